// Package pgmaint stands in for PostgreSQL's autovacuum in benchmarks and
// load runs on a server that runs without it (this project's CI machines
// turn it off). Without ANALYZE a table's statistics stay those of the
// empty table the migration made, and a prepared statement's generic plan,
// made while the table was small, is never re-planned: queries that probe
// by key in production scan whole tables. Loop applies autovacuum's own
// rules to the connection's schema: a table is analyzed once the rows
// changed since its last ANALYZE pass 50 + 10 % of its rows, and vacuumed
// once its dead rows pass 50 + 20 % (the server defaults of
// autovacuum_analyze_threshold/scale_factor and
// autovacuum_vacuum_threshold/scale_factor).
package pgmaint

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay/relaytype"
)

// AutovacuumOn reports the server's autovacuum setting.
func AutovacuumOn(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	var v string
	if err := pool.QueryRow(ctx, "SHOW autovacuum").Scan(&v); err != nil {
		return false, fmt.Errorf("pgmaint: show autovacuum: %w", err)
	}
	return v == "on", nil
}

// Once runs VACUUM (ANALYZE) over every table of the pool's current schema.
func Once(ctx context.Context, pool *pgxpool.Pool) error {
	rows, err := pool.Query(ctx, "SELECT quote_ident(tablename) FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1")
	if err != nil {
		return fmt.Errorf("pgmaint: list tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("pgmaint: list tables: %w", err)
	}
	if len(tables) == 0 {
		return nil
	}
	if _, err := pool.Exec(ctx, "VACUUM (ANALYZE) "+strings.Join(tables, ", ")); err != nil {
		return fmt.Errorf("pgmaint: vacuum: %w", err)
	}
	return nil
}

// Due runs what autovacuum would run now on the tables of the pool's
// current schema (see the package documentation) and returns how many
// tables it analyzed and vacuumed.
func Due(ctx context.Context, pool *pgxpool.Pool) (analyzed, vacuumed int, err error) {
	rows, err := pool.Query(ctx, `SELECT quote_ident(s.relname),
		       s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0),
		       s.n_dead_tup > 50 + 0.2 * greatest(c.reltuples, 0)
		FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
		WHERE s.schemaname = current_schema() ORDER BY 1`)
	if err != nil {
		return 0, 0, fmt.Errorf("pgmaint: table statistics: %w", err)
	}
	type due struct {
		table           string
		analyze, vacuum bool
	}
	ds, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (due, error) {
		var d due
		return d, r.Scan(&d.table, &d.analyze, &d.vacuum)
	})
	if err != nil {
		return 0, 0, fmt.Errorf("pgmaint: table statistics: %w", err)
	}
	for _, d := range ds {
		var stmt string
		switch {
		case d.vacuum:
			stmt, vacuumed, analyzed = "VACUUM (ANALYZE) "+d.table, vacuumed+1, analyzed+1
		case d.analyze:
			stmt, analyzed = "ANALYZE "+d.table, analyzed+1
		default:
			continue
		}
		if _, err := pool.Exec(ctx, stmt); err != nil {
			return analyzed, vacuumed, fmt.Errorf("pgmaint: %s: %w", stmt, err)
		}
	}
	return analyzed, vacuumed, nil
}

// Loop runs Due every interval until ctx ends, as autovacuum's launcher
// does every naptime. A failed round is passed to onErr (nil: ignored) and
// the next round runs as planned.
func Loop(ctx context.Context, pool *pgxpool.Pool, every time.Duration, clock relaytype.Clock, onErr func(error)) {
	loop(ctx, every, clock, onErr, func() error {
		_, _, err := Due(ctx, pool)
		return err
	})
}

// LoopAll runs Once (every table, whether due or not) every interval until
// ctx ends.
func LoopAll(ctx context.Context, pool *pgxpool.Pool, every time.Duration, clock relaytype.Clock, onErr func(error)) {
	loop(ctx, every, clock, onErr, func() error { return Once(ctx, pool) })
}

func loop(ctx context.Context, every time.Duration, clock relaytype.Clock, onErr func(error), round func() error) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-clock.After(every):
		}
		if err := round(); err != nil && ctx.Err() == nil && onErr != nil {
			onErr(err)
		}
	}
}
