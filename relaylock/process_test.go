package relaylock_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/testlog"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
)

// syncBuffer is a bytes.Buffer safe for a child's writer and the test's reader.
type syncBuffer = testlog.Buffer

// buildRelay compiles cmd/relay once per test binary.
var buildRelay = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "relay-bin-*")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "relay")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/relayhq/relay/cmd/relay").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

type child struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan error
}

func start(t *testing.T, bin string, args ...string) *child {
	t.Helper()
	c := &child{cmd: exec.Command(bin, args...), stderr: &syncBuffer{}, done: make(chan error, 1)}
	c.cmd.Stderr = c.stderr
	c.cmd.Stdout = c.stderr
	require.NoError(t, c.cmd.Start())
	go func() { c.done <- c.cmd.Wait() }()
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			_ = c.cmd.Process.Kill()
			<-c.done
		}
		if t.Failed() {
			t.Logf("child %v output:\n%s", args, c.stderr.String())
		}
	})
	return c
}

func writeRows(t *testing.T, db *sql.DB, from, to int) {
	t.Helper()
	tx, err := db.Begin()
	require.NoError(t, err)
	for id := from; id <= to; id++ {
		_, err := tx.Exec(`INSERT INTO source_messages (id, payload, received_at) VALUES (?, ?, NULL)`,
			id, fmt.Sprintf("FLOP-UPDT|S/%d|K%d|1", id, id%7))
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestSecondInstanceWaits runs two real `relay serve` processes on one
// PostgreSQL store and queue: the
// second waits for the queue lock while the first runs, never takes a
// message or moves the watermark, and takes over within moments when the first
// is killed with SIGKILL in the middle of a stream of rows. Every row is then
// applied exactly once, in order per key.
func TestSecondInstanceWaits(t *testing.T) {
	bin, err := buildRelay()
	require.NoError(t, err)
	storeURL := testdb.PGSchema(t)
	ctx := context.Background()
	store, err := relaypgx.Open(ctx, storeURL)
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })

	const total = 3000
	srcPath := filepath.Join(t.TempDir(), "source.db")
	src, err := sql.Open("sqlite", "file:"+srcPath+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { src.Close() })
	_, err = src.Exec(`CREATE TABLE source_messages (id INTEGER PRIMARY KEY, payload TEXT, received_at INTEGER)`)
	require.NoError(t, err)
	writeRows(t, src, 1, 200)

	common := []string{"serve", "--store", storeURL, "--queue", "px", "--source-driver", "sqlite",
		"--source-dsn", srcPath, "--poll", "50ms", "--log-level", "info"}
	succeeded := func() int64 {
		st, err := store.GetExecutor().MessageStats(ctx, "px")
		if err != nil {
			return -1
		}
		return st.Counts[relaytype.StateSucceeded]
	}

	a := start(t, bin, append(common, "--owner", "A", "--seed", "zero")...)
	require.Eventually(t, func() bool { return succeeded() == 200 }, 60*time.Second, 50*time.Millisecond, "A processes the first 200 rows")
	require.Contains(t, a.stderr.String(), "exclusive lock acquired")

	metricsAddr := freeAddr(t)
	b := start(t, bin, append(common, "--owner", "B", "--metrics-addr", metricsAddr)...)
	require.Eventually(t, func() bool { return strings.Contains(b.stderr.String(), "waiting for exclusive lock") },
		30*time.Second, 20*time.Millisecond, "B must wait for the lock")

	// A keeps processing while B waits; A is killed with SIGKILL in the middle
	// of a stream of rows (a FIFO batch transaction may be open), and B must
	// recover from the persisted state alone.
	writeRows(t, src, 201, total)
	require.Eventually(t, func() bool { return succeeded() >= 600 }, 60*time.Second, 5*time.Millisecond, "A keeps processing")
	require.NotContains(t, b.stderr.String(), "exclusive lock acquired", "B must not run while A holds the lock")
	require.NotContains(t, b.stderr.String(), "intake", "B must not touch the watermark while waiting")
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
	<-a.done
	atKill := succeeded()
	require.Less(t, atKill, int64(total), "A was killed mid-stream")
	require.Eventually(t, func() bool { return succeeded() == total }, 90*time.Second, 50*time.Millisecond, "B takes over after A dies")
	require.Contains(t, b.stderr.String(), "exclusive lock acquired")
	t.Logf("A was killed after %d of %d rows; B finished the rest", atKill, total)

	// Reconcile: every row applied once, watermark at the top, no holes.
	cur, err := store.GetExecutor().CursorGet(ctx, "px")
	require.NoError(t, err)
	require.Equal(t, int64(total), cur.Watermark)
	var applied, keys int64
	require.NoError(t, store.GetExecutor().QueryRow(ctx,
		`SELECT COALESCE(SUM(messages), 0), COUNT(*) FROM demo_projection WHERE queue = $1`, "px").Scan(&applied, &keys))
	require.Equal(t, int64(total), applied, "each row applied exactly once across the two instances and the crash")
	rows, err := store.GetExecutor().Query(ctx, `SELECT key, last_msg_id FROM demo_projection WHERE queue = $1`, "px")
	require.NoError(t, err)
	for rows.Next() {
		var key string
		var last int64
		require.NoError(t, rows.Scan(&key, &last))
		var k int64
		_, err := fmt.Sscanf(key, "K%d", &k)
		require.NoError(t, err)
		require.Equal(t, total-(total-k)%7, last, "key %s ends at its largest id", key)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	require.Equal(t, int64(7), keys)
	holes, err := store.GetExecutor().HoleList(ctx, "px")
	require.NoError(t, err)
	require.Empty(t, holes)

	// B's metrics endpoint shows the engine's and the intake's gauges.
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	for _, want := range []string{`relay_backlog_messages{queue="px"} 0`, fmt.Sprintf(`relay_watermark{queue="px"} %d`, total),
		`relay_watermark_lag{queue="px"} 0`, `relay_permanent_holes_total{queue="px"} 0`,
		`relay_backlog_oldest_unprocessed_seconds{queue="px"}`} {
		require.Contains(t, string(body), want)
	}

	require.NoError(t, b.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-b.done:
		require.NoError(t, err, "B stops cleanly on SIGTERM")
	case <-time.After(30 * time.Second):
		t.Fatal("B did not stop within 30s of SIGTERM")
	}
}
