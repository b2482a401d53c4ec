package relay_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// faultDriver wraps a real store and injects the failures a real server cannot
// be made to produce on demand at an exact statement (a commit that fails after
// the terminal state was written, a store error while recording a failure).
type faultDriver struct {
	relaydriver.Driver
	failCommits      atomic.Int32                                   // commits to fail (after rolling back)
	failFails        atomic.Int32                                   // MessageFail calls to fail
	refuseManyInTx   atomic.Int32                                   // in-transaction MessageCompleteMany calls to refuse with ErrConflict
	completeManyInTx atomic.Int32                                   // in-transaction MessageCompleteMany calls made
	completeInTx     atomic.Int32                                   // in-transaction MessageComplete calls made
	savepoints       atomic.Int32                                   // savepoints opened
	onList           func(*relaydriver.MessageListUnfinishedParams) // called before each MessageListUnfinished (nil: nothing)
	afterList        func()                                         // called after each MessageListUnfinished (nil: nothing)
}

var errInjected = errors.New("injected fault")

func take(n *atomic.Int32) bool { return n.Add(-1) >= 0 }

func (f *faultDriver) Begin(ctx context.Context) (relaydriver.ExecutorTx, error) {
	tx, err := f.Driver.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &faultTx{ExecutorTx: tx, f: f}, nil
}

func (f *faultDriver) GetExecutor() relaydriver.Executor {
	return &faultExecutor{Executor: f.Driver.GetExecutor(), f: f}
}

type faultTx struct {
	relaydriver.ExecutorTx
	f *faultDriver
}

func (t *faultTx) MessageCompleteMany(ctx context.Context, p []*relaydriver.MessageCompleteParams) error {
	t.f.completeManyInTx.Add(1)
	if take(&t.f.refuseManyInTx) {
		return fmt.Errorf("injected: message %d changed: %w", p[0].ID, relaytype.ErrConflict)
	}
	return t.ExecutorTx.MessageCompleteMany(ctx, p)
}

func (t *faultTx) MessageComplete(ctx context.Context, p *relaydriver.MessageCompleteParams) error {
	t.f.completeInTx.Add(1)
	return t.ExecutorTx.MessageComplete(ctx, p)
}

func (t *faultTx) Savepoint(ctx context.Context, name string) error {
	t.f.savepoints.Add(1)
	return t.ExecutorTx.Savepoint(ctx, name)
}

func (t *faultTx) Commit(ctx context.Context) error {
	if take(&t.f.failCommits) {
		return errors.Join(errInjected, t.ExecutorTx.Rollback(ctx))
	}
	return t.ExecutorTx.Commit(ctx)
}

type faultExecutor struct {
	relaydriver.Executor
	f *faultDriver
}

func (e *faultExecutor) MessageListUnfinished(ctx context.Context, p *relaydriver.MessageListUnfinishedParams) ([]*relaytype.Message, error) {
	if e.f.onList != nil {
		e.f.onList(p)
	}
	list, err := e.Executor.MessageListUnfinished(ctx, p)
	if e.f.afterList != nil {
		e.f.afterList()
	}
	return list, err
}

func (e *faultExecutor) MessageFail(ctx context.Context, p *relaydriver.MessageFailParams) (int, error) {
	if take(&e.f.failFails) {
		return 0, errInjected
	}
	return e.Executor.MessageFail(ctx, p)
}

// TestCommitFailureCountsOneAttempt: when the commit of handler writes +
// terminal state fails, nothing of it persists and exactly one attempt is
// counted, as INFRA — not one for the handler and another for the commit.
func TestCommitFailureCountsOneAttempt(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		f := &faultDriver{Driver: s.open(t, true)}
		b := setupOn(t, f, relay.Config{Handler: relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
			if err := insertProj(ctx, tx, d.Message.ID); err != nil {
				return relay.Retry(relaytype.ClassInfra, err)
			}
			return relay.Succeeded()
		})})
		b.createProj()
		b.enqueue(1)
		f.failCommits.Store(1)

		require.Equal(t, 1, b.work())
		m := b.get(1)
		require.Equal(t, relaytype.StateFailed, m.State)
		require.Equal(t, 1, m.Attempts)
		require.Equal(t, relaytype.ClassInfra, m.ErrorClass)
		require.Contains(t, m.LastError, "commit")
		require.True(t, m.AckNextAt.IsZero())
		require.Empty(t, b.projRows())

		b.clock.Advance(time.Second)
		require.Equal(t, 1, b.work())
		m = b.get(1)
		require.Equal(t, relaytype.StateSucceeded, m.State)
		require.Equal(t, 1, m.Attempts)
		require.Equal(t, []int64{1}, b.projRows())
	})
}

