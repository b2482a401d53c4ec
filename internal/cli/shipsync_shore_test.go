package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
)

// TestShipsyncShoreCommand is the demo path of docs/shipsync/shore.md as a
// test: pki → node add → shore → upload over mutual TLS → the same batch
// again (same answer) → revoke → upload refused with 403.
func TestShipsyncShoreCommand(t *testing.T) {
	t.Parallel()
	url := testdb.PGSchema(t)
	dir := filepath.Join(t.TempDir(), "pki")
	for _, a := range [][]string{{"init"}, {"server"}, {"node", "--node", "ship-1"}} {
		_, err := runShipsync(t, append(append([]string{"pki"}, a...), "--dir", dir)...)
		require.NoError(t, err)
	}
	_, err := runShipsync(t, "node", "add", "--postgres", url, "--actor", "tester", "--migrate", "--cert", filepath.Join(dir, "node-ship-1.crt"))
	require.NoError(t, err)
	_, err = runShipsync(t, "node", "allow-rule", "--postgres", url, "--actor", "tester", "--node", "ship-1", "--rule", "test-table")
	require.NoError(t, err)

	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- cli.Run(ctx, []string{"shipsync", "shore", "--postgres", url, "--addr", "127.0.0.1:0",
			"--tls-cert", filepath.Join(dir, "server.crt"), "--tls-key", filepath.Join(dir, "server.key"),
			"--client-ca", filepath.Join(dir, "ca.crt"), "--log-level", "warn"}, &out, &out)
	}()
	listening := regexp.MustCompile(`listening on (https://127\.0\.0\.1:\d+)`)
	var base string
	require.Eventually(t, func() bool {
		m := listening.FindStringSubmatch(out.String())
		if m != nil {
			base = m[1]
		}
		return m != nil
	}, 20*time.Second, 10*time.Millisecond, out.String())

	upload := []string{"upload", "--url", base, "--ca", filepath.Join(dir, "ca.crt"),
		"--cert", filepath.Join(dir, "node-ship-1.crt"), "--key", filepath.Join(dir, "node-ship-1.key"),
		"--events", "20", "--batch-id", "9b2f7c1e-0d3a-4c55-8e6f-1a2b3c4d5e6f"}
	got, err := runShipsync(t, upload...)
	require.NoError(t, err)
	require.Contains(t, got, "20 events, 20 RECEIVED, 0 RETRYABLE_FAILURE, 0 PERMANENT_REJECTED")
	again, err := runShipsync(t, upload...)
	require.NoError(t, err)
	require.Equal(t, got, again, "a resent batch id gets the same answer")

	_, err = runShipsync(t, "node", "revoke", "--postgres", url, "--actor", "tester", "--node", "ship-1")
	require.NoError(t, err)
	_, err = runShipsync(t, upload[:len(upload)-2]...)
	require.ErrorContains(t, err, "HTTP 403 ERROR_CODE_FORBIDDEN")

	stop()
	require.NoError(t, <-done)
}

// TestShipsyncShoreCDCFlags: the shore CDC consumer needs its rules file,
// and a bad one is refused naming the flag, before anything is served; so
// is an arbiter lease that is not positive.
func TestShipsyncShoreCDCFlags(t *testing.T) {
	t.Parallel()
	url := testdb.PGSchema(t)
	dir := filepath.Join(t.TempDir(), "pki")
	for _, a := range [][]string{{"init"}, {"server"}} {
		var out bytes.Buffer
		require.NoError(t, cli.Run(t.Context(), append([]string{"shipsync", "pki"}, append(a, "--dir", dir)...), &out, &out))
	}
	bad := filepath.Join(t.TempDir(), "rules.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"rules": [{"id": "x"}]}`), 0o600))
	base := []string{"shipsync", "shore", "--postgres", url, "--migrate", "--addr", "127.0.0.1:0",
		"--tls-cert", filepath.Join(dir, "server.crt"), "--tls-key", filepath.Join(dir, "server.key"),
		"--client-ca", filepath.Join(dir, "ca.crt"), "--log-level", "off", "--cdc-brokers", "127.0.0.1:1"}
	var out bytes.Buffer
	err := cli.Run(t.Context(), base, &out, &out)
	require.ErrorContains(t, err, "--cdc-rules is required with --cdc-brokers")
	err = cli.Run(t.Context(), append(base, "--cdc-rules", bad), &out, &out)
	require.ErrorContains(t, err, "--cdc-rules "+bad)
	err = cli.Run(t.Context(), append(base, "--arbiter-lease", "0"), &out, &out)
	require.ErrorContains(t, err, "--arbiter-lease must be positive")
}
