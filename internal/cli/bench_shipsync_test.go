package cli_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
)

// TestBenchShipsyncIngress runs `relay bench shipsync-ingress` small: it
// uploads over mutual TLS, checks the inbox holds every event, reports a
// rate, applies the events and reports what the apply cost per event.
func TestBenchShipsyncIngress(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := cli.Run(t.Context(), []string{"bench", "shipsync-ingress", "--nodes", "2", "--batches", "6", "--events", "20",
		"--postgres", testdb.PGURL()}, &out, &out)
	require.NoError(t, err, out.String())
	require.Contains(t, out.String(), "120 events received")
	require.Contains(t, out.String(), "inbox checked: 120 rows")
	require.Contains(t, out.String(), "120 APPLIED receipts, 120 target rows")
	require.Contains(t, out.String(), "µs per applied event")
	require.Contains(t, out.String(), "; relay_message ")
}
