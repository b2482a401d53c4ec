package converge_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/converge"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
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
	res, err := converge.Run(t.Context(), converge.Options{PostgresURL: testdb.PGSchema(t), MariaDB: testdb.MariaDBServer(),
		Dir: t.TempDir(), Rows: 30, Edits: 100, Flaps: true, Seed: 42, Progress: &progress})
	require.NoError(t, err, progress.String())
	var out bytes.Buffer
	shipdemo.WriteChecks(&out, res.Checks)
	t.Logf("%s\n%s", progress.String(), out.String())
	require.True(t, res.OK(), out.String())
	require.Positive(t, res.Cases["ACKNOWLEDGED"], "the edits made conflicts, and they were decided")
	require.Positive(t, res.Outages, "the link was cut")
	require.Positive(t, res.Uplink)
	require.Positive(t, res.Forwarded)
}
