package relay_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaytype"
)

// rows returns how many messages (any state) the queue holds.
func (b *bundle) rows() int64 {
	b.t.Helper()
	st, err := b.engine.Stats(b.ctx)
	require.NoError(b.t, err)
	var n int64
	for _, c := range st.Counts {
		n += c
	}
	return n
}

// requireAbsent checks that message id does not exist.
func (b *bundle) requireAbsent(id int64) {
	b.t.Helper()
	_, err := b.d.GetExecutor().MessageGet(b.ctx, b.engine.Queue(), id)
	require.ErrorIs(b.t, err, relaytype.ErrNotFound, "message %d", id)
}

// TestEnqueueIdentityDuplicateInOneCall: of two params with one identity in
// one call the first is enqueued and the second is reported its duplicate,
// in input order, and takes no row.
func TestEnqueueIdentityDuplicateInOneCall(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setup(t, s, relay.Config{Handler: okHandler()})
		res, err := b.engine.Enqueue(b.ctx,
			&relay.EnqueueParams{Identity: "A", Payload: []byte("a1")},
			&relay.EnqueueParams{Identity: "B", Payload: []byte("b")},
			&relay.EnqueueParams{Identity: "A", Payload: []byte("a2")},
			&relay.EnqueueParams{Payload: []byte("plain")},
			&relay.EnqueueParams{ID: 1000, Identity: "B", Payload: []byte("b2")},
		)
		require.NoError(t, err)
		require.Len(t, res, 5)
		require.Equal(t, []bool{false, false, true, false, true}, duplicates(res))
		require.Equal(t, res[0].ID, res[2].ID, "duplicate of the first A")
		require.Equal(t, res[1].ID, res[4].ID, "duplicate of the first B")
		require.Equal(t, int64(3), b.rows(), "the duplicates took no row")
		b.requireAbsent(1000)
		require.Equal(t, []byte("a1"), b.get(res[0].ID).Payload)
		require.Equal(t, "A", b.get(res[0].ID).IdentityKey)
		require.Empty(t, b.get(res[3].ID).IdentityKey, "no identity, none bound")
	})
}

func duplicates(res []relay.EnqueueResult) []bool {
	out := make([]bool, len(res))
	for i, r := range res {
		out[i] = r.Duplicate
	}
	return out
}

// TestEnqueueIdentityDuplicateAcrossCalls: a later Enqueue of a held
// identity reports the holder, whatever state it reached, and inserts
// nothing; the holder's handler runs once.
func TestEnqueueIdentityDuplicateAcrossCalls(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var c calls
		b := setup(t, s, relay.Config{Handler: relay.HandlerFunc(func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
			c.add(d.Message.ID)
			assert.Equal(t, "order-7", d.Message.IdentityKey, "the handler sees the identity bound at enqueue")
			return relay.Succeeded()
		})})
		first, err := b.engine.Enqueue(b.ctx, &relay.EnqueueParams{Identity: "order-7", Payload: []byte("first")})
		require.NoError(t, err)
		require.Equal(t, []bool{false}, duplicates(first))
		holder := first[0].ID

		again, err := b.engine.Enqueue(b.ctx, &relay.EnqueueParams{Identity: "order-7", Payload: []byte("second")},
			&relay.EnqueueParams{ID: holder + 100, Identity: "order-7"})
		require.NoError(t, err)
		require.Equal(t, []relay.EnqueueResult{{ID: holder, Duplicate: true}, {ID: holder, Duplicate: true}}, again)
		require.Equal(t, int64(1), b.rows())
		b.requireAbsent(holder + 100)

		require.Equal(t, 1, b.work())
		require.Equal(t, relaytype.StateSucceeded, b.state(holder))
		again, err = b.engine.Enqueue(b.ctx, &relay.EnqueueParams{Identity: "order-7"})
		require.NoError(t, err)
		require.Equal(t, []relay.EnqueueResult{{ID: holder, Duplicate: true}}, again, "a finished holder still holds it")
		require.Zero(t, b.work())
		require.Equal(t, []int64{holder}, c.get())
		require.Equal(t, int64(1), b.rows())
		require.Equal(t, []byte("first"), b.get(holder).Payload)
	})
}

