// Package smstest helps the send chain's tests: a schema with the chain's
// tables and the demo fixture, and sms_message rows written in bulk, so a
// test can check that a statement's cost does not grow with the table.
package smstest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaymigrate"
)

// PlanDB is a fresh schema with the chain's tables and the demo fixture.
type PlanDB struct {
	// URL is the schema's connection string; NoFK the same with foreign
	// keys off (session_replication_role = replica), for bulk rows without
	// their parents; Raw a pool on NoFK.
	URL, NoFK string
	Raw       *pgxpool.Pool
	// App is the id of the fixture's yuntong/otp app.
	App int64
}

// NewPlanDB makes the schema (dropped with the test).
func NewPlanDB(t testing.TB) *PlanDB {
	t.Helper()
	ctx := t.Context()
	url := testdb.PGSchema(t)
	d := testdb.PGDriverAt(t, url)
	clock := relayclock.NewFake(time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC))
	_, err := relaymigrate.Up(ctx, d, clock, tenancy.MigrationLines()...)
	require.NoError(t, err)
	_, err = tenancy.Seed(ctx, d.Pool(), tenancy.DemoFixture(func(name string) string { return "file:/x/" + name }),
		tenancy.SeedOpts{Clock: clock, NewApp: func(tenancy.AppCredentials) error { return nil }})
	require.NoError(t, err)
	noFK, err := dsn.WithParam(url, "session_replication_role", "replica")
	require.NoError(t, err)
	p := &PlanDB{URL: url, NoFK: noFK, Raw: testdb.PGDriverAt(t, noFK).Pool()}
	require.NoError(t, p.Raw.QueryRow(ctx, `SELECT a.id FROM sms_app a JOIN sms_enterprise e ON e.id = a.enterprise_id
		WHERE e.name = 'yuntong' AND a.name = 'otp'`).Scan(&p.App))
	return p
}

// Messages writes sms_message rows from..to (ids and client ids) in state
// accepted, admitted (one number, one segment, decided) or refused.
func (p *PlanDB) Messages(t testing.TB, ctx context.Context, from, to int, state string) {
	t.Helper()
	_, err := p.Raw.Exec(ctx, `INSERT INTO sms_message (id, app_id, client_msg_id, numbers, sign_name, template_code, params,
			content, state, accepted_at, decided_at, reason, carriers, segments, unit_li, amount_li)
		SELECT g, $3, 'c' || g, '{13812345678}', '云通科技', 'otp', '{}', 'x', $4, now(),
		       CASE WHEN $4 = 'accepted' THEN NULL ELSE now() END,
		       CASE WHEN $4 = 'refused' THEN 'blacklisted' END,
		       CASE WHEN $4 = 'admitted' THEN '{mobile}'::text[] END,
		       CASE WHEN $4 = 'admitted' THEN 1 END,
		       CASE WHEN $4 = 'admitted' THEN '{45}'::bigint[] END,
		       CASE WHEN $4 = 'admitted' THEN 45 END
		FROM generate_series($1::int, $2::int) g`, from, to, p.App, state)
	require.NoError(t, err)
}

// RequireNoScan runs plan (prepared while the table held only the batch)
// with args twice — as it was cached, then after ANALYZE sms_message — and
// fails the test when either run read more than 2,000 rows: a plan that
// reaches the batch's rows by key reads about as many as the batch has.
func (p *PlanDB) RequireNoScan(t testing.TB, ctx context.Context, plan *testdb.StalePlan, args ...any) {
	t.Helper()
	p.RequireNoScanOf(t, ctx, "sms_message", plan, args...)
}

// RequireNoScanOf is RequireNoScan for a statement on table.
func (p *PlanDB) RequireNoScanOf(t testing.TB, ctx context.Context, table string, plan *testdb.StalePlan, args ...any) {
	t.Helper()
	plan.RequireNoScan(t, ctx, p.Raw, []string{table}, args...)
}
