package relay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Config.TxBatch: claimed messages of the unordered and per-key modes share one
// transaction. These tests prove that each message's terminal state still
// commits with exactly its own handler's writes: a failure, a refused
// completion, a failed commit or a lease lost to another instance decides (or
// drops) only the message concerned, and every effect lands exactly once.

// batchHandler counts calls per message and adds one to the message's effect
// counter in the engine's transaction (a second applied effect would show as
// n = 2); it fails the messages in fail on every call.
func batchHandler(c *calls, fail map[int64]bool) relay.HandlerFunc {
	return func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
		c.add(d.Message.ID)
		if _, err := tx.Exec(ctx, "INSERT INTO effect (id, n) VALUES ($1, 1) ON CONFLICT (id) DO UPDATE SET n = effect.n + 1", d.Message.ID); err != nil {
			return relay.Retry(relaytype.ClassInfra, err)
		}
		if fail[d.Message.ID] {
			return relay.Retry(relaytype.ClassInfra, errors.New("sink down"))
		}
		return relay.Succeeded()
	}
}

func (b *bundle) createEffect() {
	b.t.Helper()
	_, err := b.d.GetExecutor().Exec(b.ctx, "CREATE TABLE effect (id BIGINT PRIMARY KEY, n INTEGER NOT NULL)")
	require.NoError(b.t, err)
}

// effects returns each message's applied-effect count.
func (b *bundle) effects() map[int64]int {
	b.t.Helper()
	rows, err := b.d.GetExecutor().Query(b.ctx, "SELECT id, n FROM effect")
	require.NoError(b.t, err)
	defer rows.Close()
	out := map[int64]int{}
	for rows.Next() {
		var id int64
		var n int
		require.NoError(b.t, rows.Scan(&id, &n))
		out[id] = n
	}
	require.NoError(b.t, rows.Err())
	return out
}

// once returns {id: 1} for each id.
func once(ids ...int64) map[int64]int {
	out := map[int64]int{}
	for _, id := range ids {
		out[id] = 1
	}
	return out
}

// TestTxBatchOptimisticOneCompletion: a claimed batch whose handlers all
// succeed runs in one transaction without savepoints and writes every terminal
// state in one set-based statement guarded by the lease owner.
func TestTxBatchOptimisticOneCompletion(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		f := &faultDriver{Driver: s.open(t, true)}
		var c calls
		b := setupOn(t, f, relay.Config{Mode: relay.ModeUnordered, Workers: 1, BatchSize: 8, TxBatch: 8,
			AckIntent: true, Handler: batchHandler(&c, nil)})
		b.createEffect()
		b.enqueue(1, 2, 3, 4, 5, 6, 7, 8)

		require.Equal(t, 8, b.work())
		require.Equal(t, once(1, 2, 3, 4, 5, 6, 7, 8), b.effects())
		require.ElementsMatch(t, []int64{1, 2, 3, 4, 5, 6, 7, 8}, c.get(), "each handler once")
		for id := int64(1); id <= 8; id++ {
			m := b.get(id)
			require.Equal(t, relaytype.StateSucceeded, m.State)
			require.Zero(t, m.Attempts)
			require.Empty(t, m.LeaseOwner, "the lease is released with the terminal state")
			require.True(t, t0.Equal(m.AckNextAt), "acknowledgement intent of %d", id)
		}
		require.Equal(t, int32(1), f.completeManyInTx.Load(), "one set-based completion for the batch")
		require.Zero(t, f.completeInTx.Load())
		require.Zero(t, f.savepoints.Load())
	})
}

