package relaypgx

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// TryLock takes the session advisory lock named params.Name on a dedicated
// connection taken out of the pool (seed 000 §4.5 PRE-5). The connection stays
// open while the lock is held; when the process dies the connection closes and
// PostgreSQL frees the lock. The lock key is hashtextextended of the current
// schema and the name, so deployments in different schemas of one database do
// not exclude each other. TTL and Now are not used. It returns
// relaytype.ErrLocked at once when another session holds the lock; ctx governs
// acquiring the connection and the lock query.
func (d *Driver) TryLock(ctx context.Context, params *relaydriver.LockParams) (relaydriver.Lock, error) {
	op := fmt.Sprintf("lock %q", params.Name)
	if params.Name == "" {
		return nil, fmt.Errorf("relaypgx: %s: empty lock name", op)
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("relaypgx: %s: driver is closed", op)
	}
	pc, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, mapErr(op, err)
	}
	var (
		key    int64
		locked bool
	)
	if err := pc.QueryRow(ctx, queries[qLockTry], params.Name).Scan(&key, &locked); err != nil {
		pc.Release()
		return nil, mapErr(op, err)
	}
	if !locked {
		pc.Release() // this session holds nothing; the connection can go back
		return nil, fmt.Errorf("relaypgx: %s: %w", op, relaytype.ErrLocked)
	}
	// The lock lives as long as this session: take the connection out of the
	// pool so that it is neither reused nor waited for by pool.Close.
	l := &advisoryLock{d: d, conn: pc.Hijack(), key: key, name: params.Name}
	d.mu.Lock()
	d.locks[l] = struct{}{}
	d.mu.Unlock()
	return l, nil
}

// advisoryLock is a held session advisory lock and its connection.
type advisoryLock struct {
	d    *Driver
	name string
	key  int64

	mu   sync.Mutex
	conn *pgx.Conn // nil once released
}

var _ relaydriver.Lock = (*advisoryLock)(nil)

// Renew checks that the connection is alive and that its session still holds
// the lock (pg_locks). now is unused: the lock has no lease.
func (l *advisoryLock) Renew(ctx context.Context, _ time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return fmt.Errorf("relaypgx: renew lock %q: released: %w", l.name, relaytype.ErrLocked)
	}
	var held bool
	if err := l.conn.QueryRow(ctx, queries[qLockHeld], l.key).Scan(&held); err != nil {
		// A broken session has lost its locks; whatever the cause, the holder
		// can no longer prove it holds the lock.
		return fmt.Errorf("relaypgx: renew lock %q: %w: %w", l.name, relaytype.ErrLocked, err)
	}
	if !held {
		return fmt.Errorf("relaypgx: renew lock %q: no longer held: %w", l.name, relaytype.ErrLocked)
	}
	return nil
}

// Release unlocks explicitly (so another session can take the lock at once,
// without waiting for the server to notice the disconnect) and closes the
// connection. Releasing a lock that was already lost is not an error. Safe to
// call more than once.
func (l *advisoryLock) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return nil
	}
	conn := l.conn
	l.conn = nil
	l.d.mu.Lock()
	delete(l.d.locks, l)
	l.d.mu.Unlock()
	if !conn.IsClosed() {
		// An unlock that fails (lost session, cancelled ctx) needs no retry:
		// closing the session below frees the lock as well.
		var unlocked bool
		_ = conn.QueryRow(ctx, queries[qLockRelease], l.key).Scan(&unlocked)
	}
	return mapErr(fmt.Sprintf("release lock %q: close connection", l.name), conn.Close(ctx))
}
