package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// workFIFO runs the global FIFO pump (seed 000 §5.1) until nothing is ready:
// only the smallest unfinished id may run, and it runs to a decision before the
// next one is looked at. Caller holds workMu.
//
// While a batch's transaction runs, the heads that follow it are read,
// decoded and bound in the background (prefetch); they are used only when the
// batch decides every one of its messages terminally on its first run, which
// makes them exactly the heads a fresh read would return (the smallest
// unfinished ids after the batch), and only when no message below them became
// unfinished meanwhile (a replay; see prefetch). Binding their identities one
// round early
// is harmless for the reason prepareFIFOBatch gives: every smaller unfinished
// id was in the batch and is bound already.
func (e *Engine) workFIFO(ctx context.Context, stop <-chan struct{}) (int, error) {
	e.nextDue = time.Time{}
	n := 0
	var next *fifoPrefetch
	defer func() { next.wait() }()
	for !service.Stopping(stop) && ctx.Err() == nil {
		var (
			heads []*relaytype.Message
			batch []fifoPrepared
			err   error
		)
		if next != nil && next.result() {
			heads, batch, err = next.heads, next.batch, next.err
			next = nil
		} else {
			next = nil
			heads, err = e.readyHeads(ctx)
			if err == nil && len(heads) > 1 {
				batch, err = e.prepareFIFOBatch(ctx, heads)
			}
		}
		if err != nil || len(heads) == 0 {
			return n, err
		}
		var decided int
		if len(batch) > 1 {
			next = e.prefetch(ctx, batch)
			var clean bool
			decided, clean, err = e.runFIFOBatch(ctx, batch)
			if !clean {
				next.wait()
				next = nil
			}
		} else {
			var o outcome
			o, err = e.processOne(ctx, heads[0], "")
			decided = boolInt(o.decided())
		}
		n += decided
		if err != nil || decided == 0 {
			// No decision was written (the head changed under us, or the store
			// failed): wait for the next round rather than spin on it.
			return n, err
		}
	}
	return n, ctx.Err()
}

// fifoPrefetch is the heads after a running batch, read and prepared in the
// background.
type fifoPrefetch struct {
	done  chan struct{}
	stale bool // an unfinished id at or below the batch's last is not the batch's
	heads []*relaytype.Message
	batch []fifoPrepared
	err   error
}

// prefetch starts reading and preparing the ready heads after batch, which is
// running. The listing still shows batch's messages as unfinished; any other
// unfinished id below the batch's last one (a message a replay made
// unfinished again meanwhile) is the smallest unfinished id, so the prefetch
// is then stale and the pump reads its heads afresh.
func (e *Engine) prefetch(ctx context.Context, batch []fifoPrepared) *fifoPrefetch {
	p := &fifoPrefetch{done: make(chan struct{})}
	inBatch := make(map[int64]bool, len(batch))
	for _, b := range batch {
		inBatch[b.m.ID] = true
	}
	after := batch[len(batch)-1].m.ID
	go func() {
		defer close(p.done)
		p.heads, p.err = e.readyHeadsAfter(ctx, after, func(id int64) { p.stale = p.stale || !inBatch[id] })
		if p.err == nil && !p.stale && len(p.heads) > 1 {
			p.batch, p.err = e.prepareFIFOBatch(ctx, p.heads)
		}
	}()
	return p
}

// wait waits for the prefetch to end (nil: nothing to wait for).
func (p *fifoPrefetch) wait() {
	if p != nil {
		<-p.done
	}
}

// result waits for the prefetch and reports whether its heads may be used.
func (p *fifoPrefetch) result() bool {
	p.wait()
	return !p.stale
}

// readyHeads returns the contiguous run of ready heads (at most FIFOBatch, at
// least one unless nothing is ready). A head is not ready when it is above the
// watermark (step 2) or a FAILED head is still waiting for its backoff (step
// 4); an exhausted head (step 3) is returned alone so processOne exhausts it.
func (e *Engine) readyHeads(ctx context.Context) ([]*relaytype.Message, error) {
	return e.readyHeadsAfter(ctx, math.MinInt64, nil)
}

