package cli_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver/relaypgx"
)

// TestShipsyncConflictCommand: an operator lists a case, shows its
// evidence, cannot decide it without the shore database to re-check
// against, and cancels it (audited, with a reason).
func TestShipsyncConflictCommand(t *testing.T) {
	t.Parallel()
	url := testdb.PGSchema(t)
	_, err := runShipsync(t, "rule", "add", "--postgres", url, "--migrate", "--actor", "tester", "--rule", "crew", "--source-table", "crew",
		"--target-table", "crew", "--key", "id", "--columns", "id,name,updated_at", "--conflict-policy", "LAST_WRITER_WINS",
		"--lww-column", "updated_at")
	require.NoError(t, err)
	out, err := runShipsync(t, "rule", "list", "--postgres", url)
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

	out, err = runShipsync(t, "conflict", "list", "--postgres", url)
	require.NoError(t, err)
	require.Contains(t, out, id)
	require.Contains(t, out, "DETECTED")
	out, err = runShipsync(t, "conflict", "show", "--postgres", url, "--conflict", id)
	require.NoError(t, err)
	require.Contains(t, out, "UPDATE 00000000-0000-4000-8000-000000000001 from ship-1: rev-0 → rev-n1")
	require.Contains(t, out, "met       rev-s1 of shore")
	_, err = runShipsync(t, "conflict", "decide", "--postgres", url, "--conflict", id, "--choice", "SHORE", "--operator", "op",
		"--reason", "keep")
	require.ErrorContains(t, err, "--target is required")
	_, err = runShipsync(t, "conflict", "cancel", "--postgres", url, "--conflict", id, "--operator", "op")
	require.ErrorContains(t, err, "--reason are required")
	out, err = runShipsync(t, "conflict", "cancel", "--postgres", url, "--conflict", id, "--operator", "op", "--reason", "test data")
	require.NoError(t, err)
	require.Contains(t, out, "cancelled")
	out, err = runShipsync(t, "conflict", "list", "--postgres", url, "--state", "CANCELLED")
	require.NoError(t, err)
	require.Contains(t, out, id)
	_, err = runShipsync(t, "conflict", "show", "--postgres", url, "--conflict", "nope")
	require.ErrorContains(t, err, "no such conflict case")
}
