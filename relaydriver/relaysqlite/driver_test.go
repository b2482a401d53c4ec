package relaysqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// t0 carries microseconds so that a lost fraction shows.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)

// open returns a migrated store on a fresh file, closed at cleanup.
func open(t *testing.T) *relaysqlite.Driver { return openB(t) }

func openB(t testing.TB) *relaysqlite.Driver {
	t.Helper()
	ctx := t.Context()
	d, err := relaysqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	_, err = relaymigrate.Up(ctx, d, relayclock.System{}, relaymigrate.EngineLineOf(d))
	require.NoError(t, err)
	return d
}

func insert(t *testing.T, ex relaydriver.Executor, queue string, ids ...int64) []int64 {
	t.Helper()
	ps := make([]*relaydriver.MessageInsertParams, len(ids))
	for i, id := range ids {
		ps[i] = &relaydriver.MessageInsertParams{Queue: queue, ID: id, Now: t0}
	}
	res, err := ex.MessageInsertMany(t.Context(), ps)
	require.NoError(t, err)
	return res.IDs
}

func TestOpenRefusesNonFilePaths(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", ":memory:", "file::memory:?cache=shared", filepath.Join(t.TempDir(), "x.db") + "?mode=ro"} {
		_, err := relaysqlite.Open(t.Context(), p)
		require.Error(t, err, "path %q", p)
	}
}

func TestMigrationFS(t *testing.T) {
	t.Parallel()
	line := relaymigrate.Line{Name: relaymigrate.EngineLine, FS: relaysqlite.MigrationFS()}
	migs, err := relaymigrate.Load(line)
	require.NoError(t, err)
	require.Equal(t, "engine", migs[0].Line)
	require.Equal(t, 1, migs[0].Version)

	d := open(t)
	ctx := t.Context()
	require.NoError(t, relaymigrate.Check(ctx, d, relaymigrate.EngineLineOf(d)))
	v, err := d.Migrator().AppliedVersions(ctx, relaymigrate.EngineLine)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2, 3, 4, 5, 6, 7}, v)
	res, err := relaymigrate.Up(ctx, d, relayclock.System{}, relaymigrate.EngineLineOf(d))
	require.NoError(t, err)
	require.Empty(t, res.Applied, "a second Up applies nothing")
}

func TestFreshStoreHasNoVersions(t *testing.T) {
	t.Parallel()
	d, err := relaysqlite.Open(t.Context(), filepath.Join(t.TempDir(), "relay.db"))
	require.NoError(t, err)
	defer d.Close()
	v, err := d.Migrator().AppliedVersions(t.Context(), "engine")
	require.NoError(t, err)
	require.Empty(t, v)
	err = relaymigrate.Check(t.Context(), d, relaymigrate.EngineLineOf(d))
	require.ErrorIs(t, err, relaytype.ErrSchemaOutdated)
}

func TestMigrationFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx := t.Context()
	err := d.Migrator().Apply(ctx, "x", 1, "bad", "CREATE TABLE x_one (a INTEGER); SELECT * FROM no_such_table;", t0)
	require.Error(t, err)
	v, err := d.Migrator().AppliedVersions(ctx, "x")
	require.NoError(t, err)
	require.Empty(t, v)
	var n int
	require.NoError(t, d.GetExecutor().QueryRow(ctx,
		"SELECT count(*) FROM sqlite_master WHERE name = 'x_one'").Scan(&n))
	require.Zero(t, n, "DDL of a failed migration is rolled back")
}

