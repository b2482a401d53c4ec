package cli_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// serveArgs returns `relay serve` arguments over a fresh SQLite store and
// source, followed by extra.
func serveArgs(t *testing.T, extra ...string) []string {
	t.Helper()
	dir := t.TempDir()
	srcPath := filepath.Join(dir, "source.db")
	src, err := sql.Open("sqlite", srcPath)
	require.NoError(t, err)
	defer src.Close()
	_, err = src.Exec(`CREATE TABLE source_messages (id INTEGER PRIMARY KEY, payload TEXT, received_at INTEGER)`)
	require.NoError(t, err)
	return append([]string{"serve", "--store", filepath.Join(dir, "relay.db"), "--source-dsn", srcPath,
		"--log-level", "warn"}, extra...)
}

// The admin API does not start on an address other hosts reach unless its
// clients must authenticate; a bad token file stops the start too.
func TestServeRefusesUnauthenticatedAdminOnNonLoopback(t *testing.T) {
	t.Parallel()
	for _, addr := range []string{"0.0.0.0:0", "[::]:0"} {
		_, err := run(t, serveArgs(t, "--admin-addr", addr)...)
		require.ErrorContains(t, err, "--admin-addr "+addr+" is not a loopback address")
		require.ErrorContains(t, err, "token")
	}
	_, err := run(t, serveArgs(t, "--admin-addr", "127.0.0.1:0", "--admin-token-file", writeToken(t, "short"))...)
	require.ErrorContains(t, err, "--admin-token-file")
	require.ErrorContains(t, err, "at least 16")
	require.NotContains(t, err.Error(), "short", "the token never shows")
	_, err = run(t, serveArgs(t, "--admin-token-file", writeToken(t, "long-enough-token-0123456789"))...)
	require.ErrorContains(t, err, "need --admin-addr")
	_, err = run(t, serveArgs(t, "--admin-addr", "127.0.0.1:0", "--admin-client-ca", "ca.pem")...)
	require.ErrorContains(t, err, "--admin-tls-cert and --admin-tls-key go together")
}
