package relay_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// Config.DeleteSucceeded: a message that succeeds is deleted in the
// transaction of its handler's writes; SKIPPED and DEAD messages and
// messages bound to an identity are kept; per-key order holds.

// TestDeleteSucceeded: on both stores, alone (TxBatch 1) and in a batch
// (TxBatch 8), in both claim modes.
func TestDeleteSucceeded(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		mode    relay.Mode
		txBatch int
	}{{"per-key alone", relay.ModePerKey, 1}, {"per-key batch", relay.ModePerKey, 8}, {"unordered batch", relay.ModeUnordered, 8}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			eachStore(t, func(t *testing.T, s store) {
				var mu sync.Mutex
				var order []int64
				f := &faultDriver{Driver: s.open(t, true)}
				b := setupOn(t, f, relay.Config{Mode: c.mode, Workers: 2, BatchSize: 16, TxBatch: c.txBatch,
					DeleteSucceeded: true, Handler: relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
						mu.Lock()
						order = append(order, d.Message.ID)
						mu.Unlock()
						if _, err := tx.Exec(ctx, "INSERT INTO effect (id, n) VALUES ($1, 1) ON CONFLICT (id) DO UPDATE SET n = effect.n + 1",
							d.Message.ID); err != nil {
							return relay.Retry(relaytype.ClassInfra, err)
						}
						switch d.Message.ID {
						case 5:
							return relay.Skip("not for us")
						case 6:
							return relay.Dead(relaytype.ClassProtocol, errors.New("bad"))
						}
						return relay.Succeeded()
					})})
				b.createEffect()
				// Key a holds 1, 2 and 3 (in that order); 7 is bound to an identity.
				for _, p := range []*relay.EnqueueParams{{ID: 1, Key: "a"}, {ID: 2, Key: "a"}, {ID: 3, Key: "a"}, {ID: 4, Key: "b"},
					{ID: 5, Key: "c"}, {ID: 6, Key: "d"}, {ID: 7, Key: "e", Identity: "X"}, {ID: 8, Key: "f"}} {
					_, err := b.engine.Enqueue(b.ctx, p)
					require.NoError(t, err)
				}
				for b.work() > 0 {
				}
				require.Equal(t, map[int64]int{1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 7: 1, 8: 1}, b.effects(), "each completion once; the dead rolled back")
				for _, id := range []int64{1, 2, 3, 4, 8} {
					b.requireAbsent(id)
				}
				require.Equal(t, relaytype.StateSkipped, b.state(5))
				require.Equal(t, relaytype.StateDead, b.state(6))
				require.Equal(t, relaytype.StateSucceeded, b.state(7), "an identity's message is its dedupe record: kept")
				res, err := b.engine.Enqueue(b.ctx, &relay.EnqueueParams{Key: "e", Identity: "X"})
				require.NoError(t, err)
				require.True(t, res[0].Duplicate, "the identity still dedupes")
				st, err := b.engine.Stats(b.ctx)
				require.NoError(t, err)
				require.Equal(t, int64(1), st.Counts[relaytype.StateSucceeded])

				mu.Lock()
				defer mu.Unlock()
				var keyA []int64
				for _, id := range order {
					if id <= 3 {
						keyA = append(keyA, id)
					}
				}
				if c.mode == relay.ModePerKey {
					require.Equal(t, []int64{1, 2, 3}, keyA, "one key in id order")
				}
				if c.txBatch > 1 {
					require.Positive(t, f.completeManyInTx.Load(), "the set-based completion deletes")
				}
			})
		})
	}
}

// TestDeleteSucceededLeaseTakenOver: while instance A runs a batch, its
// leases expire and instance B claims, finishes and deletes the same
// messages. A's completion finds them gone, which is a lost lease like a
// changed row: A decides nothing, reports no error, and each effect exists
// once — B's. (PostgreSQL: B writes while A's transaction is open.)
func TestDeleteSucceededLeaseTakenOver(t *testing.T) {
	t.Parallel()
	for _, txBatch := range []int{1, 4} {
		eachStoreWhere(t, func(s store) bool { return s.concurrentTx }, func(t *testing.T, s store) {
			d := s.open(t, true)
			var ca, cb calls
			bb := setupOn(t, d, relay.Config{Mode: relay.ModePerKey, InstanceID: "B", DeleteSucceeded: true,
				Clock: relayclock.NewFake(t0.Add(time.Hour)), Handler: batchHandler(&cb, nil)})
			var bDecided atomic.Int64
			ba := setupOn(t, d, relay.Config{Mode: relay.ModePerKey, InstanceID: "A", Workers: 1, BatchSize: 4, TxBatch: txBatch,
				DeleteSucceeded: true, Handler: takeOverFirst(bb, &bDecided, batchHandler(&ca, nil))})
			ba.createEffect()
			for id := int64(1); id <= 4; id++ {
				_, err := ba.engine.Enqueue(ba.ctx, &relay.EnqueueParams{ID: id, Key: itoa(id)})
				require.NoError(t, err)
			}

			n, err := ba.engine.Work(ba.ctx)
			require.NoError(t, err, "a message gone under A is a lost lease, not a store failure")
			require.Zero(t, n, "A decides nothing")
			require.Equal(t, int64(4), bDecided.Load())
			require.Equal(t, map[int64]int{1: 1, 2: 1, 3: 1, 4: 1}, ba.effects(), "each effect once")
			for id := int64(1); id <= 4; id++ {
				ba.requireAbsent(id)
			}
			require.Positive(t, ba.logs.count("decision dropped"))
			require.ElementsMatch(t, []int64{1, 2, 3, 4}, cb.get())
		})
	}
}

// TestConfigDeleteSucceeded: refused where something reads the terminal
// rows (the acknowledgement write-back) and in ModeFIFO.
func TestConfigDeleteSucceeded(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg relay.Config
		ok  bool
	}{
		{relay.Config{Mode: relay.ModePerKey, DeleteSucceeded: true}, true},
		{relay.Config{Mode: relay.ModeUnordered, DeleteSucceeded: true, TxBatch: 8}, true},
		{relay.Config{Mode: relay.ModeFIFO, DeleteSucceeded: true}, false},
		{relay.Config{Mode: relay.ModePerKey, DeleteSucceeded: true, AckIntent: true}, false},
	} {
		c.cfg.Queue, c.cfg.Handler = "p", okHandler()
		_, err := relay.NewEngine(openSQLite(t, false), c.cfg)
		if c.ok {
			require.NoError(t, err, "%+v", c.cfg)
		} else {
			require.ErrorContains(t, err, "Config.DeleteSucceeded", "%+v", c.cfg)
		}
	}
}
