package cli_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver/relaypgx"
)

// TestShipsyncRetainCommand: one pass over a migrated shore deletes an
// old sample and keeps a recent one; impossible keep times are refused.
func TestShipsyncRetainCommand(t *testing.T) {
	t.Parallel()
	url := testdb.PGSchema(t)
	_, err := runShipsync(t, "node", "list", "--postgres", url, "--migrate")
	require.NoError(t, err)
	d, err := relaypgx.Open(t.Context(), url)
	require.NoError(t, err)
	defer d.Close()
	_, err = d.Pool().Exec(t.Context(), `INSERT INTO sync_node (node_id, state, created_at, updated_at) VALUES ('s', 'active', now(), now())`)
	require.NoError(t, err)
	for _, age := range []time.Duration{40 * 24 * time.Hour, time.Hour} {
		_, err = d.Pool().Exec(t.Context(), `INSERT INTO sync_node_sample (node_id, at, elapsed_seconds, active_seconds,
			effective_bytes, physical_bytes, incoming_raw_bytes, backlog_events, backlog_raw_bytes)
			VALUES ('s', now() - $1::interval, 60, 60, 1, 1, 0, 0, 0)`, age.String())
		require.NoError(t, err)
	}
	out, err := runShipsync(t, "retain", "--postgres", url)
	require.NoError(t, err)
	require.Contains(t, out, "retention: 1 samples, 0 batch answers")
	var n int
	require.NoError(t, d.Pool().QueryRow(t.Context(), "SELECT count(*) FROM sync_node_sample").Scan(&n))
	require.Equal(t, 1, n)
	_, err = runShipsync(t, "retain", "--postgres", url, "--samples", "1h")
	require.ErrorContains(t, err, "--samples must be ≥ 24h")
}
