package relay_test

import (
	"context"
	"errors"
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
	failCommits atomic.Int32 // commits to fail (after rolling back)
	failFails   atomic.Int32 // MessageFail calls to fail
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
// transaction with a savepoint each. A failing message is rolled back alone and
// ends the batch (the prefix before it commits); duplicates and ignored kinds
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
		require.Equal(t, []int64{1, 2, 3, 3, 6}, c.get())
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