// TestFailurePathStoreErrorLeavesMessage: a store error while recording a
// failure is returned once (not logged as well), counts no attempt and leaves
// the message as it was; the next round retries it.
func TestFailurePathStoreErrorLeavesMessage(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		f := &faultDriver{Driver: s.open(t, true)}
		var c calls
		b := setupOn(t, f, relay.Config{Handler: relay.HandlerFunc(func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
			c.add(d.Message.ID)
			return relay.Retry(relaytype.ClassInfra, errors.New("sink down"))
		})})
		b.enqueue(1)
		f.failFails.Store(1)

		n, err := b.engine.Work(b.ctx)
		require.ErrorIs(t, err, errInjected)
		require.Zero(t, n)
		m := b.get(1)
		require.Equal(t, relaytype.StatePending, m.State)
		require.Zero(t, m.Attempts)
		for _, r := range b.logs.all() {
			require.NotContains(t, r.attrs, "error", "returned errors are not also logged: %q", r.msg)
		}

		require.Equal(t, 1, b.work())
		m = b.get(1)
		require.Equal(t, relaytype.StateFailed, m.State)
		require.Equal(t, 1, m.Attempts, "one attempt for the recorded failure only")
		require.Len(t, c.get(), 2)
	})
}

// TestFIFOBatchSavepoints: with FIFOBatch, contiguous heads share one
// transaction. A failing message's writes are rolled back and it ends the batch
// (the prefix before it commits); duplicates and ignored kinds
// end the batch too and are decided alone once they are the head, so FIFO order
// and per-message failure isolation hold.
func TestFIFOBatchSavepoints(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var c calls
		b := setup(t, s, relay.Config{
			FIFOBatch: 4, IgnoreRules: []string{"LDM-*"},
			Handler: decoding{handle: func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
				n := c.add(d.Message.ID)
				if err := insertProj(ctx, tx, d.Message.ID); err != nil {
					return relay.Retry(relaytype.ClassInfra, err)
				}
				if d.Message.ID == 3 && n == 1 {
					return relay.Retry(relaytype.ClassInfra, errors.New("once"))
				}
				return relay.Succeeded()
			}},
		})
		b.createProj()
		b.enqueuePayloads(map[int64]string{1: "a|K-X", 2: "b|K-X", 3: "c|K-X", 4: "a|K-X", 5: "e|LDM-Q", 6: "f|K-X"})

		require.Equal(t, 3, b.work())
		require.Equal(t, []int64{1, 2}, b.projRows(), "the prefix commits; the failed message's write is rolled back to its savepoint")
		require.Equal(t, relaytype.StateFailed, b.state(3))
		require.Equal(t, 1, b.get(3).Attempts)
		require.Equal(t, relaytype.StatePending, b.state(4), "nothing behind the failed head is decided")

		b.clock.Advance(time.Second)
		require.Equal(t, 4, b.work())
		// 3 failing rolls the optimistic batch back and 1, 2 run again before
		// they commit; 3 is not called again until its retry.
		require.Equal(t, []int64{1, 2, 3, 1, 2, 3, 6}, c.get())
		require.Equal(t, []int64{1, 2, 3, 6}, b.projRows())
		require.Equal(t, "duplicate-of:1", b.get(4).LastError)
		require.Equal(t, "ignored:LDM-*", b.get(5).LastError)
	})
}

