package flightstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/flightstore"
)

// PIPELINE_LOCK blocks a second transaction until the first commits; it is
// re-entrant within a transaction; LoadWith(LockPipeline) takes the same lock.
func TestLockPipeline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, flightstore.Save(b.ctx, b.pool, []*flight.State{typicalState("L")}))

	for name, lock := range map[string]func(ctx context.Context, tx pgx.Tx) error{
		"LockPipeline": func(ctx context.Context, tx pgx.Tx) error { return flightstore.LockPipeline(ctx, tx) },
		"LoadWith": func(ctx context.Context, tx pgx.Tx) error {
			got, err := flightstore.LoadWith(ctx, tx, []string{"L"}, flightstore.LoadOpts{LockPipeline: true})
			if err == nil && len(got) != 1 {
				t.Errorf("LoadWith: loaded %d flights, want 1", len(got))
			}
			return err
		},
	} {
		first, err := b.pool.Begin(b.ctx)
		require.NoError(t, err)
		require.NoError(t, lock(b.ctx, first), name)
		require.NoError(t, flightstore.LockPipeline(b.ctx, first), "%s: re-entrant", name)

		second, err := b.pool.Begin(b.ctx)
		require.NoError(t, err)
		var pid int
		require.NoError(t, second.QueryRow(b.ctx, "SELECT pg_backend_pid()").Scan(&pid))
		done := make(chan error, 1)
		go func() { done <- lock(b.ctx, second) }()

		require.Eventually(t, func() bool {
			var waiting bool
			err := b.pool.QueryRow(b.ctx, `SELECT coalesce(wait_event_type = 'Lock' AND wait_event = 'advisory', false)
				FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting)
			return err == nil && waiting
		}, 10*time.Second, 5*time.Millisecond, "%s: the second transaction waits on the advisory lock", name)
		select {
		case err := <-done:
			t.Fatalf("%s: second transaction got the lock while the first holds it (err %v)", name, err)
		default:
		}

		require.NoError(t, first.Commit(b.ctx), name)
		select {
		case err := <-done:
			require.NoError(t, err, name)
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: second transaction still blocked after the first committed", name)
		}
		require.NoError(t, second.Commit(b.ctx), name)
	}

	// With no FLIDs, LoadWith only takes the lock.
	b.inTx(t, func(tx pgx.Tx) {
		got, err := flightstore.LoadWith(b.ctx, tx, nil, flightstore.LoadOpts{LockPipeline: true})
		require.NoError(t, err)
		require.Empty(t, got)
	})
}
