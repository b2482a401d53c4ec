package relaypgx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay/relaydriver"
)

// migrator keeps the version table relay_migration(line, version, name,
// applied_at), created by the first Apply.
type migrator struct {
	pool *pgxpool.Pool
}

var _ relaydriver.Migrator = (*migrator)(nil)

// AppliedVersions returns the applied versions of line, ascending; none when
// the version table does not exist yet (a fresh store).
func (m *migrator) AppliedVersions(ctx context.Context, line string) ([]int, error) {
	op := fmt.Sprintf("applied versions of line %q", line)
	var exists bool
	if err := m.pool.QueryRow(ctx, queries[qMigrationTableExists]).Scan(&exists); err != nil {
		return nil, mapErr(op, err)
	}
	if !exists {
		return nil, nil
	}
	r, err := m.pool.Query(ctx, queries[qMigrationApplied], line)
	if err != nil {
		return nil, mapErr(op, err)
	}
	versions, err := pgx.CollectRows(r, pgx.RowTo[int])
	if err != nil {
		return nil, mapErr(op, err)
	}
	return versions, nil
}

// Apply runs sql and records the version in one transaction. Migrators of one
// schema are serialised by a transaction-scoped advisory lock; a version that
// a concurrent migrator applied meanwhile is skipped.
func (m *migrator) Apply(ctx context.Context, line string, version int, name, sql string, now time.Time) (err error) {
	op := fmt.Sprintf("apply migration %s/%03d_%s", line, version, name)
	tx, err := m.pool.Begin(ctx)
	if err != nil {
		return mapErr(op, err)
	}
	defer func() {
		if rbErr := tx.Rollback(ctx); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) {
			err = errors.Join(err, mapErr(op+": rollback", rbErr))
		}
	}()
	if _, err := tx.Exec(ctx, queries[qMigrationLock]); err != nil {
		return mapErr(op+": lock", err)
	}
	if _, err := tx.Exec(ctx, queries[qMigrationCreateTable]); err != nil {
		return mapErr(op+": create version table", err)
	}
	var applied bool
	if err := tx.QueryRow(ctx, queries[qMigrationIsApplied], line, version).Scan(&applied); err != nil {
		return mapErr(op, err)
	}
	if applied {
		return nil
	}
	// No arguments: pgx uses the simple protocol, so a file may hold several statements.
	if _, err := tx.Exec(ctx, sql); err != nil {
		return mapErr(op, err)
	}
	if _, err := tx.Exec(ctx, queries[qMigrationRecord], line, version, name, ts(now)); err != nil {
		return mapErr(op+": record version", err)
	}
	return mapErr(op+": commit", tx.Commit(ctx))
}
