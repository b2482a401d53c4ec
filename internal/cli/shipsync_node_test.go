package cli_test

import (
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/testdb"
)

// TestShipsyncNodeCommand registers, rotates, retires and revokes a node
// with `relay shipsync node` on a fresh schema.
func TestShipsyncNodeCommand(t *testing.T) {
	t.Parallel()
	url := testdb.PGSchema(t)
	dir := filepath.Join(t.TempDir(), "pki")
	run := shipsyncRun(t)
	for _, a := range [][]string{{"init"}, {"node", "--node", "ship-1"}, {"node", "--node", "ship-1", "--name", "ship-1-b"}} {
		_, err := run(append(append([]string{"pki"}, a...), "--dir", dir)...)
		require.NoError(t, err)
	}
	_, err := run("node", "list", "--postgres", url)
	require.ErrorContains(t, err, "--migrate", "an unmigrated schema is refused")
	out, err := run("node", "add", "--postgres", url, "--actor", "tester", "--migrate", "--cert", filepath.Join(dir, "node-ship-1.crt"))
	require.NoError(t, err)
	fp1 := regexp.MustCompile(`certificate ([0-9a-f]{64})`).FindStringSubmatch(out)[1]
	_, err = run("node", "add", "--postgres", url, "--actor", "tester", "--cert", filepath.Join(dir, "node-ship-1.crt"))
	require.ErrorIs(t, err, shore.ErrNodeExists)
	_, err = run("node", "rotate", "--postgres", url, "--actor", "tester", "--cert", filepath.Join(dir, "ship-1-b.crt"))
	require.NoError(t, err)
	_, err = run("node", "retire", "--postgres", url, "--actor", "tester", "--node", "ship-1", "--fingerprint", fp1)
	require.NoError(t, err)
	_, err = run("node", "revoke", "--postgres", url, "--node", "ship-1", "--actor", "alice", "--reason", "ship sold")
	require.NoError(t, err)
	out, err = run("node", "list", "--postgres", url)
	require.NoError(t, err)
	require.Regexp(t, `ship-1\s+revoked\s+`+fp1+`\s+retired`, out)
	out, err = run("node", "audit", "--postgres", url)
	require.NoError(t, err)
	require.Regexp(t, `node\.revoke\s+node ship-1\s+active\s+revoked`, out)
}

// shipsyncRun returns run for `relay shipsync …` commands.
func shipsyncRun(t *testing.T) func(args ...string) (string, error) {
	return func(args ...string) (string, error) { return run(t, append([]string{"shipsync"}, args...)...) }
}
