package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// workClaim runs the per-key and unordered modes until a claim comes back
// empty with nothing in flight. Claims lease ready messages to this instance in
// short lease-only transactions (SKIP LOCKED where supported); Workers
// goroutines process them outside it. Claiming does not wait for a whole batch:
// when the messages claimed but not yet finished fall to three quarters of
// BatchSize, the next claim tops them up to BatchSize, so workers are not
// idled by the slowest message of a batch. While the round runs, the leases
// of the messages claimed and not yet finished are renewed (leaseKeeper), so
// a message waiting for a worker or running a long handler keeps its lease.
// Caller holds workMu.
func (e *Engine) workClaim(ctx context.Context, stop <-chan struct{}) (int, error) {
	renewCtx, stopRenew := context.WithCancel(ctx)
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		e.leases.run(renewCtx)
	}()
	defer func() {
		stopRenew()
		<-renewDone
	}()
	var (
		mu      sync.Mutex
		decided int
		errs    []error
		wg      sync.WaitGroup
		// At most BatchSize messages are outstanding and a unit holds at least
		// one, so sending a claim's units never blocks.
		units = make(chan claimUnit, e.cfg.BatchSize)
		// finished carries the size of each unit a worker is done with; sized so
		// that a worker never waits for the claim loop to read it.
		finished = make(chan int, e.cfg.BatchSize)
	)
	for range e.cfg.Workers {
		wg.Go(func() {
			for u := range units {
				n, err := e.runUnit(ctx, u)
				e.leases.done(unitIDs(u))
				mu.Lock()
				decided += n
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
				finished <- len(u.msgs)
			}
		})
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(errs) > 0
	}

	lowWater := e.cfg.BatchSize * 3 / 4
	outstanding := 0 // claimed, not yet finished
	dry := false     // the last claim came back empty
	var claimErr error
	for {
		canClaim := claimErr == nil && !service.Stopping(stop) && ctx.Err() == nil && !failed()
		// After an empty claim, claim again only once everything in flight is done
		// ("nothing is ready now" is then a fact, not a race with our own leases)
		// or Notify says that new messages were committed.
		if canClaim && ((dry && outstanding == 0) || (!dry && outstanding <= lowWater)) {
			msgs, err := e.claim(ctx, e.cfg.BatchSize-outstanding)
			if err != nil {
				claimErr = err
				continue
			}
			if len(msgs) == 0 && outstanding == 0 {
				break
			}
			dry = len(msgs) == 0
			outstanding += len(msgs)
			e.leases.add(messageIDs(msgs))
			for _, u := range e.units(msgs) {
				units <- u
			}
			continue
		}
		if outstanding == 0 {
			break
		}
		select {
		case k := <-finished:
			outstanding -= k
		case <-e.wake:
			// Messages were committed since the empty claim (Enqueue, Replay):
			// claim them now rather than after everything in flight is done.
			dry = false
		}
	}
	close(units)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if err := errors.Join(append([]error{claimErr}, errs...)...); err != nil {
		return decided, err
	}
	if service.Stopping(stop) {
		return decided, nil
	}
	return decided, ctx.Err()
}

// claim leases up to limit ready messages to this instance. Expired leases
// (messages of an instance that died or stopped mid-batch) are searched for on
// the first claim and then at most every LeaseDuration/4 of Clock time, so a
// lease is recovered within a quarter lease of its expiry while the claims in
// between skip that scan. Caller holds workMu.
func (e *Engine) claim(ctx context.Context, limit int) ([]*relaytype.Message, error) {
	now := e.cfg.Clock.Now()
	skipExpired := !e.lastExpiredScan.IsZero() && !now.Before(e.lastExpiredScan) &&
		now.Sub(e.lastExpiredScan) < e.cfg.LeaseDuration/4
	if !skipExpired {
		e.lastExpiredScan = now
	}
	msgs, err := e.d.GetExecutor().MessageClaim(ctx, &relaydriver.MessageClaimParams{
		Queue:       e.cfg.Queue,
		PerKey:      e.cfg.Mode == ModePerKey,
		Limit:       limit,
		Owner:       e.cfg.InstanceID,
		LeaseUntil:  now.Add(e.cfg.LeaseDuration),
		Now:         now,
		SkipExpired: skipExpired,
	})
	if err != nil {
		return nil, fmt.Errorf("relay: claim from %q: %w", e.cfg.Queue, err)
	}
	return msgs, nil
}