func TestPragmas(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx := t.Context()
	var mode string
	// Through the read pool …
	require.NoError(t, d.GetExecutor().QueryRow(ctx, "PRAGMA journal_mode").Scan(&mode))
	require.Equal(t, "wal", mode)
	// … and on the writer, inside a transaction.
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	var fk, syncMode, busy int
	require.NoError(t, tx.QueryRow(ctx, "PRAGMA journal_mode").Scan(&mode))
	require.NoError(t, tx.QueryRow(ctx, "PRAGMA foreign_keys").Scan(&fk))
	require.NoError(t, tx.QueryRow(ctx, "PRAGMA synchronous").Scan(&syncMode))
	require.NoError(t, tx.QueryRow(ctx, "PRAGMA busy_timeout").Scan(&busy))
	require.Equal(t, "wal", mode)
	require.Equal(t, 1, fk)
	require.Equal(t, 1, syncMode, "synchronous=NORMAL")
	require.Equal(t, int(relaysqlite.BusyTimeoutDefault.Milliseconds()), busy)
	_, ok := tx.Unwrap().(*sql.Tx)
	require.True(t, ok, "Unwrap returns *sql.Tx")
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	d := open(t)
	require.Equal(t, "sqlite", d.Name())
	require.False(t, d.SupportsSkipLocked())
	require.False(t, d.SupportsListenNotify())
}

// TestDollarPlaceholdersBindPositionally pins the finding stated in the
// package doc: $N takes the N-th argument, in any order, reused or not.
func TestDollarPlaceholdersBindPositionally(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx := t.Context()
	var a, b, c string
	require.NoError(t, d.GetExecutor().QueryRow(ctx, "SELECT $2, $1, $2", "one", "two").Scan(&a, &b, &c))
	require.Equal(t, []string{"two", "one", "two"}, []string{a, b, c})

	var n int64
	require.NoError(t, d.GetExecutor().QueryRow(ctx, "SELECT $10 + $1", 1, 0, 0, 0, 0, 0, 0, 0, 0, 100).Scan(&n))
	require.Equal(t, int64(101), n, "$10 is the tenth argument, not $1 followed by 0")

	// App SQL written for PostgreSQL runs unchanged against engine tables.
	_, err := d.GetExecutor().Exec(ctx, "CREATE TABLE app_thing (id INTEGER PRIMARY KEY, name TEXT, n INTEGER)")
	require.NoError(t, err)
	aff, err := d.GetExecutor().Exec(ctx, "INSERT INTO app_thing (n, id, name) VALUES ($3, $1, $2)", 7, "seven", 70)
	require.NoError(t, err)
	require.Equal(t, int64(1), aff)
	var name string
	require.NoError(t, d.GetExecutor().QueryRow(ctx, "SELECT name, n FROM app_thing WHERE id = $1", 7).Scan(&name, &n))
	require.Equal(t, "seven", name)
	require.Equal(t, int64(70), n)
}

