package relay_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaytype"
)

// TestPerKeyOrderUnderRandomFailures: with Workers > 1 and random failures,
// every key's messages are attempted only as the key's head, never two of one
// key at once, and applied in strictly increasing id order; failed attempts
// leave no effect.
func TestPerKeyOrderUnderRandomFailures(t *testing.T) {
	t.Parallel()
	for _, txBatch := range []int{1, 4} {
		t.Run(fmt.Sprintf("TxBatch=%d", txBatch), func(t *testing.T) {
			t.Parallel()
			testPerKeyOrderUnderRandomFailures(t, txBatch)
		})
	}
}

func testPerKeyOrderUnderRandomFailures(t *testing.T, txBatch int) {
	eachStore(t, func(t *testing.T, s store) {
		const keys, perKey = 6, 12
		keyOf := func(id int64) string { return fmt.Sprintf("k%d", (id-1)%keys) }
		var (
			mu       sync.Mutex
			rnd      = rand.New(rand.NewPCG(1, 2))
			queue    = map[string][]int64{} // each key's ids still to apply, in order
			inflight = map[string]int{}
			applied  = map[string][]int64{}
			bad      []string
		)
		var ps []*relay.EnqueueParams
		for id := int64(1); id <= keys*perKey; id++ {
			queue[keyOf(id)] = append(queue[keyOf(id)], id)
			ps = append(ps, &relay.EnqueueParams{ID: id, Key: keyOf(id)})
		}
		b := setup(t, s, relay.Config{
			Mode: relay.ModePerKey, Workers: 4, BatchSize: 4, TxBatch: txBatch,
			MaxAttempts: 20, Backoff: slices.Repeat([]time.Duration{time.Second}, 19),
			Handler: relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
				id, key := d.Message.ID, d.Message.Key
				mu.Lock()
				if inflight[key] > 0 {
					bad = append(bad, fmt.Sprintf("key %s: %d started while another message of the key runs", key, id))
				}
				inflight[key]++
				if q := queue[key]; len(q) == 0 || q[0] != id {
					bad = append(bad, fmt.Sprintf("key %s: %d attempted but the head is %v", key, id, q[:min(len(q), 1)]))
				}
				fail := rnd.IntN(10) < 3
				mu.Unlock()
				defer func() {
					mu.Lock()
					inflight[key]--
					mu.Unlock()
				}()
				if err := insertProj(ctx, tx, id); err != nil {
					return relay.Retry(relaytype.ClassInfra, err)
				}
				if fail {
					return relay.Retry(relaytype.ClassInfra, errors.New("random failure"))
				}
				mu.Lock()
				queue[key] = queue[key][1:]
				applied[key] = append(applied[key], id)
				mu.Unlock()
				return relay.Succeeded()
			}),
		})
		b.createProj()
		_, err := b.engine.Enqueue(b.ctx, ps...)
		require.NoError(t, err)

		for range 100 {
			b.work()
			st, err := b.engine.Stats(b.ctx)
			require.NoError(t, err)
			if st.Counts[relaytype.StateSucceeded] == keys*perKey {
				break
			}
			b.clock.Advance(time.Second)
		}
		mu.Lock()
		defer mu.Unlock()
		require.Empty(t, bad)
		var all []int64
		for k := range keys {
			seq := applied[fmt.Sprintf("k%d", k)]
			require.Len(t, seq, perKey)
			require.True(t, slices.IsSorted(seq) && len(slices.Compact(slices.Clone(seq))) == perKey,
				"key k%d applied out of order: %v", k, seq)
			all = append(all, seq...)
		}
		slices.Sort(all)
		require.Equal(t, all, b.projRows(), "exactly the applied attempts left effects")
	})
}

// TestPerKeyParallelAcrossKeys proves that different keys run at the same
// time: two handlers of two keys wait for each other at a barrier, which only
// passes if both are inside Handle at once. SQLite has one writer connection,
// so there handlers of different keys are serialised by the store and the
// barrier cannot be met.
func TestPerKeyParallelAcrossKeys(t *testing.T) {
	t.Parallel()
	eachStoreWhere(t, func(s store) bool { return s.concurrentTx }, func(t *testing.T, s store) {
		var arrived sync.WaitGroup
		arrived.Add(2)
		both := make(chan struct{})
		go func() { arrived.Wait(); close(both) }()
		b := setup(t, s, relay.Config{
			Mode: relay.ModePerKey, Workers: 2,
			Handler: relay.HandlerFunc(func(ctx context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
				arrived.Done()
				select {
				case <-both:
					return relay.Succeeded()
				case <-time.After(10 * time.Second): // watchdog only: fails the test if keys run serially
					return relay.Dead(relaytype.ClassInternal, errors.New("keys did not run in parallel"))
				}
			}),
		})
		_, err := b.engine.Enqueue(b.ctx, &relay.EnqueueParams{ID: 1, Key: "a"}, &relay.EnqueueParams{ID: 2, Key: "b"})
		require.NoError(t, err)
		require.Equal(t, 2, b.work())
		require.Equal(t, relaytype.StateSucceeded, b.state(1))
		require.Equal(t, relaytype.StateSucceeded, b.state(2))
	})
}

