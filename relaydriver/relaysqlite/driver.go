package relaysqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// DriverName is the dialect name Driver.Name returns.
const DriverName = "sqlite"

// BusyTimeoutDefault is how long a connection waits for a lock held by another
// connection (of this or another process) before failing with SQLITE_BUSY,
// which maps to relaytype.ErrTransient. Inside one process the single writer
// means writers queue in database/sql instead and never see SQLITE_BUSY.
const BusyTimeoutDefault = 10 * time.Second

// ReadConnsDefault is the size of the read pool.
const ReadConnsDefault = 4

//go:embed migration
var migrationFS embed.FS

// Driver is the SQLite store. Create it with Open; it is safe for concurrent
// use. See the package doc for the one-writer rule.
type Driver struct {
	path   string
	write  *sql.DB // one connection, BEGIN IMMEDIATE
	read   *sql.DB // query-only pool
	wstmts *stmtCache
	rstmts *stmtCache
	exec   *executor
}

var _ relaydriver.Driver = (*Driver)(nil)

// Open opens (creating if needed) the SQLite database file at path and
// configures it for relay:
//
//   - journal_mode=WAL, so readers proceed while the writer writes and a
//     crash of the process (kill -9) loses no committed transaction;
//   - synchronous=NORMAL: in WAL mode a commit appends to the WAL without an
//     fsync and the WAL is synced at checkpoints. This is still safe against
//     process crashes — the only failure that can lose the last commits is a
//     power loss or OS crash, and even then the database stays consistent.
//     FULL would fsync on every commit, multiplying the cost of the many
//     small transactions the pump runs (one per message);
//   - busy_timeout=BusyTimeoutDefault and foreign_keys=ON;
//   - one writer connection whose transactions begin IMMEDIATE, plus a
//     query-only read pool of ReadConnsDefault connections.
//
// path must name a file (tests use t.TempDir()); ":memory:" and paths
// carrying a '?' query are refused, because an in-memory database is private
// to one connection and could not be shared by the writer and the readers.
// ctx governs only the connection checks of Open. The schema is not
// migrated: run relaymigrate.Up with relaymigrate.EngineLineOf(d).
func Open(ctx context.Context, path string) (*Driver, error) {
	if path == "" || strings.Contains(path, ":memory:") || strings.HasPrefix(path, "file:") || strings.Contains(path, "?") {
		return nil, fmt.Errorf("relaysqlite: open %q: need a plain file path (no :memory:, file: URI or ?query)", path)
	}
	busy := strconv.FormatInt(BusyTimeoutDefault.Milliseconds(), 10)

	wq := url.Values{}
	wq.Set("_busy_timeout", busy)
	wq.Set("_foreign_keys", "on")
	wq.Set("_journal_mode", "WAL")
	wq.Set("_synchronous", "NORMAL")
	wq.Set("_txlock", "immediate")
	write, err := sql.Open(DriverName, path+"?"+wq.Encode())
	if err != nil {
		return nil, fmt.Errorf("relaysqlite: open writer %q: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)

	var mode string
	if err := write.QueryRowContext(ctx, query(qPragmaJournalMode)).Scan(&mode); err != nil {
		return nil, errors.Join(fmt.Errorf("relaysqlite: open writer %q: %w", path, err), write.Close())
	}
	if !strings.EqualFold(mode, "wal") {
		return nil, errors.Join(fmt.Errorf("relaysqlite: open %q: journal_mode is %q, want wal", path, mode), write.Close())
	}

	rq := url.Values{}
	rq.Set("_busy_timeout", busy)
	rq.Set("_foreign_keys", "on")
	rq.Set("_query_only", "on")
	read, err := sql.Open(DriverName, path+"?"+rq.Encode())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("relaysqlite: open readers %q: %w", path, err), write.Close())
	}
	read.SetMaxOpenConns(ReadConnsDefault)
	read.SetMaxIdleConns(ReadConnsDefault)
	if err := read.PingContext(ctx); err != nil {
		return nil, errors.Join(fmt.Errorf("relaysqlite: open readers %q: %w", path, err), read.Close(), write.Close())
	}

	d := &Driver{path: path, write: write, read: read, wstmts: newStmtCache(write), rstmts: newStmtCache(read)}
	d.warm(ctx)
	d.exec = &executor{d: d}
	return d, nil
}

// warm prepares the statements the schema already supports (see stmtCache).
func (d *Driver) warm(ctx context.Context) {
	d.wstmts.warm(ctx)
	d.rstmts.warm(ctx)
}

// Name returns "sqlite".
func (d *Driver) Name() string { return DriverName }

// Path returns the database file path given to Open.
func (d *Driver) Path() string { return d.path }

// GetExecutor returns the autocommit executor. Its pure reads (MessageGet,
// MessageListUnfinished, MessageStats, MessageExists, CursorGet, HoleList,
// raw Query/QueryRow) run on the read pool and see the last committed state;
// its writes and raw Exec run on the single writer, each in its own
// transaction. A goroutine that holds a transaction from Begin must not write
// through GetExecutor: the write would wait for the writer connection that
// goroutine already holds, until its ctx ends (a self-deadlock without a
// deadline). Write through the ExecutorTx instead.
func (d *Driver) GetExecutor() relaydriver.Executor { return d.exec }

