package relaywork_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaytype"
	"github.com/relayhq/relay/relaywork"
)

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{})
	for _, tc := range []struct {
		cfg  relaywork.Config
		want string
	}{
		{relaywork.Config{}, "Config.Queue is required"},
		{relaywork.Config{Queue: strings.Repeat("q", 201)}, "Config.Queue has more than 200"},
		{relaywork.Config{Queue: "q", Lease: -time.Second}, "Config.Lease -1s is negative"},
		{relaywork.Config{Queue: "q", Lease: time.Microsecond}, "Config.Lease 1µs is below 1ms"},
		{relaywork.Config{Queue: "q", MaxAttempts: -1}, "Config.MaxAttempts -1 is negative"},
	} {
		_, err := relaywork.New(b.pool, tc.cfg)
		require.ErrorContains(t, err, tc.want)
	}
	_, err := relaywork.New(nil, relaywork.Config{Queue: "q"})
	require.ErrorContains(t, err, "pool is nil")
	require.Equal(t, time.Second, relaywork.DefaultBackoff(1))
	require.Equal(t, 8*time.Second, relaywork.DefaultBackoff(4))
	require.Equal(t, 256*time.Second, relaywork.DefaultBackoff(9))
	require.Equal(t, 5*time.Minute, relaywork.DefaultBackoff(10))
	require.Equal(t, 5*time.Minute, relaywork.DefaultBackoff(1000))
}

// Bump creates rows pending at revision 1 and increments existing ones; an
// idle row becomes pending; a processing row stays processing.
func TestBumpCreatesIncrementsAndRearms(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{})
	b.bump(t, "b", "a", "a") // a duplicate counts once
	for _, k := range []string{"a", "b"} {
		r := b.row(t, k)
		require.Equal(t, relaywork.StatePending, r.State)
		require.EqualValues(t, 1, r.Revision)
		require.EqualValues(t, 0, r.ProcessedRevision)
		require.Equal(t, start, r.CreatedAt)
	}
	b.clock.Advance(time.Second)
	b.bump(t, "a")
	r := b.row(t, "a")
	require.EqualValues(t, 2, r.Revision)
	require.Equal(t, start, r.UpdatedAt, "a Bump of a pending row keeps its place in line")

	require.NoError(t, inTx(b.ctx, b.pool, func(tx pgx.Tx) error { return b.store.Ensure(b.ctx, tx, []string{"c", "a"}, time.Time{}) }))
	require.Equal(t, relaywork.StateIdle, b.row(t, "c").State)
	require.EqualValues(t, 0, b.row(t, "c").Revision)
	require.EqualValues(t, 2, b.row(t, "a").Revision, "Ensure leaves existing rows alone")
	b.bump(t, "c")
	require.Equal(t, relaywork.StatePending, b.row(t, "c").State)
	require.EqualValues(t, 1, b.row(t, "c").Revision)

	cs := b.claim(t, "w1", 10)
	require.Equal(t, []string{"a", "b", "c"}, keysOf(cs), "oldest first")
	b.bump(t, "a")
	r = b.row(t, "a")
	require.Equal(t, relaywork.StateProcessing, r.State)
	require.EqualValues(t, 3, r.Revision)

	err := inTx(b.ctx, b.pool, func(tx pgx.Tx) error { return b.store.Bump(b.ctx, tx, []string{""}) })
	require.ErrorContains(t, err, "empty key")
	err = inTx(b.ctx, b.pool, func(tx pgx.Tx) error { return b.store.Bump(b.ctx, tx, []string{strings.Repeat("k", 201)}) })
	require.ErrorContains(t, err, "exceeds 200")
}