// TestFIFOBatchCommitFailure: a failed batch commit leaves no effect, counts one
// INFRA attempt on the batch's head, and leaves the rest as they were.
func TestFIFOBatchCommitFailure(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		f := &faultDriver{Driver: s.open(t, true)}
		b := setupOn(t, f, relay.Config{FIFOBatch: 8, Handler: relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
			if err := insertProj(ctx, tx, d.Message.ID); err != nil {
				return relay.Retry(relaytype.ClassInfra, err)
			}
			return relay.Succeeded()
		})})
		b.createProj()
		b.enqueue(1, 2, 3)
		f.failCommits.Store(1)
		require.Equal(t, 1, b.work())
		require.Empty(t, b.projRows())
		m := b.get(1)
		require.Equal(t, relaytype.StateFailed, m.State)
		require.Equal(t, 1, m.Attempts)
		require.Equal(t, relaytype.ClassInfra, m.ErrorClass)
		for _, id := range []int64{2, 3} {
			m := b.get(id)
			require.Equal(t, relaytype.StatePending, m.State)
			require.Zero(t, m.Attempts)
		}
		b.clock.Advance(time.Second)
		require.Equal(t, 3, b.work())
		require.Equal(t, []int64{1, 2, 3}, b.projRows())
	})
}

// projHandler inserts the message's proj row, counts its calls, and fails the
// messages fail names (every call).
func projHandler(c *calls, fail map[int64]bool) relay.HandlerFunc {
	return func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
		c.add(d.Message.ID)
		if err := insertProj(ctx, tx, d.Message.ID); err != nil {
			return relay.Retry(relaytype.ClassInfra, err)
		}
		if fail[d.Message.ID] {
			return relay.Retry(relaytype.ClassInfra, errors.New("sink down"))
		}
		return relay.Succeeded()
	}
}

// TestFIFOBatchOptimisticOneCompletion: a batch whose handlers all succeed runs
// without savepoints and writes every terminal state (with its acknowledgement
// intent) in one set-based statement.
func TestFIFOBatchOptimisticOneCompletion(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		f := &faultDriver{Driver: s.open(t, true)}
		var c calls
		b := setupOn(t, f, relay.Config{FIFOBatch: 8, AckIntent: true, Handler: projHandler(&c, nil)})
		b.createProj()
		b.enqueue(1, 2, 3, 4, 5, 6, 7, 8)

		require.Equal(t, 8, b.work())
		require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8}, b.projRows())
		require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8}, c.get(), "each handler once, in id order")
		for id := int64(1); id <= 8; id++ {
			m := b.get(id)
			require.Equal(t, relaytype.StateSucceeded, m.State)
			require.Zero(t, m.Attempts)
			require.True(t, t0.Equal(m.AckNextAt), "acknowledgement intent of %d", id)
		}
		require.Equal(t, int32(1), f.completeManyInTx.Load(), "one set-based completion for the batch")
		require.Zero(t, f.completeInTx.Load(), "no per-message completion")
		require.Zero(t, f.savepoints.Load(), "no savepoints")
	})
}

// TestFIFOBatchHandlerFailureMidBatch: when handler k of a batch fails, the
// prefix before it commits with its effects, k is FAILED with one attempt and
// its handler was called exactly once, and nothing after k is touched.
func TestFIFOBatchHandlerFailureMidBatch(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		f := &faultDriver{Driver: s.open(t, true)}
		var c calls
		b := setupOn(t, f, relay.Config{FIFOBatch: 8, Handler: projHandler(&c, map[int64]bool{4: true})})
		b.createProj()
		b.enqueue(1, 2, 3, 4, 5, 6)
		before := map[int64]*relaytype.Message{5: b.get(5), 6: b.get(6)}

		require.Equal(t, 4, b.work(), "three successes and one failure decided")
		require.Equal(t, []int64{1, 2, 3}, b.projRows(), "the prefix commits; the failed message's write is gone")
		for _, id := range []int64{1, 2, 3} {
			require.Equal(t, relaytype.StateSucceeded, b.state(id))
		}
		m := b.get(4)
		require.Equal(t, relaytype.StateFailed, m.State)
		require.Equal(t, 1, m.Attempts)
		require.Equal(t, relaytype.ClassInfra, m.ErrorClass)
		require.Equal(t, "sink down", m.LastError)
		for id, was := range before {
			require.Equal(t, was, b.get(id), "message %d behind the failure is untouched", id)
		}
		require.Equal(t, []int64{1, 2, 3, 4, 1, 2, 3}, c.get(), "the prefix runs twice; 4 once; 5 and 6 never")
		require.Equal(t, int32(1), f.completeManyInTx.Load(), "only the committed prefix writes its completion")
		require.Zero(t, f.savepoints.Load())
	})
}

