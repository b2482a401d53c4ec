package cli_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
)

// TestShipsyncDemoBothWays is the README's two-way demo, small: it runs,
// shows its progress and counts, and every check of its reconciliation
// passes (the command fails otherwise).
func TestShipsyncDemoBothWays(t *testing.T) {
	var out bytes.Buffer
	err := cli.Run(t.Context(), []string{"shipsync", "demo", "--both-ways", "--rows", "10", "--edits", "40", "--seed", "3",
		"--postgres", testdb.PGURL(), "--mariadb", testdb.MariaDBServer()}, &out, &out)
	require.NoError(t, err, out.String())
	for _, want := range []string{"quiet after inserts", "edits done", "conflict cases:", "reconciliation:",
		"ok   crew: both databases hold the same", "ok   no change looped back"} {
		require.Contains(t, out.String(), want)
	}
	require.NotContains(t, out.String(), "FAIL")
}