// The two-receipts race: a fact arrives while a worker processes the key;
// Done leaves the row pending (processed_revision = the claimed revision),
// the next claim sees the new revision and its Done leaves it idle.
func TestDoneWithNewFactsLeavesPending(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{})
	b.bump(t, "submit-1")
	cs := b.claim(t, "w1", 1)
	require.Len(t, cs, 1)
	c := cs[0]
	require.EqualValues(t, 1, c.Revision)
	require.EqualValues(t, 1, c.Fence)
	require.False(t, c.TakenOver)

	b.bump(t, "submit-1") // the second segment's receipt
	require.NoError(t, b.finish(c, time.Time{}))
	r := b.row(t, "submit-1")
	require.Equal(t, relaywork.StatePending, r.State)
	require.EqualValues(t, 1, r.ProcessedRevision)
	require.EqualValues(t, 2, r.Revision)
	require.Empty(t, r.LeaseOwner)

	cs = b.claim(t, "w2", 1)
	require.Len(t, cs, 1)
	require.EqualValues(t, 2, cs[0].Revision)
	require.EqualValues(t, 2, cs[0].Fence)
	require.NoError(t, b.finish(cs[0], time.Time{}))
	r = b.row(t, "submit-1")
	require.Equal(t, relaywork.StateIdle, r.State)
	require.EqualValues(t, 2, r.ProcessedRevision)
	require.True(t, r.NextAttemptAt.IsZero())
	require.Empty(t, b.claim(t, "w2", 1), "idle without a wake-up is not claimable")

	// Done a second time with the same claim is fenced.
	require.ErrorIs(t, b.finish(cs[0], time.Time{}), relaywork.ErrFenced)
}

// Concurrent claimers on separate pools never get the same row, and every
// row is claimed exactly once.
func TestConcurrentClaimersNeverShareARow(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{})
	const n = 300
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%03d", i)
	}
	b.bump(t, keys...)

	const claimers = 4
	got := make([][]string, claimers)
	var wg sync.WaitGroup
	errs := make(chan error, claimers)
	for w := range claimers {
		pool, err := pgxpool.New(b.ctx, b.url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		s, err := relaywork.New(pool, relaywork.Config{Queue: "q", Clock: b.clock})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				cs, err := s.Claim(b.ctx, fmt.Sprintf("w%d", w), 7)
				if err != nil {
					errs <- err
					return
				}
				if len(cs) == 0 {
					return
				}
				got[w] = append(got[w], keysOf(cs)...)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var all []string
	for _, g := range got {
		all = append(all, g...)
	}
	slices.Sort(all)
	require.Equal(t, keys, all, "each row claimed exactly once")
}

// A worker whose lease expired is fenced out: a second worker takes the row
// over (TakenOver, fence+1) and only the second worker's Lock and Done pass.
func TestLeaseExpiryFencesTheStaleHolder(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{Lease: 30 * time.Second})
	b.bump(t, "k")
	c1 := b.claim(t, "w1", 1)[0]
	require.Equal(t, start.Add(30*time.Second), b.row(t, "k").LeaseUntil)

	b.clock.Advance(29 * time.Second)
	require.Empty(t, b.claim(t, "w2", 1), "a live lease is not taken over")
	b.clock.Advance(2 * time.Second)
	cs := b.claim(t, "w2", 1)
	require.Len(t, cs, 1)
	c2 := cs[0]
	require.True(t, c2.TakenOver)
	require.Equal(t, c1.Fence+1, c2.Fence)
	require.Equal(t, "w2", c2.Owner)

	// w1's side-effect transaction is refused at its first statement.
	err := b.finish(c1, time.Time{})
	require.ErrorIs(t, err, relaywork.ErrFenced)
	require.ErrorContains(t, err, "q/k")
	// Done alone (without Lock) is refused too.
	err = inTx(b.ctx, b.pool, func(tx pgx.Tx) error { return b.store.Done(b.ctx, tx, c1, time.Time{}) })
	require.ErrorIs(t, err, relaywork.ErrFenced)
	require.ErrorIs(t, b.store.Fail(b.ctx, c1, errors.New("late")), relaywork.ErrFenced)

	require.NoError(t, b.finish(c2, time.Time{}))
	r := b.row(t, "k")
	require.Equal(t, relaywork.StateIdle, r.State)
	require.EqualValues(t, 2, r.Fence)
	require.EqualValues(t, 1, r.ProcessedRevision)
}

// Lock refuses a holder whose lease expired even when nobody took the row yet.
func TestLockRefusesAnExpiredLease(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{Lease: 10 * time.Second})
	b.bump(t, "k")
	c := b.claim(t, "w1", 1)[0]
	b.clock.Advance(10 * time.Second)
	err := inTx(b.ctx, b.pool, func(tx pgx.Tx) error { return b.store.Lock(b.ctx, tx, c) })
	require.ErrorIs(t, err, relaywork.ErrFenced)
	require.ErrorContains(t, err, "lease expired")
}

