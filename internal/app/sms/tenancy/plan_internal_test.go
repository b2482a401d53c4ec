package tenancy

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaymigrate"
)

// TestLedgerLookupDoesNotScan: looking up a batch's 32 idempotency keys
// reads about the batch's rows with 20,000 other entries in the ledger, on
// a generic plan made while the ledger was nearly empty and on one made
// after ANALYZE. The look-up runs with the account locked: a plan that
// scanned the ledger would hold every freeze and settlement of the account
// behind it. (Under `relay sms load` at 1,000/s it read about 4 buffers per
// key: probes.)
func TestLedgerLookupDoesNotScan(t *testing.T) {
	ctx := t.Context()
	url := testdb.PGSchema(t)
	d := testdb.PGDriverAt(t, url)
	_, err := relaymigrate.Up(ctx, d, relayclock.NewFake(time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)), MigrationLines()...)
	require.NoError(t, err)
	noFK, err := dsn.WithParam(url, "session_replication_role", "replica")
	require.NoError(t, err)
	raw := testdb.PGDriverAt(t, noFK).Pool()
	entries := func(from, to int) {
		_, err := raw.Exec(ctx, `INSERT INTO sms_ledger (account_id, kind, idem_key, amount_li, balance_after_li,
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
	plan := testdb.PrepareStale(t, ctx, noFK, "ledger_by_keys", stmts["LedgerByKeys"], keys(1))
	entries(3, 20_032)
	for _, when := range []string{"stale", "analyzed"} {
		if when == "analyzed" {
			_, err := raw.Exec(ctx, "ANALYZE sms_ledger")
			require.NoError(t, err)
		}
		read, shape := plan.Touched(t, ctx, keys(20_001))
		t.Logf("%s plan: read %d rows", when, read)
		require.Less(t, read, int64(2_000), "%s plan scans the ledger:\n%s", when, shape)
	}
}