// TestTxBatchHandlerFailure: when handlers of a batch fail, each failure is
// recorded alone with one attempt (its handler called once per round), the
// other messages commit exactly once, and nothing of a failed message's writes
// survives.
func TestTxBatchHandlerFailure(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		f := &faultDriver{Driver: s.open(t, true)}
		var c calls
		b := setupOn(t, f, relay.Config{Mode: relay.ModeUnordered, Workers: 1, BatchSize: 8, TxBatch: 8,
			Handler: batchHandler(&c, map[int64]bool{3: true, 6: true})})
		b.createEffect()
		b.enqueue(1, 2, 3, 4, 5, 6, 7, 8)

		require.Equal(t, 8, b.work(), "six successes and two failures decided")
		require.Equal(t, once(1, 2, 4, 5, 7, 8), b.effects())
		for _, id := range []int64{3, 6} {
			m := b.get(id)
			require.Equal(t, relaytype.StateFailed, m.State)
			require.Equal(t, 1, m.Attempts)
			require.Equal(t, "sink down", m.LastError)
			require.Empty(t, m.LeaseOwner)
		}
		// The optimistic run stops at 3; 3's failure is recorded; the rest run
		// under savepoints, where 6 fails and is rolled back alone.
		require.Equal(t, []int64{1, 2, 3, 1, 2, 4, 5, 6, 7, 8}, c.get())
		require.Zero(t, f.completeManyInTx.Load())
		require.Equal(t, int32(7), f.savepoints.Load())
		require.Equal(t, int32(6), f.completeInTx.Load())

		b.clock.Advance(time.Second)
		require.Equal(t, 2, b.work(), "both retried (and failed again)")
		require.Equal(t, 2, b.get(3).Attempts)
		require.Equal(t, once(1, 2, 4, 5, 7, 8), b.effects())
	})
}

// TestTxBatchCompleteManyConflictFallsBack: when the store refuses the
// set-based completion, the batch runs again with a savepoint and a guarded
// completion per message; every effect lands once.
func TestTxBatchCompleteManyConflictFallsBack(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		f := &faultDriver{Driver: s.open(t, true)}
		var c calls
		b := setupOn(t, f, relay.Config{Mode: relay.ModeUnordered, Workers: 1, BatchSize: 4, TxBatch: 4,
			Handler: batchHandler(&c, nil)})
		b.createEffect()
		b.enqueue(1, 2, 3, 4)
		f.refuseManyInTx.Store(1)

		require.Equal(t, 4, b.work())
		require.Equal(t, once(1, 2, 3, 4), b.effects())
		for id := int64(1); id <= 4; id++ {
			require.Equal(t, relaytype.StateSucceeded, b.state(id))
			require.Zero(t, b.get(id).Attempts)
		}
		require.Equal(t, []int64{1, 2, 3, 4, 1, 2, 3, 4}, c.get())
		require.Equal(t, int32(4), f.savepoints.Load())
		require.Equal(t, int32(4), f.completeInTx.Load())
	})
}

// TestTxBatchCommitFailure: a failed batch commit leaves no effect and counts
// one INFRA attempt on each message of the batch; they succeed on retry.
func TestTxBatchCommitFailure(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		f := &faultDriver{Driver: s.open(t, true)}
		var c calls
		b := setupOn(t, f, relay.Config{Mode: relay.ModeUnordered, Workers: 1, BatchSize: 4, TxBatch: 4,
			Handler: batchHandler(&c, nil)})
		b.createEffect()
		b.enqueue(1, 2, 3, 4)
		f.failCommits.Store(1)

		require.Equal(t, 4, b.work())
		require.Empty(t, b.effects())
		for id := int64(1); id <= 4; id++ {
			m := b.get(id)
			require.Equal(t, relaytype.StateFailed, m.State)
			require.Equal(t, 1, m.Attempts)
			require.Equal(t, relaytype.ClassInfra, m.ErrorClass)
			require.Contains(t, m.LastError, "commit")
		}
		b.clock.Advance(time.Second)
		require.Equal(t, 4, b.work())
		require.Equal(t, once(1, 2, 3, 4), b.effects())
		for id := int64(1); id <= 4; id++ {
			require.Equal(t, relaytype.StateSucceeded, b.state(id))
		}
	})
}

// takeOverFirst returns a handler that, at its first call, has other run a
// whole round of Work (other's clock being past every lease this instance
// holds, it takes them over) and stores how many messages it decided in
// decided, then runs inner.
func takeOverFirst(other *bundle, decided *atomic.Int64, inner relay.HandlerFunc) relay.Handler {
	var once sync.Once
	return relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, dl *relay.Delivery) relay.Result {
		once.Do(func() {
			n, err := other.engine.Work(ctx)
			if err != nil {
				panic(err)
			}
			decided.Store(int64(n))
		})
		return inner(ctx, tx, dl)
	})
}

