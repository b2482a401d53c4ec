package relaypgx_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver/relaypgx"
)

// genericPlan returns the EXPLAIN of the generic plan PostgreSQL makes for sql
// on conn's schema as it is now.
func genericPlan(t *testing.T, ctx context.Context, d *relaypgx.Driver, sql string) string {
	t.Helper()
	conn, err := d.Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	n := 0
	for _, m := range regexp.MustCompile(`\$(\d+)`).FindAllStringSubmatch(sql, -1) {
		var k int
		fmt.Sscan(m[1], &k)
		n = max(n, k)
	}
	_, err = conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "PREPARE plan_probe AS "+sql)
	require.NoError(t, err)
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "DEALLOCATE plan_probe; RESET plan_cache_mode")
	}()
	args := strings.TrimSuffix(strings.Repeat("NULL,", n), ",")
	rows, err := conn.Query(ctx, "EXPLAIN EXECUTE plan_probe("+args+")")
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		l, err := pgx.RowTo[string](row)
		return strings.TrimSpace(l), err
	})
	require.NoError(t, err)
	return strings.Join(lines, "\n")
}

// The hot statements reach relay_message by key even in a generic plan made
// while the table is empty — what a freshly migrated store prepares, and
// keeps without autovacuum's ANALYZE. Without statistics every path costs
// alike, and such plans had the claim join back through the identity index
// (reading every unbound message per claimed row), the batch completion and
// the acknowledgement hash over or scan every unfinished or terminal row, the
// identity binding hash over the whole queue, and the outbox's SENT mark
// scan the whole outbox: each fine on an empty table, each slower with every
// row it holds.
func TestHotStatementsProbeByKeyOnAnEmptyTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := testdb.PGDriver(t)
	for _, c := range []struct {
		query string
		want  []string // each must appear in the plan
	}{
		{"MessageClaim", []string{`Index Cond: ((queue = ready.queue) AND (id = ready.id))`}},
		{"MessageCompleteMany", []string{`Tid Scan on relay_message t`, `Index Cond: ((queue = u.queue) AND (id = u.id))`}},
		{"MessageDeleteMany", []string{`Tid Scan on relay_message t`, `Index Cond: ((queue = u.queue) AND (id = u.id))`}},
		{"AckDone", []string{`Tid Scan on relay_message t`, `Index Cond: ((queue = $1) AND (id = u.id))`}},
		{"OutboxMarkSent", []string{`Tid Scan on relay_outbox o`, `Index Cond: (id = u.id)`}},
		{"OutboxDeleteDelivered", []string{`Tid Scan on relay_outbox o`, `Index Cond: (id = u.id)`}},
		{"MessageLeaseRenew", []string{`Index Cond: ((queue = $1) AND (id = u.id))`, `Tid Scan on relay_message t`}},
		{"MessageBindIdentities", []string{`Index Cond: ((queue = $1) AND (id = i.id))`,
			`Index Cond: ((queue = $1) AND (identity_key = i.identity))`, `Index Cond: ((queue = f.queue) AND (id = f.id))`}},
	} {
		plan := genericPlan(t, ctx, d, relaypgx.QueryForTest(c.query))
		for _, w := range c.want {
			require.Contains(t, plan, w, "%s:\n%s", c.query, plan)
		}
		require.NotContains(t, plan, "Seq Scan on relay_message", "%s:\n%s", c.query, plan)
		require.NotContains(t, plan, "Seq Scan on relay_outbox", "%s:\n%s", c.query, plan)
		require.NotContains(t, plan, "Hash Join", "%s:\n%s", c.query, plan)
		require.NotContains(t, plan, "relay_message_identity_key on relay_message t", "%s:\n%s", c.query, plan)
	}
}
