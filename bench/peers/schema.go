package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// setupTimeout bounds connecting, creating and dropping a round's schema.
const setupTimeout = 15 * time.Second

// freshSchema creates a schema peers_<random> on the server of base and returns
// a URL whose search_path selects only that schema (pgx sends it at connect, so
// every pooled connection sees the round's own tables) with pool_max_conns set,
// the schema's name, and a function that drops the schema. Copied from
// internal/testdb: this is a separate module.
func freshSchema(ctx context.Context, base string, poolMaxConns int) (dsn, schema string, drop func() error, err error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", "", nil, fmt.Errorf("parse --postgres %q: %w", base, err)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", nil, err
	}
	schema = "peers_" + hex.EncodeToString(b[:])
	if err := execSQL(ctx, base, "CREATE SCHEMA "+schema); err != nil {
		return "", "", nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	drop = func() error {
		if err := execSQL(ctx, base, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", schema, err)
		}
		return nil
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("pool_max_conns", strconv.Itoa(poolMaxConns))
	u.RawQuery = q.Encode()
	return u.String(), schema, drop, nil
}

// freshPool opens a pool of poolMaxConns on a fresh schema (freshSchema) and
// runs stmts there; close closes the pool and drops the schema.
func freshPool(ctx context.Context, base string, poolMaxConns int, stmts ...string) (_ *pgxpool.Pool, close func() error, err error) {
	dsn, _, drop, err := freshSchema(ctx, base, poolMaxConns)
	if err != nil {
		return nil, nil, err
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, nil, errors.Join(err, drop())
	}
	close = func() error { pool.Close(); return drop() }
	for _, q := range stmts {
		if _, err := pool.Exec(ctx, q); err != nil {
			return nil, nil, errors.Join(err, close())
		}
	}
	return pool, close, nil
}

// execSQL runs one statement on a connection of its own to base, bounded by
// setupTimeout even when ctx is already cancelled (cleanup must still run).
func execSQL(ctx context.Context, base, sql string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), setupTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		u, _ := url.Parse(base)
		return fmt.Errorf("PostgreSQL at %s is not reachable: %w", u.Redacted(), err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// The effect table: one row per job/message, written by the handler/worker.
// The primary key makes a second execution bump n instead of adding a row, so
// the check below sees both losses (missing rows) and duplicates (n > 1).
const (
	effectDDL    = `CREATE TABLE peers_effect (seq bigint PRIMARY KEY, n int NOT NULL)`
	effectInsert = `INSERT INTO peers_effect (seq, n) VALUES ($1, 1)
ON CONFLICT (seq) DO UPDATE SET n = peers_effect.n + 1`
	effectCheck = `SELECT count(*), COALESCE(sum(n), 0), COALESCE(max(n), 0),
COALESCE(min(seq), 0), COALESCE(max(seq), 0) FROM peers_effect`
)

// Per-key order (scenario burn-down, per key): message seq has key
// (seq-1) % keys, so a key's messages are seq k+1, k+1+keys, k+1+2·keys, …
// peers_key holds the last seq applied per key. The handler advances it only
// from the key's previous seq (seq-keys, or 0 for the key's first message) and
// writes its effect in the same statement, so an effect exists only if the
// message was applied right after its predecessor in commit order; a message
// applied out of order writes nothing and the handler makes it DEAD.
const (
	keyDDL      = `CREATE TABLE peers_key (k int PRIMARY KEY, last bigint NOT NULL)`
	keyFill     = `INSERT INTO peers_key (k, last) SELECT g, 0 FROM generate_series(0, $1::int - 1) g`
	orderedStep = `WITH up AS (UPDATE peers_key SET last = $1 WHERE k = $2 AND last = $3 RETURNING k)
INSERT INTO peers_effect (seq, n) SELECT $1, 1 FROM up
ON CONFLICT (seq) DO UPDATE SET n = peers_effect.n + 1`
	// keyCheck counts keys whose last applied seq is not the key's last seq.
	keyCheck = `SELECT count(*) FROM peers_key
WHERE last <> k + 1 + (($2::bigint - 1 - k) / $1::bigint) * $1::bigint`
)

// keyOf is the key of message seq among keys keys, and prevOf the seq the key
// must have applied just before seq (0: none).
func keyOf(seq int64, keys int) int64  { return (seq - 1) % int64(keys) }
func prevOf(seq int64, keys int) int64 { return max(seq-int64(keys), 0) }

// checkEffects verifies that seq 1..n each have exactly one effect.
func checkEffects(ctx context.Context, pool *pgxpool.Pool, n int) error {
	var rows, sum, maxN, lo, hi int64
	if err := pool.QueryRow(ctx, effectCheck).Scan(&rows, &sum, &maxN, &lo, &hi); err != nil {
		return fmt.Errorf("read effects: %w", err)
	}
	if rows != int64(n) || sum != int64(n) || (n > 0 && (maxN != 1 || lo != 1 || hi != int64(n))) {
		return fmt.Errorf("effects: %d distinct jobs, %d executions, max %d per job, seq %d..%d; want %d each once (seq 1..%d)",
			rows, sum, maxN, lo, hi, n, n)
	}
	return nil
}

// checkKeys verifies that every key applied its messages in order up to its
// last one (n ≥ keys).
func checkKeys(ctx context.Context, pool *pgxpool.Pool, n, keys int) error {
	var bad int64
	if err := pool.QueryRow(ctx, keyCheck, keys, n).Scan(&bad); err != nil {
		return fmt.Errorf("read per-key order: %w", err)
	}
	if bad != 0 {
		return fmt.Errorf("per-key order: %d of %d keys did not end on their last message", bad, keys)
	}
	return nil
}