// claimUnit is what one worker runs at a time: either messages of one key that
// must run serially, in order (serial), or independent messages that may share
// one transaction (Config.TxBatch).
type claimUnit struct {
	msgs   []*relaytype.Message
	serial bool
}

// units splits a claim into work units. In ModePerKey messages of one key form
// a serial unit (the claim takes one head per key, so a key with several
// messages only occurs if a store returned more). Independent messages are
// chunked into units of at most TxBatch, and small enough that every worker
// gets one.
func (e *Engine) units(msgs []*relaytype.Message) []claimUnit {
	var out []claimUnit
	var free []*relaytype.Message
	if e.cfg.Mode == ModePerKey {
		idx := make(map[string]int)
		var groups [][]*relaytype.Message
		for _, m := range msgs { // ascending id order from the claim
			i, ok := idx[m.Key]
			if !ok {
				i = len(groups)
				idx[m.Key] = i
				groups = append(groups, nil)
			}
			groups[i] = append(groups[i], m)
		}
		for _, g := range groups {
			if len(g) == 1 {
				free = append(free, g[0])
			} else {
				out = append(out, claimUnit{msgs: g, serial: true})
			}
		}
	} else {
		free = msgs
	}
	size := max(1, min(e.cfg.TxBatch, (len(free)+e.cfg.Workers-1)/e.cfg.Workers))
	for len(free) > 0 {
		k := min(size, len(free))
		out = append(out, claimUnit{msgs: free[:k:k]})
		free = free[k:]
	}
	return out
}

// runUnit processes one unit and reports the decisions written. A serial unit
// stops at its first message that did not reach a terminal state, so a failing
// head pauses only its own key; its later messages keep their lease until it
// expires (they are no longer renewed). A message whose lease a renewal found
// lost is not started: it belongs to another instance now (a serial unit
// stops there, since its key's later messages must wait for it).
func (e *Engine) runUnit(ctx context.Context, u claimUnit) (int, error) {
	owner := e.cfg.InstanceID
	if u.serial || len(u.msgs) == 1 {
		n := 0
		for _, m := range u.msgs {
			if e.skipLost(ctx, m) {
				return n, nil
			}
			o, err := e.processOne(ctx, m, owner)
			n += boolInt(o.decided())
			if err != nil || (u.serial && !o.terminal()) {
				return n, err
			}
		}
		return n, nil
	}
	return e.processClaimBatch(ctx, u.msgs)
}

