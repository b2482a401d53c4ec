package tenancy

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay/internal/app/sms/rules"
	"github.com/relayhq/relay/relaytype"
)

// Cache hands out the rules snapshot and reads the rules again only when
// they changed: every statement that writes a rules table bumps
// sms_rules_version in its own transaction (migration 004), so a snapshot
// read at version v is the rules as committed for as long as the version
// is still v. Get costs one primary-key read while nothing changed, where
// Load costs a transaction of thirteen queries. Safe for concurrent use;
// the snapshots it returns are shared and must not be changed.
type Cache struct {
	pool  *pgxpool.Pool
	clock relaytype.Clock

	mu      sync.Mutex
	snap    *rules.Snapshot
	version int64
	loads   int64
}

// NewCache returns an empty cache on pool; the first Get loads.
func NewCache(pool *pgxpool.Pool, clock relaytype.Clock) *Cache {
	return &Cache{pool: pool, clock: clock}
}

// Get returns a snapshot of the rules as committed when Get began (or
// later): the cached one when the version is unchanged, else a new one.
func (c *Cache) Get(ctx context.Context) (*rules.Snapshot, error) {
	var v int64
	if err := c.pool.QueryRow(ctx, stmts["RulesVersion"]).Scan(&v); err != nil {
		return nil, fmt.Errorf("tenancy: rules version: %w", err)
	}
	c.mu.Lock()
	if c.snap != nil && c.version == v {
		s := c.snap
		c.mu.Unlock()
		return s, nil
	}
	c.mu.Unlock()

	snap, read, err := c.load(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loads++
	if c.snap == nil || read >= c.version {
		c.snap, c.version = snap, read
	}
	return snap, nil
}

// Loads is how many times the cache read the rules (for tests and metrics).
func (c *Cache) Loads() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loads
}

// load reads the version and the rules in one repeatable-read transaction,
// so the snapshot is exactly the rules at that version.
func (c *Cache) load(ctx context.Context) (*rules.Snapshot, int64, error) {
	tx, err := c.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, 0, fmt.Errorf("tenancy: load: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var v int64
	if err := tx.QueryRow(ctx, stmts["RulesVersion"]).Scan(&v); err != nil {
		return nil, 0, fmt.Errorf("tenancy: rules version: %w", err)
	}
	s, err := LoadTx(ctx, tx, c.clock.Now())
	if err != nil {
		return nil, 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, 0, fmt.Errorf("tenancy: load: commit: %w", err)
	}
	return s, v, nil
}
