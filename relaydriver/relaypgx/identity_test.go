package relaypgx_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
)

// sentTracer records what a pool sends: each plain query and each batch (its
// statements), so a test can count round trips.
type sentTracer struct {
	mu      sync.Mutex
	queries []string   // Exec/Query/QueryRow, including BEGIN and COMMIT
	batches [][]string // the statements of each SendBatch
}

func (s *sentTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries = append(s.queries, d.SQL)
	return ctx
}

func (s *sentTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *sentTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	var stmts []string
	for _, q := range d.Batch.QueuedQueries {
		stmts = append(stmts, q.SQL)
	}
	s.batches = append(s.batches, stmts)
	return ctx
}

func (s *sentTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (s *sentTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// reset forgets what was sent so far.
func (s *sentTracer) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries, s.batches = nil, nil
}

// sent returns what was sent since the last reset.
func (s *sentTracer) sent() (queries []string, batches [][]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries, s.batches
}

// openOn opens a driver on the migrated schema dsn with its own pool, named
// appName in pg_stat_activity and traced by tr (when not nil).
func openOn(t *testing.T, dsn, appName string, tr *sentTracer) *relaypgx.Driver {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["application_name"] = appName
	if tr != nil {
		cfg.ConnConfig.Tracer = tr
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	d := relaypgx.New(pool)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return d
}

func randomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// A FIFO batch's identities are bound in one round trip (one batch: the
// async-commit setting and the statement; in a transaction: savepoint,
// statement, release), whatever mix of fresh, bound, owned and repeated
// identities it holds — never one statement per message.
func TestBindIdentitiesOneRoundTrip(t *testing.T) {
	t.Parallel()
	dsn := testdb.PGSchema(t)
	testdb.PGDriverAt(t, dsn) // migrates
	tr := &sentTracer{}
	d := openOn(t, dsn, randomName("relay_bind_"), tr)
	ctx := t.Context()
	ex := d.GetExecutor()
	var ins []*relaydriver.MessageInsertParams
	for id := int64(1); id <= 40; id++ {
		ins = append(ins, &relaydriver.MessageInsertParams{Queue: "p", ID: id, Now: t0})
	}
	_, err := ex.MessageInsertMany(ctx, ins)
	require.NoError(t, err)
	_, err = ex.MessageBindIdentity(ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: 1, Identity: "I1"})
	require.NoError(t, err)

	bind := func(ex relaydriver.Executor, from, to int64) *relaydriver.MessageBindIdentitiesResult {
		t.Helper()
		p := &relaydriver.MessageBindIdentitiesParams{Queue: "p"}
		for id := from; id <= to; id++ {
			identity := "I" + string(rune('0'+id%10)) // repeats every ten ids; I1 is owned by 1
			p.IDs, p.Identities = append(p.IDs, id), append(p.Identities, identity)
		}
		res, err := ex.MessageBindIdentities(ctx, p)
		require.NoError(t, err)
		return res
	}
	bind(ex, 2, 3) // warms pgx's statement cache: its first use also prepares
	tr.reset()
	res := bind(ex, 4, 25)
	queries, batches := tr.sent()
	require.Empty(t, queries)
	require.Len(t, batches, 1, "one round trip")
	require.Len(t, batches[0], 2)
	require.Contains(t, batches[0][0], "synchronous_commit", "outside a transaction the binding commits asynchronously")
	require.Equal(t, int64(1), res.Owners[7], "I1 (message 11) is owned by message 1")
	require.Equal(t, int64(4), res.Owners[10], "I4 (message 14) is owned by message 4, bound in this call")
	require.Equal(t, int64(5), res.Owners[1])

	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	tr.reset()
	res = bind(tx, 26, 40)
	queries, batches = tr.sent()
	require.Empty(t, queries)
	require.Len(t, batches, 1, "one round trip in a transaction too")
	require.Len(t, batches[0], 3)
	require.Contains(t, batches[0][0], "SAVEPOINT")
	require.Contains(t, batches[0][2], "RELEASE")
	require.Equal(t, int64(6), res.Owners[0], "I6 (message 26) was bound to message 6 by the call before")
	require.NoError(t, tx.Commit(ctx))
}

// A writer that binds between the statement's snapshot and its UPDATE —
// taking one of the identities (a unique violation) or binding one of the
// messages — sends the call back to MessageBindIdentity per input, whose
// outcome is the in-order one; inside a transaction the transaction stays
// usable.
func TestBindIdentitiesConcurrentWriter(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		// rivalID/rivalIdentity is what the concurrent transaction binds.
		rivalID       int64
		rivalIdentity string
		want          *relaydriver.MessageBindIdentitiesResult
		want1         string // message 1's identity afterwards
	}{
		{"IdentityTaken", 2, "X", &relaydriver.MessageBindIdentitiesResult{Owners: []int64{2, 3}, Identities: []string{"X", "Y"}}, ""},
		{"MessageBound", 1, "Z", &relaydriver.MessageBindIdentitiesResult{Owners: []int64{1, 3}, Identities: []string{"Z", "Y"}}, "Z"},
	} {
		for _, inTx := range []bool{false, true} {
			name := c.name
			if inTx {
				name += "InTx"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				dsn := testdb.PGSchema(t)
				rival := testdb.PGDriverAt(t, dsn)
				app := randomName("relay_bind_race_")
				d := openOn(t, dsn, app, nil)
				ctx := t.Context()
				_, err := rival.GetExecutor().MessageInsertMany(ctx, []*relaydriver.MessageInsertParams{
					{Queue: "p", ID: 1, Now: t0}, {Queue: "p", ID: 2, Now: t0}, {Queue: "p", ID: 3, Now: t0},
				})
				require.NoError(t, err)

				rtx, err := rival.Begin(ctx)
				require.NoError(t, err)
				defer rtx.Rollback(ctx) //nolint:errcheck
				_, err = rtx.MessageBindIdentity(ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: c.rivalID, Identity: c.rivalIdentity})
				require.NoError(t, err)

				var ex relaydriver.Executor = d.GetExecutor()
				var tx relaydriver.ExecutorTx
				if inTx {
					tx, err = d.Begin(ctx)
					require.NoError(t, err)
					defer tx.Rollback(ctx) //nolint:errcheck
					ex = tx
				}
				type outcome struct {
					res *relaydriver.MessageBindIdentitiesResult
					err error
				}
				done := make(chan outcome, 1)
				go func() {
					res, err := ex.MessageBindIdentities(ctx, &relaydriver.MessageBindIdentitiesParams{
						Queue: "p", IDs: []int64{1, 3}, Identities: []string{"X", "Y"},
					})
					done <- outcome{res, err}
				}()
				// The statement read its snapshot and now waits on the rival's
				// uncommitted row (the identity's index entry or the message row).
				require.Eventually(t, func() bool {
					var waiting int
					err := rival.GetExecutor().QueryRow(ctx,
						"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'", app).Scan(&waiting)
					require.NoError(t, err)
					return waiting == 1
				}, 30*time.Second, 10*time.Millisecond)
				require.NoError(t, rtx.Commit(ctx))

				got := <-done
				require.NoError(t, got.err)
				require.Equal(t, c.want, got.res)
				if inTx {
					require.NoError(t, tx.MessageComplete(ctx, &relaydriver.MessageCompleteParams{
						Queue: "p", ID: 3, State: relaytype.StateSucceeded, Now: t0,
					}), "the transaction is still usable")
					require.NoError(t, tx.Commit(ctx))
				}
				for id, want := range map[int64]string{1: c.want1, 3: "Y"} {
					m, err := rival.GetExecutor().MessageGet(ctx, "p", id)
					require.NoError(t, err)
					require.Equal(t, want, m.IdentityKey, "message %d", id)
				}
			})
		}
	}
}

// Several keys' latest states are one statement, not one per key.
func TestLatestUpsertManyOneStatement(t *testing.T) {
	t.Parallel()
	dsn := testdb.PGSchema(t)
	testdb.PGDriverAt(t, dsn)
	tr := &sentTracer{}
	d := openOn(t, dsn, randomName("relay_latest_"), tr)
	ctx := t.Context()
	var ps []*relaydriver.LatestUpsertParams
	for _, k := range []string{"c", "a", "b", "d"} {
		ps = append(ps, &relaydriver.LatestUpsertParams{Target: "t", Key: k, Version: 1, Type: relaydriver.OutboxUpsert,
			Payload: []byte(k), Now: t0})
	}
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	tr.reset()
	res, err := tx.LatestUpsertMany(ctx, ps)
	require.NoError(t, err)
	queries, batches := tr.sent()
	require.Len(t, queries, 1)
	require.Empty(t, batches)
	for i := range res {
		require.True(t, res[i].Accepted)
	}
	require.NoError(t, tx.Commit(ctx))
}
