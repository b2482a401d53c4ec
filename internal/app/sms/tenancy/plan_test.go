package tenancy_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/smstest"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/testdb"
)

// TestLedgerLookupDoesNotScan: looking up a batch's 32 idempotency keys
// reads about the batch's rows with 20,000 other entries in the ledger, on
// a generic plan made while the ledger was nearly empty and on one made
// after ANALYZE. The look-up runs with the account locked: a plan that
// scanned the ledger would hold every freeze and settlement of the account
// behind it. (Under `relay sms load` at 1,000/s it read about 4 buffers per
// key: probes.)
func TestLedgerLookupDoesNotScan(t *testing.T) {
	db := smstest.NewPlanDB(t)
	ctx := t.Context()
	entries := func(from, to int) {
		_, err := db.Raw.Exec(ctx, `INSERT INTO sms_ledger (account_id, kind, idem_key, amount_li, balance_after_li,
			frozen_after_li, created_at) SELECT 1, 'freeze', 'k' || g, 1, 10, 1, now() FROM generate_series($1::int, $2::int) g`,
			from, to)
		require.NoError(t, err)
	}
	keys := func(from int) []string {
		out := make([]string, 32)
		for i := range out {
			out[i] = fmt.Sprintf("k%d", from+i)
		}
		return out
	}
	entries(1, 2)
	plan := testdb.PrepareStale(t, ctx, db.NoFK, "ledger_by_keys", tenancy.LedgerByKeysSQL, keys(1))
	entries(3, 20_032)
	db.RequireNoScanOf(t, ctx, "sms_ledger", plan, keys(20_001))
}
