package relaywork_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaywork"
)

var start = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)

// bundle is one test's database and store.
type bundle struct {
	ctx   context.Context
	url   string // the schema's URL: a new pool on it sees the same tables
	pool  *pgxpool.Pool
	clock *relayclock.Fake
	store *relaywork.Store
}

// setup migrates a fresh schema (engine and relay_work lines) and returns a
// store of queue "q" on it with a fake clock at start; cfg's Queue and Clock
// are filled in when empty.
func setup(t *testing.T, cfg relaywork.Config) *bundle {
	t.Helper()
	url := testdb.PGSchema(t)
	d := testdb.PGDriverAt(t, url)
	ctx := t.Context()
	_, err := relaymigrate.Up(ctx, d, relayclock.System{}, relaywork.MigrationLine())
	require.NoError(t, err)
	require.NoError(t, relaymigrate.Check(ctx, d, relaywork.MigrationLine()))
	clock := relayclock.NewFake(start)
	if cfg.Queue == "" {
		cfg.Queue = "q"
	}
	if cfg.Clock == nil {
		cfg.Clock = clock
	}
	s, err := relaywork.New(d.Pool(), cfg)
	require.NoError(t, err)
	return &bundle{ctx: ctx, url: url, pool: d.Pool(), clock: clock, store: s}
}

// inTx runs fn in a transaction of pool and commits it, returning fn's error
// (the transaction is rolled back then).
func inTx(ctx context.Context, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (b *bundle) bump(t *testing.T, keys ...string) {
	t.Helper()
	require.NoError(t, inTx(b.ctx, b.pool, func(tx pgx.Tx) error { return b.store.Bump(b.ctx, tx, keys) }))
}

func (b *bundle) row(t *testing.T, key string) relaywork.Row {
	t.Helper()
	r, err := b.store.Get(b.ctx, key)
	require.NoError(t, err)
	return r
}

// finish runs Lock + Done for c in one transaction.
func (b *bundle) finish(c relaywork.Claim, wakeAt time.Time) error {
	return inTx(b.ctx, b.pool, func(tx pgx.Tx) error {
		if err := b.store.Lock(b.ctx, tx, c); err != nil {
			return err
		}
		return b.store.Done(b.ctx, tx, c, wakeAt)
	})
}

func (b *bundle) claim(t *testing.T, owner string, n int) []relaywork.Claim {
	t.Helper()
	cs, err := b.store.Claim(b.ctx, owner, n)
	require.NoError(t, err)
	return cs
}

func keysOf(cs []relaywork.Claim) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Key
	}
	return out
}
