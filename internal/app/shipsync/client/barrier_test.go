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
	clock := relayclock.NewFake(time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC))
	require.NoError(t, idleClient(t, clock, Config{}).Meter(ctx, 1<<30), "unmetered")

	c := idleClient(t, clock, Config{UploadRate: 1000, UploadBurst: 1000})
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
	clock := relayclock.NewFake(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)) // a Thursday noon
	w, err := flow.ParseWindow("Mon-Fri 22:00-06:00", time.UTC)
	require.NoError(t, err)
	c := idleClient(t, clock, Config{BulkWindow: w})
	require.False(t, c.MayTransfer(normalize.PriorityBulk), "noon is outside the window")
	require.True(t, c.MayTransfer(normalize.PriorityNormal))
	require.True(t, c.MayTransfer(normalize.PriorityCritical))
	clock.Advance(11 * time.Hour)
	require.True(t, c.MayTransfer(normalize.PriorityBulk), "23:00 is inside")
	require.True(t, idleClient(t, clock, Config{}).MayTransfer(normalize.PriorityBulk), "no window")
}

// idleClient is a client built with cfg (its brokers and topics filled in)
// that is never run.
func idleClient(t *testing.T, clock *relayclock.Fake, cfg Config) *Client {
	t.Helper()
	st, err := OpenStore(t.Context(), filepath.Join(t.TempDir(), "client.db"), "g", clock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	tr, err := NewTransport("http://127.0.0.1:1", nil, 0)
	require.NoError(t, err)
	t.Cleanup(tr.Close)
	rules, err := normalize.LoadRules(strings.NewReader(`{"rules": []}`))
	require.NoError(t, err)
	cfg.Brokers, cfg.TopicPrefix = []string{"127.0.0.1:1"}, "sync.cdc."
	c, err := Build(Parts{NodeID: "ship-1", ConnectorID: "c", Rules: rules, Store: st, Transport: tr, Clock: clock}, cfg)
	require.NoError(t, err)
	return c
}
