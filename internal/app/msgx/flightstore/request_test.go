package flightstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/flightstore"
	"github.com/relayhq/relay/relaytype"
)

func (b *bundle) requestState(t *testing.T, id int64) string {
	t.Helper()
	var st string
	require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT state FROM req_track WHERE id = $1", id).Scan(&st))
	return st
}

// PENDING -> SENT -> DONE, with every guard of G-REQ-TRACK.
func TestRequestLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	t0, t1, t2 := base, base.Add(time.Second), base.Add(2*time.Second)

	r, err := flightstore.RequestRegister(b.ctx, b.pool, &flightstore.Request{Type: "SCHD", Scope: "20260301", Sender: "AODB", SEQN: "100", State: "DONE", ID: 9}, t0)
	require.NoError(t, err)
	require.Positive(t, r.ID)
	require.Equal(t, &flightstore.Request{ID: r.ID, Type: "SCHD", Scope: "20260301", Sender: "AODB", SEQN: "100", State: "PENDING", CreatedAt: t0}, r)

	pending, err := flightstore.RequestPending(b.ctx, b.pool)
	require.NoError(t, err)
	require.Equal(t, []*flightstore.Request{r}, pending)

	found, err := flightstore.RequestFindOpen(b.ctx, b.pool, "SCHD", "AODB", "100")
	require.NoError(t, err)
	require.Equal(t, r, found, "a PENDING request is open")
	ok, err := flightstore.RequestDone(b.ctx, b.pool, r.ID, t1)
	require.NoError(t, err)
	require.False(t, ok, "only SENT can be DONE")

	require.NoError(t, flightstore.RequestMarkSent(b.ctx, b.pool, r.ID, 555, t1))
	require.ErrorIs(t, flightstore.RequestMarkSent(b.ctx, b.pool, r.ID, 556, t1), flightstore.ErrNoRequest)
	require.Error(t, flightstore.RequestMarkSent(b.ctx, b.pool, r.ID, 0, t1))

	found, err = flightstore.RequestFindOpen(b.ctx, b.pool, "SCHD", "AODB", "100")
	require.NoError(t, err)
	require.Equal(t, &flightstore.Request{ID: r.ID, Type: "SCHD", Scope: "20260301", Sender: "AODB", SEQN: "100",
		State: "SENT", OutboxID: 555, CreatedAt: t0, SentAt: t1}, found)
	for _, miss := range [][3]string{{"SCHD", "AODB", "101"}, {"REFD", "AODB", "100"}, {"SCHD", "OTHER", "100"}} {
		_, err = flightstore.RequestFindOpen(b.ctx, b.pool, miss[0], miss[1], miss[2])
		require.ErrorIs(t, err, flightstore.ErrNoRequest, miss)
	}

	ok, err = flightstore.RequestDone(b.ctx, b.pool, r.ID, t2)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = flightstore.RequestDone(b.ctx, b.pool, r.ID, t2)
	require.NoError(t, err)
	require.False(t, ok, "a late second response changes nothing")
	_, err = flightstore.RequestFindOpen(b.ctx, b.pool, "SCHD", "AODB", "100")
	require.ErrorIs(t, err, flightstore.ErrNoRequest)

	// A SEQN is unique per sender over every retained row.
	_, err = flightstore.RequestRegister(b.ctx, b.pool, &flightstore.Request{Type: "REFD", Scope: "AIRLINE", Sender: "AODB", SEQN: "100"}, t2)
	require.ErrorIs(t, err, relaytype.ErrConflict)
	_, err = flightstore.RequestRegister(b.ctx, b.pool, &flightstore.Request{Type: "REFD", Scope: "AIRLINE", Sender: "FIDS", SEQN: "100"}, t2)
	require.NoError(t, err)

	for name, bad := range map[string]*flightstore.Request{
		"type":   {Type: "FLOP", Scope: "x", Sender: "AODB", SEQN: "1"},
		"scope":  {Type: "SCHD", Sender: "AODB", SEQN: "1"},
		"sender": {Type: "SCHD", Scope: "x", SEQN: "1"},
		"seqn":   {Type: "SCHD", Scope: "x", Sender: "AODB"},
	} {
		_, err := flightstore.RequestRegister(b.ctx, b.pool, bad, t2)
		require.Error(t, err, name)
	}
}

// A new registration expires the open one of the same (type, scope, sender),
// PENDING or SENT; other scopes and senders are independent.
func TestRequestRegisterExpiresOpen(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := func(scope, sender, seqn string) *flightstore.Request {
		r, err := flightstore.RequestRegister(b.ctx, b.pool, &flightstore.Request{Type: "SCHD", Scope: scope, Sender: sender, SEQN: seqn}, base)
		require.NoError(t, err)
		return r
	}
	r1 := reg("20260301", "AODB", "1")
	other := reg("20260302", "AODB", "2")
	r2 := reg("20260301", "AODB", "3")
	require.Equal(t, "EXPIRED", b.requestState(t, r1.ID))
	require.NoError(t, flightstore.RequestMarkSent(b.ctx, b.pool, r2.ID, 7, base))
	r3 := reg("20260301", "AODB", "4")
	require.Equal(t, "EXPIRED", b.requestState(t, r2.ID))
	require.Equal(t, "PENDING", b.requestState(t, r3.ID))
	require.Equal(t, "PENDING", b.requestState(t, other.ID))
	require.ErrorIs(t, flightstore.RequestMarkSent(b.ctx, b.pool, r1.ID, 8, base), flightstore.ErrNoRequest)
}