// TestEnqueueIdentityAndDecoderIdentity: the two ways an identity is bound
// share one namespace per queue. An Enqueue of an identity a Decoder
// bound to an earlier message is its duplicate; a message enqueued with an
// identity is bound already, so its Decoder's identity is not bound (the
// message keeps the enqueued one), and a later message whose Decoder
// returns the enqueued identity is SKIPPED duplicate-of it — in the FIFO
// path, the batched FIFO path and the claim path alike.
func TestEnqueueIdentityAndDecoderIdentity(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name string
		cfg  relay.Config
	}{
		{"fifo", relay.Config{}},
		{"fifo-batch", relay.Config{FIFOBatch: 8}},
		{"unordered", relay.Config{Mode: relay.ModeUnordered, Workers: 1}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			eachStore(t, func(t *testing.T, s store) {
				var c calls
				cfg := mode.cfg
				cfg.Handler = decoding{handle: func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
					c.add(d.Message.ID)
					return relay.Succeeded()
				}}
				b := setup(t, s, cfg)

				// Message 1 learns its identity X only from its payload.
				b.enqueuePayloads(map[int64]string{1: "X|K-A"})
				require.Equal(t, 1, b.work())
				require.Equal(t, "X", b.get(1).IdentityKey)
				res, err := b.engine.Enqueue(b.ctx, &relay.EnqueueParams{ID: 2, Identity: "X", Payload: []byte("X|K-A")})
				require.NoError(t, err)
				require.Equal(t, []relay.EnqueueResult{{ID: 1, Duplicate: true}}, res, "duplicate of the decoder-bound message")
				b.requireAbsent(2)

				// Message 3 is enqueued with Y; its decoder says Z, which is not
				// bound. Message 4's decoder says Y: a duplicate of 3. Message
				// 5's decoder says Z, still free: it binds Z.
				res, err = b.engine.Enqueue(b.ctx,
					&relay.EnqueueParams{ID: 3, Identity: "Y", Payload: []byte("Z|K-A")},
					&relay.EnqueueParams{ID: 4, Payload: []byte("Y|K-A")},
					&relay.EnqueueParams{ID: 5, Payload: []byte("Z|K-A")},
				)
				require.NoError(t, err)
				require.Equal(t, []bool{false, false, false}, duplicates(res))
				require.Equal(t, 3, b.work())
				require.Equal(t, relaytype.StateSucceeded, b.state(3))
				require.Equal(t, "Y", b.get(3).IdentityKey, "the enqueued identity is left alone")
				m4 := b.get(4)
				require.Equal(t, relaytype.StateSkipped, m4.State)
				require.Equal(t, "duplicate-of:3", m4.LastError)
				require.Equal(t, relaytype.StateSucceeded, b.state(5))
				require.Equal(t, "Z", b.get(5).IdentityKey)
				require.ElementsMatch(t, []int64{1, 3, 5}, c.get())
			})
		})
	}
}

// TestEnqueueIdentityConcurrentTransactions: two real PostgreSQL
// transactions enqueue one identity. The second waits for the first: when
// the first commits, the second is told it is a duplicate of the first's
// message; when the first rolls back, the second's message is inserted.
// Exactly one row holds the identity either way.
func TestEnqueueIdentityConcurrentTransactions(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		name := "first-commits"
		if !commit {
			name = "first-rolls-back"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			eachStoreWhere(t, func(s store) bool { return s.concurrentTx }, func(t *testing.T, s store) {
				b := setup(t, s, relay.Config{Handler: okHandler()})
				ctx := b.ctx
				tx1, err := b.d.Begin(ctx)
				require.NoError(t, err)
				defer tx1.Rollback(ctx) //nolint:errcheck
				first, err := b.engine.EnqueueTx(ctx, tx1, &relay.EnqueueParams{Identity: "X", Payload: []byte("first")})
				require.NoError(t, err)
				require.False(t, first[0].Duplicate)
				var pid1 int64
				require.NoError(t, tx1.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid1))

				type outcome struct {
					res []relay.EnqueueResult
					err error
				}
				done := make(chan outcome, 1)
				go func() {
					tx2, err := b.d.Begin(ctx)
					if err != nil {
						done <- outcome{nil, err}
						return
					}
					res, err := b.engine.EnqueueTx(ctx, tx2, &relay.EnqueueParams{Identity: "X", Payload: []byte("second")})
					if err != nil {
						done <- outcome{nil, errors.Join(err, tx2.Rollback(ctx))}
						return
					}
					done <- outcome{res, tx2.Commit(ctx)}
				}()
				// The second transaction's INSERT waits on the first's row.
				require.Eventually(t, func() bool {
					var waiting int
					err := b.d.GetExecutor().QueryRow(ctx,
						"SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))", pid1).Scan(&waiting)
					require.NoError(t, err)
					return waiting == 1
				}, 30*time.Second, 10*time.Millisecond)
				if commit {
					require.NoError(t, tx1.Commit(ctx))
				} else {
					require.NoError(t, tx1.Rollback(ctx))
				}
				got := <-done
				require.NoError(t, got.err)
				require.Len(t, got.res, 1)

				require.Equal(t, int64(1), b.rows(), "exactly one row")
				if commit {
					require.Equal(t, relay.EnqueueResult{ID: first[0].ID, Duplicate: true}, got.res[0])
					require.Equal(t, []byte("first"), b.get(first[0].ID).Payload)
				} else {
					require.False(t, got.res[0].Duplicate)
					require.NotEqual(t, first[0].ID, got.res[0].ID)
					b.requireAbsent(first[0].ID)
					m := b.get(got.res[0].ID)
					require.Equal(t, []byte("second"), m.Payload)
					require.Equal(t, "X", m.IdentityKey)
				}
			})
		})
	}
}

// TestEnqueueIdentityRace: many enqueuers of one identity at once, each in
// its own transaction: one message, and every caller is told its id.
func TestEnqueueIdentityRace(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setup(t, s, relay.Config{Handler: okHandler()})
		const n = 8
		results := make([]relay.EnqueueResult, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				res, err := b.engine.Enqueue(b.ctx, &relay.EnqueueParams{Identity: "same"})
				if assert.NoError(t, err) && assert.Len(t, res, 1) {
					results[i] = res[0]
				}
			})
		}
		wg.Wait()
		inserted := 0
		for _, r := range results {
			if !r.Duplicate {
				inserted++
			}
			require.Equal(t, results[0].ID, r.ID)
		}
		require.Equal(t, 1, inserted)
		require.Equal(t, int64(1), b.rows())
	})
}
