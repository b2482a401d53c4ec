package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
// and a function that drops the schema. Copied from internal/testdb: this is a
// separate module.
func freshSchema(ctx context.Context, base string, poolMaxConns int) (string, func() error, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, fmt.Errorf("parse --postgres %q: %w", base, err)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	schema := "peers_" + hex.EncodeToString(b[:])
	exec := func(sql string) error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), setupTimeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return fmt.Errorf("PostgreSQL at %s is not reachable: %w", u.Redacted(), err)
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec("CREATE SCHEMA " + schema); err != nil {
		return "", nil, fmt.Errorf("create schema %s: %w", schema, err)
	}
	drop := func() error {
		if err := exec("DROP SCHEMA " + schema + " CASCADE"); err != nil {
			return fmt.Errorf("drop schema %s: %w", schema, err)
		}
		return nil
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("pool_max_conns", strconv.Itoa(poolMaxConns))
	u.RawQuery = q.Encode()
	return u.String(), drop, nil
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
