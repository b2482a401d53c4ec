package relay_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaytype"
)

// batchProj is a BatchHandler that writes each message's projection row and
// records every HandleBatch call's ids; fail maps an id to the Result it gets.
type batchProj struct {
	mu      sync.Mutex
	batches [][]int64
	singles []int64
	fail    map[int64]relay.Result
	panicOn int64
	short   bool
}

func (h *batchProj) decide(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
	if r, ok := h.fail[d.Message.ID]; ok {
		return r
	}
	if err := insertProj(ctx, tx, d.Message.ID); err != nil {
		return relay.Retry(relaytype.ClassInfra, err)
	}
	return relay.Succeeded()
}

func (h *batchProj) Handle(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
	h.mu.Lock()
	h.singles = append(h.singles, d.Message.ID)
	h.mu.Unlock()
	return h.decide(ctx, tx, d)
}

func (h *batchProj) HandleBatch(ctx context.Context, tx relay.Tx, ds []*relay.Delivery) []relay.Result {
	ids := make([]int64, len(ds))
	for i, d := range ds {
		ids[i] = d.Message.ID
		if d.Message.ID == h.panicOn {
			panic("boom")
		}
	}
	h.mu.Lock()
	h.batches = append(h.batches, ids)
	h.mu.Unlock()
	out := make([]relay.Result, len(ds))
	for i, d := range ds {
		out[i] = h.decide(ctx, tx, d)
	}
	if h.short {
		return out[:len(out)-1]
	}
	return out
}

// TestBatchHandlerGetsWholeBatches: a BatchHandler receives the contiguous
// ready heads in one call and they commit together, in order.
func TestBatchHandlerGetsWholeBatches(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		h := &batchProj{}
		b := setup(t, s, relay.Config{FIFOBatch: 4, Handler: h})
		b.createProj()
		b.enqueue(1, 2, 3, 4, 5, 6)
		require.Equal(t, 6, b.work())
		require.Equal(t, [][]int64{{1, 2, 3, 4}, {5, 6}}, h.batches)
		require.Empty(t, h.singles)
		require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, b.projRows())
		for id := int64(1); id <= 6; id++ {
			require.Equal(t, relaytype.StateSucceeded, b.state(id))
		}
	})
}

// TestBatchHandlerFailureMidBatch: result k not Succeeded/Skip rolls the batch
// back, the prefix runs again as a batch and commits, k's result is recorded
// alone (DEAD here, without a retry), and nothing after k is touched.
func TestBatchHandlerFailureMidBatch(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		h := &batchProj{fail: map[int64]relay.Result{3: relay.Dead(relaytype.ClassProtocol, errors.New("bad package"))}}
		b := setup(t, s, relay.Config{FIFOBatch: 8, Handler: h})
		b.createProj()
		b.enqueue(1, 2, 3, 4, 5)
		require.Equal(t, 5, b.work())
		require.Equal(t, [][]int64{{1, 2, 3, 4, 5}, {1, 2}, {4, 5}}, h.batches,
			"the prefix runs again alone; 3 is decided on its own; the rest is the next batch")
		require.Empty(t, h.singles, "3's result of the first call is recorded; its handler is not called again")
		require.Equal(t, []int64{1, 2, 4, 5}, b.projRows(), "the rolled-back first run left nothing of 3")
		m := b.get(3)
		require.Equal(t, relaytype.StateDead, m.State)
		require.Equal(t, relaytype.ClassProtocol, m.ErrorClass)
		require.Equal(t, 1, m.Attempts, "DEAD at once, no retry: its one attempt counted")
	})
}

// TestBatchHandlerPanicAndWrongCount: a panic or a wrong number of results
// fails the batch's first message (INTERNAL, retried) and commits nothing.
func TestBatchHandlerPanicAndWrongCount(t *testing.T) {
	t.Parallel()
	for name, h := range map[string]*batchProj{"panic": {panicOn: 2}, "short": {short: true}} {
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, s store) {
				b := setup(t, s, relay.Config{FIFOBatch: 4, Handler: h})
				b.createProj()
				b.enqueue(1, 2, 3)
				require.Equal(t, 1, b.work())
				require.Empty(t, b.projRows())
				m := b.get(1)
				require.Equal(t, relaytype.StateFailed, m.State)
				require.Equal(t, relaytype.ClassInternal, m.ErrorClass)
				require.Equal(t, 1, m.Attempts)
				for _, id := range []int64{2, 3} {
					require.Equal(t, relaytype.StatePending, b.state(id))
					require.Zero(t, b.get(id).Attempts)
				}
			})
		})
	}
}