// TestTxBatchLeaseTakenOver: while instance A runs a batch, its leases expire
// and instance B claims and finishes the same messages. A's set-based
// completion is refused, its savepoint fallback drops every decision, and each
// message's effect exists once — B's. (PostgreSQL: B writes while A's
// transaction is open.)
func TestTxBatchLeaseTakenOver(t *testing.T) {
	t.Parallel()
	eachStoreWhere(t, func(s store) bool { return s.concurrentTx }, func(t *testing.T, s store) {
		d := s.open(t, true)
		var ca, cb calls
		// B's clock is past every lease A takes.
		bb := setupOn(t, d, relay.Config{Mode: relay.ModeUnordered, InstanceID: "B",
			Clock: relayclock.NewFake(t0.Add(time.Hour)), Handler: batchHandler(&cb, nil)})
		var bDecided atomic.Int64
		ba := setupOn(t, d, relay.Config{Mode: relay.ModeUnordered, InstanceID: "A", Workers: 1, BatchSize: 4, TxBatch: 4,
			Handler: takeOverFirst(bb, &bDecided, batchHandler(&ca, nil))})
		ba.createEffect()
		ba.enqueue(1, 2, 3, 4)

		require.Equal(t, 0, ba.work(), "A decides nothing: every message changed under it")
		require.Equal(t, int64(4), bDecided.Load())
		require.Equal(t, map[int64]int{1: 1, 2: 1, 3: 1, 4: 1}, ba.effects(), "each effect once")
		for id := int64(1); id <= 4; id++ {
			require.Equal(t, relaytype.StateSucceeded, ba.state(id))
		}
		require.Equal(t, 4, ba.logs.count("decision dropped"))
		require.ElementsMatch(t, []int64{1, 2, 3, 4}, cb.get())
	})
}

// TestConfigTxBatch: TxBatch is bounded and belongs to the claim modes.
func TestConfigTxBatch(t *testing.T) {
	t.Parallel()
	h := relay.HandlerFunc(func(context.Context, relay.Tx, *relay.Delivery) relay.Result { return relay.Succeeded() })
	for _, c := range []struct {
		cfg relay.Config
		ok  bool
	}{
		{relay.Config{Mode: relay.ModeUnordered, TxBatch: relay.TxBatchMax}, true},
		{relay.Config{Mode: relay.ModePerKey, TxBatch: 8}, true},
		{relay.Config{Mode: relay.ModeUnordered, TxBatch: relay.TxBatchMax + 1}, false},
		{relay.Config{Mode: relay.ModeUnordered, TxBatch: -1}, false},
		{relay.Config{Mode: relay.ModeFIFO, TxBatch: 2}, false},
	} {
		c.cfg.Queue, c.cfg.Handler = "p", h
		_, err := relay.NewEngine(openSQLite(t, false), c.cfg)
		if c.ok {
			require.NoError(t, err, "%+v", c.cfg)
		} else {
			require.ErrorContains(t, err, "Config.TxBatch", "%+v", c.cfg)
		}
	}
}

// TestClaimKeepsFlowing: claiming does not wait for a whole batch: while one
// slow message holds a worker, the other workers go on through later claims.
func TestClaimKeepsFlowing(t *testing.T) {
	t.Parallel()
	eachStoreWhere(t, func(s store) bool { return s.concurrentTx }, func(t *testing.T, s store) {
		release := make(chan struct{})
		var done atomic.Int32
		b := setup(t, s, relay.Config{Mode: relay.ModeUnordered, Workers: 2, BatchSize: 4,
			Handler: relay.HandlerFunc(func(ctx context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
				if d.Message.ID == 1 {
					select {
					case <-release:
					case <-time.After(10 * time.Second): // watchdog only: fails the test if claims wait for message 1
						return relay.Dead(relaytype.ClassInternal, errors.New("claims stalled behind a slow message"))
					}
				} else if done.Add(1) == 19 {
					close(release) // every other message went by the slow one
				}
				return relay.Succeeded()
			})})
		ids := make([]int64, 20)
		for i := range ids {
			ids[i] = int64(i + 1)
		}
		b.enqueue(ids...)
		require.Equal(t, 20, b.work(), "19 messages passed message 1 while it ran, over several claims of 4")
		for _, id := range ids {
			require.Equal(t, relaytype.StateSucceeded, b.state(id), fmt.Sprint(id))
		}
	})
}

