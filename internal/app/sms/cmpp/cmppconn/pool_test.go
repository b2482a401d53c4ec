package cmppconn

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// startPool starts a pool and stops it at cleanup.
func startPool(t *testing.T, cfg PoolConfig) *Pool {
	t.Helper()
	p, err := NewPool(cfg)
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = p.Stop(ctx)
	})
	return p
}

func waitLive(t *testing.T, p *Pool, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return p.Live() == n }, 10*time.Second, time.Millisecond, "want %d live", n)
}

// TestPoolSpreadsAndReconnects: Submits use every connection; when the
// ISMG drops them, each slot waits the first backoff level on the clock
// and dials again.
func TestPoolSpreadsAndReconnects(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{})
	clock := newTestClock()
	p := startPool(t, PoolConfig{Conn: srv.clientConfig(clock), Size: 2})
	waitLive(t, p, 2)

	for i, r := range submitAll(context.Background(), p.Submit, "p-", 200) {
		require.NoError(t, r.err)
		require.Equal(t, msgIDFor(fmt.Appendf(nil, "p-%d", i)), r.res.MsgID)
	}
	srv.mu.Lock()
	require.Len(t, srv.conns, 2)
	for _, c := range srv.conns {
		require.NotZero(t, c.submits, "a connection carried nothing")
	}
	srv.mu.Unlock()

	srv.dropAll()
	waitLive(t, p, 0)
	clock.waitAfters(t, time.Second, 2)
	require.ErrorIs(t, p.LastErr(), ErrConnLost)
	clock.Advance(time.Second)
	waitLive(t, p, 2)
	_, err := p.Submit(context.Background(), testSubmit("after"))
	require.NoError(t, err)
}

// TestPoolBackoff: failed dials wait 1, 2, 4 s …; a login refused for a
// reason retrying cannot cure waits the longest level.
func TestPoolBackoff(t *testing.T) {
	t.Parallel()
	t.Run("doubling", func(t *testing.T) {
		t.Parallel()
		srv := startISMG(t, ismgConfig{loginStatus: 9})
		clock := newTestClock()
		p := startPool(t, PoolConfig{Conn: srv.clientConfig(clock)})
		for _, d := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
			clock.waitAfters(t, d, 1)
			clock.Advance(d)
		}
		require.ErrorIs(t, p.LastErr(), ErrLoginRefused)
		require.Zero(t, p.Live())
	})
	t.Run("permanent", func(t *testing.T) {
		t.Parallel()
		srv := startISMG(t, ismgConfig{loginStatus: 3})
		clock := newTestClock()
		p := startPool(t, PoolConfig{Conn: srv.clientConfig(clock), Backoff: []time.Duration{time.Second, 90 * time.Second}})
		clock.waitAfters(t, 90*time.Second, 1)
		require.Zero(t, clock.afterCount(time.Second))
		require.ErrorIs(t, p.LastErr(), ErrLoginRefused)
	})
}

// TestPoolRateLimit: the channel's limit holds across its connections.
func TestPoolRateLimit(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{})
	clock := newTestClock()
	p := startPool(t, PoolConfig{Conn: srv.clientConfig(clock), Size: 3, RateLimit: 5, RateBurst: 2})
	waitLive(t, p, 3)
	const n = 12
	results := make(chan []submitted, 1)
	go func() { results <- submitAll(context.Background(), p.Submit, "q-", n) }()
	stepRateLimit(t, clock, srv, p.limit, n, 2, 7, 12)
	for _, r := range <-results {
		require.NoError(t, r.err)
	}
}

// TestPoolOutcomes: flow control and rejection come through as themselves.
func TestPoolOutcomes(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{})
	p := startPool(t, PoolConfig{Conn: srv.clientConfig(newTestClock())})
	res, err := p.Submit(context.Background(), testSubmit("throttle"))
	require.ErrorIs(t, err, ErrFlowControl)
	require.Equal(t, OutcomeFlowControl, res.Outcome)
	res, err = p.Submit(context.Background(), testSubmit("reject"))
	require.ErrorIs(t, err, ErrRejected)
	require.Equal(t, OutcomeRejected, res.Outcome)
}

// TestPoolWithoutConnection: with no connection up, Submit waits for ctx
// and is NotSent; after Stop, NotSent with ErrClosed.
func TestPoolWithoutConnection(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{loginStatus: 9})
	p := startPool(t, PoolConfig{Conn: srv.clientConfig(newTestClock())})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := p.Submit(ctx, testSubmit("none"))
	require.Equal(t, OutcomeNotSent, res.Outcome)
	require.ErrorIs(t, err, ErrNoConnection)
	require.ErrorIs(t, err, context.Canceled)

	require.NoError(t, p.Stop(context.Background()))
	_, err = p.Submit(context.Background(), testSubmit("stopped"))
	require.ErrorIs(t, err, ErrNotSent)
	require.ErrorIs(t, err, ErrClosed)
}

// TestPoolStop: Stop closes the connections gracefully (Terminate) and
// ends the slot goroutines.
func TestPoolStop(t *testing.T) {
	t.Parallel()
	srv := startISMG(t, ismgConfig{})
	p, err := NewPool(PoolConfig{Conn: srv.clientConfig(newTestClock()), Size: 2})
	require.NoError(t, err)
	require.NoError(t, p.Start(context.Background()))
	waitLive(t, p, 2)
	require.NoError(t, p.Stop(context.Background()))
	require.Zero(t, p.Live())
	srv.mu.Lock()
	require.Equal(t, 2, srv.terminates)
	srv.mu.Unlock()
	require.NoError(t, p.Stop(context.Background()), "a second Stop is a no-op")
}

// TestPoolConfig names the bad field.
func TestPoolConfig(t *testing.T) {
	t.Parallel()
	ok := Config{Addr: "x", Version: 0x30, SourceAddr: testSPID, Secret: "s"}
	for _, tc := range []struct {
		cfg  PoolConfig
		want string
	}{
		{PoolConfig{Conn: ok, Size: -1}, "Size -1"},
		{PoolConfig{Conn: ok, RateLimit: -1}, "RateLimit"},
		{PoolConfig{Conn: ok, Backoff: []time.Duration{-time.Second}}, "Backoff"},
		{PoolConfig{Conn: Config{Addr: "x", Version: 0x21, SourceAddr: testSPID, Secret: "s"}}, "Version"},
	} {
		_, err := NewPool(tc.cfg)
		require.ErrorContains(t, err, tc.want)
	}
}
