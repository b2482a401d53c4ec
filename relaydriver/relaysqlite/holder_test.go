package relaysqlite_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// lockChildEnv makes the test binary a lock holder (TestMain): it takes the
// lock in the store file the variable names, prints "held" and waits to be
// killed.
const lockChildEnv = "RELAYSQLITE_LOCK_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(lockChildEnv); path != "" {
		holdLockForever(path)
		return
	}
	os.Exit(m.Run())
}

func holdLockForever(path string) {
	ctx := context.Background()
	d, err := relaysqlite.Open(ctx, path)
	if err != nil {
		panic(err)
	}
	if _, err := d.TryLock(ctx, &relaydriver.LockParams{Name: "pipeline:q", Owner: "child", TTL: time.Hour, Now: t0}); err != nil {
		panic(err)
	}
	os.Stdout.WriteString("held\n")
	select {}
}

// TestLockOfKilledProcessTakenAtOnce: a process holding a lock row with an
// hour left is killed with SIGKILL; another process of the same machine
// takes the lock at once instead of waiting the hour, and the row names the
// new holder. While the child lives, the lock is refused.
func TestLockOfKilledProcessTakenAtOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "relay.db")
	d, err := relaysqlite.Open(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	_, err = relaymigrate.Up(ctx, d, relayclock.System{}, relaymigrate.EngineLineOf(d))
	require.NoError(t, err)

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), lockChildEnv+"="+path)
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "held\n", line)

	params := &relaydriver.LockParams{Name: "pipeline:q", Owner: "parent", TTL: time.Hour, Now: t0.Add(time.Minute)}
	_, err = d.TryLock(ctx, params)
	require.ErrorIs(t, err, relaytype.ErrLocked, "the holder is alive")

	require.NoError(t, child.Process.Kill())
	_ = child.Wait() // reaped: the PID no longer exists
	l, err := d.TryLock(ctx, params)
	require.NoError(t, err, "the holder is gone: taken at once, 59 minutes before expiry")
	var owner string
	var pid int
	require.NoError(t, d.DB().QueryRowContext(ctx, "SELECT owner, holder_pid FROM relay_lock WHERE name = 'pipeline:q'").Scan(&owner, &pid))
	require.Equal(t, "parent", owner)
	require.Equal(t, os.Getpid(), pid)
	require.NoError(t, l.Renew(ctx, t0.Add(2*time.Minute)))
}

// TestLockTakeOverOnlyForThisMachine: a row whose holder is a dead PID of
// another machine (or namespace), or of no recorded holder at all (written
// before the holder columns), is only taken on expiry.
func TestLockTakeOverOnlyForThisMachine(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx := t.Context()
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	deadPID := gone.Process.Pid

	for _, holder := range []string{"other-host|pid:[1]", ""} {
		_, err := d.DB().ExecContext(ctx, "DELETE FROM relay_lock")
		require.NoError(t, err)
		_, err = d.TryLock(ctx, &relaydriver.LockParams{Name: "x", Owner: "a", TTL: time.Hour, Now: t0})
		require.NoError(t, err)
		_, err = d.DB().ExecContext(ctx, "UPDATE relay_lock SET holder = ?, holder_pid = ?", holder, deadPID)
		require.NoError(t, err)
		_, err = d.TryLock(ctx, &relaydriver.LockParams{Name: "x", Owner: "b", TTL: time.Hour, Now: t0.Add(time.Minute)})
		require.ErrorIs(t, err, relaytype.ErrLocked, "holder %q", holder)
		_, err = d.TryLock(ctx, &relaydriver.LockParams{Name: "x", Owner: "b", TTL: time.Hour, Now: t0.Add(time.Hour)})
		require.NoError(t, err, "expired: taken as before")
	}
}
