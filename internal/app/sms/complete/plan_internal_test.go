package complete

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaymigrate"
)

// TestIntakePlansDoNotScanTheSubmits: recording a batch of reports and
// matching parked reports must cost the same on 20,000 submits as on three,
// even on generic plans made while the tables were nearly empty and never
// re-planned (no ANALYZE since). Rows are inserted without their parents
// (foreign keys off for this test's sessions): only the plans' shapes are
// under test. ResultsRecord is not here: its Msg_Id write joins by key and
// relies on current statistics (see its comment in queries.sql).
func TestIntakePlansDoNotScanTheSubmits(t *testing.T) {
	url := testdb.PGSchema(t)
	d := testdb.PGDriverAt(t, url)
	ctx := t.Context()
	clock := relayclock.NewFake(time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC))
	_, err := relaymigrate.Up(ctx, d, clock, tenancy.MigrationLines()...)
	require.NoError(t, err)
	_, err = tenancy.Seed(ctx, d.Pool(), tenancy.DemoFixture(func(name string) string { return "file:/x/" + name }),
		tenancy.SeedOpts{Clock: clock, NewApp: func(tenancy.AppCredentials) error { return nil }})
	require.NoError(t, err)
	rows, err := d.Pool().Query(ctx, `SELECT name FROM sms_channel ORDER BY id`)
	require.NoError(t, err)
	channels, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, channels)

	noFK, err := dsn.WithParam(url, "session_replication_role", "replica")
	require.NoError(t, err)
	raw := testdb.PGDriverAt(t, noFK).Pool()
	// Submits of attempts from..to, one per attempt, on the channels in turn,
	// Msg_Id = the attempt number; parked reports for them, all matched but
	// one in 500.
	grow := func(from, to int) {
		_, err := raw.Exec(ctx, `INSERT INTO sms_submit (submit_id, attempt_id, channel_id, pk_number, registered, msg_id, result)
			SELECT g * 256 + 1, g, (SELECT id FROM sms_channel ORDER BY id OFFSET g % $3 LIMIT 1), 1, true, g::text, 'ACCEPTED'
			FROM generate_series($1::int, $2::int) g`, from, to, len(channels))
		require.NoError(t, err)
		_, err = raw.Exec(ctx, `INSERT INTO sms_report_parked (event_key, channel, msg_id, stat, received_at, matched_at, attempt_id)
			SELECT 'p' || g, (SELECT name FROM sms_channel ORDER BY id OFFSET g % $3 LIMIT 1), g::text, 'DELIVRD', now(),
			       CASE WHEN g % 500 = 0 THEN NULL ELSE now() END, CASE WHEN g % 500 = 0 THEN NULL ELSE g END
			FROM generate_series($1::int, $2::int) g`, from, to, len(channels))
		require.NoError(t, err)
	}
	// A batch naming attempts from..from+31: 32 results, 32 reports.
	batch := func(from int) (rKey []string, rSubmit []int64, rChan, rKind, rState, rMsg, rDetail, pKey, pMsg, pStat []string) {
		for g := from; g < from+32; g++ {
			ch := channels[g%len(channels)]
			rKey = append(rKey, fmt.Sprintf("r%d", g))
			rSubmit = append(rSubmit, int64(g)*256+1)
			rChan = append(rChan, ch)
			rKind = append(rKind, "result")
			rState = append(rState, "ACCEPTED")
			rMsg = append(rMsg, fmt.Sprint(g))
			rDetail = append(rDetail, "")
			pKey = append(pKey, fmt.Sprintf("n%d", g))
			pMsg = append(pMsg, fmt.Sprint(g))
			pStat = append(pStat, "DELIVRD")
		}
		return
	}
	grow(1, 3)
	now := clock.Now()
	type check struct {
		name, query string
		args        func(from int) []any
	}
	checks := []check{
		{"reports", stmts["ReportsRecord"], func(from int) []any {
			_, _, c, _, _, _, _, k, m, st := batch(from)
			return []any{k, c, m, st, now}
		}},
		{"parked_by_id", stmts["ParkedMatch"], func(from int) []any {
			_, _, _, _, _, _, _, _, m, _ := batch(from)
			return []any{m, now, 128}
		}},
		{"parked_sweep", stmts["ParkedMatch"], func(int) []any { return []any{nil, now, 128} }},
	}
	plans := make([]*testdb.StalePlan, len(checks))
	for i, c := range checks {
		plans[i] = testdb.PrepareStale(t, ctx, noFK, c.name, c.query, c.args(1)...)
	}
	grow(4, 20_000)
	for i, c := range checks {
		read, shape := plans[i].Touched(t, ctx, c.args(10_000)...)
		t.Logf("%s: a batch of 32 on 20,000 submits read %d rows", c.name, read)
		if read >= 2_000 {
			t.Errorf("%s scans the table (%d rows read):\n%s", c.name, read, shape)
		}
	}
}