// TestFIFOBatchFailureInRerunPrefix: when a prefix handler fails on its second
// run, the batch shrinks again and only that earlier failure is recorded; the
// later failure it replaced counts no attempt.
func TestFIFOBatchFailureInRerunPrefix(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var c calls
		b := setup(t, s, relay.Config{FIFOBatch: 8, Handler: relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
			n := c.add(d.Message.ID)
			if err := insertProj(ctx, tx, d.Message.ID); err != nil {
				return relay.Retry(relaytype.ClassInfra, err)
			}
			if d.Message.ID == 4 || (d.Message.ID == 2 && n == 2) {
				return relay.Retry(relaytype.ClassInfra, errors.New("flaky"))
			}
			return relay.Succeeded()
		})})
		b.createProj()
		b.enqueue(1, 2, 3, 4, 5)

		require.Equal(t, 2, b.work())
		require.Equal(t, []int64{1, 2, 3, 4, 1, 2, 1}, c.get())
		require.Equal(t, []int64{1}, b.projRows())
		require.Equal(t, relaytype.StateSucceeded, b.state(1))
		require.Equal(t, 1, b.get(2).Attempts)
		for _, id := range []int64{3, 4, 5} {
			m := b.get(id)
			require.Equal(t, relaytype.StatePending, m.State, "message %d", id)
			require.Zero(t, m.Attempts, "message %d", id)
		}
	})
}

// TestFIFOBatchCompleteManyConflictFallsBack: when the store refuses the
// set-based completion (a message changed under us), the batch is rolled back
// and runs again with a savepoint and a completion per message, deciding it as
// before.
func TestFIFOBatchCompleteManyConflictFallsBack(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		f := &faultDriver{Driver: s.open(t, true)}
		var c calls
		b := setupOn(t, f, relay.Config{FIFOBatch: 8, Handler: projHandler(&c, nil)})
		b.createProj()
		b.enqueue(1, 2, 3, 4)
		f.refuseManyInTx.Store(1)

		require.Equal(t, 4, b.work())
		require.Equal(t, []int64{1, 2, 3, 4}, b.projRows(), "each effect exactly once")
		for id := int64(1); id <= 4; id++ {
			m := b.get(id)
			require.Equal(t, relaytype.StateSucceeded, m.State)
			require.Zero(t, m.Attempts)
		}
		require.Equal(t, []int64{1, 2, 3, 4, 1, 2, 3, 4}, c.get())
		require.Equal(t, int32(1), f.completeManyInTx.Load())
		require.Equal(t, int32(4), f.completeInTx.Load(), "the fallback completes message by message")
		require.Equal(t, int32(4), f.savepoints.Load(), "the fallback has a savepoint per message")
	})
}

// TestFIFOBatchConflictFallbackAfterFailure: a refused completion of a prefix
// that is running again after handler k failed falls back for the prefix, then
// records k's failure without calling k again.
func TestFIFOBatchConflictFallbackAfterFailure(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		f := &faultDriver{Driver: s.open(t, true)}
		var c calls
		b := setupOn(t, f, relay.Config{FIFOBatch: 8, Handler: projHandler(&c, map[int64]bool{3: true})})
		b.createProj()
		b.enqueue(1, 2, 3, 4)
		f.refuseManyInTx.Store(1)

		require.Equal(t, 3, b.work())
		require.Equal(t, []int64{1, 2}, b.projRows())
		require.Equal(t, []int64{1, 2, 3, 1, 2, 1, 2}, c.get(), "3 is called once")
		m := b.get(3)
		require.Equal(t, relaytype.StateFailed, m.State)
		require.Equal(t, 1, m.Attempts)
		require.Equal(t, relaytype.StatePending, b.state(4))
		require.Zero(t, b.get(4).Attempts)
	})
}

