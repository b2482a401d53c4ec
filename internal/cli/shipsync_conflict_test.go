package cli_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver/relaypgx"
)

// TestShipsyncConflictCommand: an operator lists a case, shows its
// evidence, cannot decide it without the shore database to re-check
// against, and cancels it (audited, with a reason).
func TestShipsyncConflictCommand(t *testing.T) {
	t.Parallel()
	url := testdb.PGSchema(t)
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := cli.Run(t.Context(), append([]string{"shipsync"}, args...), &out, &out)
		return out.String(), err
	}
	_, err := run("rule", "add", "--postgres", url, "--migrate", "--actor", "tester", "--rule", "crew", "--source-table", "crew",
		"--target-table", "crew", "--key", "id", "--columns", "id,name,updated_at", "--conflict-policy", "LAST_WRITER_WINS",
		"--lww-column", "updated_at")
	require.NoError(t, err)
	out, err := run("rule", "list", "--postgres", url)
	require.NoError(t, err)
	require.Contains(t, out, "LAST_WRITER_WINS (updated_at)")

	d, err := relaypgx.Open(t.Context(), url)
	require.NoError(t, err)
	defer d.Close()
	hash, text, err := shore.RecordKey([]*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: 7}}})
	require.NoError(t, err)
	var id string
	require.NoError(t, pgx.BeginFunc(t.Context(), d.Pool(), func(tx pgx.Tx) error {
		id, _, err = shore.OpenConflict(t.Context(), tx, "crew", 1, hash, text, shore.Evidence{Origin: "ship-1",
			EventID: "00000000-0000-4000-8000-000000000001", Operation: pb.Operation_OPERATION_UPDATE, Base: "rev-0",
			Result: "rev-n1", CurrentRevision: "rev-s1", CurrentOrigin: "shore", FoundIn: "target"}, time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC))
		return err
	}))

	out, err = run("conflict", "list", "--postgres", url)
	require.NoError(t, err)
	require.Contains(t, out, id)
	require.Contains(t, out, "DETECTED")
	out, err = run("conflict", "show", "--postgres", url, "--conflict", id)
	require.NoError(t, err)
	require.Contains(t, out, "UPDATE 00000000-0000-4000-8000-000000000001 from ship-1: rev-0 → rev-n1")
	require.Contains(t, out, "met       rev-s1 of shore")
	_, err = run("conflict", "decide", "--postgres", url, "--conflict", id, "--choice", "SHORE", "--operator", "op",
		"--reason", "keep")
	require.ErrorContains(t, err, "--target is required")
	_, err = run("conflict", "cancel", "--postgres", url, "--conflict", id, "--operator", "op")
	require.ErrorContains(t, err, "--reason are required")
	out, err = run("conflict", "cancel", "--postgres", url, "--conflict", id, "--operator", "op", "--reason", "test data")
	require.NoError(t, err)
	require.Contains(t, out, "cancelled")
	out, err = run("conflict", "list", "--postgres", url, "--state", "CANCELLED")
	require.NoError(t, err)
	require.Contains(t, out, id)
	_, err = run("conflict", "show", "--postgres", url, "--conflict", "nope")
	require.ErrorContains(t, err, "no such conflict case")
}
