package admit

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
)

// TestGrouperBatchesWhileBusy: while the one allowed transaction is open,
// later requests queue and go together in the next; every caller gets the
// result of its own request.
func TestGrouperBatchesWhileBusy(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var mu sync.Mutex
	var sizes []int
	g := grouper{batch: 64, max: 1, commit: func(_ context.Context, b []*pendingAccept) ([]relay.EnqueueResult, error) {
		mu.Lock()
		sizes = append(sizes, len(b))
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			entered <- struct{}{}
			<-release
		}
		res := make([]relay.EnqueueResult, len(b))
		for i, p := range b {
			res[i] = relay.EnqueueResult{ID: p.app}
		}
		return res, nil
	}}
	ctx := t.Context()
	got := make([]int64, 11)
	var wg sync.WaitGroup
	wg.Go(func() {
		res, err := g.accept(ctx, &pendingAccept{app: 100})
		require.NoError(t, err)
		got[0] = res.ID
	})
	<-entered
	queued := make(chan struct{}, 10)
	for i := 1; i <= 10; i++ {
		wg.Go(func() {
			queued <- struct{}{}
			res, err := g.accept(ctx, &pendingAccept{app: int64(100 + i)})
			require.NoError(t, err)
			got[i] = res.ID
		})
	}
	for range 10 {
		<-queued
	}
	// Wait until all ten are in the queue before the first batch ends.
	for {
		g.mu.Lock()
		n := len(g.queue)
		g.mu.Unlock()
		if n == 10 {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()
	for i, id := range got {
		require.Equal(t, int64(100+i), id, "caller %d got another request's result", i)
	}
	require.Equal(t, []int{1, 10}, sizes)
	// The last leader returns right after answering: no leader is left
	// behind once it has.
	for {
		g.mu.Lock()
		n := g.running
		g.mu.Unlock()
		if n == 0 {
			break
		}
		runtime.Gosched()
	}
}

// TestGrouperIsolatesAFailure: a batch the store refuses is tried request
// by request, so only the request at fault fails.
func TestGrouperIsolatesAFailure(t *testing.T) {
	bad := errors.New("refused")
	var calls [][]int64
	g := grouper{batch: 64, max: 1, commit: func(_ context.Context, b []*pendingAccept) ([]relay.EnqueueResult, error) {
		var apps []int64
		for _, p := range b {
			apps = append(apps, p.app)
		}
		calls = append(calls, apps)
		res := make([]relay.EnqueueResult, len(b))
		for i, p := range b {
			if p.app == 2 {
				return nil, bad
			}
			res[i] = relay.EnqueueResult{ID: p.app * 10}
		}
		return res, nil
	}}
	ps := []*pendingAccept{{app: 1}, {app: 2}, {app: 3}}
	for _, p := range ps {
		p.done = make(chan acceptOutcome, 1)
	}
	g.run(t.Context(), ps)
	require.Equal(t, [][]int64{{1, 2, 3}, {1}, {2}, {3}}, calls)
	out := []acceptOutcome{<-ps[0].done, <-ps[1].done, <-ps[2].done}
	require.NoError(t, out[0].err)
	require.Equal(t, int64(10), out[0].res.ID)
	require.ErrorIs(t, out[1].err, bad)
	require.NoError(t, out[2].err)
	require.Equal(t, int64(30), out[2].res.ID)
}
