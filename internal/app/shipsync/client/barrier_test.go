package client

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/flow"
	"github.com/relayhq/relay/relayclock"
)

// TestMeter: an uploader beside the client takes its bytes from the
// client's own upload bucket — the burst at once, then at the rate — and a
// client without a limit never waits.
func TestMeter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	t0 := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	clock := relayclock.NewFake(t0)
	st, err := OpenStore(ctx, filepath.Join(t.TempDir(), "client.db"), "g", clock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	tr, err := NewTransport("http://127.0.0.1:1", nil, 0)
	require.NoError(t, err)
	t.Cleanup(tr.Close)
	rules, err := normalize.LoadRules(strings.NewReader(`{"rules": []}`))
	require.NoError(t, err)
	build := func(rate int64) *Client {
		c, err := Build(Parts{NodeID: "ship-1", ConnectorID: "c", Rules: rules, Store: st, Transport: tr, Clock: clock},
			Config{Brokers: []string{"127.0.0.1:1"}, TopicPrefix: "sync.cdc.", UploadRate: rate, UploadBurst: rate})
		require.NoError(t, err)
		return c
	}
	require.NoError(t, build(0).Meter(ctx, 1<<30), "unmetered")

	c := build(1000)
	require.NoError(t, c.Meter(ctx, 1000), "the burst")
	done := make(chan error, 1)
	go func() { done <- c.Meter(ctx, 500) }()
	require.Eventually(t, func() bool { return clock.Waiters() == 1 }, 5*time.Second, time.Millisecond)
	select {
	case <-done:
		t.Fatal("took bytes the bucket does not have")
	default:
	}
	clock.Advance(500 * time.Millisecond)
	require.NoError(t, <-done)

	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- c.Meter(cctx, 1000) }()
	require.Eventually(t, func() bool { return clock.Waiters() == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
}

// TestMayTransfer: a BULK rule may send only inside the transfer window,
// other classes always; without a window every class may.
func TestMayTransfer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := relayclock.NewFake(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)) // a Thursday noon
	st, err := OpenStore(ctx, filepath.Join(t.TempDir(), "client.db"), "g", clock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	tr, err := NewTransport("http://127.0.0.1:1", nil, 0)
	require.NoError(t, err)
	t.Cleanup(tr.Close)
	rules, err := normalize.LoadRules(strings.NewReader(`{"rules": []}`))
	require.NoError(t, err)
	w, err := flow.ParseWindow("Mon-Fri 22:00-06:00", time.UTC)
	require.NoError(t, err)
	build := func(w *flow.Window) *Client {
		c, err := Build(Parts{NodeID: "ship-1", ConnectorID: "c", Rules: rules, Store: st, Transport: tr, Clock: clock},
			Config{Brokers: []string{"127.0.0.1:1"}, TopicPrefix: "sync.cdc.", BulkWindow: w})
		require.NoError(t, err)
		return c
	}
	c := build(w)
	require.False(t, c.MayTransfer(normalize.PriorityBulk), "noon is outside the window")
	require.True(t, c.MayTransfer(normalize.PriorityNormal))
	require.True(t, c.MayTransfer(normalize.PriorityCritical))
	clock.Advance(11 * time.Hour)
	require.True(t, c.MayTransfer(normalize.PriorityBulk), "23:00 is inside")
	require.True(t, build(nil).MayTransfer(normalize.PriorityBulk), "no window")
}