func TestTimeRoundTrip(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx := t.Context()
	ex := d.GetExecutor()
	// Nanoseconds are truncated to the microsecond; any zone comes back as UTC.
	zone := time.FixedZone("UTC+8", 8*3600)
	recv := time.Date(2030, 1, 2, 11, 4, 5, 123456789, zone)
	now := time.Date(2030, 1, 2, 3, 4, 6, 999999999, time.UTC)
	_, err := ex.MessageInsertMany(ctx, []*relaydriver.MessageInsertParams{
		{Queue: "p", ID: 1, ReceivedAt: recv, Now: now},
		{Queue: "p", ID: 2, Now: now}, // ReceivedAt zero → NULL
	})
	require.NoError(t, err)

	m, err := ex.MessageGet(ctx, "p", 1)
	require.NoError(t, err)
	require.True(t, m.ReceivedAt.Equal(recv.Truncate(time.Microsecond)), "got %v", m.ReceivedAt)
	require.Equal(t, 123456000, m.ReceivedAt.Nanosecond())
	require.Equal(t, time.UTC, m.ReceivedAt.Location())
	require.True(t, m.EnqueuedAt.Equal(now.Truncate(time.Microsecond)))
	require.Equal(t, time.UTC, m.EnqueuedAt.Location())
	for name, v := range map[string]time.Time{"NextAttemptAt": m.NextAttemptAt, "AckNextAt": m.AckNextAt,
		"AckAt": m.AckAt, "AckAbandonedAt": m.AckAbandonedAt, "LeaseExpiresAt": m.LeaseExpiresAt} {
		require.True(t, v.IsZero(), "%s: NULL reads as the zero time", name)
	}
	m2, err := ex.MessageGet(ctx, "p", 2)
	require.NoError(t, err)
	require.True(t, m2.ReceivedAt.IsZero())

	// The column really holds integer microseconds (numeric comparisons).
	var raw int64
	var typ string
	require.NoError(t, ex.QueryRow(ctx, "SELECT received_at, typeof(received_at) FROM relay_message WHERE queue = $1 AND id = $2", "p", 1).Scan(&raw, &typ))
	require.Equal(t, "integer", typ)
	require.Equal(t, recv.UnixMicro(), raw)
	var null sql.NullInt64
	require.NoError(t, ex.QueryRow(ctx, "SELECT received_at FROM relay_message WHERE queue = $1 AND id = $2", "p", 2).Scan(&null))
	require.False(t, null.Valid)

	// Times before 1970 and far in the future survive too.
	for _, ts := range []time.Time{time.Date(1969, 12, 31, 23, 59, 59, 1000, time.UTC), time.Date(2999, 12, 31, 0, 0, 0, 1000, time.UTC)} {
		require.NoError(t, ex.CursorSave(ctx, &relaydriver.CursorSaveParams{Queue: "c", Watermark: 1, HoleSince: ts, Now: now}))
		c, err := ex.CursorGet(ctx, "c")
		require.NoError(t, err)
		require.True(t, c.HoleSince.Equal(ts), "want %v got %v", ts, c.HoleSince)
	}
	require.NoError(t, ex.CursorSave(ctx, &relaydriver.CursorSaveParams{Queue: "c", Watermark: 2, Now: now}))
	c, err := ex.CursorGet(ctx, "c")
	require.NoError(t, err)
	require.True(t, c.HoleSince.IsZero(), "zero HoleSince is stored as NULL")
	require.True(t, c.SeededAt.IsZero())
}