// TestClaimRecoversExpiredLeases: messages leased by an instance that died are
// taken over by a running engine within a quarter lease of their expiry, and
// processed exactly once; until then they are left alone.
func TestClaimRecoversExpiredLeases(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var c calls
		b := setup(t, s, relay.Config{Mode: relay.ModeUnordered, Handler: batchHandler(&c, nil), TxBatch: 4})
		b.createEffect()
		b.enqueue(1, 2, 3, 4, 5, 6)
		// A dead instance leased 1..3 for 30s.
		ms, err := b.d.GetExecutor().MessageClaim(b.ctx, &relaydriver.MessageClaimParams{
			Queue: "p", Limit: 3, Owner: "dead", LeaseUntil: t0.Add(30 * time.Second), Now: t0})
		require.NoError(t, err)
		require.Len(t, ms, 3)

		require.Equal(t, 3, b.work(), "4..6; 1..3 are leased")
		b.enqueue(7)
		b.clock.Advance(29 * time.Second)
		require.Equal(t, 1, b.work(), "7; the leases are still live")
		b.clock.Advance(time.Second + relay.LeaseDurationDefault/4)
		require.Equal(t, 3, b.work(), "1..3 recovered")
		require.Equal(t, once(1, 2, 3, 4, 5, 6, 7), b.effects())
		for id := int64(1); id <= 7; id++ {
			require.Equal(t, relaytype.StateSucceeded, b.state(id))
		}
	})
}

// claimBatchHandler is batchHandler with a HandleBatch that records each call's
// ids as one entry and applies the same effects in one call.
type claimBatchHandler struct {
	relay.HandlerFunc
	mu      sync.Mutex
	batches [][]int64
	fail    map[int64]bool
}

func (h *claimBatchHandler) HandleBatch(ctx context.Context, tx relay.Tx, ds []*relay.Delivery) []relay.Result {
	ids := make([]int64, len(ds))
	out := make([]relay.Result, len(ds))
	for i, d := range ds {
		ids[i] = d.Message.ID
		if _, err := tx.Exec(ctx, "INSERT INTO effect (id, n) VALUES ($1, 1) ON CONFLICT (id) DO UPDATE SET n = effect.n + 1", d.Message.ID); err != nil {
			out[i] = relay.Retry(relaytype.ClassInfra, err)
			continue
		}
		out[i] = relay.Succeeded()
		if h.fail[d.Message.ID] {
			out[i] = relay.Retry(relaytype.ClassInfra, errors.New("sink down"))
		}
	}
	h.mu.Lock()
	h.batches = append(h.batches, ids)
	h.mu.Unlock()
	return out
}

// TestTxBatchBatchHandler: in the claim modes a BatchHandler receives a
// TxBatch's messages in one HandleBatch call, and they commit with one
// set-based completion; when one of its results fails, that failure is
// recorded alone and the others run again each with Handle under a savepoint,
// every effect landing once.
func TestTxBatchBatchHandler(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		f := &faultDriver{Driver: s.open(t, true)}
		var c calls
		h := &claimBatchHandler{HandlerFunc: batchHandler(&c, nil), fail: map[int64]bool{7: true}}
		b := setupOn(t, f, relay.Config{Mode: relay.ModeUnordered, Workers: 1, BatchSize: 4, TxBatch: 4, Handler: h})
		b.createEffect()
		b.enqueue(1, 2, 3, 4)

		require.Equal(t, 4, b.work())
		require.Equal(t, [][]int64{{1, 2, 3, 4}}, h.batches, "one HandleBatch call for the batch")
		require.Empty(t, c.get(), "Handle not called")
		require.Equal(t, once(1, 2, 3, 4), b.effects())
		require.Equal(t, int32(1), f.completeManyInTx.Load())
		require.Zero(t, f.savepoints.Load())

		b.enqueue(5, 6, 7, 8)
		require.Equal(t, 4, b.work())
		require.Equal(t, [][]int64{{1, 2, 3, 4}, {5, 6, 7, 8}}, h.batches)
		require.Equal(t, []int64{5, 6, 8}, c.get(), "the others run alone with Handle; 7's failure is not run again")
		require.Equal(t, once(1, 2, 3, 4, 5, 6, 8), b.effects())
		require.Equal(t, relaytype.StateFailed, b.state(7))
		require.Equal(t, 1, b.get(7).Attempts)
	})
}