// Renew keeps a lease alive past its first expiry; after a takeover Renew
// reports the claim lost.
func TestRenewKeepsAndReportsLoss(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{Lease: 30 * time.Second})
	b.bump(t, "a", "b")
	cs := b.claim(t, "w1", 2)
	require.Len(t, cs, 2)
	b.clock.Advance(20 * time.Second)
	lost, err := b.store.Renew(b.ctx, cs)
	require.NoError(t, err)
	require.Empty(t, lost)
	require.Equal(t, start.Add(50*time.Second), b.row(t, "a").LeaseUntil)
	b.clock.Advance(20 * time.Second) // 40s: past the first lease, within the renewed one
	require.Empty(t, b.claim(t, "w2", 2))

	// Finish a; let b expire and be taken over.
	require.NoError(t, b.finish(cs[0], time.Time{}))
	b.clock.Advance(11 * time.Second)
	require.Len(t, b.claim(t, "w2", 2), 1)
	lost, err = b.store.Renew(b.ctx, cs)
	require.NoError(t, err)
	require.Equal(t, cs, lost, "a finished and b taken over: both lost")
}

// Fail waits the backoff on the clock; MaxAttempts failures end in
// needs_review, which a Bump does not re-arm and Rearm does.
func TestFailBacksOffThenNeedsReview(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{MaxAttempts: 3})
	b.bump(t, "k")
	c := b.claim(t, "w1", 1)[0]
	require.Equal(t, 0, c.Attempts)
	long := "supplier said:\nno\x00" + strings.Repeat("é", 400)
	require.NoError(t, b.store.Fail(b.ctx, c, errors.New(long)))
	r := b.row(t, "k")
	require.Equal(t, relaywork.StateRetryWait, r.State)
	require.Equal(t, 1, r.Attempts)
	require.Equal(t, start.Add(time.Second), r.NextAttemptAt)
	require.Empty(t, r.LeaseOwner)
	require.LessOrEqual(t, len([]rune(r.LastError)), relaywork.MaxErrorText)
	require.NotContains(t, r.LastError, "\n")
	require.NotContains(t, r.LastError, "\x00")
	require.True(t, strings.HasPrefix(r.LastError, "supplier said: no "))

	b.clock.Advance(999 * time.Millisecond)
	require.Empty(t, b.claim(t, "w1", 1), "not claimable before next_attempt_at")
	b.clock.Advance(time.Millisecond)
	c = b.claim(t, "w1", 1)[0]
	require.Equal(t, 1, c.Attempts)
	require.NoError(t, b.store.Fail(b.ctx, c, errors.New("again")))
	require.Equal(t, start.Add(time.Second+2*time.Second), b.row(t, "k").NextAttemptAt)

	b.bump(t, "k") // a new fact during retry_wait keeps the wait
	require.Equal(t, relaywork.StateRetryWait, b.row(t, "k").State)
	b.clock.Advance(2 * time.Second)
	c = b.claim(t, "w1", 1)[0]
	require.Equal(t, 2, c.Attempts)
	require.NoError(t, b.store.Fail(b.ctx, c, errors.New("third")))
	r = b.row(t, "k")
	require.Equal(t, relaywork.StateNeedsReview, r.State)
	require.Equal(t, 3, r.Attempts)
	require.True(t, r.NextAttemptAt.IsZero())
	require.Equal(t, "third", r.LastError)

	b.bump(t, "k")
	b.clock.Advance(time.Hour)
	require.Empty(t, b.claim(t, "w1", 1), "needs_review is not claimable, even after a Bump")
	st, err := b.store.Stats(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.NeedsReview())

	require.NoError(t, b.store.Rearm(b.ctx, "k"))
	require.ErrorIs(t, b.store.Rearm(b.ctx, "k"), relaytype.ErrNotFound)
	require.ErrorIs(t, b.store.Rearm(b.ctx, "nope"), relaytype.ErrNotFound)
	c = b.claim(t, "w1", 1)[0]
	require.Equal(t, 0, c.Attempts)
	require.EqualValues(t, 3, c.Revision)
	require.NoError(t, b.finish(c, time.Time{}))
	r = b.row(t, "k")
	require.Equal(t, relaywork.StateIdle, r.State)
	require.Empty(t, r.LastError)
}