// TestConcurrentWriters runs writers on several goroutines, through
// autocommit calls and explicit transactions: the single writer queues them,
// so none fails with SQLITE_BUSY.
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx := t.Context()
	const workers, per = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers*per+50)
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				id := int64(w*per + i + 1)
				if i%2 == 0 {
					_, err := d.GetExecutor().MessageInsertMany(ctx, []*relaydriver.MessageInsertParams{
						{Queue: "p", ID: id, Now: t0}, {Queue: "q", Now: t0}})
					errs <- err
					continue
				}
				tx, err := d.Begin(ctx)
				if err != nil {
					errs <- err
					continue
				}
				_, err = tx.MessageInsertMany(ctx, []*relaydriver.MessageInsertParams{{Queue: "p", ID: id, Now: t0}, {Queue: "q", Now: t0}})
				if err == nil {
					_, err = tx.MessageFail(ctx, &relaydriver.MessageFailParams{Queue: "p", ID: id, ErrorClass: relaytype.ClassInfra, Now: t0})
				}
				if err != nil {
					errs <- errors.Join(err, tx.Rollback(ctx))
					continue
				}
				errs <- tx.Commit(ctx)
			}
		})
	}
	// Readers run alongside.
	wg.Go(func() {
		for range 50 {
			_, err := d.GetExecutor().MessageStats(ctx, "p")
			errs <- err
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st, err := d.GetExecutor().MessageStats(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, int64(workers*per/2), st.Counts[relaytype.StatePending])
	require.Equal(t, int64(workers*per/2), st.Counts[relaytype.StateFailed])
	st, err = d.GetExecutor().MessageStats(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, int64(workers*per), st.Counts[relaytype.StatePending], "every allocated id is distinct")
	require.Equal(t, int64(workers*per), st.MaxID)
}

// TestReadsProceedDuringWriteTx: in WAL mode the read pool reads the last
// committed state while a write transaction holds the writer.
func TestReadsProceedDuringWriteTx(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx := t.Context()
	insert(t, d.GetExecutor(), "p", 1)

	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	insert(t, tx, "p", 2)
	require.NoError(t, tx.CursorSave(ctx, &relaydriver.CursorSaveParams{Queue: "p", Watermark: 2, Now: t0}))

	// These return while tx is open (they would hang if they needed the writer).
	ex := d.GetExecutor()
	_, err = ex.MessageGet(ctx, "p", 1)
	require.NoError(t, err)
	_, err = ex.MessageGet(ctx, "p", 2)
	require.ErrorIs(t, err, relaytype.ErrNotFound, "uncommitted row is invisible to readers")
	_, err = ex.CursorGet(ctx, "p")
	require.ErrorIs(t, err, relaytype.ErrNotFound)
	ms, err := ex.MessageListUnfinished(ctx, &relaydriver.MessageListUnfinishedParams{Queue: "p", Limit: 10})
	require.NoError(t, err)
	require.Len(t, ms, 1)
	ok, err := ex.MessageExists(ctx, "p")
	require.NoError(t, err)
	require.True(t, ok)
	_, err = ex.HoleList(ctx, "p")
	require.NoError(t, err)
	_, err = ex.MessageStats(ctx, "p")
	require.NoError(t, err)

	// The transaction sees its own writes.
	_, err = tx.MessageGet(ctx, "p", 2)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	_, err = ex.MessageGet(ctx, "p", 2)
	require.NoError(t, err)
	require.NoError(t, tx.Rollback(ctx), "Rollback after Commit is a no-op")
}

// TestWriteThroughGetExecutorWhileHoldingTx documents the one-writer rule: the
// write waits for the writer the same goroutine holds, until its ctx ends.
func TestWriteThroughGetExecutorWhileHoldingTx(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx := t.Context()
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err = d.GetExecutor().CursorSave(short, &relaydriver.CursorSaveParams{Queue: "p", Watermark: 1, Now: t0})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, relaytype.ErrTransient)
	// The transaction is unharmed.
	require.NoError(t, tx.CursorSave(ctx, &relaydriver.CursorSaveParams{Queue: "p", Watermark: 1, Now: t0}))
	require.NoError(t, tx.Commit(ctx))
}

func TestRawQueryThroughGetExecutorIsReadOnly(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx := t.Context()
	var id int64
	err := d.GetExecutor().QueryRow(ctx, "INSERT INTO relay_sequence (queue, last_id) VALUES ('x', 1) RETURNING last_id").Scan(&id)
	require.Error(t, err, "raw QueryRow runs on the query-only read pool")

	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, tx.QueryRow(ctx, "INSERT INTO relay_sequence (queue, last_id) VALUES ('x', 1) RETURNING last_id").Scan(&id))
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, int64(1), id)
}

func TestRawErrorsMapped(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx := t.Context()
	ex := d.GetExecutor()
	insert(t, ex, "p", 1)
	_, err := ex.Exec(ctx, "INSERT INTO relay_message (queue, id, enqueued_at, updated_at) VALUES ($1, $2, 0, 0)", "p", 1)
	require.ErrorIs(t, err, relaytype.ErrConflict)
	err = ex.QueryRow(ctx, "SELECT id FROM relay_message WHERE queue = $1", "nope").Scan(new(int64))
	require.ErrorIs(t, err, relaytype.ErrNotFound)
	_, err = ex.Exec(ctx, "UPDATE relay_message SET state = 'BOGUS' WHERE queue = $1", "p")
	require.Error(t, err)
	require.NotErrorIs(t, err, relaytype.ErrConflict, "a CHECK failure is a bug, not a conflict")
}

