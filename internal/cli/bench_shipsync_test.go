package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
)

// TestBenchShipsyncIngress runs `relay bench shipsync-ingress` small: it
// uploads over mutual TLS, checks the inbox holds every event, and reports
// a rate, the receive phase's CPU (this process and its PostgreSQL
// backends) and a profile of that phase; then applies the events and
// reports what the apply cost per event.
func TestBenchShipsyncIngress(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	prof := filepath.Join(t.TempDir(), "receive.prof")
	err := cli.Run(t.Context(), []string{"bench", "shipsync-ingress", "--nodes", "2", "--batches", "6", "--events", "20",
		"--postgres", testdb.PGURL(), "--receive-cpuprofile", prof}, &out, &out)
	require.NoError(t, err, out.String())
	require.Contains(t, out.String(), "120 events received")
	require.Contains(t, out.String(), "inbox checked: 120 rows")
	require.Regexp(t, `receive CPU: relay process [0-9.]+ s, PostgreSQL backends [0-9.]+ s \([1-9][0-9]*\)`, out.String())
	st, err := os.Stat(prof)
	require.NoError(t, err)
	require.Positive(t, st.Size())
	require.Contains(t, out.String(), "120 APPLIED receipts, 120 target rows")
	require.Contains(t, out.String(), "µs per applied event")
	require.Contains(t, out.String(), "; relay_message ")
}
