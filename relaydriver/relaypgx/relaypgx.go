package relaypgx

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relaydriver"
)

//go:embed migration
var migrationFS embed.FS

// closeTimeout bounds releasing each held lock in Close.
const closeTimeout = 5 * time.Second

// Name is the dialect name the driver reports ("postgres").
const Name = "postgres"

// Driver is the PostgreSQL implementation of relaydriver.Driver. It is safe for
// concurrent use.
type Driver struct {
	pool     *pgxpool.Pool
	ownsPool bool
	exec     *executor
	migrator *migrator

	mu     sync.Mutex
	locks  map[*advisoryLock]struct{}
	closed bool
}

var _ relaydriver.Driver = (*Driver)(nil)

// New returns a driver on pool. The caller keeps ownership of pool: Close
// releases the driver's locks but does not close pool.
func New(pool *pgxpool.Pool) *Driver {
	d := &Driver{pool: pool, exec: &executor{db: pool}, locks: map[*advisoryLock]struct{}{}}
	d.migrator = &migrator{pool: pool}
	return d
}

// PoolMaxConnsDefault is the pool size Open uses when the connection string
// does not set pool_max_conns: enough for the default Workers (4) plus the
// claim, lease renewal, listener, dispatcher and lock connections of one
// process, with room for a second engine.
const PoolMaxConnsDefault = 16

// Open connects a new pool to url (a pgx connection string, e.g.
// "postgres://user@host:5432/db?sslmode=disable&search_path=myschema"), pings
// it, and returns a driver that owns the pool: Close closes it. ctx governs the
// connection attempt only.
//
// Unless url sets pool_max_conns, the pool holds up to PoolMaxConnsDefault
// connections (pgx's own default, max(4, CPUs), is too small for an engine:
// every worker's transaction, the claim, the lease renewal, the listener and
// the instance locks each need one at once, and a renewal that waits for a
// connection lets leases expire).
//
// Errors never show a password of url: pgx's own parse and connect errors
// may quote the connection string, so their text is scrubbed (dsn.Scrub;
// errors.As still reaches pgx's error, whose own text must not be printed).
func Open(ctx context.Context, url string) (*Driver, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("relaypgx: parse connection string %s: %w", dsn.Redact(url), dsn.Scrub(err, url))
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, PoolMaxConnsDefault)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, dsn.Scrub(mapErr("open pool", err), url)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, dsn.Scrub(mapErr(fmt.Sprintf("connect to %s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port), err), url)
	}
	d := New(pool)
	d.ownsPool = true
	return d, nil
}

// Pool returns the driver's connection pool, for apps that need pgx directly.
func (d *Driver) Pool() *pgxpool.Pool { return d.pool }

// Name returns "postgres".
func (d *Driver) Name() string { return Name }

// GetExecutor returns an executor that runs each call in its own implicit
// transaction.
func (d *Driver) GetExecutor() relaydriver.Executor { return d.exec }

// Begin starts a transaction; the returned ExecutorTx's Unwrap gives the pgx.Tx.
func (d *Driver) Begin(ctx context.Context) (relaydriver.ExecutorTx, error) {
	tx, err := d.pool.Begin(ctx)
	if err != nil {
		return nil, mapErr("begin", err)
	}
	return &txExecutor{executor: executor{db: tx, inTx: true}, tx: tx}, nil
}

// SupportsSkipLocked reports true: claims use FOR UPDATE SKIP LOCKED.
func (d *Driver) SupportsSkipLocked() bool { return true }

// SupportsListenNotify reports true: PostgreSQL has LISTEN/NOTIFY.
func (d *Driver) SupportsListenNotify() bool { return true }

// MigrationFS returns the embedded engine migrations, rooted so that
// "engine/001_engine.up.sql" resolves.
func (d *Driver) MigrationFS() fs.FS {
	sub, err := fs.Sub(migrationFS, "migration")
	if err != nil {
		panic(err) // the embedded directory exists at compile time
	}
	return sub
}

// Migrator returns the migration bookkeeping, kept in relay_migration.
func (d *Driver) Migrator() relaydriver.Migrator { return d.migrator }

// Close releases every lock the driver still holds and, when the driver opened
// its pool (Open), closes the pool. Safe to call more than once.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	locks := make([]*advisoryLock, 0, len(d.locks))
	for l := range d.locks {
		locks = append(locks, l)
	}
	d.mu.Unlock()
	var errs []error
	for _, l := range locks {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		errs = append(errs, l.Release(ctx))
		cancel()
	}
	if d.ownsPool {
		d.pool.Close()
	}
	return errors.Join(errs...)
}