// Concurrent registrations of one (type, scope, sender) all succeed and leave
// exactly one open request; the partial unique index refuses a second open row
// even when the advisory serialisation is bypassed.
func TestRequestRegisterConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 16
	var (
		wg   sync.WaitGroup
		errs = make(chan error, n)
	)
	for i := range n {
		wg.Go(func() {
			_, err := flightstore.RequestRegister(b.ctx, b.pool, &flightstore.Request{Type: "REFD", Scope: "AIRLINE", Sender: "AODB", SEQN: fmt.Sprint(i)}, base.Add(time.Duration(i)*time.Second))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM req_track WHERE state IN ('PENDING', 'SENT')"))
	require.Equal(t, n-1, b.count(t, "SELECT count(*) FROM req_track WHERE state = 'EXPIRED'"))

	_, err := b.pool.Exec(b.ctx, `INSERT INTO req_track (req_type, scope, sender, seqn, state, created_at)
		VALUES ('REFD', 'AIRLINE', 'AODB', 'raw', 'PENDING', $1)`, base)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "%v", err)
	require.Equal(t, "req_track_open_key", pgErr.ConstraintName)
}

// RequestExpire closes SENT and PENDING requests older than the cut-off;
// RequestPurgeClosed deletes closed rows closed before the time.
func TestRequestExpireAndPurge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	reg := func(scope, seqn string, at time.Time) *flightstore.Request {
		r, err := flightstore.RequestRegister(b.ctx, b.pool, &flightstore.Request{Type: "SCHD", Scope: scope, Sender: "AODB", SEQN: seqn}, at)
		require.NoError(t, err)
		return r
	}
	oldSent := reg("20260301", "1", base)
	require.NoError(t, flightstore.RequestMarkSent(b.ctx, b.pool, oldSent.ID, 1, base))
	newSent := reg("20260302", "2", base)
	require.NoError(t, flightstore.RequestMarkSent(b.ctx, b.pool, newSent.ID, 2, base.Add(time.Hour)))
	oldPending := reg("20260303", "3", base)
	newPending := reg("20260304", "4", base.Add(time.Hour))

	n, err := flightstore.RequestExpire(b.ctx, b.pool, base.Add(time.Minute), base.Add(2*time.Hour))
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, "EXPIRED", b.requestState(t, oldSent.ID))
	require.Equal(t, "EXPIRED", b.requestState(t, oldPending.ID))
	require.Equal(t, "SENT", b.requestState(t, newSent.ID))
	require.Equal(t, "PENDING", b.requestState(t, newPending.ID))
	ok, err := flightstore.RequestDone(b.ctx, b.pool, oldSent.ID, base.Add(3*time.Hour))
	require.NoError(t, err)
	require.False(t, ok, "an expired request is never completed")
	ok, err = flightstore.RequestDone(b.ctx, b.pool, newSent.ID, base.Add(3*time.Hour))
	require.NoError(t, err)
	require.True(t, ok)

	// Closed at +2h (two expired) and +3h (done).
	n, err = flightstore.RequestPurgeClosed(b.ctx, b.pool, base.Add(150*time.Minute), 1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = flightstore.RequestPurgeClosed(b.ctx, b.pool, base.Add(150*time.Minute), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 2, b.count(t, "SELECT count(*) FROM req_track"))
	_, err = flightstore.RequestPurgeClosed(b.ctx, b.pool, base, 0)
	require.Error(t, err)
	// The purged SEQNs can be used again.
	reg("20260305", "1", base.Add(4*time.Hour))
}

// FindOpen locks the row: RequestExpire waits for the response's transaction,
// which therefore always completes the request it found SENT.
func TestRequestFindOpenLocksAgainstExpire(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r, err := flightstore.RequestRegister(b.ctx, b.pool, &flightstore.Request{Type: "SCHD", Scope: "20260301", Sender: "AODB", SEQN: "1"}, base)
	require.NoError(t, err)
	require.NoError(t, flightstore.RequestMarkSent(b.ctx, b.pool, r.ID, 1, base))

	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(b.ctx) }()
	_, err = flightstore.RequestFindOpen(b.ctx, tx, "SCHD", "AODB", "1")
	require.NoError(t, err)
	other, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	defer other.Release()
	var pid int
	require.NoError(t, other.QueryRow(b.ctx, "SELECT pg_backend_pid()").Scan(&pid))
	expired := make(chan int, 1)
	go func() {
		n, err := flightstore.RequestExpire(b.ctx, other, base.Add(time.Hour), base.Add(time.Hour))
		if err != nil {
			n = -1
		}
		expired <- n
	}()
	require.Eventually(t, func() bool { // the expiry waits for the row lock
		return b.count(t, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'", pid) > 0
	}, 10*time.Second, 5*time.Millisecond)
	ok, err := flightstore.RequestDone(b.ctx, tx, r.ID, base.Add(time.Minute))
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, tx.Commit(b.ctx))
	require.Equal(t, 0, <-expired)
	require.Equal(t, "DONE", b.requestState(t, r.ID))
}
