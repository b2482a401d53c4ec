package msgx_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/internal/app/msgx"
	"github.com/relayhq/relay/internal/app/msgx/simulate"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaysink/relaykafka"
	"github.com/relayhq/relay/relaytype"
)

// bundle is one msgx deployment on real parts: a fresh PostgreSQL schema, a
// fresh MariaDB mailbox database and an in-process Kafka cluster.
type bundle struct {
	ctx     context.Context
	store   *relaypgx.Driver
	mailbox *sql.DB
	cluster *kfake.Cluster
	cfg     msgx.Config
}

// testConfig is the defaults with waits short enough for a test.
func testConfig() msgx.Config {
	cfg := msgx.Defaults()
	cfg.PollInterval = 20 * time.Millisecond
	cfg.MaxCommitDelay = time.Second
	cfg.Backoff = []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond}
	cfg.LifecycleEvery = time.Hour
	return cfg
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	b := &bundle{ctx: ctx, store: testdb.PGDriver(t), mailbox: testdb.MariaDB(t), cfg: testConfig()}
	_, err := msgx.Migrate(ctx, b.store, relayclock.System{})
	require.NoError(t, err)
	require.NoError(t, simulate.CreateMailbox(ctx, b.mailbox))
	b.cluster, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, b.cfg.MsgTopic, b.cfg.SchdTopic))
	require.NoError(t, err)
	t.Cleanup(b.cluster.Close)
	return b
}

// start runs a Service until the test ends (or stop is called) and returns stop.
func (b *bundle) start(t *testing.T) (*msgx.Service, func()) {
	t.Helper()
	sink, err := relaykafka.New(relaykafka.Config{Brokers: b.cluster.ListenAddrs()})
	require.NoError(t, err)
	svc, err := msgx.New(msgx.Options{Config: b.cfg, Store: b.store, Mailbox: b.mailbox, Sink: sink, Owner: t.Name()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, sink.Close(context.Background()))
	}
	t.Cleanup(stop)
	return svc, stop
}

// settled waits on msgx.Settled.
func (b *bundle) settled(t *testing.T, rows int) bool {
	t.Helper()
	ok, err := msgx.Settled(b.ctx, b.store, b.mailbox, rows)
	require.NoError(t, err)
	return ok
}

// TestEndToEndSimulatedDay is the acceptance run: a simulated operating
// day with real holes (rolled-back and late inserts), duplicates, malformed,
// ignored and protocol-violating messages goes through MariaDB → intake →
// FIFO → flight state in PostgreSQL → outbox → Kafka, and Verify finds the
// flight state, both topics and every mailbox mark as the simulator's model says.
func TestEndToEndSimulatedDay(t *testing.T) {
	b := setup(t)
	plan := simulate.NewPlan(simulate.Options{Flights: 200, Seed: 7, LateBy: 200 * time.Millisecond})
	b.cfg.CutoverWatermark = "zero"
	_, stop := b.start(t)

	written, err := plan.Write(b.ctx, b.mailbox, 0, nil)
	require.NoError(t, err)
	require.NotEmpty(t, written.Holes, "the plan makes real holes")
	require.Eventually(t, func() bool { return b.settled(t, len(written.Rows)) }, 3*time.Minute, 50*time.Millisecond)
	stop()

	marks := make(map[int64]string, len(written.Rows))
	for id, o := range written.Rows {
		marks[id] = string(o)
	}
	rep, err := msgx.Verify(b.ctx, b.cfg, b.store, b.mailbox, b.cluster.ListenAddrs(),
		msgx.Expectation{Compare: plan.Model().Compare, Marks: marks})
	require.NoError(t, err)
	require.Empty(t, rep.Problems)
	require.Equal(t, plan.Model().Flights(), rep.Flights)
	require.Equal(t, len(written.Rows), rep.MailboxRows)
	stats, err := b.store.GetExecutor().MessageStats(b.ctx, b.cfg.Pipeline)
	require.NoError(t, err)
	t.Logf("rows %d, holes %d, flights %d (deleted %d), msg records %d, schd records %d, states %v",
		rep.MailboxRows, len(written.Holes), rep.Flights, rep.Deleted, rep.MsgRecords, rep.SchdRecords, stats.Counts)
	require.Zero(t, stats.Backlog())
	require.Positive(t, stats.Counts[relaytype.StateDead])
	require.Positive(t, stats.Counts[relaytype.StateSkipped])
}

// TestVerifyCanFail proves the reconciliation is not vacuous: after a clean
// run, one changed flight field, one wrong mark and one extra Kafka notice are
// each reported.
func TestVerifyCanFail(t *testing.T) {
	b := setup(t)
	plan := simulate.NewPlan(simulate.Options{Flights: 100, Seed: 3, Rollbacks: 1, Late: 1,
		LateBy: 100 * time.Millisecond})
	b.cfg.CutoverWatermark = "zero"
	_, stop := b.start(t)
	written, err := plan.Write(b.ctx, b.mailbox, 0, nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.settled(t, len(written.Rows)) }, 3*time.Minute, 50*time.Millisecond)
	stop()
	marks := make(map[int64]string, len(written.Rows))
	var anyID int64
	for id, o := range written.Rows {
		marks[id] = string(o)
		anyID = id
	}
	exp := msgx.Expectation{Compare: plan.Model().Compare, Marks: marks}
	rep, err := msgx.Verify(b.ctx, b.cfg, b.store, b.mailbox, b.cluster.ListenAddrs(), exp)
	require.NoError(t, err)
	require.Empty(t, rep.Problems)

	var flid string
	require.NoError(t, b.store.Pool().QueryRow(b.ctx,
		"SELECT FLID FROM FLIGHT_SCHD WHERE STATE = 'ACTIVE' ORDER BY FLID LIMIT 1").Scan(&flid))
	_, err = b.store.Pool().Exec(b.ctx, "UPDATE FLIGHT_SCHD SET FLNO = 'XX9999' WHERE FLID = $1", flid)
	require.NoError(t, err)
	_, err = b.mailbox.ExecContext(b.ctx, "UPDATE CMINMSGS SET PROCFLAG = 'BOGUS' WHERE ID = ?", anyID)
	require.NoError(t, err)
	rep, err = msgx.Verify(b.ctx, b.cfg, b.store, b.mailbox, b.cluster.ListenAddrs(), exp)
	require.NoError(t, err)
	joined := fmt.Sprint(rep.Problems)
	require.Contains(t, joined, flid, "the changed flight is reported")
	require.Contains(t, joined, fmt.Sprintf("mailbox row %d PROCFLAG BOGUS", anyID))
	require.Contains(t, joined, b.cfg.SchdTopic+": FLID "+flid, "the schd document no longer matches the store")
}
