package admit

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/smstest"
	"github.com/relayhq/relay/internal/testdb"
)

// TestDecidePlanDoesNotScanTheMessages: deciding a batch of 32 accepted
// messages reads about the batch's rows with 20,000 others in the table,
// on a generic plan made while the table was small and on one made after
// ANALYZE found almost no accepted row (where the join to the decisions was
// planned as a scan of every message).
func TestDecidePlanDoesNotScanTheMessages(t *testing.T) {
	db := smstest.NewPlanDB(t)
	ctx := t.Context()
	now := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)
	decisions := func(from int) string {
		var ds []map[string]any
		for id := from; id < from+32; id++ {
			ds = append(ds, map[string]any{"id": id, "numbers": []string{"13812345678"}, "content": "x",
				"carriers": []string{"mobile"}, "segments": 1, "unit_li": []int64{45}, "amount_li": 45, "state": "admitted"})
		}
		b, err := json.Marshal(ds)
		require.NoError(t, err)
		return string(b)
	}
	db.Messages(t, ctx, 1, 32, "accepted")
	plan := testdb.PrepareStale(t, ctx, db.NoFK, "decide", stmts["MessagesDecide"], decisions(1), now)
	db.Messages(t, ctx, 33, 20_000, "refused")
	db.Messages(t, ctx, 20_001, 20_032, "accepted")
	db.RequireNoScan(t, ctx, plan, decisions(20_001), now)
}

// TestCountersPlansDoNotScanTheCounters: reading a batch's 96 limit
// counters and adding to them read about those rows with 20,000 other
// counters in the table, on generic plans made while the table was small
// and on ones made after ANALYZE. The add runs holding the batch's counter
// locks; a plan that scanned the table would stall every batch behind it.
// (Under `relay sms load` at 1,000/s the counters' statements read about 9
// buffers per counter: probes.)
func TestCountersPlansDoNotScanTheCounters(t *testing.T) {
	db := smstest.NewPlanDB(t)
	ctx := t.Context()
	now := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)
	until := now.Add(time.Hour)
	counters := func(from, to int) {
		_, err := db.Raw.Exec(ctx, `INSERT INTO sms_limit_counter (key, count, until, updated_at)
			SELECT 'n:' || g, 1, $3, $3 FROM generate_series($1::int, $2::int) g`, from, to, until)
		require.NoError(t, err)
	}
	// batch gives 96 keys from `from` on, half of them not in the table.
	batch := func(from int) ([]string, []int32, []int32, []time.Time) {
		var ks []string
		var ds, mx []int32
		var us []time.Time
		for i := from; i < from+96; i++ {
			k := fmt.Sprintf("n:%d", i)
			if i%2 == 1 {
				k = fmt.Sprintf("new:%d", i)
			}
			ks, ds, mx, us = append(ks, k), append(ds, 2), append(mx, 10), append(us, until)
		}
		return ks, ds, mx, us
	}
	counters(1, 96)
	ks, ds, mx, us := batch(1)
	read := testdb.PrepareStale(t, ctx, db.NoFK, "counters_read", stmts["CountersRead"], ks)
	add := testdb.PrepareStale(t, ctx, db.NoFK, "counters_add", stmts["CountersAdd"], ks, ds, mx, us, now)
	counters(97, 20_096)
	ks, ds, mx, us = batch(20_001)
	db.RequireNoScanOf(t, ctx, "sms_limit_counter", read, ks)
	db.RequireNoScanOf(t, ctx, "sms_limit_counter", add, ks, ds, mx, us, now)
}

// TestGetPlansFollowTheTables: GET /v1/messages/{id} reads one message and
// its attempts with their submits by key with 20,000 others in the tables,
// on statistics taken when the tables held one message. The API runs both
// statements planned at each execution (getExec): a generic plan cached
// while the tables were that small scans them (20,001 rows for the
// message), and PostgreSQL would keep it on that connection until an
// ANALYZE, while a plan made at the execution sees the tables' size now.
func TestGetPlansFollowTheTables(t *testing.T) {
	db := smstest.NewPlanDB(t)
	ctx := t.Context()
	var channel int64
	require.NoError(t, db.Raw.QueryRow(ctx, `SELECT min(id) FROM sms_channel`).Scan(&channel))
	// messages from..to, each with one attempt (id = message id) and two
	// submits.
	grow := func(from, to int) {
		db.Messages(t, ctx, from, to, "admitted")
		_, err := db.Raw.Exec(ctx, `INSERT INTO sms_attempt (id, message_id, recipient, attempt_no, channel_id, receipt_mode,
				segments, state, created_at)
			SELECT g, g, 0, 1, $3, 'per_segment', 2, 'queued', now() FROM generate_series($1::int, $2::int) g`, from, to, channel)
		require.NoError(t, err)
		_, err = db.Raw.Exec(ctx, `INSERT INTO sms_submit (submit_id, attempt_id, channel_id, pk_number, registered)
			SELECT g * 256 + k, g, $3, k, true FROM generate_series($1::int, $2::int) g, generate_series(1, 2) k`, from, to, channel)
		require.NoError(t, err)
	}
	grow(1, 1)
	_, err := db.Raw.Exec(ctx, `ANALYZE sms_message; ANALYZE sms_attempt; ANALYZE sms_submit`)
	require.NoError(t, err)
	grow(2, 20_001)
	for _, c := range []struct {
		name string
		args []any
	}{{"MessageGet", []any{10_000, db.App}}, {"MessageAttempts", []any{10_000}}} {
		read, shape := testdb.TouchedOnce(t, ctx, db.Raw, stmts[c.name], c.args...)
		t.Logf("%s: read %d rows", c.name, read)
		require.Less(t, read, int64(2_000), "%s scans:\n%s", c.name, shape)
	}
	rows, err := db.Raw.Query(ctx, stmts["MessageAttempts"], getExec, 10_000)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 2, n, "the message's two submits")
}