func TestLeaseLockExpiry(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx := t.Context()
	const ttl = 10 * time.Second
	lp := func(owner string, now time.Time) *relaydriver.LockParams {
		return &relaydriver.LockParams{Name: "queue:p", Owner: owner, TTL: ttl, Now: now}
	}
	a, err := d.TryLock(ctx, lp("a", t0))
	require.NoError(t, err)
	_, err = d.TryLock(ctx, lp("b", t0.Add(5*time.Second)))
	require.ErrorIs(t, err, relaytype.ErrLocked)

	// Renewal at +5s moves expiry to +15s.
	require.NoError(t, a.Renew(ctx, t0.Add(5*time.Second)))
	_, err = d.TryLock(ctx, lp("b", t0.Add(14*time.Second)))
	require.ErrorIs(t, err, relaytype.ErrLocked, "still live at +14s")

	// The same owner may take it again (a restart with a stable owner id).
	a2, err := d.TryLock(ctx, lp("a", t0.Add(6*time.Second)))
	require.NoError(t, err)
	_ = a2

	// Expired at exactly expires_at: +16s is past +6s+10s.
	b, err := d.TryLock(ctx, lp("b", t0.Add(16*time.Second)))
	require.NoError(t, err)
	require.ErrorIs(t, a.Renew(ctx, t0.Add(16*time.Second)), relaytype.ErrLocked, "a lost the lease")
	require.NoError(t, a.Release(ctx), "releasing a lost lock is harmless")
	_, err = d.TryLock(ctx, lp("c", t0.Add(17*time.Second)))
	require.ErrorIs(t, err, relaytype.ErrLocked, "a's Release did not free b's lease")

	require.NoError(t, b.Release(ctx))
	require.NoError(t, b.Release(ctx), "Release twice")
	require.ErrorIs(t, b.Renew(ctx, t0.Add(17*time.Second)), relaytype.ErrLocked)
	c, err := d.TryLock(ctx, lp("c", t0.Add(17*time.Second)))
	require.NoError(t, err)
	require.NoError(t, c.Renew(ctx, t0.Add(18*time.Second)))

	// Other lock names are independent.
	_, err = d.TryLock(ctx, &relaydriver.LockParams{Name: "other", Owner: "b", TTL: ttl, Now: t0})
	require.NoError(t, err)

	// Boundary: expires_at <= now counts as expired.
	_, err = d.TryLock(ctx, lp("d", t0.Add(28*time.Second)))
	require.NoError(t, err, "c expired at exactly +28s")

	_, err = d.TryLock(ctx, &relaydriver.LockParams{Name: "x", Owner: "a"})
	require.Error(t, err, "TTL and Now are required")
}

func TestAllocatedIDsSkipExplicitOnes(t *testing.T) {
	t.Parallel()
	d := open(t)
	ex := d.GetExecutor()
	got := insert(t, ex, "p", 0, 0)
	require.Equal(t, []int64{1, 2}, got)
	insert(t, ex, "p", 10)
	got = insert(t, ex, "p", 0, 5, 0)
	require.Equal(t, []int64{11, 5, 12}, got)
	got = insert(t, ex, "other", 0)
	require.Equal(t, []int64{1}, got, "allocation is per queue")
}

func TestSavepointNames(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx := t.Context()
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	for _, bad := range []string{"", "1x", "a b", "x; DROP TABLE relay_message", `"q"`} {
		require.Error(t, tx.Savepoint(ctx, bad), "name %q", bad)
	}
	require.NoError(t, tx.Savepoint(ctx, "msg_1"))
	insert(t, tx, "p", 1)
	require.NoError(t, tx.RollbackTo(ctx, "msg_1"))
	require.NoError(t, tx.ReleaseSavepoint(ctx, "msg_1"))
	insert(t, tx, "p", 2)
	require.NoError(t, tx.Commit(ctx))
	_, err = d.GetExecutor().MessageGet(ctx, "p", 1)
	require.ErrorIs(t, err, relaytype.ErrNotFound)
	_, err = d.GetExecutor().MessageGet(ctx, "p", 2)
	require.NoError(t, err)
}

func TestBindIdentityUniqueViolationInTx(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx := t.Context()
	insert(t, d.GetExecutor(), "p", 1, 2)
	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	r, err := tx.MessageBindIdentity(ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: 1, Identity: "k"})
	require.NoError(t, err)
	require.Equal(t, int64(1), r.OwnerID)
	r, err = tx.MessageBindIdentity(ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: 2, Identity: "k"})
	require.NoError(t, err)
	require.Equal(t, int64(1), r.OwnerID, "duplicate reports the owner")
	// The transaction goes on after the statement-level unique violation.
	require.NoError(t, tx.MessageComplete(ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 2,
		State: relaytype.StateSkipped, LastError: fmt.Sprintf("duplicate-of:%d", r.OwnerID), Now: t0}))
	require.NoError(t, tx.Commit(ctx))
	m, err := d.GetExecutor().MessageGet(ctx, "p", 2)
	require.NoError(t, err)
	require.Equal(t, relaytype.StateSkipped, m.State)
	require.Empty(t, m.IdentityKey)
}

