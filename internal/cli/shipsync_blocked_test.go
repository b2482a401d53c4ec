package cli_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/cli"
)

func TestShipsyncBlockedOnFreshState(t *testing.T) {
	var out, errOut bytes.Buffer
	state := filepath.Join(t.TempDir(), "client.db")
	require.NoError(t, cli.Run(t.Context(), []string{"shipsync", "blocked", "--state", state}, &out, &errOut))
	require.Equal(t, "no blocked events\n", out.String())
	err := cli.Run(t.Context(), []string{"shipsync", "blocked", "--state", state, "--limit", "0"}, &out, &errOut)
	require.ErrorContains(t, err, "--limit must be ≥ 1")
}
