package shipbench_test

import (
	"context"
	"net/url"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/app/shipsync/shipbench"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/internal/weaklink"
	"github.com/relayhq/relay/relayclock"
)

// TestLongOutageOnInjectedClock keeps the ship offline for three hours of
// the client's (injected) clock with a backlog waiting: every upload
// fails, the retries back off to the 5-minute cap without a hot loop and
// nothing reaches the shore; once the link is back the whole backlog
// drains and every event is applied once.
func TestLongOutageOnInjectedClock(t *testing.T) {
	ctx := t.Context()
	mdb, shoreDSN := testdb.MariaDBWithDSN(t)
	for _, q := range shipbench.ShoreTables {
		_, err := mdb.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	dir := t.TempDir()
	sh, err := shipdemo.StartShore(ctx, shipdemo.ShoreOptions{PostgresURL: testdb.PGSchema(t), TargetDSN: shoreDSN,
		PKIDir: filepath.Join(dir, "pki"), Node: shipbench.Node, Rules: shipbench.ShoreRules,
		Limits: shore.Limits{NodeConcurrency: 6}})
	require.NoError(t, err)
	t.Cleanup(sh.Close)

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, shipbench.BulkTopic),
		kfake.SeedTopics(1, shipbench.CritTopic))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	const events = 2000
	require.NoError(t, shipbench.WriteBacklog(ctx, cluster.ListenAddrs(), 200, events, 9))

	u, err := url.Parse(sh.URL)
	require.NoError(t, err)
	proxy, err := weaklink.New(weaklink.Config{Target: u.Host})
	require.NoError(t, err)
	addr, err := proxy.Start(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Stop(t.Context()) })
	proxy.SetDown(true) // the ship is offline

	clock := relayclock.NewFake(time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC))
	st, err := client.OpenStore(ctx, filepath.Join(dir, "client.db"), "", clock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	tc, err := sh.PKI.ClientTLS("node-" + shipbench.Node)
	require.NoError(t, err)
	tr, err := client.NewTransport("https://"+addr, tc, 10*time.Second)
	require.NoError(t, err)
	t.Cleanup(tr.Close)
	rules, err := shipbench.Rules()
	require.NoError(t, err)
	c, err := client.Build(client.Parts{NodeID: shipbench.Node, ConnectorID: "capture-" + shipbench.Logical,
		Rules: rules, Store: st, Transport: tr, Clock: clock, Types: shipbench.Types()},
		client.Config{Brokers: cluster.ListenAddrs(), TopicPrefix: "sync.cdc." + shipbench.Logical + ".",
			ReceiptEvery: time.Second, HeartbeatEvery: time.Minute, Uploads: 2})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	// Wait until the backlog is read (real time: the topic), then let three
	// hours of the client's clock pass, a few seconds at a time, each step
	// once the client's loops are parked on the clock.
	waitFor(t, "backlog read", func() bool { return c.Stats().Produced == events })
	parked := func() {
		waitFor(t, "client parked on its clock", func() bool { return clock.Waiters() >= 3 })
	}
	for elapsed := time.Duration(0); elapsed < 3*time.Hour; elapsed += 5 * time.Second {
		parked()
		clock.Advance(5 * time.Second)
	}
	s := c.Stats()
	t.Logf("three hours offline on the client's clock: %d uploads tried and failed", s.UploadFailures)
	// Full jitter up to a 5-minute cap: on average one retry per 2.5 min per
	// upload loop (two), after a short doubling start — about 150 in three
	// hours; a hot loop would make thousands, a lost retry none.
	require.Greater(t, s.UploadFailures, int64(40), "%+v", s)
	require.Less(t, s.UploadFailures, int64(400), "%+v", s)
	require.Zero(t, s.Received, "nothing can have reached the shore")
	var inbox int64
	require.NoError(t, sh.PG.Pool().QueryRow(ctx, "SELECT count(*) FROM sync_inbox_event").Scan(&inbox))
	require.Zero(t, inbox)

	proxy.SetDown(false)
	var receipts int64
	waitFor(t, "backlog drained", func() bool {
		clock.Advance(time.Second) // the retries due, the receipt pulls
		require.NoError(t, sh.PG.Pool().QueryRow(ctx, "SELECT count(*) FROM sync_event_receipt WHERE result = 'APPLIED'").
			Scan(&receipts))
		return receipts == events && c.Waiting() == 0
	})
	counts, err := st.Counts(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(events), counts.ByResult["APPLIED"], "%+v", counts)
	require.Equal(t, int64(events), counts.ByState[client.StateTerminal])
}

// waitFor polls cond (a few ms apart, real time: the goroutines it waits
// for run on real time) for up to two minutes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited two minutes for: %s", what)
		}
		runtime.Gosched()
		time.Sleep(2 * time.Millisecond)
	}
}