// TestPerKeyFailingHeadPausesOnlyItsKey: a FAILED head blocks the later
// messages of its own key until its retry, while other keys run on.
func TestPerKeyFailingHeadPausesOnlyItsKey(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var c calls
		b := setup(t, s, relay.Config{
			Mode: relay.ModePerKey, Workers: 3,
			Handler: relay.HandlerFunc(func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
				if c.add(d.Message.ID) == 1 && d.Message.ID == 1 {
					return relay.Retry(relaytype.ClassInfra, errors.New("key a is stuck"))
				}
				return relay.Succeeded()
			}),
		})
		_, err := b.engine.Enqueue(b.ctx,
			&relay.EnqueueParams{ID: 1, Key: "a"}, &relay.EnqueueParams{ID: 2, Key: "b"},
			&relay.EnqueueParams{ID: 3, Key: "a"}, &relay.EnqueueParams{ID: 4, Key: "b"},
			&relay.EnqueueParams{ID: 5, Key: "b"})
		require.NoError(t, err)

		require.Equal(t, 4, b.work(), "1 retried; 2, 4, 5 of key b went on")
		require.Equal(t, relaytype.StateFailed, b.state(1))
		require.Equal(t, relaytype.StatePending, b.state(3), "behind its key's failed head")
		for _, id := range []int64{2, 4, 5} {
			require.Equal(t, relaytype.StateSucceeded, b.state(id))
		}
		require.Equal(t, 0, b.work())

		b.clock.Advance(time.Second)
		require.Equal(t, 2, b.work())
		require.Equal(t, relaytype.StateSucceeded, b.state(1))
		require.Equal(t, relaytype.StateSucceeded, b.state(3))
		got := c.get()
		require.Equal(t, []int64{1, 3}, got[len(got)-2:], "key a resumes in order after its retry")
		require.Equal(t, []int64{2, 4, 5}, slices.DeleteFunc(slices.Clone(got), func(id int64) bool { return id%2 == 1 && id != 5 }))
	})
}

// TestUnorderedTwoInstancesExactlyOnce: two engines (two instances, distinct
// lease owners) on one store claim concurrently and together process every
// message exactly once.
func TestUnorderedTwoInstancesExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, txBatch := range []int{1, 8} {
		t.Run(fmt.Sprintf("TxBatch=%d", txBatch), func(t *testing.T) {
			t.Parallel()
			testUnorderedTwoInstancesExactlyOnce(t, txBatch)
		})
	}
}

func testUnorderedTwoInstancesExactlyOnce(t *testing.T, txBatch int) {
	eachStore(t, func(t *testing.T, s store) {
		const total = 300
		d := s.open(t, true)
		var perID sync.Map // id -> *atomic.Int32
		var perEngine [2]atomic.Int32
		mk := func(i int) *bundle {
			return setupOn(t, d, relay.Config{
				Mode: relay.ModeUnordered, Workers: 4, BatchSize: 7, TxBatch: txBatch,
				InstanceID: fmt.Sprintf("instance-%d", i),
				Handler: relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, dl *relay.Delivery) relay.Result {
					n, _ := perID.LoadOrStore(dl.Message.ID, new(atomic.Int32))
					n.(*atomic.Int32).Add(1)
					perEngine[i].Add(1)
					if err := insertProj(ctx, tx, dl.Message.ID); err != nil {
						return relay.Dead(relaytype.ClassInternal, err) // a second effect would land here
					}
					return relay.Succeeded()
				}),
			})
		}
		e1, e2 := mk(0), mk(1)
		e1.createProj()
		ps := make([]*relay.EnqueueParams, total)
		for i := range ps {
			ps[i] = &relay.EnqueueParams{}
		}
		enqueued, err := e1.engine.Enqueue(e1.ctx, ps...)
		require.NoError(t, err)
		require.Len(t, enqueued, total)

		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, b := range []*bundle{e1, e2} {
			wg.Go(func() {
				<-start
				_, err := b.engine.Work(b.ctx)
				require.NoError(t, err)
			})
		}
		close(start)
		wg.Wait()

		st, err := e1.engine.Stats(e1.ctx)
		require.NoError(t, err)
		require.Equal(t, int64(total), st.Counts[relaytype.StateSucceeded])
		require.Len(t, e1.projRows(), total)
		for _, r := range enqueued {
			id := r.ID
			n, ok := perID.Load(id)
			require.True(t, ok, "id %d never processed", id)
			require.Equal(t, int32(1), n.(*atomic.Int32).Load(), "id %d processed more than once", id)
		}
		t.Logf("instance-0 processed %d, instance-1 processed %d", perEngine[0].Load(), perEngine[1].Load())
		if s.concurrentTx {
			require.Positive(t, perEngine[0].Load())
			require.Positive(t, perEngine[1].Load())
		}
	})
}
