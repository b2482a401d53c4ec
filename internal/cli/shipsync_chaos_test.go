package cli_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testbin"
	"github.com/relayhq/relay/internal/testdb"
)

// TestShipsyncShoreCrash kills a real shore process (data API + applier)
// with SIGKILL at random moments and at each step of the apply workflow
// while a test ship uploads 1,800 events over mutual TLS, then reconciles
// every event from PostgreSQL, the shore MariaDB database (rows, a
// trigger-written log of every row write, the applied-event ledger) and the
// receipts the ship pulled.
func TestShipsyncShoreCrash(t *testing.T) {
	t.Parallel()
	bin := testbin.Relay(t)
	got, err := run(t, "shipsync", "chaos", "--binary", bin, "--seed", "7", "--postgres", testdb.PGURL())
	t.Log("\n" + got)
	require.NoError(t, err)
	require.Contains(t, got, "events:    1800 (")
	kills, deaths := chaosKills(t, got)
	require.GreaterOrEqual(t, kills+deaths, 12)
	require.Contains(t, got, "reconcile: ok (9 checks)")
	require.NotContains(t, got, "PROBLEM")
}

// TestShipsyncShipCrash runs the ship side's harness through the CLI, short:
// the client and the capture killed at random and at their fault points,
// the shore killed, the link cut; every check must pass.
func TestShipsyncShipCrash(t *testing.T) {
	t.Parallel()
	bin := testbin.Relay(t)
	got, err := run(t, "shipsync", "chaos", "--side", "ship", "--binary", bin, "--changes", "400", "--kills", "4",
		"--shore-kills", "1", "--capture-kills", "2", "--cuts", "1", "--fault-probability", "0.5", "--seed", "5",
		"--postgres", testdb.PGURL())
	t.Log("\n" + got)
	require.NoError(t, err)
	require.Contains(t, got, "plan: 4 client kills, 1 shore kills, 2 capture kills, 1 cuts")
	require.Regexp(t, `capture: +\d+ SIGKILLs at random, \d+ deaths at fault points`, got)
	require.Contains(t, got, "shore:     1 SIGKILLs and restarts")
	require.Contains(t, got, "link:      1 cuts")
	require.Contains(t, got, "reconcile: ok (7 checks)")
	require.NotContains(t, got, "FAIL")
	require.NotContains(t, got, "PROBLEM")
}

// TestShipsyncBothCrash runs the two-way harness through the CLI, short:
// both databases edited at once, the shore process and the ship client
// killed at random and at their fault points; every check must pass.
func TestShipsyncBothCrash(t *testing.T) {
	t.Parallel()
	bin := testbin.Relay(t)
	got, err := run(t, "shipsync", "chaos", "--side", "both", "--binary", bin, "--rows", "10", "--edits", "40",
		"--kills", "4", "--client-kills", "2", "--fault-probability", "0.5", "--seed", "3", "--postgres", testdb.PGURL())
	t.Log("\n" + got)
	require.NoError(t, err)
	require.Regexp(t, `shore: +4 SIGKILLs at random, \d+ deaths at fault points`, got)
	require.Regexp(t, `client: +2 SIGKILLs at random, \d+ deaths at fault points`, got)
	require.Contains(t, got, "fault point shipsync.arbiter.after-claim")
	require.Contains(t, got, "reconcile: ok (7 checks)")
	require.NotContains(t, got, "FAIL")
	require.NotContains(t, got, "PROBLEM")
}

func TestShipsyncChaosFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--records", "0"},
		{"--kills", "-1"},
		{"--fault-probability", "2"},
		{"--batch", "0"},
		{"extra"},
	} {
		_, err := run(t, append([]string{"shipsync", "chaos", "--binary", "relay-not-started"}, args...)...)
		require.Error(t, err, "%v", args)
	}
	for _, args := range [][]string{
		{"--changes", "5"},
		{"--kills", "-1"},
		{"--shore-kills", "-1"},
		{"--cuts", "-1"},
		{"--writers", "0"},
		{"--fault-probability", "2"},
		{"--records", "10"}, // the shore side's
		{"extra"},
	} {
		_, err := run(t, append([]string{"shipsync", "chaos", "--side", "ship", "--binary", "relay-not-started"}, args...)...)
		require.Error(t, err, "%v", args)
	}
	for _, args := range [][]string{
		{"--rows", "5"},
		{"--edits", "0"},
		{"--kills", "-1"},
		{"--client-kills", "-1"},
		{"--fault-probability", "2"},
		{"--arbiter-lease", "0s"},
		{"--changes", "10"}, // the ship side's
		{"extra"},
	} {
		_, err := run(t, append([]string{"shipsync", "chaos", "--side", "both", "--binary", "relay-not-started"}, args...)...)
		require.Error(t, err, "%v", args)
	}
	for _, args := range [][]string{{"--side", "bridge"}, {"--side"}, {"--side=ship", "--changes=1"}} {
		_, err := run(t, append([]string{"shipsync", "chaos", "--binary", "relay-not-started"}, args...)...)
		require.Error(t, err, "%v", args)
	}
}