// dbtx is what the pool and a pgx.Tx have in common.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// txExecutor is an executor bound to one transaction.
type txExecutor struct {
	executor
	tx pgx.Tx
}

var _ relaydriver.ExecutorTx = (*txExecutor)(nil)

func (t *txExecutor) savepointExec(ctx context.Context, op, query, name string) error {
	sql, err := withIdent(query, name)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(ctx, sql)
	return mapErr(op+" "+name, err)
}

// Savepoint opens savepoint name (an identifier).
func (t *txExecutor) Savepoint(ctx context.Context, name string) error {
	return t.savepointExec(ctx, "savepoint", qSavepoint, name)
}

// RollbackTo undoes the work since savepoint name.
func (t *txExecutor) RollbackTo(ctx context.Context, name string) error {
	return t.savepointExec(ctx, "rollback to savepoint", qRollbackToSavepoint, name)
}

// ReleaseSavepoint forgets savepoint name, keeping its work.
func (t *txExecutor) ReleaseSavepoint(ctx context.Context, name string) error {
	return t.savepointExec(ctx, "release savepoint", qReleaseSavepoint, name)
}

// Commit commits the transaction.
func (t *txExecutor) Commit(ctx context.Context) error {
	return mapErr("commit", t.tx.Commit(ctx))
}

// Rollback rolls the transaction back; after Commit or Rollback it is a no-op,
// so it can be deferred.
func (t *txExecutor) Rollback(ctx context.Context) error {
	err := t.tx.Rollback(ctx)
	if errors.Is(err, pgx.ErrTxClosed) {
		return nil
	}
	return mapErr("rollback", err)
}

// Unwrap returns the pgx.Tx.
func (t *txExecutor) Unwrap() any { return t.tx }

// WrapTx returns tx — a transaction the caller began on this driver's
// database (Pool().Begin) — as the engine's transaction type, so the engine's
// writes join the caller's own: relay's EnqueueTx, AppendEventsTx and
// UpsertLatestTx accept the result, and commit or roll back with tx. The
// caller still owns tx and ends it; the result is valid while tx is. It takes
// a pgx.Tx, so passing anything else does not compile.
func (d *Driver) WrapTx(tx pgx.Tx) relaydriver.ExecutorTx {
	return &txExecutor{executor: executor{db: tx, inTx: true}, tx: tx}
}

// ErrNotPgx is wrapped by PgxTx's error when the transaction is not one of
// this driver's.
var ErrNotPgx = errors.New("relaypgx: the transaction is not a PostgreSQL (pgx) transaction")

// PgxTx returns the pgx.Tx behind tx: a relay handler's Tx, a transaction
// from Driver.Begin or one made by WrapTx. A handler uses it for dialect
// features (batches, COPY, typed scans) inside the engine's transaction; it
// must not commit or roll it back. A transaction of another driver yields an
// error wrapping ErrNotPgx.
func PgxTx(tx interface{ Unwrap() any }) (pgx.Tx, error) {
	if tx == nil {
		return nil, fmt.Errorf("%w: nil", ErrNotPgx)
	}
	ptx, ok := tx.Unwrap().(pgx.Tx)
	if !ok {
		return nil, fmt.Errorf("%w: %T", ErrNotPgx, tx.Unwrap())
	}
	return ptx, nil
}