// A domain sends a case to a person with Review, fenced like Done.
func TestReviewIsFenced(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{Lease: 10 * time.Second})
	b.bump(t, "k")
	c := b.claim(t, "w1", 1)[0]
	review := func(c relaywork.Claim) error {
		return inTx(b.ctx, b.pool, func(tx pgx.Tx) error {
			if err := b.store.Lock(b.ctx, tx, c); err != nil {
				return err
			}
			return b.store.Review(b.ctx, tx, c, "receipts disagree")
		})
	}
	b.clock.Advance(11 * time.Second)
	c2 := b.claim(t, "w2", 1)[0]
	require.ErrorIs(t, review(c), relaywork.ErrFenced)
	require.NoError(t, review(c2))
	r := b.row(t, "k")
	require.Equal(t, relaywork.StateNeedsReview, r.State)
	require.Equal(t, "receipts disagree", r.LastError)
}

// Ensure with a wake-up time: the idle row becomes claimable at wakeAt, not
// before; Done with a wake-up re-arms the timer.
func TestEnsureWakeUp(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{})
	wake := start.Add(10 * time.Second)
	require.NoError(t, inTx(b.ctx, b.pool, func(tx pgx.Tx) error { return b.store.Ensure(b.ctx, tx, []string{"k"}, wake) }))
	require.NoError(t, inTx(b.ctx, b.pool, func(tx pgx.Tx) error {
		return b.store.Ensure(b.ctx, tx, []string{"k"}, start.Add(time.Second))
	}))
	r := b.row(t, "k")
	require.Equal(t, relaywork.StateIdle, r.State)
	require.Equal(t, wake, r.NextAttemptAt, "Ensure leaves an existing row alone")

	b.clock.Advance(9 * time.Second)
	require.Empty(t, b.claim(t, "w1", 1))
	b.clock.Advance(time.Second)
	c := b.claim(t, "w1", 1)[0]
	require.EqualValues(t, 0, c.Revision)
	next := b.clock.Now().Add(time.Minute)
	require.NoError(t, b.finish(c, next))
	r = b.row(t, "k")
	require.Equal(t, relaywork.StateIdle, r.State)
	require.Equal(t, next, r.NextAttemptAt)
	b.clock.Set(next)
	require.Len(t, b.claim(t, "w1", 1), 1)
}

// Release hands an owner's rows back at once; other owners' rows stay.
func TestReleaseHandsRowsBack(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{})
	b.bump(t, "a", "b", "c")
	mine := b.claim(t, "w1", 2)
	theirs := b.claim(t, "w2", 1)
	require.Len(t, mine, 2)
	require.Len(t, theirs, 1)
	n, err := b.store.Release(b.ctx, "w1")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for _, c := range mine {
		r := b.row(t, c.Key)
		require.Equal(t, relaywork.StatePending, r.State)
		require.Empty(t, r.LeaseOwner)
		require.True(t, r.LeaseUntil.IsZero())
	}
	again := b.claim(t, "w3", 3)
	require.ElementsMatch(t, keysOf(mine), keysOf(again))
	for i, c := range again {
		require.Equal(t, mine[i].Fence+1, c.Fence, "the released claims are fenced out")
		require.False(t, c.TakenOver)
	}
	require.ErrorIs(t, b.finish(mine[0], time.Time{}), relaywork.ErrFenced)
	require.Equal(t, "w2", b.row(t, theirs[0].Key).LeaseOwner)
}

// Stats counts per state and reports the oldest pending and retry times.
func TestStats(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{})
	b.bump(t, "a")
	b.clock.Advance(time.Second)
	b.bump(t, "b", "c")
	c := b.claim(t, "w1", 1)[0] // a
	require.Equal(t, "a", c.Key)
	require.NoError(t, b.store.Fail(b.ctx, c, errors.New("x")))
	st, err := b.store.Stats(b.ctx)
	require.NoError(t, err)
	require.Equal(t, map[relaywork.State]int{
		relaywork.StatePending: 2, relaywork.StateProcessing: 0, relaywork.StateRetryWait: 1,
		relaywork.StateIdle: 0, relaywork.StateNeedsReview: 0,
	}, st.Counts)
	require.Equal(t, start.Add(time.Second), st.OldestPendingSince)
	require.Equal(t, start.Add(2*time.Second), st.OldestRetryDue)
}

