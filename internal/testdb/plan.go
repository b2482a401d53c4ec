package testdb

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
)

// StalePlan is a prepared statement whose generic plan was made while its
// tables were small: what a long-lived connection runs once its tables have
// grown and no ANALYZE has refreshed their statistics (autovacuum off, or not
// yet come round). Touched then reports how many rows one execution really
// read, so a test can prove a query's cost does not grow with the table.
type StalePlan struct {
	conn *pgx.Conn
	name string
	n    int // parameters
}

// PrepareStale opens a connection of its own on url (closed in t.Cleanup),
// forces generic plans on it, prepares query as name and executes it once
// with args inside a rolled-back transaction, so the generic plan is made
// and cached now, on the tables as they are.
func PrepareStale(t testing.TB, ctx context.Context, url, name, query string, args ...any) *StalePlan {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(ctx)) })
	_, err = conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	// A named statement of the server's own (SQL PREPARE), so EXPLAIN
	// EXECUTE below runs exactly the plan cached here.
	_, err = conn.Exec(ctx, fmt.Sprintf("PREPARE %s AS %s", name, query))
	require.NoError(t, err)
	p := &StalePlan{conn: conn, name: name, n: len(args)}
	p.Touched(t, ctx, args...)
	return p
}

// Touched executes the statement with args inside a rolled-back transaction
// under EXPLAIN ANALYZE and returns the rows its plan read: every node's rows
// out times its loops plus the rows its filters, join filters and rechecks
// removed. A query that reaches its rows by key stays near the rows it
// returns; one that scans a whole table reads the table. The second result
// is the plan, one node a line with the rows it read, for a failure message.
func (p *StalePlan) Touched(t testing.TB, ctx context.Context, args ...any) (int64, string) {
	t.Helper()
	require.Len(t, args, p.n, "arguments of %s", p.name)
	tx, err := p.conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	marks := make([]string, len(args))
	for i := range args {
		marks[i] = fmt.Sprintf("$%d", i+1)
	}
	var out []byte
	q := fmt.Sprintf("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE %s(%s)", p.name, strings.Join(marks, ", "))
	// EXECUTE's arguments cannot be bound parameters (EXPLAIN takes none):
	// the simple protocol writes them into the text as literals.
	simple := append([]any{pgx.QueryExecModeSimpleProtocol}, args...)
	require.NoError(t, tx.QueryRow(ctx, q, simple...).Scan(&out))
	return readPlan(t, out)
}

// RequireNoScan runs the statement with args twice — on its plan as cached,
// then after ANALYZE of tables on db — and fails the test when either run
// read 2,000 rows or more: a plan that reaches its rows by key reads about
// as many as it returns, one that scans reads the table.
func (p *StalePlan) RequireNoScan(t testing.TB, ctx context.Context, db interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, tables []string, args ...any) {
	t.Helper()
	for _, when := range []string{"stale", "analyzed"} {
		if when == "analyzed" {
			for _, table := range tables {
				_, err := db.Exec(ctx, "ANALYZE "+table)
				require.NoError(t, err)
			}
		}
		read, shape := p.Touched(t, ctx, args...)
		t.Logf("%s plan: read %d rows", when, read)
		require.Less(t, read, int64(2_000), "%s plan scans the table:\n%s", when, shape)
	}
}

// TouchedOnce is Touched for query planned at this execution, as an unnamed
// statement (what pgx's QueryExecModeExec sends): a custom plan, made on
// the table's size now and whatever statistics it has, run once with args
// on pool in a rolled-back transaction.
func TouchedOnce(t testing.TB, ctx context.Context, pool interface {
	Begin(context.Context) (pgx.Tx, error)
}, query string, args ...any) (int64, string) {
	t.Helper()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var out []byte
	exec := append([]any{pgx.QueryExecModeExec}, args...)
	require.NoError(t, tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+query, exec...).Scan(&out))
	return readPlan(t, out)
}

// readPlan reads EXPLAIN's JSON: the rows its nodes read and its shape.
func readPlan(t testing.TB, out []byte) (int64, string) {
	t.Helper()
	var plans []struct {
		Plan map[string]any `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(out, &plans))
	require.Len(t, plans, 1)
	var b strings.Builder
	return touched(plans[0].Plan, 0, &b), b.String()
}

// touched sums a plan node's rows read, then its children's (including
// init plans and sub plans, which EXPLAIN lists among "Plans"), and writes
// the node to b.
func touched(node map[string]any, depth int, b *strings.Builder) int64 {
	num := func(k string) float64 {
		f, _ := node[k].(float64)
		return f
	}
	str := func(k string) string {
		s, _ := node[k].(string)
		return s
	}
	loops := num("Actual Loops")
	n := int64((num("Actual Rows") + num("Rows Removed by Filter") + num("Rows Removed by Join Filter") +
		num("Rows Removed by Index Recheck")) * loops)
	fmt.Fprintf(b, "%s%s %s %s: %d\n", strings.Repeat("  ", depth), str("Node Type"), str("Relation Name"), str("Index Name"), n)
	children, _ := node["Plans"].([]any)
	for _, c := range children {
		if m, ok := c.(map[string]any); ok {
			n += touched(m, depth+1, b)
		}
	}
	return n
}
