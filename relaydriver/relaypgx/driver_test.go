package relaypgx_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)

func TestCapabilities(t *testing.T) {
	t.Parallel()
	d := testdb.PGDriver(t)
	require.Equal(t, "postgres", d.Name())
	require.True(t, d.SupportsSkipLocked())
	require.True(t, d.SupportsListenNotify())
	migs, err := relaymigrate.Load(relaymigrate.EngineLineOf(d))
	require.NoError(t, err)
	require.Equal(t, "engine", migs[0].Line)
	require.Equal(t, 1, migs[0].Version)
	require.Equal(t, "engine", migs[0].Name)

	tx, err := d.Begin(t.Context())
	require.NoError(t, err)
	defer tx.Rollback(t.Context()) //nolint:errcheck
	_, ok := tx.Unwrap().(pgx.Tx)
	require.True(t, ok, "Unwrap returns pgx.Tx")
	require.NoError(t, tx.Commit(t.Context()))
	require.NoError(t, tx.Rollback(t.Context()), "Rollback after Commit is a no-op")
}

// Times come back in UTC whatever zone they were written in.
func TestTimesUTC(t *testing.T) {
	t.Parallel()
	d := testdb.PGDriver(t)
	ex := d.GetExecutor()
	zoned := t0.In(time.FixedZone("CST", 8*3600))
	_, err := ex.MessageInsertMany(t.Context(), []*relaydriver.MessageInsertParams{{Queue: "p", ID: 1, ReceivedAt: zoned, Now: zoned}})
	require.NoError(t, err)
	m, err := ex.MessageGet(t.Context(), "p", 1)
	require.NoError(t, err)
	require.Equal(t, time.UTC, m.EnqueuedAt.Location())
	require.True(t, t0.Equal(m.EnqueuedAt))
	require.True(t, t0.Equal(m.ReceivedAt))
}

// An allocated id that someone inserted explicitly is skipped, not reported as
// a message the caller did not write.
func TestInsertAllocatedIDCollision(t *testing.T) {
	t.Parallel()
	d := testdb.PGDriver(t)
	ex := d.GetExecutor()
	res, err := ex.MessageInsertMany(t.Context(), []*relaydriver.MessageInsertParams{{Queue: "p", Now: t0}})
	require.NoError(t, err)
	x := res.IDs[0]
	_, err = ex.MessageInsertMany(t.Context(), []*relaydriver.MessageInsertParams{
		{Queue: "p", ID: x + 1, Payload: []byte("explicit"), Now: t0},
		{Queue: "p", ID: x + 2, Payload: []byte("explicit"), Now: t0},
	})
	require.NoError(t, err)
	res, err = ex.MessageInsertMany(t.Context(), []*relaydriver.MessageInsertParams{{Queue: "p", Payload: []byte("allocated"), Now: t0}})
	require.NoError(t, err)
	require.Equal(t, 1, res.Inserted)
	require.Greater(t, res.IDs[0], x+2)
	m, err := ex.MessageGet(t.Context(), "p", res.IDs[0])
	require.NoError(t, err)
	require.Equal(t, []byte("allocated"), m.Payload)
}

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	d := testdb.PGDriver(t)
	ex := d.GetExecutor()
	ctx := t.Context()
	_, err := ex.MessageInsertMany(ctx, []*relaydriver.MessageInsertParams{{Queue: "p", ID: 1, Now: t0}})
	require.NoError(t, err)

	_, err = ex.Exec(ctx, "INSERT INTO relay_message (queue, id, enqueued_at, updated_at) VALUES ($1, $2, $3, $3)", "p", int64(1), t0)
	require.ErrorIs(t, err, relaytype.ErrConflict)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)

	_, err = ex.Exec(ctx, "DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '40001'; END $$")
	require.ErrorIs(t, err, relaytype.ErrTransient)
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "40001", pgErr.Code)

	_, err = ex.Exec(ctx, "SELECT * FROM no_such_table")
	require.Error(t, err)
	require.NotErrorIs(t, err, relaytype.ErrTransient)

	// Nothing listens on port 1: a connection failure is transient.
	_, err = relaypgx.Open(ctx, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5")
	require.ErrorIs(t, err, relaytype.ErrTransient)
}

