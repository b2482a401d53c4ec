package relaysqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// stmtCache holds the prepared statements of one *sql.DB, one per query name,
// prepared on first use. Parsing a statement costs about as much as running
// it in SQLite, and the pump runs the same few statements over and over, so
// each is prepared once per connection (database/sql keeps the per-connection
// copies) and reused; a transaction rebinds it with Tx.StmtContext, which
// reuses the copy already prepared on the writer's one connection. SQLite
// re-prepares a statement by itself when a migration changes the schema.
type stmtCache struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func newStmtCache(db *sql.DB) *stmtCache {
	return &stmtCache{db: db, m: make(map[string]*sql.Stmt)}
}

// get returns the prepared statement of query name, preparing it on c.db on
// a miss (which takes a connection of c.db: never call it while holding the
// writer's one connection in a transaction; see lookup).
func (c *stmtCache) get(ctx context.Context, name string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.m[name]; ok {
		return s, nil
	}
	s, err := c.db.PrepareContext(ctx, query(name))
	if err != nil {
		return nil, err
	}
	c.m[name] = s
	return s, nil
}

// lookup returns the cached statement of query name, if any, without
// preparing.
func (c *stmtCache) lookup(name string) (*sql.Stmt, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[name]
	return s, ok
}

// warm prepares every cacheable query whose tables exist, so that
// transactions, which cannot prepare on the writer's pool (its one connection
// is theirs), find their statements cached. Queries that do not compile yet
// (no schema) are left for later; warm is called again after each migration.
func (c *stmtCache) warm(ctx context.Context) {
	for _, name := range cachedQueryNames {
		_, _ = c.get(ctx, name) // a failure only means "not prepared yet"
	}
}

// close closes every cached statement.
func (c *stmtCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for name, s := range c.m {
		errs = append(errs, s.Close())
		delete(c.m, name)
	}
	return errors.Join(errs...)
}

// runner runs named queries through a stmtCache, inside tx when set.
type runner struct {
	c  *stmtCache
	tx *sql.Tx
}

// stmt returns the prepared statement of query name for this runner, or nil
// when a transaction finds it not yet prepared (it then runs the SQL text).
func (r runner) stmt(ctx context.Context, name string) (*sql.Stmt, error) {
	if r.tx != nil {
		s, ok := r.c.lookup(name)
		if !ok {
			return nil, nil
		}
		// Reuses the copy prepared on the tx's connection; closed by
		// database/sql when the transaction ends.
		return r.tx.StmtContext(ctx, s), nil
	}
	return r.c.get(ctx, name)
}

func (r runner) exec(ctx context.Context, name string, args ...any) (sql.Result, error) {
	s, err := r.stmt(ctx, name)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return r.tx.ExecContext(ctx, query(name), args...)
	}
	return s.ExecContext(ctx, args...)
}

// affected runs exec and returns the number of rows it changed.
func (r runner) affected(ctx context.Context, name string, args ...any) (int64, error) {
	res, err := r.exec(ctx, name, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (r runner) query(ctx context.Context, name string, args ...any) (*sql.Rows, error) {
	s, err := r.stmt(ctx, name)
	if err != nil {
		return nil, err
	}
	if s == nil {
		return r.tx.QueryContext(ctx, query(name), args...)
	}
	return s.QueryContext(ctx, args...)
}

// queryRow runs a named single-row query; Scan reports sql.ErrNoRows when
// there is no row.
func (r runner) queryRow(ctx context.Context, name string, args ...any) rowResult {
	s, err := r.stmt(ctx, name)
	if err != nil {
		return rowResult{err: err}
	}
	if s == nil {
		return rowResult{row: r.tx.QueryRowContext(ctx, query(name), args...)}
	}
	return rowResult{row: s.QueryRowContext(ctx, args...)}
}

// rowResult is a *sql.Row or the error that prevented running it.
type rowResult struct {
	row *sql.Row
	err error
}

// Scan scans the row or returns the earlier error.
func (r rowResult) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return r.row.Scan(dest...)
}
