package relaywork_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaywork"
)

// TestClaimPlanDoesNotScanTheQueue: a claim's cost must not grow with the
// queue, even on a generic plan made while the table was nearly empty and
// never re-planned (no ANALYZE since: autovacuum off or not yet run). Before
// the claim locked each candidate by its primary key, such a plan joined the
// candidates to a scan of the whole queue, twice: 20,000 rows read per row
// claimed, 90 ms a claim.
func TestClaimPlanDoesNotScanTheQueue(t *testing.T) {
	b := setup(t, relaywork.Config{})
	insert := func(from, to int, state string) {
		_, err := b.pool.Exec(b.ctx, `INSERT INTO relay_work (queue, key, revision, processed_revision, state, created_at, updated_at)
			SELECT 'q', 'k' || lpad(g::text, 6, '0'), 1, 0, $3, now(), now() FROM generate_series($1::int, $2::int) g`, from, to, state)
		require.NoError(t, err)
	}
	insert(1, 2, "pending")
	insert(3, 3, "idle")
	const lease = int64(30_000_000) // µs
	plan := testdb.PrepareStale(t, b.ctx, b.url, "claim", relaywork.QueryForTest("Claim"), nil, "q", 32, "w", lease)

	insert(4, 10_000, "idle")
	insert(10_001, 20_000, "pending")
	read, shape := plan.Touched(t, b.ctx, nil, "q", 32, "w", lease)
	t.Logf("one claim of 32 on a 20,000-row queue read %d rows", read)
	require.Less(t, read, int64(1_000), fmt.Sprintf("the claim scans the queue (%d rows read):\n%s", read, shape))
}
