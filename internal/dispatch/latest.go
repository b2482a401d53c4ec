package dispatch

import (
	"context"
	"errors"
	"fmt"

	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaytype"
)

// latestEventID is the sink event id of one generation of a latest-state row:
// unique per accepted write, so consumers dedupe redeliveries of a generation.
func latestEventID(r *relaydriver.LatestRecord) string {
	return fmt.Sprintf("%s/%s/%d", r.Target, r.Key, r.Generation)
}

// latestRound dispatches one frozen batch of latest-state rows and returns how
// many reached an outcome (0: nothing was due). Each row is one event (ID
// target/key/generation, Seq = version, a tombstone with a nil payload); one
// sink call publishes the batch. Confirmed rows are marked SENT only at the
// generation read: a row rewritten during Publish keeps its newer generation
// PENDING and goes in the next round. A failed row gets one failure at the
// generation read (backoff, DEAD at MaxAttempts); a superseded one is left to
// its newer generation.
func (x *Dispatcher) latestRound(ctx context.Context) (int, error) {
	ex := x.d.GetExecutor()
	batch, err := ex.LatestFetch(ctx, &relaydriver.LatestFetchParams{
		Target: x.cfg.Target, Limit: x.cfg.BatchSize, Now: x.cfg.Clock.Now(),
	})
	if err != nil {
		return 0, fmt.Errorf("relay: dispatch latest %q: fetch: %w", x.cfg.Target, err)
	}
	if len(batch) == 0 {
		return 0, nil
	}
	events := make([]relaysink.Event, len(batch))
	for i, r := range batch {
		events[i] = relaysink.Event{
			ID: latestEventID(r), Topic: r.Topic, Key: r.Key, Seq: r.Version, Type: relaysink.EventType(r.Type),
			Headers: r.Headers, Payload: r.Payload,
		}
		if r.Type == relaydriver.OutboxTombstone {
			events[i].Payload = nil
		}
	}
	errs := x.publish(ctx, events)
	faultpoint.Hit(faultpoint.DispatchAfterConfirm)

	var (
		sent   []relaydriver.LatestRef
		failed []int // indexes into batch
	)
	for i, r := range batch {
		if errs[i] == nil {
			sent = append(sent, relaydriver.LatestRef{Key: r.Key, Generation: r.Generation})
		} else {
			failed = append(failed, i)
		}
	}
	now := x.cfg.Clock.Now()
	// A cancelled ctx is a Stop that could not wait or a lost target lock:
	// nothing more is written (see settleEvents).
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("relay: dispatch latest %q: settle: %w", x.cfg.Target, context.Cause(ctx))
	}
	if len(sent) > 0 {
		marked, err := ex.LatestMarkSent(ctx, &relaydriver.LatestMarkSentParams{Target: x.cfg.Target, Rows: sent, Now: now})
		if err != nil {
			return 0, fmt.Errorf("relay: dispatch latest %q: mark %d rows sent: %w", x.cfg.Target, len(sent), err)
		}
		x.count(outcomeSentLabel, marked)
		if superseded := len(sent) - marked; superseded > 0 {
			x.log.DebugContext(ctx, "relay: latest rows rewritten during delivery; their new state goes next round",
				"target", x.cfg.Target, "rows", superseded)
		}
	}
	n := len(sent)
	for _, i := range failed {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("relay: dispatch latest %q: settle: %w", x.cfg.Target, context.Cause(ctx))
		}
		r := batch[i]
		text := x.errText(errs[i])
		next := now
		if r.Attempts < len(x.cfg.Backoff) {
			next = now.Add(x.cfg.Backoff[r.Attempts]) // after the (Attempts+1)-th failure
		}
		res, err := ex.LatestFail(ctx, &relaydriver.LatestFailParams{
			Target: r.Target, Key: r.Key, Generation: r.Generation, Error: text,
			NextAttemptAt: next, MaxAttempts: x.cfg.MaxAttempts, Now: now,
		})
		if errors.Is(err, relaytype.ErrConflict) {
			n++ // superseded during delivery: the new generation starts afresh
			continue
		}
		if err != nil {
			return n, fmt.Errorf("relay: dispatch latest %q: record failure of %s: %w", x.cfg.Target, latestEventID(r), err)
		}
		n++
		if res.Dead {
			x.count(outcomeDeadLabel, 1)
			x.log.ErrorContext(ctx, "relay: latest row dead", "target", x.cfg.Target, "event_id", latestEventID(r),
				x.keyAttr(r.Key), "version", r.Version, "attempts", res.Attempts, "error", text)
			continue
		}
		x.count(outcomeRetryLabel, 1)
		x.log.WarnContext(ctx, "relay: latest row delivery failed", "target", x.cfg.Target,
			"event_id", latestEventID(r), x.keyAttr(r.Key), "version", r.Version, "attempts", res.Attempts,
			"next_attempt_at", next, "error", text)
	}
	return n, nil
}