// The advisory lock lives with its session: when the session dies (here:
// terminated by the server, as when the process is killed) the holder's Renew
// reports ErrLocked and another instance can take the lock.
func TestLockFreedWhenSessionDies(t *testing.T) {
	t.Parallel()
	dsn := testdb.PGSchema(t)
	ctx := t.Context()
	open := func() *relaypgx.Driver {
		d, err := relaypgx.Open(ctx, dsn)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, d.Close()) })
		return d
	}
	a, b := open(), open() // two instances on one database
	params := &relaydriver.LockParams{Name: "queue:x", Owner: "a"}
	la, err := a.TryLock(ctx, params)
	require.NoError(t, err)
	_, err = b.TryLock(ctx, params)
	require.ErrorIs(t, err, relaytype.ErrLocked)

	// Find and terminate the session holding the lock.
	var pid int32
	require.NoError(t, b.Pool().QueryRow(ctx, `
		SELECT l.pid FROM pg_locks l,
		     (SELECT hashtextextended(current_schema() || '/' || $1::text, 0) AS k) s
		WHERE l.locktype = 'advisory' AND l.granted
		  AND l.classid::bigint = ((s.k >> 32) & 4294967295) AND l.objid::bigint = (s.k & 4294967295)`,
		params.Name).Scan(&pid))
	var ok bool
	require.NoError(t, b.Pool().QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok))
	require.True(t, ok)

	require.ErrorIs(t, la.Renew(ctx, t0), relaytype.ErrLocked)
	var lb relaydriver.Lock
	require.Eventually(t, func() bool {
		lb, err = b.TryLock(ctx, params)
		return err == nil
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, lb.Renew(ctx, t0))
	require.NoError(t, la.Release(ctx), "releasing a lost lock is harmless")
	require.NoError(t, lb.Renew(ctx, t0), "and does not free the new holder's lock")
}

// Close releases held locks; locks are scoped to the schema.
func TestLockCloseAndSchemaScope(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := testdb.PGSchema(t)
	a, err := relaypgx.Open(ctx, dsn)
	require.NoError(t, err)
	b, err := relaypgx.Open(ctx, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	other := testdb.PGDriver(t) // another schema of the same database

	params := &relaydriver.LockParams{Name: "queue:y", Owner: "a"}
	_, err = a.TryLock(ctx, params)
	require.NoError(t, err)
	lo, err := other.TryLock(ctx, params)
	require.NoError(t, err, "another schema is another deployment")
	require.NoError(t, lo.Release(ctx))

	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "Close is idempotent")
	lb, err := b.TryLock(ctx, params)
	require.NoError(t, err, "Close released the lock")
	require.NoError(t, lb.Release(ctx))
	_, err = a.TryLock(ctx, params)
	require.Error(t, err, "a closed driver takes no locks")
}

// Overlapping insert batches in concurrent transactions neither deadlock nor
// double count.
func TestInsertConcurrentOverlap(t *testing.T) {
	t.Parallel()
	d := testdb.PGDriver(t)
	ctx := t.Context()
	batch := func(reverse bool) []*relaydriver.MessageInsertParams {
		ps := make([]*relaydriver.MessageInsertParams, 200)
		for i := range ps {
			id := int64(i + 1)
			if reverse {
				id = int64(200 - i)
			}
			ps[i] = &relaydriver.MessageInsertParams{Queue: "p", ID: id, Now: t0}
		}
		return ps
	}
	results := make(chan int, 2)
	errs := make(chan error, 2)
	for _, reverse := range []bool{false, true} {
		go func() {
			tx, err := d.Begin(ctx)
			if err != nil {
				errs <- err
				return
			}
			res, err := tx.MessageInsertMany(ctx, batch(reverse))
			if err != nil {
				_ = tx.Rollback(ctx)
				errs <- err
				return
			}
			errs <- tx.Commit(ctx)
			results <- res.Inserted
		}()
	}
	for range 2 {
		require.NoError(t, <-errs)
	}
	require.Equal(t, 200, <-results+<-results)
	st, err := d.GetExecutor().MessageStats(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, int64(200), st.Backlog())
}

func TestOpenRejectsBadURL(t *testing.T) {
	t.Parallel()
	_, err := relaypgx.Open(context.Background(), "postgres://%zz")
	require.Error(t, err)
}

