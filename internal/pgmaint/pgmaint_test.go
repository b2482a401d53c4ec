package pgmaint_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/pgmaint"
	"github.com/relayhq/relay/internal/testdb"
)

// TestDueFollowsAutovacuumsRules: a table with enough changed rows is
// analyzed, one with enough dead rows vacuumed, a quiet one left alone.
func TestDueFollowsAutovacuumsRules(t *testing.T) {
	d := testdb.PGDriverAt(t, testdb.PGSchema(t))
	pool, ctx := d.Pool(), t.Context()
	_, err := pool.Exec(ctx, `CREATE TABLE busy (id int PRIMARY KEY, v int); CREATE TABLE quiet (id int PRIMARY KEY)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO busy SELECT g, 0 FROM generate_series(1, 1000) g; INSERT INTO quiet VALUES (1)`)
	require.NoError(t, err)
	// Statistics reach the server's counters when a session goes idle (at
	// most once a second): wait for them.
	stat := func(table, col string) int64 {
		var n int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT `+col+` FROM pg_stat_user_tables
			WHERE schemaname = current_schema() AND relname = $1`, table).Scan(&n))
		return n
	}
	counted := func(table, col string, want int64) {
		require.Eventually(t, func() bool {
			_, _ = pool.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
			return stat(table, col) >= want
		}, 20*time.Second, 50*time.Millisecond, "%s.%s", table, col)
	}
	counted("busy", "n_mod_since_analyze", 1000)
	counted("quiet", "n_mod_since_analyze", 1)

	analyzed, vacuumed, err := pgmaint.Due(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, 1, analyzed, "busy: 1,000 changed > 50 + 10 %% of 0; quiet: 1 changed ≤ 50")
	require.Zero(t, vacuumed)
	counted("busy", "analyze_count", 1)
	require.Zero(t, stat("quiet", "analyze_count"))
	require.Zero(t, stat("busy", "n_mod_since_analyze"))

	// Every row updated twice: 2,000 dead versions, far past 50 + 20 % of
	// 1,000 even if page pruning has already removed some.
	_, err = pool.Exec(ctx, `UPDATE busy SET v = v + 1; UPDATE busy SET v = v + 1`)
	require.NoError(t, err)
	counted("busy", "n_dead_tup", 300)
	analyzed, vacuumed, err = pgmaint.Due(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, 1, vacuumed)
	require.Equal(t, 1, analyzed)
	counted("busy", "vacuum_count", 1)

	// Nothing changed since — but the vacuum removes only the dead rows no
	// transaction can still see, and the server may run another one that
	// does (CI runs the packages' tests side by side): the rule then says
	// vacuum again, and only that.
	dead := stat("busy", "n_dead_tup")
	analyzed, vacuumed, err = pgmaint.Due(ctx, pool)
	require.NoError(t, err)
	if dead > 50+200 { // 50 + 20 % of 1,000 rows
		require.Equal(t, []int{1, 1}, []int{analyzed, vacuumed}, "%d dead rows left: vacuum (and analyze) again", dead)
	} else {
		require.Zero(t, analyzed+vacuumed, "nothing changed since (%d dead rows left)", dead)
	}
}
