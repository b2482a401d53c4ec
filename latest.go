package relay

import (
	"context"
	"errors"
	"fmt"

	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaytype"
)

// DispatchKind says what a Dispatcher delivers (DispatcherConfig.Kind).
type DispatchKind string

const (
	// DispatchEvents delivers the outbox's events (AppendEventsTx) in per-key
	// commit order (seed 000 §8.1). The default.
	DispatchEvents DispatchKind = "events"
	// DispatchLatest delivers the target's latest-state rows (UpsertLatestTx):
	// only each key's latest state, confirmed only if it was not rewritten
	// meanwhile (seed 000 §8.2, §12.4).
	DispatchLatest DispatchKind = "latest"
)

// LatestEvent is a key's latest full state (seed 000 §8.2): the outbox keeps
// one row per (Target, Key), written only forward by Version, and a Dispatcher
// with Kind DispatchLatest delivers the latest state of each key — intermediate
// versions written between two rounds are never delivered.
type LatestEvent struct {
	// Target names the Dispatcher (Kind DispatchLatest) that delivers the row.
	// Required.
	Target string
	// Topic is the destination inside the sink.
	Topic string
	// Key is the row's key and the partition key (e.g. the FLID).
	Key string
	// Version is the state's version (STATE_VERSION): the write is accepted only
	// when Version ≥ the stored version; an equal version replaces the state.
	Version int64
	// Type is relaysink.Upsert (the default when empty) or relaysink.Tombstone
	// (delivered with a nil payload: the key's state is removed).
	Type relaysink.EventType
	// Headers are delivered with the state.
	Headers map[string]string
	// Payload is the full state; must be nil for a Tombstone.
	Payload []byte
}

// UpsertLatestTx writes ev as its key's latest state inside tx, so it commits
// or rolls back with the caller's own writes (seed 000 §8.2, §5.3). tx is the
// relay.Tx a Handler receives or a transaction the caller began, as for
// AppendEventsTx.
//
// It reports whether the state was accepted: only when ev.Version ≥ the
// stored version (only forward), so a late older state never overwrites a
// newer one. An accepted write takes a new write generation and makes the row
// PENDING again with its attempts and error cleared — a DEAD row of the key
// is replaced by the new state (seed 000 §8.3). The updated-at time is the
// engine's clock for a handler's Tx and the system clock for a transaction
// the caller began.
func UpsertLatestTx(ctx context.Context, tx Tx, ev *LatestEvent) (accepted bool, err error) {
	ex, params, err := latestParams("UpsertLatestTx", tx, []*LatestEvent{ev})
	if err != nil {
		return false, err
	}
	res, err := ex.LatestUpsert(ctx, params[0])
	if err != nil {
		return false, fmt.Errorf("relay: UpsertLatestTx %s/%s: %w", ev.Target, ev.Key, err)
	}
	return res.Accepted, nil
}

// UpsertLatestManyTx is UpsertLatestTx for several keys in one store
// statement (on PostgreSQL; SQLite loops in tx), e.g. every flight a batch of
// messages changed: each event follows UpsertLatestTx's rules for its own key
// — accepted only when its Version ≥ the stored version, an accepted write
// takes a new generation and resets the row to PENDING with its attempts and
// error cleared. It reports, per event in input order, whether it was
// accepted.
//
// Each (Target, Key) may appear at most once: the caller keeps only each
// key's last state (the earlier ones would be overwritten in the same
// transaction anyway), and a repeated key is an error, before anything is
// written. After a store error the caller must roll tx back (on PostgreSQL tx
// is aborted anyway). An empty evs writes nothing and returns an empty slice.
func UpsertLatestManyTx(ctx context.Context, tx Tx, evs []*LatestEvent) ([]bool, error) {
	ex, params, err := latestParams("UpsertLatestManyTx", tx, evs)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(evs))
	if len(evs) == 0 {
		return out, nil
	}
	res, err := ex.LatestUpsertMany(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("relay: UpsertLatestManyTx of %d states: %w", len(evs), err)
	}
	if len(res) != len(evs) {
		return nil, fmt.Errorf("relay: UpsertLatestManyTx of %d states: the store answered for %d", len(evs), len(res))
	}
	for i, r := range res {
		out[i] = r.Accepted
	}
	return out, nil
}

// latestParams resolves tx and validates evs for op, returning the store
// parameters stamped with tx's clock. A repeated (Target, Key) is an error.
func latestParams(op string, tx Tx, evs []*LatestEvent) (relaydriver.ExecutorTx, []*relaydriver.LatestUpsertParams, error) {
	ex, clock, err := resolveTx(op, tx)
	if err != nil {
		return nil, nil, err
	}
	now := clock.Now()
	params := make([]*relaydriver.LatestUpsertParams, len(evs))
	type targetKey struct{ target, key string }
	seen := make(map[targetKey]int, len(evs))
	for i, ev := range evs {
		what := op
		if len(evs) > 1 {
			what = fmt.Sprintf("%s: event %d", op, i)
		}
		if ev == nil {
			return nil, nil, fmt.Errorf("relay: %s: nil event", what)
		}
		typ := ev.Type
		if typ == "" {
			typ = relaysink.Upsert
		}
		switch {
		case ev.Target == "":
			return nil, nil, fmt.Errorf("relay: %s: Target is empty", what)
		case typ != relaysink.Upsert && typ != relaysink.Tombstone:
			return nil, nil, fmt.Errorf("relay: %s: Type %q is neither %s nor %s", what, typ, relaysink.Upsert, relaysink.Tombstone)
		case typ == relaysink.Tombstone && ev.Payload != nil:
			return nil, nil, fmt.Errorf("relay: %s: a %s carries no payload", what, relaysink.Tombstone)
		}
		k := targetKey{ev.Target, ev.Key}
		if j, dup := seen[k]; dup {
			return nil, nil, fmt.Errorf("relay: %s: events %d and %d both write %s/%s; pass each key's latest state once",
				op, j, i, ev.Target, ev.Key)
		}
		seen[k] = i
		params[i] = &relaydriver.LatestUpsertParams{
			Target: ev.Target, Topic: ev.Topic, Key: ev.Key, Version: ev.Version, Type: string(typ),
			Headers: ev.Headers, Payload: ev.Payload, Now: now,
		}
	}
	return ex, params, nil
}

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
		next := now
		if r.Attempts < len(x.cfg.Backoff) {
			next = now.Add(x.cfg.Backoff[r.Attempts]) // after the (Attempts+1)-th failure
		}
		res, err := ex.LatestFail(ctx, &relaydriver.LatestFailParams{
			Target: r.Target, Key: r.Key, Generation: r.Generation, Error: errs[i].Error(),
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
				"key", r.Key, "version", r.Version, "attempts", res.Attempts, "error", errs[i].Error())
			continue
		}
		x.count(outcomeRetryLabel, 1)
		x.log.WarnContext(ctx, "relay: latest row delivery failed", "target", x.cfg.Target,
			"event_id", latestEventID(r), "key", r.Key, "version", r.Version, "attempts", res.Attempts,
			"next_attempt_at", next, "error", errs[i].Error())
	}
	return n, nil
}