// processClaimBatch runs independent claimed messages in one transaction
// (Config.TxBatch). Exhausted messages, decode failures, duplicates and
// ignored kinds are decided first, each alone, as processOne would. The rest
// run optimistically, without savepoints: when every handler succeeds, one
// MessageCompleteMany (guarded per row by state and lease owner) writes every
// terminal state and the transaction commits — one round trip per message (its
// handler's statement) plus three per batch, and one commit. When a handler
// fails, the transaction is rolled back, that failure is recorded in its own
// statement (its handler is not called again) and the others run again with a
// savepoint each (runClaimSavepoints), which decides each message alone; the
// same fallback decides the batch when the store refuses the set-based
// completion (a message changed under us, e.g. its lease passed to another
// instance). So each message's terminal state commits with exactly its own
// handler's writes, and a failure never undoes or blocks another message.
// A Handler that is a BatchHandler gets the optimistic run in one HandleBatch
// call; the savepoint fallback calls Handle per message.
func (e *Engine) processClaimBatch(ctx context.Context, msgs []*relaytype.Message) (int, error) {
	owner := e.cfg.InstanceID
	n := 0
	var errs []error
	var batch []fifoPrepared
	for _, m := range msgs {
		a := attempt{m: m, owner: owner}
		if e.skipLost(ctx, m) {
			continue
		}
		if e.exhausted(m) {
			o, err := e.exhaust(ctx, a)
			n += boolInt(o.decided())
			errs = append(errs, err)
			continue
		}
		dec, o, err := e.prepare(ctx, a)
		if err != nil || o.decided() {
			n += boolInt(o.decided())
			errs = append(errs, err)
			continue
		}
		batch = append(batch, fifoPrepared{m: m, dec: dec})
	}
	switch len(batch) {
	case 0:
	case 1:
		o, err := e.runOne(ctx, attempt{m: batch[0].m, owner: owner}, batch[0].dec)
		n += boolInt(o.decided())
		errs = append(errs, err)
	default:
		k, err := e.runClaimBatch(ctx, batch)
		n += k
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// runClaimBatch is the optimistic run of processClaimBatch.
func (e *Engine) runClaimBatch(ctx context.Context, batch []fifoPrepared) (int, error) {
	owner := e.cfg.InstanceID
	tx, err := e.d.Begin(ctx)
	if err != nil {
		return e.failAll(ctx, batch, Retry(relaytype.ClassInfra, fmt.Errorf("begin: %w", err)))
	}
	results := make([]Result, 0, len(batch))
	params := make([]*relaydriver.MessageCompleteParams, 0, len(batch))
	// A BatchHandler decides the whole batch in one call (it may read what
	// the batch needs once and order its locks across messages); a plain
	// Handler is called per message. Either way the first result that is
	// not Succeeded or Skip rolls the batch back below.
	var batchResults []Result
	if bh, ok := e.cfg.Handler.(BatchHandler); ok {
		ds := make([]*Delivery, len(batch))
		for i, p := range batch {
			ds[i] = &Delivery{Message: p.m, Decoded: p.dec}
		}
		batchResults = e.callBatchHandler(ctx, bh, tx, ds)
	}
	for i := range batch {
		p := &batch[i]
		var res Result
		if batchResults != nil {
			res = batchResults[min(i, len(batchResults)-1)] // one result only when the batch failed as a whole
		} else {
			res = e.callHandler(ctx, tx, &Delivery{Message: p.m, Decoded: p.dec})
		}
		if res.kind != resultSucceeded && res.kind != resultSkip {
			// No half effects: everything the batch wrote goes. The failure is
			// recorded alone; the others run again, each under its own savepoint.
			if err := tx.Rollback(ctx); err != nil {
				e.logRollback(ctx, p.m, err)
			}
			o, err := e.fail(ctx, attempt{m: p.m, owner: owner}, res)
			rest := append(append(make([]fifoPrepared, 0, len(batch)-1), batch[:i]...), batch[i+1:]...)
			n, err2 := e.runClaimSavepoints(ctx, rest)
			return n + boolInt(o.decided()), errors.Join(err, err2)
		}
		results = append(results, res)
		params = append(params, e.completeParams(attempt{m: p.m, owner: owner}, res))
	}
	if err := tx.MessageCompleteMany(ctx, params); err != nil {
		if rbErr := tx.Rollback(ctx); rbErr != nil {
			e.logRollback(ctx, batch[0].m, rbErr)
		}
		if !e.lostWrite(err) {
			e.log.WarnContext(ctx, "relay: set-based completion failed; batch runs again with savepoints",
				"queue", e.cfg.Queue, "first_id", batch[0].m.ID, "size", len(batch), "error", err)
		}
		return e.runClaimSavepoints(ctx, batch)
	}
	if err := tx.Commit(ctx); err != nil {
		return e.failAll(ctx, batch, Retry(relaytype.ClassInfra, fmt.Errorf("commit batch of %d: %w", len(batch), err)))
	}
	for i, p := range batch {
		e.decided(ctx, attempt{m: p.m, owner: owner}, completedOutcome(results[i]), results[i].reason, nil)
	}
	return len(batch), nil
}

// runClaimSavepoints runs batch in one transaction with a savepoint per
// message: a message whose handler does not succeed, or whose completion the
// store refuses, is rolled back to its savepoint and the batch goes on; after
// the commit each such failure is recorded in its own statement (a refused
// completion — the message changed under us — records nothing). A failed
// commit counts one INFRA attempt on each message that was to commit.
func (e *Engine) runClaimSavepoints(ctx context.Context, batch []fifoPrepared) (int, error) {
	if len(batch) == 0 {
		return 0, nil
	}
	owner := e.cfg.InstanceID
	tx, err := e.d.Begin(ctx)
	if err != nil {
		return e.failAll(ctx, batch, Retry(relaytype.ClassInfra, fmt.Errorf("begin: %w", err)))
	}
	type failure struct {
		p   fifoPrepared
		res Result
	}
	var (
		done     []fifoPrepared
		results  []Result
		failures []failure
	)
	for i, p := range batch {
		a := attempt{m: p.m, owner: owner}
		sp := fmt.Sprintf("relay_m%d", i)
		if err := tx.Savepoint(ctx, sp); err != nil {
			return 0, errors.Join(fmt.Errorf("relay: savepoint for message %d: %w", p.m.ID, err), tx.Rollback(ctx))
		}
		res := e.callHandler(ctx, tx, &Delivery{Message: p.m, Decoded: p.dec})
		if res.kind == resultSucceeded || res.kind == resultSkip {
			err := e.completeTx(ctx, tx, a, res)
			if err == nil {
				done = append(done, p)
				results = append(results, res)
				continue
			}
			if e.lostWrite(err) {
				e.lost(ctx, a, err)
				res = Result{} // no decision for it
			} else {
				res = Retry(relaytype.ClassInfra, fmt.Errorf("complete: %w", err))
			}
		}
		if err := tx.RollbackTo(ctx, sp); err != nil {
			return 0, errors.Join(fmt.Errorf("relay: rollback to savepoint for message %d: %w", p.m.ID, err), tx.Rollback(ctx))
		}
		if res.kind != resultInvalid {
			failures = append(failures, failure{p, res})
		}
	}
	n := 0
	var errs []error
	if len(done) == 0 {
		if err := tx.Rollback(ctx); err != nil {
			e.logRollback(ctx, batch[0].m, err)
		}
	} else if err := tx.Commit(ctx); err != nil {
		k, err := e.failAll(ctx, done, Retry(relaytype.ClassInfra, fmt.Errorf("commit batch of %d: %w", len(done), err)))
		n += k
		errs = append(errs, err)
		done = nil
	}
	for i, p := range done {
		e.decided(ctx, attempt{m: p.m, owner: owner}, completedOutcome(results[i]), results[i].reason, nil)
		n++
	}
	for _, f := range failures {
		o, err := e.fail(ctx, attempt{m: f.p.m, owner: owner}, f.res)
		n += boolInt(o.decided())
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// failAll records res for every message of batch, each in its own guarded
// statement (a message whose terminal state did commit refuses it).
func (e *Engine) failAll(ctx context.Context, batch []fifoPrepared, res Result) (int, error) {
	n := 0
	var errs []error
	for _, p := range batch {
		o, err := e.fail(ctx, attempt{m: p.m, owner: e.cfg.InstanceID}, res)
		n += boolInt(o.decided())
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// skipLost reports (and logs) that m's lease was found lost before its
// attempt started, so the attempt must not start.
func (e *Engine) skipLost(ctx context.Context, m *relaytype.Message) bool {
	if !e.leases.isLost(m.ID) {
		return false
	}
	e.log.WarnContext(ctx, "relay: lease lost before processing; message left to its new owner",
		"queue", e.cfg.Queue, "message_id", m.ID, "lease_owner", e.cfg.InstanceID)
	return true
}

func messageIDs(msgs []*relaytype.Message) []int64 {
	ids := make([]int64, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

func unitIDs(u claimUnit) []int64 { return messageIDs(u.msgs) }