// readyHeadsAfter is readyHeads for the heads with ids above after, for a
// prefetch while the batch ending at after runs: the listing reads past that
// batch, whose messages are unfinished until it commits, and passes each
// unfinished id at or below after to skipped.
func (e *Engine) readyHeadsAfter(ctx context.Context, after int64, skipped func(id int64)) ([]*relaytype.Message, error) {
	ex := e.d.GetExecutor()
	limit := e.cfg.FIFOBatch
	if skipped != nil {
		limit += e.cfg.FIFOBatch
	}
	// The watermark is read before the listing, never after: intake registers
	// every id up to W in the transaction that saves W, so a listing taken
	// after W was read holds every unfinished id <= W. Read the other way
	// round, a hole that commits between the two reads would show a later id
	// as the head under a watermark that already covers the hole's id, which
	// the listing missed — and the later id would overtake it.
	wm := int64(-1) // no watermark gate
	noCursor := false
	if e.cfg.Watermarked {
		cur, err := ex.CursorGet(ctx, e.cfg.Queue)
		switch {
		case errors.Is(err, relaytype.ErrNotFound):
			noCursor = true
		case err != nil:
			return nil, fmt.Errorf("relay: read watermark of %q: %w", e.cfg.Queue, err)
		default:
			wm = cur.Watermark
		}
	}
	list, err := ex.MessageListUnfinished(ctx, &relaydriver.MessageListUnfinishedParams{
		Queue: e.cfg.Queue, Limit: limit,
	})
	if err != nil {
		return nil, fmt.Errorf("relay: read FIFO head of %q: %w", e.cfg.Queue, err)
	}
	for len(list) > 0 && list[0].ID <= after {
		skipped(list[0].ID)
		list = list[1:]
	}
	if len(list) == 0 {
		return nil, nil // step 1: no head
	}
	if noCursor {
		if !e.warnedNoCursor {
			e.warnedNoCursor = true
			e.log.WarnContext(ctx, "relay: FIFO head not taken: the queue has no watermark yet",
				"queue", e.cfg.Queue, "head_id", list[0].ID)
		}
		return nil, nil
	}
	now := e.cfg.Clock.Now()
	var out []*relaytype.Message
	for i, m := range list[:min(len(list), e.cfg.FIFOBatch)] {
		if wm >= 0 && m.ID > wm {
			if i == 0 {
				// seed 000 §5.1 step 2: taking it would overtake smaller ids not yet
				// enqueued. WARN once per watermark value.
				if !e.warnedAny || e.warnedW != wm {
					e.warnedAny, e.warnedW = true, wm
					e.log.WarnContext(ctx, "relay: FIFO head above the watermark not taken",
						"queue", e.cfg.Queue, "head_id", m.ID, "watermark", wm)
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

// fifoPrepared is one message of a FIFO batch, decoded and bound.
type fifoPrepared struct {
	m   *relaytype.Message
	dec *Decoded
}

// FIFO batches (Config.FIFOBatch): several contiguous ready heads run in one
// transaction, in id order. Decoding, identity binding and ignore rules
// still run outside the transaction, before it opens (prepareFIFOBatch): the
// batch is the longest prefix of plain heads (a duplicate, an ignored kind or
// a decode failure ends it, and that message is then handled alone as the
// head).
//
// The batch runs optimistically, without savepoints (runFIFOBatch): when every
// handler succeeds, one MessageCompleteMany writes all terminal states and the
// transaction commits — about one round trip per message (its handler's
// statement) instead of three. When a handler fails, the transaction is rolled
// back and the prefix before it runs again in a fresh one, then the failure is
// recorded in its own statement exactly as processOne would; when the store
// refuses the set-based completion (a message changed under us), the batch
// runs again with a savepoint per message (processFIFOBatchSavepoints), which
// decides it exactly as a message-by-message run would. A failed commit counts
// one INFRA attempt on the batch's first message (the head that blocks the
// queue); the others stay as they were.

// prepareFIFOBatch is prepare for a run of heads that are not yet the head: it
// decodes them, binds their identities and applies the ignore rules, writing
// no decision, and returns the longest prefix of heads that needs none. A
// message that needs a decision of its own (decode failure, duplicate,
// ignored) ends the prefix; it gets that decision through processOne once it
// is the head.
//
// The identities are bound in one MessageBindIdentities call instead of one
// MessageBindIdentity per message, with the same outcome: the call decides
// each input as the single binding would, in id order (seed 000 §2), and it
// binds only what a message-by-message run would have bound by the time the
// batch ends — the heads up to the first decode failure (excluded: a message
// whose decoding fails is retried, and might then claim an identity a later
// message would otherwise have taken first) or the first ignored kind
// (included: an ignored message is bound before it is ignored, as in
// prepare). Heads after a duplicate are bound one round early; that is
// harmless, since nothing before them can still claim their identity (every
// smaller unfinished id is in the call) and binding again is idempotent.
func (e *Engine) prepareFIFOBatch(ctx context.Context, heads []*relaytype.Message) ([]fifoPrepared, error) {
	if e.decoder == nil {
		batch := make([]fifoPrepared, len(heads))
		for i, m := range heads {
			batch[i] = fifoPrepared{m: m}
		}
		return batch, nil
	}
	decs := make([]*Decoded, 0, len(heads))
	for _, m := range heads {
		dec, err := e.decode(ctx, m)
		if err != nil {
			break // decided (and retried) as the head
		}
		decs = append(decs, dec)
		if dec != nil && e.ignoredKind(dec) {
			break // bound, then decided as the head
		}
	}
	var (
		ids        []int64
		identities []string
		bindAt     = make(map[int]int, len(decs)) // index in decs → index in ids
	)
	for i, dec := range decs {
		if dec != nil && dec.Identity != "" && heads[i].IdentityKey == "" {
			bindAt[i] = len(ids)
			ids = append(ids, heads[i].ID)
			identities = append(identities, dec.Identity)
		}
	}
	var bound *relaydriver.MessageBindIdentitiesResult
	if len(ids) > 0 {
		var err error
		bound, err = e.d.GetExecutor().MessageBindIdentities(ctx, &relaydriver.MessageBindIdentitiesParams{
			Queue: e.cfg.Queue, IDs: ids, Identities: identities,
		})
		if err != nil {
			return nil, fmt.Errorf("relay: bind identities of %d messages from %d: %w", len(ids), ids[0], err)
		}
		if len(bound.Owners) != len(ids) || len(bound.Identities) != len(ids) {
			return nil, fmt.Errorf("relay: bind identities of %d messages from %d: the store answered for %d",
				len(ids), ids[0], len(bound.Owners))
		}
	}
	batch := make([]fifoPrepared, 0, len(decs))
	for i, dec := range decs {
		m := heads[i]
		if j, ok := bindAt[i]; ok {
			if bound.Owners[j] != m.ID {
				break // a duplicate
			}
			m.IdentityKey = bound.Identities[j]
		}
		if dec != nil && e.ignoredKind(dec) {
			break
		}
		batch = append(batch, fifoPrepared{m: m, dec: dec})
	}
	return batch, nil
}

// ignoredKind reports whether an ignore rule matches dec's kind.
func (e *Engine) ignoredKind(dec *Decoded) bool {
	if dec.Kind == "" {
		return false
	}
	for _, r := range e.ignore {
		if r.match(dec.Kind) {
			return true
		}
	}
	return false
}

// runFIFOBatch runs batch optimistically: all handlers in one transaction with
// no savepoints, then one set-based completion and one commit. When handler k
// does not succeed, the whole transaction is rolled back and batch[:k] runs
// again the same way in a fresh transaction (shorter again if one of those now
// fails); after it commits, k's failure — the Result of its one call — is
// recorded in its own statement. k's handler is not called again — unless the
// prefix's set-based completion is also refused and the prefix is longer than
// SavepointBatchMax: the fallback then decides only its first
// SavepointBatchMax messages, and k is a head again later. On these rare paths
// handlers run more than once; that is safe because a handler's effects live
// only in the engine's transaction (the Handler contract), and the earlier
// runs' were rolled back.
func (e *Engine) runFIFOBatch(ctx context.Context, batch []fifoPrepared) (decided int, clean bool, err error) {
	var failed *fifoPrepared // the message that ended the batch, if any
	var failedRes Result
	for len(batch) > 0 {
		tx, err := e.d.Begin(ctx)
		if err != nil {
			o, err := e.fail(ctx, attempt{m: batch[0].m}, Retry(relaytype.ClassInfra, fmt.Errorf("begin: %w", err)))
			return boolInt(o.decided()), false, err
		}
		results := make([]Result, 0, len(batch))
		params := make([]*relaydriver.MessageCompleteParams, 0, len(batch))
		k := -1
		accept := func(i int, res Result) bool {
			if res.kind != resultSucceeded && res.kind != resultSkip {
				k, failedRes = i, res
				return false
			}
			results = append(results, res)
			params = append(params, e.completeParams(attempt{m: batch[i].m}, res))
			return true
		}
		if bh, ok := e.cfg.Handler.(BatchHandler); ok {
			ds := make([]*Delivery, len(batch))
			for i, p := range batch {
				ds[i] = &Delivery{Message: p.m, Decoded: p.dec}
			}
			for i, res := range e.callBatchHandler(ctx, bh, tx, ds) {
				if !accept(i, res) {
					break
				}
			}
			if k < 0 && len(batch) > 1 {
				faultpoint.Hit(faultpoint.FIFOMidBatch)
			}
		} else {
			for i := range batch {
				p := &batch[i]
				if i > 0 {
					faultpoint.Hit(faultpoint.FIFOMidBatch)
				}
				if !accept(i, e.callHandler(ctx, tx, &Delivery{Message: p.m, Decoded: p.dec})) {
					break
				}
			}
		}
		if k >= 0 {
			// No half effects: everything the batch wrote goes; the prefix runs again.
			if err := tx.Rollback(ctx); err != nil {
				e.logRollback(ctx, batch[0].m, err)
			}
			failed = &batch[k]
			batch = batch[:k]
			continue
		}
		if err := tx.MessageCompleteMany(ctx, params); err != nil {
			// A message changed under us (e.g. a replay raced), or the store failed:
			// drop the optimistic run and decide the batch with a savepoint and a
			// completion per message, which names and drops only what changed.
			if rbErr := tx.Rollback(ctx); rbErr != nil {
				e.logRollback(ctx, batch[0].m, rbErr)
			}
			level := slog.LevelWarn
			if errors.Is(err, relaytype.ErrConflict) {
				level = slog.LevelDebug // the fallback logs the message that changed
			}
			e.log.Log(ctx, level, "relay: set-based completion refused; batch runs again with savepoints",
				"queue", e.cfg.Queue, "first_id", batch[0].m.ID, "size", len(batch), "error", err)
			if len(batch) > SavepointBatchMax {
				// The rest are heads of the next round, and so is the message that
				// ended the optimistic run: its handler will run again (its first
				// run's effects were rolled back with the batch).
				batch, failed = batch[:SavepointBatchMax], nil
			}
			n, all, err := e.processFIFOBatchSavepoints(ctx, batch)
			if err != nil || !all || failed == nil {
				return n, false, err
			}
			o, err := e.fail(ctx, attempt{m: failed.m}, failedRes)
			return n + boolInt(o.decided()), false, err
		}
		if err := tx.Commit(ctx); err != nil {
			o, err := e.fail(ctx, attempt{m: batch[0].m}, Retry(relaytype.ClassInfra, fmt.Errorf("commit batch of %d: %w", len(batch), err)))
			return boolInt(o.decided()), false, err
		}
		faultpoint.Hit(faultpoint.FIFOAfterCommit)
		for i, p := range batch {
			e.decided(ctx, attempt{m: p.m}, completedOutcome(results[i]), results[i].reason, nil)
		}
		n := len(batch)
		if failed == nil {
			return n, true, nil
		}
		o, err := e.fail(ctx, attempt{m: failed.m}, failedRes)
		return n + boolInt(o.decided()), false, err
	}
	// The batch's first handler failed: nothing to commit before its failure.
	o, err := e.fail(ctx, attempt{m: failed.m}, failedRes)
	return boolInt(o.decided()), false, err
}

// processFIFOBatchSavepoints runs batch in one transaction with a savepoint per
// message — the fallback of runFIFOBatch when the set-based completion is
// refused. A message whose handler does not succeed is rolled back to its
// savepoint and ends the batch: the prefix before it commits, then its failure
// is recorded in its own statement exactly as processOne would. A failed commit
// counts one INFRA attempt on the batch's first message. It reports the
// decisions written and whether every message of batch was decided terminally
// (succeeded or skipped).
func (e *Engine) processFIFOBatchSavepoints(ctx context.Context, batch []fifoPrepared) (int, bool, error) {
	tx, err := e.d.Begin(ctx)
	if err != nil {
		o, err := e.fail(ctx, attempt{m: batch[0].m}, Retry(relaytype.ClassInfra, fmt.Errorf("begin: %w", err)))
		return boolInt(o.decided()), false, err
	}
	var done []fifoPrepared // committed with the transaction
	var results []Result
	var failed *fifoPrepared // the message that ended the batch, if any
	var failedRes Result
	for i := range batch {
		p := &batch[i]
		sp := "relay_m" + strconv.Itoa(i)
		if err := tx.Savepoint(ctx, sp); err != nil {
			return 0, false, errors.Join(fmt.Errorf("relay: savepoint for message %d: %w", p.m.ID, err), tx.Rollback(ctx))
		}
		res := e.callHandler(ctx, tx, &Delivery{Message: p.m, Decoded: p.dec})
		if res.kind == resultSucceeded || res.kind == resultSkip {
			// The savepoint is not released: RELEASE costs a round trip and frees
			// nothing until the top-level commit (PostgreSQL keeps a released
			// subtransaction's xid until then), hence the FIFOBatch cap.
			err := e.completeTx(ctx, tx, attempt{m: p.m}, res)
			if err == nil {
				done = append(done, *p)
				results = append(results, res)
				continue
			}
			if errors.Is(err, relaytype.ErrConflict) {
				e.lost(ctx, attempt{m: p.m}, err)
				res = Result{} // no decision for it; the batch ends before it
			} else {
				res = Retry(relaytype.ClassInfra, fmt.Errorf("complete: %w", err))
			}
		}
		if err := tx.RollbackTo(ctx, sp); err != nil {
			return 0, false, errors.Join(fmt.Errorf("relay: rollback to savepoint for message %d: %w", p.m.ID, err), tx.Rollback(ctx))
		}
		failed, failedRes = p, res
		break
	}
	if len(done) == 0 {
		if err := tx.Rollback(ctx); err != nil {
			e.logRollback(ctx, batch[0].m, err)
		}
	} else if err := tx.Commit(ctx); err != nil {
		o, err := e.fail(ctx, attempt{m: batch[0].m}, Retry(relaytype.ClassInfra, fmt.Errorf("commit batch of %d: %w", len(done), err)))
		return boolInt(o.decided()), false, err
	}
	n := 0
	for i, p := range done {
		e.decided(ctx, attempt{m: p.m}, completedOutcome(results[i]), results[i].reason, nil)
		n++
	}
	if failed == nil {
		return n, true, nil
	}
	if failedRes.kind == resultInvalid { // lost: changed under us
		return n, false, nil
	}
	o, err := e.fail(ctx, attempt{m: failed.m}, failedRes)
	return n + boolInt(o.decided()), false, err
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