// TestAsyncCommitIsScopedToItsBatch pins what MessageBindIdentity relies on: a
// batch sent outside a transaction is one implicit transaction, so the
// set_config(…, true) that leads it ends with it and never leaks into the
// pooled connection's later statements.
func TestAsyncCommitIsScopedToItsBatch(t *testing.T) {
	t.Parallel()
	d := testdb.PGDriver(t)
	conn, err := d.Pool().Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue("SELECT set_config('synchronous_commit', 'off', true)")
	b.Queue("SHOW synchronous_commit")
	br := conn.SendBatch(t.Context(), b)
	_, err = br.Exec()
	require.NoError(t, err)
	var inside string
	require.NoError(t, br.QueryRow().Scan(&inside))
	require.NoError(t, br.Close())
	require.Equal(t, "off", inside)
	var after string
	require.NoError(t, conn.QueryRow(t.Context(), "SHOW synchronous_commit").Scan(&after))
	require.Equal(t, "on", after, "the setting ends with the batch's implicit transaction")
}

// A lease renewal skips a row another transaction holds locked — here the
// owner's own terminal write, not committed yet — instead of waiting for that
// transaction: the row is neither renewed nor reported lost, the others are
// renewed, and once the write commits the next renewal reports it.
func TestLeaseRenewSkipsLockedRows(t *testing.T) {
	t.Parallel()
	d := testdb.PGDriver(t)
	ex := d.GetExecutor()
	ctx := t.Context()
	_, err := ex.MessageInsertMany(ctx, []*relaydriver.MessageInsertParams{
		{Queue: "p", ID: 1, Now: t0}, {Queue: "p", ID: 2, Now: t0}})
	require.NoError(t, err)
	ms, err := ex.MessageClaim(ctx, &relaydriver.MessageClaimParams{Queue: "p", Limit: 2, Owner: "w1",
		LeaseUntil: t0.Add(time.Minute), Now: t0})
	require.NoError(t, err)
	require.Len(t, ms, 2)

	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	require.NoError(t, tx.MessageComplete(ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 1,
		State: relaytype.StateSucceeded, LeaseOwner: "w1", Now: t0}))

	renew := func() []int64 {
		t.Helper()
		// Bounded: a renewal that waited for the open transaction would fail here.
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res, err := ex.MessageLeaseRenew(rctx, &relaydriver.MessageLeaseRenewParams{Queue: "p", Owner: "w1",
			IDs: []int64{1, 2}, LeaseUntil: t0.Add(2 * time.Minute)})
		require.NoError(t, err)
		return res.Lost
	}
	require.Empty(t, renew(), "1 is locked (not lost), 2 is renewed")
	m1, err := ex.MessageGet(ctx, "p", 1)
	require.NoError(t, err)
	require.True(t, t0.Add(time.Minute).Equal(m1.LeaseExpiresAt), "the locked row is not renewed: %v", m1.LeaseExpiresAt)
	m2, err := ex.MessageGet(ctx, "p", 2)
	require.NoError(t, err)
	require.True(t, t0.Add(2*time.Minute).Equal(m2.LeaseExpiresAt), "renewed: %v", m2.LeaseExpiresAt)

	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, []int64{1}, renew(), "finished")
}

// TestOpenErrorsShowNoPassword: pgx's parse and connect errors may quote the
// connection string; Open's never show a password, and a connect failure is
// still classified transient.
func TestOpenErrorsShowNoPassword(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct{ conn, secret string }{
		{"postgres://relay:Pars3Pass@127.0.0.1:1/relay?pool_max_conns=many", "Pars3Pass"},
		{"host=127.0.0.1 port=1 password = 'Pars3 Pass' pool_max_conns=many", "Pars3"},
		{"host=127.0.0.1 port=1 password=Pars3Pass tail9x", "tail9x"},
	} {
		_, err := relaypgx.Open(ctx, c.conn)
		require.ErrorContains(t, err, "relaypgx: parse connection string")
		require.NotContains(t, err.Error(), c.secret)
	}
	_, err := relaypgx.Open(ctx, "postgres://relay@127.0.0.1:1/relay?connect_timeout=2&password=C0nnectPass")
	require.ErrorContains(t, err, "relaypgx: connect to 127.0.0.1:1")
	require.NotContains(t, err.Error(), "C0nnectPass")
	require.ErrorIs(t, err, relaytype.ErrTransient)
}
