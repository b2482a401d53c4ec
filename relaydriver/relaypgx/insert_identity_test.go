package relaypgx_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver"
)

// A batch with identities is one round trip once its ids are known: the
// INSERT and the lookup of the inputs it did not insert go in one batch,
// whatever mix of new, held and repeated identities it carries; allocating
// ids adds the allocation query, as without identities.
func TestInsertIdentitiesOneRoundTrip(t *testing.T) {
	t.Parallel()
	dsn := testdb.PGSchema(t)
	testdb.PGDriverAt(t, dsn) // migrates
	tr := &sentTracer{}
	d := openOn(t, dsn, randomName("relay_insert_"), tr)
	ctx := t.Context()
	ex := d.GetExecutor()
	insert := func(ps ...*relaydriver.MessageInsertParams) *relaydriver.MessageInsertResult {
		t.Helper()
		res, err := ex.MessageInsertMany(ctx, ps)
		require.NoError(t, err)
		return res
	}
	insert(&relaydriver.MessageInsertParams{Queue: "p", ID: 1, Identity: "held", Now: t0}) // also warms the statement cache

	tr.reset()
	res := insert(
		&relaydriver.MessageInsertParams{Queue: "p", ID: 2, Identity: "A", Now: t0},
		&relaydriver.MessageInsertParams{Queue: "p", ID: 3, Identity: "held", Now: t0},
		&relaydriver.MessageInsertParams{Queue: "p", ID: 4, Identity: "A", Now: t0},
		&relaydriver.MessageInsertParams{Queue: "p", ID: 5, Now: t0},
	)
	queries, batches := tr.sent()
	require.Empty(t, queries)
	require.Len(t, batches, 1, "one round trip")
	require.Len(t, batches[0], 2, "the INSERT and the lookup")
	require.Equal(t, []int64{2, 1, 2, 5}, res.IDs)
	require.Equal(t, []bool{false, true, true, false}, res.Duplicate)
	require.Equal(t, 2, res.Inserted)

	// Allocated ids come from a sequence shared by every queue; queue
	// q has no explicit ids they could collide with.
	held := insert(&relaydriver.MessageInsertParams{Queue: "q", Identity: "held", Now: t0}).IDs[0]
	tr.reset()
	res = insert(
		&relaydriver.MessageInsertParams{Queue: "q", Identity: "B", Now: t0},
		&relaydriver.MessageInsertParams{Queue: "q", Identity: "held", Now: t0},
	)
	queries, batches = tr.sent()
	require.Len(t, queries, 1, "the id allocation")
	require.Len(t, batches, 1)
	require.Equal(t, []bool{false, true}, res.Duplicate)
	require.Equal(t, held, res.IDs[1])

	// Without identities (intake) the batch is the INSERT alone.
	tr.reset()
	insert(&relaydriver.MessageInsertParams{Queue: "p", ID: 10, Now: t0}, &relaydriver.MessageInsertParams{Queue: "p", ID: 11, Now: t0})
	queries, batches = tr.sent()
	require.Empty(t, queries)
	require.Len(t, batches, 1)
	require.Len(t, batches[0], 1)
}

// Two transactions inserting one identity: the second waits on the first's
// uncommitted row (the partial unique index is an arbiter of the INSERT) and
// then reports a duplicate of it when it commits, or inserts its own row when
// it rolls back. Either way exactly one row holds the identity.
func TestInsertIdentityConcurrentTransactions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		rivalCommit bool
		inTx        bool
	}{
		{"RivalCommits", true, false},
		{"RivalCommitsInTx", true, true},
		{"RivalRollsBack", false, false},
		{"RivalRollsBackInTx", false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dsn := testdb.PGSchema(t)
			rival := testdb.PGDriverAt(t, dsn)
			app := randomName("relay_insert_race_")
			d := openOn(t, dsn, app, nil)
			ctx := t.Context()

			rtx, err := rival.Begin(ctx)
			require.NoError(t, err)
			defer rtx.Rollback(ctx) //nolint:errcheck
			rres, err := rtx.MessageInsertMany(ctx, []*relaydriver.MessageInsertParams{{Queue: "p", Identity: "X", Payload: []byte("rival"), Now: t0}})
			require.NoError(t, err)
			require.Equal(t, 1, rres.Inserted)
			rivalID := rres.IDs[0]

			var ex relaydriver.Executor = d.GetExecutor()
			var tx relaydriver.ExecutorTx
			if c.inTx {
				tx, err = d.Begin(ctx)
				require.NoError(t, err)
				defer tx.Rollback(ctx) //nolint:errcheck
				ex = tx
			}
			type outcome struct {
				res *relaydriver.MessageInsertResult
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				res, err := ex.MessageInsertMany(ctx, []*relaydriver.MessageInsertParams{
					{Queue: "p", Identity: "Y", Now: t0},
					{Queue: "p", Identity: "X", Payload: []byte("mine"), Now: t0},
				})
				done <- outcome{res, err}
			}()
			require.Eventually(t, func() bool {
				var waiting int
				err := rival.GetExecutor().QueryRow(ctx,
					"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", app).Scan(&waiting)
				require.NoError(t, err)
				return waiting == 1
			}, 30*time.Second, 10*time.Millisecond, "the second insert waits for the first transaction")
			if c.rivalCommit {
				require.NoError(t, rtx.Commit(ctx))
			} else {
				require.NoError(t, rtx.Rollback(ctx))
			}

			got := <-done
			require.NoError(t, got.err)
			require.False(t, got.res.Duplicate[0])
			if c.rivalCommit {
				require.Equal(t, []bool{false, true}, got.res.Duplicate)
				require.Equal(t, rivalID, got.res.IDs[1])
				require.Equal(t, 1, got.res.Inserted)
			} else {
				require.Equal(t, []bool{false, false}, got.res.Duplicate)
				require.NotEqual(t, rivalID, got.res.IDs[1])
				require.Equal(t, 2, got.res.Inserted)
			}
			if c.inTx {
				require.NoError(t, tx.Commit(ctx))
			}

			var n int
			var payload []byte
			var holder int64
			require.NoError(t, rival.GetExecutor().QueryRow(ctx,
				"SELECT count(*) OVER (), id, payload FROM relay_message WHERE queue = 'p' AND identity_key = 'X'").Scan(&n, &holder, &payload))
			require.Equal(t, 1, n, "exactly one row holds the identity")
			require.Equal(t, got.res.IDs[1], holder)
			if c.rivalCommit {
				require.Equal(t, "rival", string(payload))
			} else {
				require.Equal(t, "mine", string(payload))
			}
		})
	}
}
