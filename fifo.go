package relay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// workFIFO runs the global FIFO pump (seed 000 §5.1) until nothing is ready:
// only the smallest unfinished id may run, and it runs to a decision before the
// next one is looked at. Caller holds workMu.
func (e *Engine) workFIFO(ctx context.Context, stop <-chan struct{}) (int, error) {
	e.nextDue = time.Time{}
	n := 0
	for !stopping(stop) && ctx.Err() == nil {
		heads, err := e.readyHeads(ctx)
		if err != nil || len(heads) == 0 {
			return n, err
		}
		var decided int
		var progressed bool
		if len(heads) > 1 {
			decided, progressed, err = e.processFIFOBatch(ctx, heads)
		} else {
			var o outcome
			o, err = e.processOne(ctx, heads[0], "")
			if o.decided() {
				decided = 1
			}
			progressed = o.decided()
		}
		n += decided
		if err != nil || !progressed {
			// No decision was written (the head changed under us): wait for the next
			// round rather than spin on it.
			return n, err
		}
	}
	return n, ctx.Err()
}

// readyHeads returns the contiguous run of ready heads (at most FIFOBatch, at
// least one unless nothing is ready). A head is not ready when it is above the
// watermark (step 2) or a FAILED head is still waiting for its backoff (step
// 4); an exhausted head (step 3) is returned alone so processOne exhausts it.
func (e *Engine) readyHeads(ctx context.Context) ([]*relaytype.Message, error) {
	ex := e.d.GetExecutor()
	list, err := ex.MessageListUnfinished(ctx, &relaydriver.MessageListUnfinishedParams{
		Pipeline: e.cfg.Pipeline, Limit: e.cfg.FIFOBatch,
	})
	if err != nil {
		return nil, fmt.Errorf("relay: read FIFO head of %q: %w", e.cfg.Pipeline, err)
	}
	if len(list) == 0 {
		return nil, nil // step 1: no head
	}
	limit := int64(-1) // no watermark gate
	if e.cfg.Watermarked {
		cur, err := ex.CursorGet(ctx, e.cfg.Pipeline)
		switch {
		case errors.Is(err, relaytype.ErrNotFound):
			if !e.warnedNoCursor {
				e.warnedNoCursor = true
				e.log.WarnContext(ctx, "relay: FIFO head not taken: the pipeline has no watermark yet",
					"pipeline", e.cfg.Pipeline, "head_id", list[0].ID)
			}
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("relay: read watermark of %q: %w", e.cfg.Pipeline, err)
		}
		limit = cur.Watermark
	}
	now := e.cfg.Clock.Now()
	var out []*relaytype.Message
	for i, m := range list {
		if limit >= 0 && m.ID > limit {
			if i == 0 {
				// seed 000 §5.1 step 2: taking it would overtake smaller ids not yet
				// enqueued. WARN once per watermark value.
				if !e.warnedAny || e.warnedW != limit {
					e.warnedAny, e.warnedW = true, limit
					e.log.WarnContext(ctx, "relay: FIFO head above the watermark not taken",
						"pipeline", e.cfg.Pipeline, "head_id", m.ID, "watermark", limit)
				}
			}
			break
		}
		if e.exhausted(m) {
			if i == 0 {
				out = append(out, m) // step 3, alone
			}
			break
		}
		if m.State == relaytype.StateFailed && m.NextAttemptAt.After(now) {
			if i == 0 {
				e.nextDue = m.NextAttemptAt // step 4: nothing behind it runs
			}
			break
		}
		out = append(out, m)
	}
	return out, nil
}

// processFIFOBatch runs several contiguous ready heads in order. It stops at the
// first head that did not reach a terminal state: that head still blocks the
// queue. It reports how many decisions were written and whether every head
// reached a terminal state.
func (e *Engine) processFIFOBatch(ctx context.Context, heads []*relaytype.Message) (int, bool, error) {
	n := 0
	for _, m := range heads {
		o, err := e.processOne(ctx, m, "")
		if o.decided() {
			n++
		}
		if err != nil || !o.terminal() {
			return n, o.decided(), err
		}
	}
	return n, true, nil
}