// Begin starts a transaction on the single writer with BEGIN IMMEDIATE, so the
// write lock is held from the start and the transaction cannot fail later
// with SQLITE_BUSY. It waits while another transaction is open (ctx bounds the
// wait). The caller must Commit or Rollback promptly: every other writer waits
// for it. ctx also governs the transaction: when it ends before Commit, the
// transaction is rolled back (database/sql semantics).
func (d *Driver) Begin(ctx context.Context) (relaydriver.ExecutorTx, error) {
	tx, err := d.write.BeginTx(ctx, nil)
	if err != nil {
		return nil, mapErr("begin", err)
	}
	return &txExecutor{executor: executor{d: d, tx: tx}}, nil
}

// SupportsSkipLocked reports false: SQLite has no row locks; the single writer
// serialises claims.
func (d *Driver) SupportsSkipLocked() bool { return false }

// SupportsListenNotify reports false: SQLite cannot wake listeners on commit.
func (d *Driver) SupportsListenNotify() bool { return false }

// MigrationFS returns the embedded engine migrations, laid out as
// engine/NNN_name.up.sql.
func (d *Driver) MigrationFS() fs.FS { return MigrationFS() }

// MigrationFS returns the embedded engine migrations (engine/NNN_name.up.sql)
// without an open Driver, for tools that list versions.
func MigrationFS() fs.FS {
	sub, err := fs.Sub(migrationFS, "migration")
	if err != nil { // cannot happen: the directory is embedded
		panic(err)
	}
	return sub
}

// Migrator returns the migration bookkeeping (table relay_migration).
func (d *Driver) Migrator() relaydriver.Migrator { return migrator{d: d} }

// Close closes the read pool and the writer. Transactions still open are
// rolled back by SQLite.
func (d *Driver) Close() error {
	return errors.Join(d.rstmts.close(), d.wstmts.close(), d.read.Close(), d.write.Close())
}

// migrator implements relaydriver.Migrator.
type migrator struct{ d *Driver }

// AppliedVersions reads relay_migration on the read pool; a database that has
// never been migrated (no table yet) has no versions.
func (m migrator) AppliedVersions(ctx context.Context, line string) ([]int, error) {
	var n int
	if err := m.d.read.QueryRowContext(ctx, query(qMigrationTableExists)).Scan(&n); err != nil {
		return nil, mapErr("migration versions", err)
	}
	if n == 0 {
		return nil, nil
	}
	rows, err := m.d.read.QueryContext(ctx, query(qMigrationVersions), line)
	if err != nil {
		return nil, mapErr("migration versions", err)
	}
	out, err := collect(rows, func(s scanner) (v int, err error) {
		err = s.Scan(&v)
		return v, err
	})
	return out, mapErr("migration versions", err)
}

// Apply runs sql and records the version in one IMMEDIATE transaction (SQLite
// DDL is transactional, so a failing file leaves nothing behind). A version
// already recorded (by a concurrent migrator) is skipped.
func (m migrator) Apply(ctx context.Context, line string, version int, name, sqlText string, now time.Time) error {
	if now.IsZero() {
		return errors.New("relaysqlite: migration apply: now is required")
	}
	op := fmt.Sprintf("apply migration %s/%03d_%s", line, version, name)
	defer m.d.warm(ctx) // statements of the new tables, once the writer is free
	return m.d.exec.atomically(ctx, op, func(q runner) error {
		// DDL runs unprepared: a cached statement would outlive the schema it
		// was compiled against.
		if _, err := q.tx.ExecContext(ctx, query(qMigrationBootstrap)); err != nil {
			return err
		}
		// Under the single writer this check cannot race: a version another
		// migrator applied meanwhile is skipped, as in relaypgx.
		var n int
		if err := q.tx.QueryRowContext(ctx, query(qMigrationIsApplied), line, version).Scan(&n); err != nil {
			return err
		} else if n > 0 {
			return nil
		}

		if _, err := q.tx.ExecContext(ctx, sqlText); err != nil {
			return err
		}
		_, err := q.tx.ExecContext(ctx, query(qMigrationRecord), line, version, name, timeArg(now))
		return err
	})
}

