package crash_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/crash"
	"github.com/relayhq/relay/internal/testbin"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver/relaypgx"
)

// setup builds the relay binary the children run and opens a fresh
// PostgreSQL schema: its URL for the children, a driver on it for the harness.
func setup(t *testing.T) (bin, storeURL string, store *relaypgx.Driver) {
	t.Helper()
	bin = testbin.Relay(t)
	storeURL = testdb.PGSchema(t)
	return bin, storeURL, testdb.PGDriverAt(t, storeURL)
}

// TestCrashHarness kills a real `relay serve` child 20 times — at random
// moments and at the engine's named fault points — while rows keep arriving,
// then reconciles every row: enqueued, applied exactly once, its event in Kafka
// in per-key order, its processing mark written back.
func TestCrashHarness(t *testing.T) {
	bin, storeURL, store := setup(t)

	var log strings.Builder
	res, err := crash.Run(context.Background(), crash.Options{
		Binary: bin, StoreURL: storeURL, Store: store, Dir: t.TempDir(),
		Kills: 20, Rows: 3000, Seed: 11, FaultProbability: 0.03, Out: &log,
	})
	t.Log("\n" + log.String())
	require.NoError(t, err)
	require.Equal(t, 20, res.Kills)
	require.True(t, res.Report.OK(), "%v", res.Report.Failures)
	require.Equal(t, res.Report.Succeeded, res.Report.EventsDelivered)
	require.Equal(t, res.Report.SourceRows, res.AcksWritten)
	fmt.Fprintf(os.Stderr, "crash harness: %d kills (%d at fault points), %d rows reconciled\n", res.Kills, res.FaultKills, res.Report.SourceRows)
}

// TestCrashHarnessRerun runs a small harness twice on one PostgreSQL schema,
// as `relay demo --chaos --store postgres://…` run twice would: each run takes
// a queue of its own, so the second is neither refused as a second cutover
// seeding nor reconciled against the first run's rows.
func TestCrashHarnessRerun(t *testing.T) {
	bin, storeURL, store := setup(t)
	dir := t.TempDir() // one directory too, as the same working directory would be

	var queues []string
	for run := 1; run <= 2; run++ {
		var log strings.Builder
		res, err := crash.Run(context.Background(), crash.Options{
			Binary: bin, StoreURL: storeURL, Store: store, Dir: dir,
			Kills: 2, Rows: 200, Seed: 3, Out: &log,
		})
		require.NoError(t, err, "run %d:\n%s", run, log.String())
		require.True(t, res.Report.OK(), "run %d: %v", run, res.Report.Failures)
		require.Equal(t, 200, res.Report.SourceRows, "run %d reconciles only its own rows", run)
		require.Equal(t, res.Report.SourceRows, res.AcksWritten)
		queues = append(queues, res.Queue)
	}
	require.NotEqual(t, queues[0], queues[1])
}
