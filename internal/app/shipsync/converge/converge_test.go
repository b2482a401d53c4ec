package converge_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/arbiter"
	"github.com/relayhq/relay/internal/app/shipsync/converge"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	"github.com/relayhq/relay/internal/testbin"
	"github.com/relayhq/relay/internal/testdb"
)

// TestConvergence: a ship and a shore database edited at once — the same
// rows on both sides, some business times no policy can trust — while the
// link flaps; after quiescence and arbitration (an operator deciding what
// the policies leave to one) both databases hold the same rows, nothing
// looped back, every conflict is accounted for and every event and
// command has exactly one result.
func TestConvergence(t *testing.T) {
	var progress bytes.Buffer
	o := converge.Options{PostgresURL: testdb.PGSchema(t), MariaDB: testdb.MariaDBServer(),
		Dir: t.TempDir(), Rows: 30, Edits: 100, Flaps: true, Seed: 42, Progress: &progress}
	// A hot row of the ship's: what a failed check would tell of it.
	var history string
	converge.HistoryOf(&o, "fuel_log", "1", &history)
	res, err := converge.Run(t.Context(), o)
	require.NoError(t, err, progress.String())
	t.Logf("history of fuel_log 1:%s", history)
	for _, want := range []string{"ship wrote c ", "shore wrote u ", "shore received event", "APPLIED", "command "} {
		require.Contains(t, history, want, "the history of a hot row tells both captures, the uplink and the downlink")
	}
	var out bytes.Buffer
	shipdemo.WriteChecks(&out, res.Checks)
	t.Logf("%s\n%s", progress.String(), out.String())
	require.True(t, res.OK(), out.String())
	require.Positive(t, res.Cases["ACKNOWLEDGED"], "the edits made conflicts, and they were decided")
	require.Positive(t, res.Outages, "the link was cut")
	require.Positive(t, res.Uplink)
	require.Positive(t, res.Forwarded)
}

// TestConvergenceUnderKills is the convergence run with the shore and the
// ship client as relay processes killed with SIGKILL while both sides
// edit — at random moments and at the fault points of seed 004 §23.3 — and
// restarted: every check must still pass, and some lives must have died at
// a fault point.
func TestConvergenceUnderKills(t *testing.T) {
	var progress bytes.Buffer
	res, err := converge.Run(t.Context(), converge.Options{PostgresURL: testdb.PGSchema(t), MariaDB: testdb.MariaDBServer(),
		Dir: t.TempDir(), Rows: 20, Edits: 100, Seed: 7, Progress: &progress,
		Chaos: &converge.Chaos{Binary: testbin.Relay(t), ShoreKills: 8, ClientKills: 4, FaultProbability: 0.5}})
	require.NoError(t, err, progress.String())
	var out bytes.Buffer
	res.Write(&out)
	t.Logf("%s\n%s", progress.String(), out.String())
	require.True(t, res.OK(), out.String())
	faults := 0
	for _, n := range res.Fired() {
		faults += n
	}
	require.Positive(t, faults, "some lives died at a fault point")
	require.GreaterOrEqual(t, res.Shore.Lives, 9, "every planned shore kill landed")
	require.GreaterOrEqual(t, res.Client.Lives, 5, "every planned client kill landed")
	require.Positive(t, res.Uplink)
	require.Positive(t, res.Forwarded)
}

// TestBench runs the benchmark small: both directions deliver every
// change, and the conflict round settles with the shore's edits on both
// sides.
func TestBench(t *testing.T) {
	var progress bytes.Buffer
	res, err := converge.Bench(t.Context(), converge.BenchOptions{PostgresURL: testdb.PGSchema(t), MariaDB: testdb.MariaDBServer(),
		Dir: t.TempDir(), Rows: 200, Rounds: 1, Conflicts: 20, Progress: &progress})
	require.NoError(t, err, progress.String())
	t.Log(progress.String())
	require.Len(t, res.Uplink, 1)
	require.Len(t, res.Downlink, 1)
	require.True(t, res.Converged, progress.String())
	require.Positive(t, res.Cases[arbiter.StateAcknowledged])
}