// Without a Clock the database's clock_timestamp() stamps the rows: a claim
// holds a lease that others respect until it expires.
func TestDatabaseTime(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{})
	s, err := relaywork.New(b.pool, relaywork.Config{Queue: "dbtime", Lease: 300 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, inTx(b.ctx, b.pool, func(tx pgx.Tx) error { return s.Bump(b.ctx, tx, []string{"k"}) }))
	cs, err := s.Claim(b.ctx, "w1", 1)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	r, err := s.Get(b.ctx, "k")
	require.NoError(t, err)
	require.WithinDuration(t, r.UpdatedAt.Add(300*time.Millisecond), r.LeaseUntil, time.Millisecond)
	// The rows of queue "q" (fake clock, year 2026) are not this store's.
	require.Empty(t, b.claim(t, "other", 1))

	// w2 gets the row only once the lease has run out in the database's time.
	var c2 relaywork.Claim
	require.Eventually(t, func() bool {
		cs, err := s.Claim(b.ctx, "w2", 1)
		require.NoError(t, err)
		if len(cs) == 0 {
			return false
		}
		c2 = cs[0]
		return true
	}, 10*time.Second, 20*time.Millisecond)
	require.True(t, c2.TakenOver)
	require.Equal(t, cs[0].Fence+1, c2.Fence)
	err = inTx(b.ctx, b.pool, func(tx pgx.Tx) error { return s.Lock(b.ctx, tx, cs[0]) })
	require.ErrorIs(t, err, relaywork.ErrFenced)
	require.NoError(t, inTx(b.ctx, b.pool, func(tx pgx.Tx) error {
		if err := s.Lock(b.ctx, tx, c2); err != nil {
			return err
		}
		return s.Done(b.ctx, tx, c2, time.Time{})
	}))
	r, err = s.Get(b.ctx, "k")
	require.NoError(t, err)
	require.Equal(t, relaywork.StateIdle, r.State)
}

// A fact that arrives while a worker's side-effect transaction holds the
// row (after Lock) waits for it, then re-arms the row: the run either saw
// the fact or the row is pending again afterwards.
func TestBumpWaitsForLockedRunThenRearms(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{})
	b.bump(t, "k")
	c := b.claim(t, "w1", 1)[0]
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(b.ctx) }()
	require.NoError(t, b.store.Lock(b.ctx, tx, c))
	var lockerPID int
	require.NoError(t, tx.QueryRow(b.ctx, "SELECT pg_backend_pid()").Scan(&lockerPID))

	bumped := make(chan error, 1)
	go func() {
		bumped <- inTx(b.ctx, b.pool, func(tx pgx.Tx) error { return b.store.Bump(b.ctx, tx, []string{"k"}) })
	}()
	require.Eventually(t, func() bool {
		var waiting bool
		require.NoError(t, b.pool.QueryRow(b.ctx,
			"SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)))", lockerPID).Scan(&waiting))
		return waiting
	}, 10*time.Second, 5*time.Millisecond, "the Bump waits for the locked row")
	require.NoError(t, b.store.Done(b.ctx, tx, c, time.Time{}))
	require.NoError(t, tx.Commit(b.ctx))
	require.NoError(t, <-bumped)
	r := b.row(t, "k")
	require.Equal(t, relaywork.StatePending, r.State)
	require.EqualValues(t, 2, r.Revision)
	require.EqualValues(t, 1, r.ProcessedRevision)
}

// While a holder's side-effect transaction has the row locked, no claimer
// can take it over, even past the lease: Lock's check holds until commit.
func TestNoTakeoverDuringALockedCommit(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{Lease: 10 * time.Second})
	b.bump(t, "k")
	c := b.claim(t, "w1", 1)[0]
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(b.ctx) }()
	require.NoError(t, b.store.Lock(b.ctx, tx, c))
	b.clock.Advance(time.Minute)
	require.Empty(t, b.claim(t, "w2", 1), "the locked row is skipped")
	require.NoError(t, b.store.Done(b.ctx, tx, c, time.Time{}))
	require.NoError(t, tx.Commit(b.ctx))
	require.Empty(t, b.claim(t, "w2", 1))
	require.Equal(t, relaywork.StateIdle, b.row(t, "k").State)
}

