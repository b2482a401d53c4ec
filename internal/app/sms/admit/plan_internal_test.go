package admit

import (
	"encoding/json"
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
