package fleet_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/fleet"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/testbin"
	"github.com/relayhq/relay/internal/testdb"
)

// TestFleetSmall runs 40 nodes reconnecting within 2 s against a shore
// process with limits tight enough that it must push back: every event is
// in the inbox once and terminal at its node, the shore answered 429s and
// every retry waited its Retry-After, the shore never had more requests in
// flight than its limit nor more PostgreSQL connections than its budget
// (its pool and the connections its session locks keep).
func TestFleetSmall(t *testing.T) {
	var progress bytes.Buffer
	o := fleet.Options{PostgresURL: testdb.PGSchema(t), MariaDB: testdb.MariaDBServer(), Dir: t.TempDir(),
		Relay: testbin.Relay(t), Nodes: 40, Events: 25, Batch: 5, Jitter: 2 * time.Second, Pool: 6,
		Limits:    shore.Limits{GlobalConcurrency: 4, GlobalRate: 40, GlobalBurst: 10, NodeConcurrency: 1, NodeRate: 5, NodeBurst: 2},
		Heartbeat: 2 * time.Second, Poll: 200 * time.Millisecond, Timeout: 3 * time.Minute, Seed: 7, Progress: &progress}
	res, err := fleet.Run(t.Context(), o)
	require.NoError(t, err, progress.String())
	var out bytes.Buffer
	res.Write(&out)
	report := out.String() + progress.String()
	require.Empty(t, res.Problems(), report)

	// Reconciled: every event once in the inbox, applied once, and its
	// APPLIED receipt held by its node.
	require.EqualValues(t, 40*25, res.InboxRows, report)
	require.Zero(t, res.Missing+res.Unexpected+res.NotTerminal+res.DupReceipts+res.UnknownReceipts, report)
	require.Equal(t, map[string]int64{"EVENT_RESULT_APPLIED": 1000}, res.Results, report)
	require.EqualValues(t, 1000, res.TargetRows, report)

	// Back-pressure happened and was honoured.
	require.Positive(t, res.Limited, report)
	require.Equal(t, res.Limited, res.ShoreLimited, "the nodes saw every 429 the shore sent\n%s", report)
	require.Equal(t, res.Limited, res.Honoured, report)
	require.Zero(t, res.Early, report)
	require.GreaterOrEqual(t, res.RetryAfterMin, time.Second, report)
	require.GreaterOrEqual(t, res.Waited, res.RetryAfterMin, report)

	// The shore's own gauges saw the fleet and the nodes it told to come
	// back.
	require.Positive(t, res.ConnectedPeak, report)
	require.LessOrEqual(t, res.ConnectedPeak, int64(40), report)
	require.Positive(t, res.QueuePeak, report)
	require.Positive(t, res.ShoreRSS, report)

	// Limits and budget held, and were reached.
	require.Positive(t, res.InFlightPeak, report)
	require.LessOrEqual(t, res.InFlightPeak, int64(4), report)
	// The pool's 6 and the applier engines' session locks, each on a
	// connection of its own.
	require.Positive(t, res.PGPeak, report)
	require.EqualValues(t, 6+fleet.SessionLocks, res.Budget)
	require.LessOrEqual(t, res.PGPeak, res.Budget, report)
	require.LessOrEqual(t, res.PGLockedPeak, int64(fleet.SessionLocks), report)

	require.Len(t, res.CatchUp, 40)
	require.Positive(t, res.Quantile(0.5), report)
	require.LessOrEqual(t, res.Quantile(1), res.Wall, report)
	require.Contains(t, out.String(), "nothing lost, nothing duplicated, connections within budget")
	t.Log("\n" + out.String())
}

// TestShoreThatDoesNotStart: a shore process that exits before it listens
// ends the run with an error naming its log, not a hang.
func TestShoreThatDoesNotStart(t *testing.T) {
	t.Parallel()
	_, err := fleet.Run(t.Context(), fleet.Options{PostgresURL: testdb.PGSchema(t), MariaDB: testdb.MariaDBServer(),
		Dir: t.TempDir(), Relay: "/bin/false", Nodes: 2, Events: 1})
	require.ErrorContains(t, err, "fleet: the shore exited at start (exit status 1)")
	require.ErrorContains(t, err, "shore.log ends: ")
}
