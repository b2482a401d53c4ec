package cli_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/cli"
)

// TestBenchShipsyncFleetFlags: bad sizes are refused before anything is
// set up (the simulation itself is tested in package fleet).
func TestBenchShipsyncFleetFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--nodes", "0"}, {"--batch", "-1"}, {"--pool", "0"}, {"extra"}} {
		var out bytes.Buffer
		err := cli.Run(t.Context(), append([]string{"bench", "shipsync-fleet"}, args...), &out, &out)
		require.Error(t, err, args)
		require.Contains(t, err.Error(), "bench shipsync-fleet: ", args)
	}
}

// TestShipsyncShoreMaxConns: the shore's connection bound is a flag (a
// fleet keeps one connection per node) and must be positive.
func TestShipsyncShoreMaxConns(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	err := cli.Run(t.Context(), []string{"shipsync", "shore", "--max-conns", "0", "--tls-cert", "c", "--tls-key", "k",
		"--client-ca", "ca"}, &out, &out)
	require.ErrorContains(t, err, "--max-conns must be ≥ 1")
}