// TestFIFOBatchRealConflict: a message of the batch finished elsewhere while
// the batch ran (PostgreSQL, where another connection can write meanwhile): the
// set-based completion is refused, the fallback commits the messages before it
// and drops the decision on it, as a message-by-message run would.
func TestFIFOBatchRealConflict(t *testing.T) {
	t.Parallel()
	eachStoreWhere(t, func(s store) bool { return s.concurrentTx }, func(t *testing.T, s store) {
		f := &faultDriver{Driver: s.open(t, true)}
		var c calls
		var once atomic.Bool
		b := setupOn(t, f, relay.Config{FIFOBatch: 8, Handler: relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
			c.add(d.Message.ID)
			if d.Message.ID == 3 && once.CompareAndSwap(false, true) {
				// Another writer finishes message 2 while the batch is open.
				if err := f.Driver.GetExecutor().MessageComplete(ctx, &relaydriver.MessageCompleteParams{
					Queue: "p", ID: 2, State: relaytype.StateSkipped, LastError: "elsewhere", Now: t0,
				}); err != nil {
					return relay.Retry(relaytype.ClassInternal, err)
				}
			}
			if err := insertProj(ctx, tx, d.Message.ID); err != nil {
				return relay.Retry(relaytype.ClassInfra, err)
			}
			return relay.Succeeded()
		})})
		b.createProj()
		b.enqueue(1, 2, 3, 4)

		// 1 commits in the fallback, 2's decision is dropped, then 3 and 4 run as
		// the next batch.
		require.Equal(t, 3, b.work())
		require.Equal(t, []int64{1, 3, 4}, b.projRows(), "2's write was rolled back with its decision")
		for _, id := range []int64{1, 3, 4} {
			require.Equal(t, relaytype.StateSucceeded, b.state(id))
		}
		m := b.get(2)
		require.Equal(t, relaytype.StateSkipped, m.State)
		require.Equal(t, "elsewhere", m.LastError)
		require.Zero(t, m.Attempts)
		require.Equal(t, 1, b.logs.count("decision dropped"))
		require.Equal(t, int32(2), f.completeManyInTx.Load(), "the refused batch and the next one")
		require.Equal(t, []int64{1, 2, 3, 4, 1, 2, 3, 4}, c.get())
	})
}

// TestFIFOBatchLongFallbackIsCapped: a FIFO batch longer than
// SavepointBatchMax whose set-based completion is refused falls back with a
// savepoint for only its first SavepointBatchMax messages; the rest run as the
// next heads, and every message is decided once, in order.
func TestFIFOBatchLongFallbackIsCapped(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		f := &faultDriver{Driver: s.open(t, true)}
		var c calls
		n := relay.SavepointBatchMax + 36
		b := setupOn(t, f, relay.Config{FIFOBatch: relay.FIFOBatchMax, Handler: projHandler(&c, nil)})
		b.createProj()
		var ids, want []int64
		for id := int64(1); id <= int64(n); id++ {
			ids = append(ids, id)
		}
		b.enqueue(ids...)
		f.refuseManyInTx.Store(1)

		require.Equal(t, n, b.work())
		require.Equal(t, ids, b.projRows(), "each effect exactly once")
		for _, id := range ids {
			require.Equal(t, relaytype.StateSucceeded, b.state(id))
		}
		require.Equal(t, int32(relay.SavepointBatchMax), f.savepoints.Load(), "one savepoint per message of the capped fallback")
		want = append(want, ids...)                           // the refused optimistic run
		want = append(want, ids[:relay.SavepointBatchMax]...) // the fallback
		want = append(want, ids[relay.SavepointBatchMax:]...) // the next heads
		require.Equal(t, want, c.get())
	})
}

