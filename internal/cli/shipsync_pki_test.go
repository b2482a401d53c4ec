package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/internal/cli"
)

// TestShipsyncPKICommand makes a CA, a server and a node certificate with
// `relay shipsync pki`, and checks modes, identity and that nothing is
// overwritten.
func TestShipsyncPKICommand(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "pki")
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := cli.Run(t.Context(), append([]string{"shipsync", "pki"}, args...), &out, &out)
		return out.String(), err
	}
	_, err := run("init", "--dir", dir)
	require.NoError(t, err)
	_, err = run("server", "--dir", dir)
	require.NoError(t, err)
	out, err := run("node", "--dir", dir, "--node", "ship-1")
	require.NoError(t, err)
	require.Contains(t, out, "fingerprint ")

	st, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	st, err = os.Stat(filepath.Join(dir, "node-ship-1.key"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	c, err := pki.ReadCert(filepath.Join(dir, "node-ship-1.crt"))
	require.NoError(t, err)
	id, err := pki.NodeID(c)
	require.NoError(t, err)
	require.Equal(t, "ship-1", id)

	_, err = run("init", "--dir", dir)
	require.ErrorIs(t, err, pki.ErrExists)
	_, err = run("node", "--dir", dir, "--node", "ship-1")
	require.ErrorIs(t, err, pki.ErrExists)
	_, err = run("node", "--dir", dir)
	require.ErrorContains(t, err, "--node is required")
}
