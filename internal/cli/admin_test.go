package cli_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayadmin"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
)

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestAdminAgainstServe runs `relay serve` in-process with --admin-addr and
// --admin-token-file over a SQLite source (one malformed row) into a
// PostgreSQL store, and drives `relay admin stats` and `relay admin replay`
// against it through cli.Run with --token-file; without the token, or with
// another, the API refuses.
func TestAdminAgainstServe(t *testing.T) {
	t.Parallel()
	srcPath := filepath.Join(t.TempDir(), "source.db")
	src, err := sql.Open("sqlite", srcPath)
	require.NoError(t, err)
	defer src.Close()
	_, err = src.Exec(`CREATE TABLE source_messages (id INTEGER PRIMARY KEY, payload TEXT, received_at INTEGER)`)
	require.NoError(t, err)
	const n = 6
	for i := 1; i <= n; i++ {
		payload := fmt.Sprintf("FLOP-UPDT|S/%d|K%d|1", i, i)
		if i == 3 {
			payload = "not a demo message"
		}
		_, err := src.Exec(`INSERT INTO source_messages (id, payload) VALUES (?, ?)`, i, payload)
		require.NoError(t, err)
	}
	storeURL := testdb.PGSchema(t)
	addr := freeAddr(t)
	tokenFile := writeToken(t, "serve-admin-token-0123456789")
	wrongToken := writeToken(t, "some-other-token-0123456789")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- cli.Run(ctx, []string{"serve", "--store", storeURL, "--queue", "adm", "--source-driver", "sqlite",
			"--source-dsn", srcPath, "--seed", "min", "--poll", "20ms", "--admin-addr", addr,
			"--admin-token-file", tokenFile, "--log-level", "warn"},
			&out, &out)
	}()

	var st relayadmin.Stats
	require.Eventually(t, func() bool {
		o, err := run(t, "admin", "stats", "--addr", addr, "--token-file", tokenFile, "--json")
		if err != nil || json.Unmarshal([]byte(o), &st) != nil {
			return false
		}
		return st.Counts[relaytype.StateSucceeded] == n-1 && st.Counts[relaytype.StateDead] == 1
	}, 60*time.Second, 20*time.Millisecond, "processed; serve output:\n%s", out.String())
	require.Zero(t, st.Backlog)
	require.NotNil(t, st.Cursor)
	require.Equal(t, int64(n), st.Cursor.Watermark)
	require.True(t, st.Cursor.Seeded)

	o, err := run(t, "admin", "stats", "--addr", addr, "--token-file", tokenFile)
	require.NoError(t, err, o)
	require.Regexp(t, `(?m)^DEAD\s+1$`, o)
	require.Regexp(t, `(?m)^backlog\s+0$`, o)
	require.Regexp(t, `(?m)^watermark W\s+6$`, o)
	require.Regexp(t, `(?m)^late rows\s+0 \(0 not ingested\)$`, o)

	o, err = run(t, "admin", "dead", "--addr", addr, "--token-file", tokenFile)
	require.NoError(t, err, o)
	require.Regexp(t, `(?m)^3\s+MALFORMED\s+1\s+`, o, "processed once: attempts 1")
	require.NotContains(t, o, "not a demo message", "never a payload")

	_, err = run(t, "admin", "stats", "--addr", addr)
	require.ErrorContains(t, err, "401 Unauthorized", "no token")
	_, err = run(t, "admin", "replay", "--addr", addr, "--token-file", wrongToken, "--ids", "3")
	require.ErrorContains(t, err, "401 Unauthorized", "another token")

	o, err = run(t, "admin", "stats", "--store", storeURL, "--queue", "adm")
	require.NoError(t, err, o)
	require.Regexp(t, `(?m)^SUCCEEDED\s+5$`, o, "offline read of the store")

	_, err = run(t, "admin", "replay", "--addr", addr, "--token-file", tokenFile, "--class", "MALFORMED")
	require.ErrorContains(t, err, "400 Bad Request")
	require.ErrorContains(t, err, `class "MALFORMED" is not replayable`)
	_, err = run(t, "admin", "replay", "--store", storeURL, "--class", "INFRA")
	require.ErrorContains(t, err, "flag provided but not defined: -store", "replay has no offline mode")
	_, err = run(t, "admin", "replay", "--class", "INFRA")
	require.ErrorContains(t, err, "needs --addr")
	_, err = run(t, "admin", "reopen", "--addr", addr, "--token-file", tokenFile, "--reason", "MISSING_ROW")
	require.ErrorContains(t, err, "409 Conflict", "serve runs no acknowledgement writer")

	o, err = run(t, "admin", "late", "--addr", addr, "--token-file", tokenFile)
	require.NoError(t, err, o)
	require.Contains(t, o, "0 late rows, 0 not ingested")
	o, err = run(t, "admin", "late", "--store", storeURL, "--queue", "adm")
	require.NoError(t, err, o)
	require.Contains(t, o, "0 late rows", "offline read of the store")
	o, err = run(t, "admin", "late-ingest", "--addr", addr, "--token-file", tokenFile, "--ids", "3")
	require.NoError(t, err, o)
	require.Contains(t, o, "3: not_late", "id 3 is a message, not a late row: nothing enqueued")

	// Message 2 as if it had exhausted its attempts: a whitelisted class.
	store, err := relaypgx.Open(context.Background(), storeURL)
	require.NoError(t, err)
	defer store.Close()
	changed, err := store.GetExecutor().Exec(context.Background(),
		`UPDATE relay_message SET state = 'DEAD', error_class = 'EXHAUSTED', last_error = 'gave up' WHERE queue = $1 AND id = $2`,
		"adm", int64(2))
	require.NoError(t, err)
	require.Equal(t, int64(1), changed)

	o, err = run(t, "admin", "replay", "--addr", addr, "--token-file", tokenFile, "--ids", "2")
	require.NoError(t, err, o)
	require.Contains(t, o, "replayed 1 (classes [EXHAUSTED])")
	// It runs again after its key's effect is already applied: the demo handler
	// sees its own id in the projection and parks it as DEAD(PROTOCOL) — replay
	// does not restore history order (seed 000 §9.1).
	require.Eventually(t, func() bool {
		m, err := store.GetExecutor().MessageGet(context.Background(), "adm", 2)
		return err == nil && m.State == relaytype.StateDead && m.ErrorClass == relaytype.ClassProtocol
	}, 60*time.Second, 20*time.Millisecond)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "serve stops cleanly; output:\n%s", out.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30s")
	}
}

// writeToken writes tok into a fresh 0600 token file and returns its path.
func writeToken(t *testing.T, tok string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte(tok+"\n"), 0o600))
	return path
}

func TestAdminUsage(t *testing.T) {
	t.Parallel()
	o, err := run(t, "admin")
	require.NoError(t, err)
	require.Contains(t, o, "replay, reopen and late-ingest always need --addr")
	require.Contains(t, o, "late-ingest")
	_, err = run(t, "admin", "late-ingest", "--ids", "3")
	require.ErrorContains(t, err, "needs --addr")
	_, err = run(t, "admin", "nope")
	require.ErrorContains(t, err, `unknown admin command "nope"`)
	_, err = run(t, "admin", "stats")
	require.ErrorContains(t, err, "give --addr")
	_, err = run(t, "admin", "dead", "--addr", "127.0.0.1:1", "--class", "WHAT")
	require.ErrorContains(t, err, "unknown error class")
	o, err = run(t, "help")
	require.NoError(t, err)
	require.Contains(t, o, "admin")
}