func TestClaimPerKeySerialisesKeys(t *testing.T) {
	t.Parallel()
	d := open(t)
	ctx := t.Context()
	ex := d.GetExecutor()
	_, err := ex.MessageInsertMany(ctx, []*relaydriver.MessageInsertParams{
		{Queue: "p", ID: 1, Key: "a", Now: t0}, {Queue: "p", ID: 2, Key: "b", Now: t0},
		{Queue: "p", ID: 3, Key: "a", Now: t0}, {Queue: "p", ID: 4, Key: "c", Now: t0},
	})
	require.NoError(t, err)
	claim := func(owner string, now time.Time) []int64 {
		ms, err := ex.MessageClaim(ctx, &relaydriver.MessageClaimParams{Queue: "p", PerKey: true, Limit: 10,
			Owner: owner, LeaseUntil: now.Add(time.Minute), Now: now})
		require.NoError(t, err)
		out := []int64{}
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	require.Equal(t, []int64{1, 2, 4}, claim("w1", t0))
	require.Equal(t, []int64{}, claim("w2", t0), "every key is leased or behind its head")
	require.NoError(t, ex.MessageComplete(ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 1,
		State: relaytype.StateSucceeded, LeaseOwner: "w1", Now: t0}))
	require.Equal(t, []int64{3}, claim("w2", t0))
	// Leases expire at +1m (expires_at <= now): every head is claimable again.
	require.Equal(t, []int64{2, 3, 4}, claim("w3", t0.Add(time.Minute)))
	err = ex.MessageComplete(ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 2,
		State: relaytype.StateSucceeded, LeaseOwner: "w1", Now: t0})
	require.ErrorIs(t, err, relaytype.ErrConflict, "w1 lost the lease to w3")
}

// TestSchemaMigratedElsewhere: a store opened before its schema existed (the
// file was migrated by another process) prepares nothing at Open; its
// transactions then run the SQL text instead of cached statements, and
// autocommit calls prepare lazily. Two stores on one file also show that two
// writers (two processes) share the file through busy_timeout.
func TestSchemaMigratedElsewhere(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "relay.db")
	early, err := relaysqlite.Open(ctx, path)
	require.NoError(t, err)
	defer early.Close()
	other, err := relaysqlite.Open(ctx, path)
	require.NoError(t, err)
	defer other.Close()
	_, err = relaymigrate.Up(ctx, other, relayclock.System{}, relaymigrate.EngineLineOf(other))
	require.NoError(t, err)

	tx, err := early.Begin(ctx)
	require.NoError(t, err)
	insert(t, tx, "p", 1, 2)
	ms, err := tx.MessageClaim(ctx, &relaydriver.MessageClaimParams{Queue: "p", Limit: 1, Owner: "o", LeaseUntil: t0.Add(time.Minute), Now: t0})
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.NoError(t, tx.MessageComplete(ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 1, State: relaytype.StateSucceeded, LeaseOwner: "o", Now: t0}))
	require.NoError(t, tx.Commit(ctx))

	insert(t, other.GetExecutor(), "p", 3)
	st, err := early.GetExecutor().MessageStats(ctx, "p")
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Counts[relaytype.StatePending])
	require.Equal(t, int64(1), st.Counts[relaytype.StateSucceeded])
	require.NoError(t, early.GetExecutor().MessageComplete(ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 2, State: relaytype.StateDead, ErrorClass: relaytype.ClassMalformed, Now: t0}))
	m, err := other.GetExecutor().MessageGet(ctx, "p", 2)
	require.NoError(t, err)
	require.Equal(t, relaytype.StateDead, m.State)
}
