package cmppconn

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTokenBucket: bursts pass at once, the rest are spaced 1/rate apart,
// and a caller that gives up returns its place.
func TestTokenBucket(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	b := newTokenBucket(clock, 4, 2) // 250 ms apart, 2 at once
	ctx := context.Background()
	require.NoError(t, b.wait(ctx, nil))
	require.NoError(t, b.wait(ctx, nil))

	cctx, cancel := context.WithCancel(ctx)
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- b.wait(cctx, nil) }()
	clock.waitAfters(t, 250*time.Millisecond, 1)
	cancel()
	require.ErrorIs(t, <-gaveUp, context.Canceled)

	// The place given back: the next caller waits 250 ms, not 500.
	passed := make(chan error, 1)
	go func() { passed <- b.wait(ctx, nil) }()
	clock.waitAfters(t, 250*time.Millisecond, 2)
	require.Zero(t, clock.afterCount(500*time.Millisecond))
	clock.Advance(250 * time.Millisecond)
	require.NoError(t, <-passed)

	stop := make(chan struct{})
	close(stop)
	require.ErrorIs(t, b.wait(ctx, stop), errStopped)
	require.Nil(t, newTokenBucket(clock, 0, 1))
}
