package complete

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/smstest"
	"github.com/relayhq/relay/internal/testdb"
)

// TestIntakePlansDoNotScanTheSubmits: recording a batch of reports and
// matching parked reports must cost the same on 20,000 submits as on three,
// even on generic plans made while the tables were nearly empty and never
// re-planned (no ANALYZE since). Rows are inserted without their parents
// (foreign keys off for this test's sessions): only the plans' shapes are
// under test. Recording results is checked on submits that still need
// their Msg_Id and result written, so its write runs too.
func TestIntakePlansDoNotScanTheSubmits(t *testing.T) {
	db := smstest.NewPlanDB(t)
	ctx := t.Context()
	rows, err := db.Raw.Query(ctx, `SELECT name FROM sms_channel ORDER BY id`)
	require.NoError(t, err)
	channels, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.NotEmpty(t, channels)
	noFK, raw := db.NoFK, db.Raw
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
	now := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
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
	results := func(from int) []any {
		k, sub, c, kind, st, m, d, _, _, _ := batch(from)
		return []any{k, sub, c, kind, st, m, d, now}
	}
	resultsPlan := testdb.PrepareStale(t, ctx, noFK, "results", stmts["ResultsRecord"], results(1)...)
	grow(4, 20_000)
	for i, c := range checks {
		read, shape := plans[i].Touched(t, ctx, c.args(10_000)...)
		t.Logf("%s: a batch of 32 on 20,000 submits read %d rows", c.name, read)
		if read >= 2_000 {
			t.Errorf("%s scans the table (%d rows read):\n%s", c.name, read, shape)
		}
	}
	// 32 submits without a Msg_Id or a result yet: the batch's results
	// write both.
	_, err = raw.Exec(ctx, `INSERT INTO sms_submit (submit_id, attempt_id, channel_id, pk_number, registered)
		SELECT g * 256 + 1, g, (SELECT id FROM sms_channel ORDER BY id OFFSET g % $3 LIMIT 1), 1, true
		FROM generate_series($1::int, $2::int) g`, 20_001, 20_032, len(channels))
	require.NoError(t, err)
	read, shape := resultsPlan.Touched(t, ctx, results(20_001)...)
	t.Logf("results: a batch of 32 on 20,032 submits read %d rows", read)
	require.Less(t, read, int64(2_000), "results scan the table:\n%s", shape)
	require.Contains(t, shape, "ModifyTable sms_submit : 32", "the write ran on the 32 submits:\n%s", shape)
}

// TestCompletePlanDoesNotScanTheMessages: completing a batch of 32 admitted
// messages reads about the batch's rows with 20,000 others in the table, on
// a generic plan made while the table was small and on one made after
// ANALYZE found almost no admitted row.
func TestCompletePlanDoesNotScanTheMessages(t *testing.T) {
	db := smstest.NewPlanDB(t)
	ctx := t.Context()
	now := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)
	outcomes := func(from int) string {
		var b strings.Builder
		b.WriteString("[")
		for id := from; id < from+32; id++ {
			if id > from {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"id":%d,"outcomes":["delivered"]}`, id)
		}
		return b.String() + "]"
	}
	db.Messages(t, ctx, 1, 32, "admitted")
	plan := testdb.PrepareStale(t, ctx, db.NoFK, "complete", stmts["MessagesComplete"], outcomes(1), now)
	db.Messages(t, ctx, 33, 20_000, "refused")
	db.Messages(t, ctx, 20_001, 20_032, "admitted")
	db.RequireNoScan(t, ctx, plan, outcomes(20_001), now)
}
