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

// TestCountersSetDoesNotScanTheCounters: writing a batch's 96 counter
// values reads about those rows with 20,000 other counters in the table, on
// a generic plan made while the table was small and on one made after
// ANALYZE. The statement runs holding the batch's counter locks; a plan
// that scanned the table would stall every batch behind it. (Under
// `relay sms load` at 1,000/s it read about 9 buffers per counter: probes.)
func TestCountersSetDoesNotScanTheCounters(t *testing.T) {
	db := smstest.NewPlanDB(t)
	ctx := t.Context()
	now := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)
	counters := func(from, to int) {
		_, err := db.Raw.Exec(ctx, `INSERT INTO sms_limit_counter (key, count, until, updated_at)
			SELECT 'n:' || g, 1, $3, $3 FROM generate_series($1::int, $2::int) g`, from, to, now.Add(time.Hour))
		require.NoError(t, err)
	}
	batch := func(from int) ([]string, []int32, []int32) {
		var ks []string
		var ns, mx []int32
		for i := from; i < from+96; i++ {
			ks, ns, mx = append(ks, fmt.Sprintf("n:%d", i)), append(ns, 2), append(mx, 10)
		}
		return ks, ns, mx
	}
	counters(1, 96)
	ks, ns, mx := batch(1)
	plan := testdb.PrepareStale(t, ctx, db.NoFK, "counters_set", stmts["CountersSet"], ks, ns, mx, now)
	counters(97, 20_096)
	ks, ns, mx = batch(20_001)
	db.RequireNoScanOf(t, ctx, "sms_limit_counter", plan, ks, ns, mx, now)
}
