package shipcrash

import (
	"bytes"
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testbin"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver/relaypgx"
)

// TestShipClientCrash runs a short seeded harness: the client and the
// capture killed at random and at their fault points, the shore killed,
// the link cut, while the workload writes; then every check must pass —
// the capture's repeats (records sent again after a crash) included.
func TestShipClientCrash(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	res, err := Run(t.Context(), Options{Binary: testbin.Relay(t), PostgresURL: testdb.PGSchema(t),
		MariaDB: mariaServer(t), Dir: t.TempDir(), Changes: 1500, Kills: 10, ShoreKills: 2, Cuts: 2,
		CaptureKills: 4, FaultProbability: 0.5, Seed: 7, Out: &out})
	require.NoError(t, err, out.String())
	res.Write(&out)
	t.Log("\n" + out.String())
	require.True(t, res.OK())
	require.Len(t, res.Checks, 7)
	faults := 0
	for _, n := range res.Client.Faults {
		faults += n
	}
	require.GreaterOrEqual(t, res.Client.Kills+faults, 10, "every planned client kill landed")
	require.Positive(t, faults, "some lives died at a fault point")
	require.Equal(t, 2, res.Shore.Kills)
	require.Equal(t, 2, res.Cuts)
	capFaults := 0
	for _, n := range res.Capture.Faults {
		capFaults += n
	}
	require.GreaterOrEqual(t, res.Capture.Kills+capFaults, 4, "every planned capture kill landed")
}

// TestReconcileFindsDamage: a run without chaos reconciles; the same run
// with a shore row changed and a ledger row deleted does not, on exactly
// those checks.
func TestReconcileFindsDamage(t *testing.T) {
	t.Parallel()
	bin := testbin.Relay(t)
	run := func(tamper func(ctx context.Context, ship, shore *sql.DB, pg *relaypgx.Driver) error) *Result {
		var out bytes.Buffer
		res, err := Run(t.Context(), Options{Binary: bin, PostgresURL: testdb.PGSchema(t), MariaDB: mariaServer(t),
			Dir: t.TempDir(), Changes: 200, Seed: 3, tamper: tamper, Out: &out})
		require.NoError(t, err, out.String())
		res.Write(&out)
		t.Log("\n" + out.String())
		return res
	}
	clean := run(nil)
	require.True(t, clean.OK())
	require.Len(t, clean.Checks, 7)

	bad := run(func(ctx context.Context, _, shore *sql.DB, _ *relaypgx.Driver) error {
		if _, err := shore.ExecContext(ctx, "UPDATE crew SET name = 'tampered' ORDER BY id LIMIT 1"); err != nil {
			return err
		}
		_, err := shore.ExecContext(ctx, "DELETE FROM sync_applied_event LIMIT 1")
		return err
	})
	require.False(t, bad.OK())
	var failed []string
	for _, c := range bad.Checks {
		if !c.OK {
			failed = append(failed, c.Name)
		}
	}
	require.Len(t, failed, 2, "%v", failed)
	require.True(t, strings.HasPrefix(failed[0], "ship and shore databases identical"), failed[0])
	require.True(t, strings.HasPrefix(failed[1], "the shore:"), failed[1])
}

// mariaServer is the MariaDB server the tests use.
func mariaServer(t *testing.T) string {
	t.Helper()
	return testdb.MariaDBServer()
}