// TryLock takes the lease row params.Name for params.Owner when it is absent,
// expired (expires_at <= Now), already held by the same Owner, or held by a
// process of this machine that no longer exists (see holder.go), setting its
// expiry to Now+TTL; otherwise it returns relaytype.ErrLocked at once. Name,
// Owner, a positive TTL and Now are required.
func (d *Driver) TryLock(ctx context.Context, params *relaydriver.LockParams) (relaydriver.Lock, error) {
	if params == nil || params.Name == "" || params.Owner == "" {
		return nil, errors.New("relaysqlite: trylock: Name and Owner are required")
	}
	if params.TTL <= 0 || params.Now.IsZero() {
		return nil, fmt.Errorf("relaysqlite: trylock %q: a positive TTL and Now are required (SQLite locks are leases)", params.Name)
	}
	holder, pid := holderID(), os.Getpid()
	expires := timeArg(params.Now.Add(params.TTL))
	res, err := d.write.ExecContext(ctx, query(qLockAcquire), params.Name, params.Owner,
		expires, timeArg(params.Now), holder, pid)
	if err != nil {
		return nil, mapErr("trylock "+params.Name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return nil, mapErr("trylock "+params.Name, err)
	}
	if n == 0 {
		if n, err = d.takeOverDead(ctx, params, expires, holder, pid); err != nil {
			return nil, mapErr("trylock "+params.Name, err)
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("relaysqlite: trylock %q: %w", params.Name, relaytype.ErrLocked)
	}
	return &lease{d: d, name: params.Name, owner: params.Owner, ttl: params.TTL}, nil
}

// takeOverDead takes the held lock row params.Name when its holder is a
// process of this machine and PID namespace that no longer exists (see
// holder.go), and returns 1 if it did. The row changes hands only if it still
// names the dead process.
func (d *Driver) takeOverDead(ctx context.Context, params *relaydriver.LockParams, expires any, holder string, pid int) (int64, error) {
	if holder == "" {
		return 0, nil
	}
	var (
		owner, rowHolder string
		rowPID           int
	)
	err := d.write.QueryRowContext(ctx, query(qLockHolder), params.Name).Scan(&owner, &rowHolder, &rowPID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil // released meanwhile: the caller's next try takes it
	}
	if err != nil {
		return 0, err
	}
	if rowHolder != holder || rowPID == pid || !processGone(rowPID) {
		return 0, nil
	}
	res, err := d.write.ExecContext(ctx, query(qLockTakeOver), params.Name, params.Owner, expires,
		holder, pid, owner, rowPID)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// lease is a held relay_lock row.
type lease struct {
	d     *Driver
	name  string
	owner string
	ttl   time.Duration
}

// Renew extends the lease to now+TTL while the row is still ours; otherwise
// (released, or expired and taken by another owner) it returns ErrLocked.
func (l *lease) Renew(ctx context.Context, now time.Time) error {
	if now.IsZero() {
		return fmt.Errorf("relaysqlite: renew lock %q: now is required", l.name)
	}
	res, err := l.d.write.ExecContext(ctx, query(qLockRenew), l.name, l.owner, timeArg(now.Add(l.ttl)))
	if err != nil {
		return mapErr("renew lock "+l.name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return mapErr("renew lock "+l.name, err)
	} else if n == 0 {
		return fmt.Errorf("relaysqlite: renew lock %q: %w", l.name, relaytype.ErrLocked)
	}
	return nil
}

// Release deletes the row if it is still ours. Safe to call more than once.
func (l *lease) Release(ctx context.Context) error {
	_, err := l.d.write.ExecContext(ctx, query(qLockRelease), l.name, l.owner)
	return mapErr("release lock "+l.name, err)
}

// DB returns the driver's single writer connection pool. A caller that wants
// its own writes and the engine's in one transaction begins it here
// (DB().BeginTx) and passes WrapTx's result to relay; SQLite has one writer,
// so such a transaction blocks the engine's writes until it ends.
func (d *Driver) DB() *sql.DB { return d.write }

// ReadDB returns the driver's query-only read pool: readers see the last
// committed state and neither wait for the writer nor make it wait (WAL),
// so a long read belongs here rather than on DB().
func (d *Driver) ReadDB() *sql.DB { return d.read }

// WrapTx returns tx — a transaction the caller began on DB() — as the
// engine's transaction type, so the engine's writes join the caller's own:
// relay's EnqueueTx, AppendEventsTx and UpsertLatestTx accept the result,
// and commit or roll back with tx. The caller still owns tx and ends it. It
// takes a *sql.Tx, so passing anything else does not compile; a transaction
// of another database fails at its first statement.
func (d *Driver) WrapTx(tx *sql.Tx) relaydriver.ExecutorTx {
	return &txExecutor{executor: executor{d: d, tx: tx}}
}

// ErrNotSQLite is wrapped by SQLTx's error when the transaction is not one of
// this driver's.
var ErrNotSQLite = errors.New("relaysqlite: the transaction is not a SQLite (*sql.Tx) transaction")

// SQLTx returns the *sql.Tx behind tx: a relay handler's Tx, a transaction
// from Driver.Begin or one made by WrapTx. A handler must not commit or roll
// it back. A transaction of another driver yields an error wrapping
// ErrNotSQLite.
func SQLTx(tx interface{ Unwrap() any }) (*sql.Tx, error) {
	if tx == nil {
		return nil, fmt.Errorf("%w: nil", ErrNotSQLite)
	}
	stx, ok := tx.Unwrap().(*sql.Tx)
	if !ok {
		return nil, fmt.Errorf("%w: %T", ErrNotSQLite, tx.Unwrap())
	}
	return stx, nil
}
