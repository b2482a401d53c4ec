package cli_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := cli.Run(context.Background(), args, &out, &errOut)
	return out.String() + errOut.String(), err
}

// runShipsync runs `relay shipsync args…`.
func runShipsync(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return run(t, append([]string{"shipsync"}, args...)...)
}

func TestHelpAndUnknownCommand(t *testing.T) {
	t.Parallel()
	out, err := run(t, "help")
	require.NoError(t, err)
	for _, cmd := range []string{"demo", "serve", "migrate", "bench"} {
		require.Contains(t, out, cmd)
	}
	_, err = run(t, "nope")
	require.ErrorContains(t, err, `unknown command "nope"`)
	_, err = run(t, "demo", "--no-such-flag")
	require.Error(t, err)
	_, err = run(t, "serve", "--store", filepath.Join(t.TempDir(), "x.db"))
	require.ErrorContains(t, err, "--source-dsn is required")
}

func TestDemoCommand(t *testing.T) {
	t.Parallel()
	out, err := run(t, "demo", "--n", "400", "--keys", "5", "--holes", "20", "--max-commit-delay", "100ms")
	require.NoError(t, err, out)
	require.Contains(t, out, "RESULT: reconciled")
	require.Contains(t, out, "W=") // progress lines
}

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	store := filepath.Join(t.TempDir(), "relay.db")
	out, err := run(t, "migrate", "--store", store)
	require.NoError(t, err, out)
	require.Contains(t, out, "applied engine/001_engine")
	out, err = run(t, "migrate", "--store", store)
	require.NoError(t, err, out)
	require.Contains(t, out, "schema up to date (0 applied)")
}

// The bench command checks its own result (every message's effect written
// once) before it prints a figure; here only that it runs on both stores.
func TestBenchFIFOCommand(t *testing.T) {
	t.Parallel()
	out, err := run(t, "bench", "fifo", "--n", "200", "--rounds", "1", "--batch", "1,20", "--postgres", testdb.PGSchema(t))
	require.NoError(t, err, out)
	require.Regexp(t, `(?m)^postgres\s+1\s+\d+`, out)
	require.Regexp(t, `(?m)^sqlite\s+20\s+\d+`, out)
}

// bench outbox verifies per-key order and that every event was SENT before it
// prints a figure; here only that it runs end to end on PostgreSQL and kfake.
func TestBenchOutboxCommand(t *testing.T) {
	t.Parallel()
	out, err := run(t, "bench", "outbox", "--events", "600", "--keys", "50", "--per-tx", "40", "--batch", "100",
		"--rounds", "1", "--postgres", testdb.PGSchema(t))
	require.NoError(t, err, out)
	require.Regexp(t, `(?m)^kafka\s+100\s+\d+`, out)
	require.Regexp(t, `(?m)^redis\s+100\s+\d+`, out)
}