// TestFIFOPrefetchSeesReplay: the heads after a running batch are read in the
// background, but a message made unfinished again below them meanwhile (a
// replay landing before that read) is the smallest unfinished id and runs
// first: the prefetch is dropped and the heads are read afresh.
func TestFIFOPrefetchSeesReplay(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		f := &faultDriver{Driver: s.open(t, true)}
		var c calls
		var dead atomic.Bool
		b := setupOn(t, f, relay.Config{FIFOBatch: 4, Handler: relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
			c.add(d.Message.ID)
			if d.Message.ID == 2 && dead.CompareAndSwap(false, true) {
				return relay.Dead(relaytype.ClassInfra, errors.New("down"))
			}
			return relay.Succeeded()
		})})
		b.enqueue(1, 2)
		require.Equal(t, 2, b.work())
		require.Equal(t, relaytype.StateDead, b.state(2))
		var ids []int64
		for id := int64(3); id <= 12; id++ {
			ids = append(ids, id)
		}
		b.enqueue(ids...)
		// The first listing of a prefetch (it reads two batches' worth) is the
		// one that runs while the batch 3..6 does: replay 2 just before it.
		var replayed atomic.Bool
		f.onList = func(p *relaydriver.MessageListUnfinishedParams) {
			if p.Limit > 4 && replayed.CompareAndSwap(false, true) {
				n, err := b.engine.Replay(b.ctx, &relay.ReplayParams{Classes: []relaytype.ErrorClass{relaytype.ClassInfra}, IDs: []int64{2}})
				require.NoError(t, err)
				require.Equal(t, 1, n)
			}
		}

		for b.work() > 0 {
		}
		require.True(t, replayed.Load())
		got := c.get()
		require.Equal(t, []int64{1, 2, 1, 3, 4, 5, 6, 2, 7}, got[:9], "2 runs right after the batch it was replayed under: %v", got)
		for _, id := range append(ids, 1, 2) {
			require.Equal(t, relaytype.StateSucceeded, b.state(id), "message %d", id)
		}
	})
}

// TestFIFOWatermarkHoleCommitsDuringListing: a hole that commits between the
// pump's listing of unfinished heads and its read of the watermark must not
// let the id above the hole overtake it. Intake registers the hole's id and
// moves the watermark past it in one transaction; that transaction is run
// here right after the listing, the worst moment for a pump that read the
// listing first.
func TestFIFOWatermarkHoleCommitsDuringListing(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		f := &faultDriver{Driver: s.open(t, true)}
		var c calls
		b := setupOn(t, f, relay.Config{Watermarked: true, Handler: relay.HandlerFunc(func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
			c.add(d.Message.ID)
			return relay.Succeeded()
		})})
		ex := b.d.GetExecutor()
		require.NoError(t, ex.CursorSave(b.ctx, &relaydriver.CursorSaveParams{Queue: "p", Watermark: 1, Now: b.clock.Now()}))
		b.enqueue(1, 3) // 3 is registered above the watermark; 2 is a hole
		require.Equal(t, 1, b.work())

		var once atomic.Bool
		f.afterList = func() {
			if !once.CompareAndSwap(false, true) {
				return
			}
			tx, err := b.d.Begin(b.ctx)
			require.NoError(t, err)
			params, err := relay.InsertParams("p", b.clock.Now(), &relay.EnqueueParams{ID: 2, Payload: []byte("2")})
			require.NoError(t, err)
			_, err = tx.MessageInsertMany(b.ctx, params)
			require.NoError(t, err)
			require.NoError(t, tx.CursorSave(b.ctx, &relaydriver.CursorSaveParams{Queue: "p", Watermark: 3, Now: b.clock.Now()}))
			require.NoError(t, tx.Commit(b.ctx))
		}
		b.work() // the round whose listing the hole commits under
		require.True(t, once.Load())
		for b.work() > 0 {
		}
		require.Equal(t, []int64{1, 2, 3}, c.get(), "the hole's id runs before the id above it")
	})
}