// Claim takes the oldest first across kinds: pending by when it became
// pending, retry_wait and wake-ups by their due time, takeovers by lease end.
func TestClaimOldestFirst(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{Lease: 3 * time.Second})
	b.bump(t, "retry")
	require.NoError(t, b.store.Fail(b.ctx, b.claim(t, "w1", 1)[0], errors.New("x"))) // due at 1s
	b.bump(t, "lease")
	require.Equal(t, []string{"lease"}, keysOf(b.claim(t, "w1", 1))) // lease ends at 3s
	require.NoError(t, inTx(b.ctx, b.pool, func(tx pgx.Tx) error {
		return b.store.Ensure(b.ctx, tx, []string{"wake"}, start.Add(2*time.Second))
	}))
	b.clock.Advance(500 * time.Millisecond)
	b.bump(t, "early") // pending since 0.5s
	b.clock.Advance(3500 * time.Millisecond)
	b.bump(t, "late") // pending since 4s
	cs := b.claim(t, "w2", 10)
	require.Equal(t, []string{"early", "retry", "wake", "lease", "late"}, keysOf(cs))
	require.Equal(t, []bool{false, false, false, true, false}, []bool{cs[0].TakenOver, cs[1].TakenOver, cs[2].TakenOver, cs[3].TakenOver, cs[4].TakenOver})
	// A limit smaller than the candidates takes the oldest.
	b.bump(t, "x", "y")
	b.clock.Advance(time.Minute) // every lease of w2 expires; x and y are older (4s)
	require.Equal(t, []string{"x", "y"}, keysOf(b.claim(t, "w3", 2)))
}

// LockMany and DoneMany: of three claims, one taken over after its lease
// lapsed is reported fenced and left alone; the two held ones are done in
// one statement — one idle with its wake-up, one pending again because a
// fact arrived while it ran. DoneMany with a stale claim is refused.
func TestLockManyDoneMany(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{Lease: 30 * time.Second})
	b.bump(t, "a", "b", "c")
	cs := b.claim(t, "w1", 3)
	require.Len(t, cs, 3)
	stale, mine := cs[0], cs[1:]
	b.clock.Advance(20 * time.Second)
	lost, err := b.store.Renew(b.ctx, mine) // w1 keeps two leases, lets the first lapse
	require.NoError(t, err)
	require.Empty(t, lost)
	b.clock.Advance(11 * time.Second)
	taken := b.claim(t, "w2", 3)
	require.Len(t, taken, 1)
	require.Equal(t, stale.Key, taken[0].Key)
	all := append([]relaywork.Claim{stale}, mine...)
	b.bump(t, mine[1].Key) // a fact while w1 runs
	wake := start.Add(time.Hour)
	err = inTx(b.ctx, b.pool, func(tx pgx.Tx) error {
		held, fenced, err := b.store.LockMany(b.ctx, tx, all)
		if err != nil {
			return err
		}
		require.Equal(t, []relaywork.Claim{stale}, fenced)
		require.ElementsMatch(t, mine, held)
		require.ErrorIs(t, b.store.DoneMany(b.ctx, tx, []relaywork.Claim{stale}, []time.Time{wake}), relaywork.ErrFenced)
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, inTx(b.ctx, b.pool, func(tx pgx.Tx) error {
		held, _, err := b.store.LockMany(b.ctx, tx, mine)
		if err != nil {
			return err
		}
		return b.store.DoneMany(b.ctx, tx, held, []time.Time{wake, wake})
	}))
	r0, r1 := b.row(t, mine[0].Key), b.row(t, mine[1].Key)
	require.Equal(t, relaywork.StateIdle, r0.State)
	require.Equal(t, wake, r0.NextAttemptAt)
	require.Equal(t, relaywork.StatePending, r1.State, "revision moved while it ran")
	require.Equal(t, relaywork.StateProcessing, b.row(t, stale.Key).State, "still w2's")
}
