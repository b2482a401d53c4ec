package relaydrivertest

import (
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// Migrations are idempotent: a second Up applies nothing and Check passes; a
// line the store has not applied yet fails Check with ErrSchemaOutdated until
// Up applies it, and a newly added version fails it again.
func testMigrations(t *testing.T, b *bundle) {
	clock := relayclock.NewFake(t0)
	engine := relaymigrate.EngineLineOf(b.d)
	res, err := relaymigrate.Up(b.ctx, b.d, clock, engine)
	require.NoError(t, err)
	require.Empty(t, res.Applied, "the factory's store is already migrated")
	require.NoError(t, relaymigrate.Check(b.ctx, b.d, engine))
	versions, err := b.d.Migrator().AppliedVersions(b.ctx, relaymigrate.EngineLine)
	require.NoError(t, err)
	require.NotEmpty(t, versions)
	require.Equal(t, 1, versions[0])

	// A fresh line, in SQL both dialects accept.
	files := fstest.MapFS{
		"probe/001_probe.up.sql": {Data: []byte("CREATE TABLE relaydrivertest_probe (id INTEGER PRIMARY KEY);\n")},
	}
	probe := relaymigrate.Line{Name: "probe", FS: files}
	require.ErrorIs(t, relaymigrate.Check(b.ctx, b.d, probe), relaytype.ErrSchemaOutdated)
	versions, err = b.d.Migrator().AppliedVersions(b.ctx, "probe")
	require.NoError(t, err)
	require.Empty(t, versions)

	res, err = relaymigrate.Up(b.ctx, b.d, clock, probe)
	require.NoError(t, err)
	require.Len(t, res.Applied, 1)
	res, err = relaymigrate.Up(b.ctx, b.d, clock, probe, engine)
	require.NoError(t, err)
	require.Empty(t, res.Applied, "Up twice applies nothing the second time")
	require.NoError(t, relaymigrate.Check(b.ctx, b.d, probe, engine))
	_, err = b.ex.Exec(b.ctx, "INSERT INTO relaydrivertest_probe (id) VALUES ($1)", int64(1))
	require.NoError(t, err, "the migration ran")

	files["probe/002_note.up.sql"] = &fstest.MapFile{Data: []byte("ALTER TABLE relaydrivertest_probe ADD COLUMN note TEXT;\n")}
	require.ErrorIs(t, relaymigrate.Check(b.ctx, b.d, probe), relaytype.ErrSchemaOutdated)
	res, err = relaymigrate.Up(b.ctx, b.d, clock, probe)
	require.NoError(t, err)
	require.Len(t, res.Applied, 1)
	require.Equal(t, 2, res.Applied[0].Version)
	versions, err = b.d.Migrator().AppliedVersions(b.ctx, "probe")
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, versions)

	// A failing migration applies nothing and records nothing.
	files["probe/003_broken.up.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE relaydrivertest_probe2 (id INTEGER PRIMARY KEY);\nTHIS IS NOT SQL;\n")}
	_, err = relaymigrate.Up(b.ctx, b.d, clock, probe)
	require.Error(t, err)
	versions, err = b.d.Migrator().AppliedVersions(b.ctx, "probe")
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, versions)
	_, err = b.ex.Exec(b.ctx, "INSERT INTO relaydrivertest_probe2 (id) VALUES ($1)", int64(1))
	require.Error(t, err, "the failed version's first statement was rolled back")
}

// Rollback discards the transaction's writes; Commit makes them visible; a
// transaction reads its own writes.
func testTxRollback(t *testing.T, b *bundle) {
	tx, err := b.d.Begin(b.ctx)
	require.NoError(t, err)
	require.NotNil(t, tx.Unwrap())
	_, err = tx.MessageInsertMany(b.ctx, []*relaydriver.MessageInsertParams{{Queue: "p", ID: 1, Now: b.now}})
	require.NoError(t, err)
	require.NoError(t, tx.CursorSave(b.ctx, &relaydriver.CursorSaveParams{Queue: "p", Watermark: 1, Now: b.now}))
	_, err = tx.MessageGet(b.ctx, "p", 1)
	require.NoError(t, err, "a transaction reads its own writes")
	require.NoError(t, tx.Rollback(b.ctx))

	_, err = b.ex.MessageGet(b.ctx, "p", 1)
	require.ErrorIs(t, err, relaytype.ErrNotFound)
	_, err = b.ex.CursorGet(b.ctx, "p")
	require.ErrorIs(t, err, relaytype.ErrNotFound)

	// seed 000 §5.3: insert and cursor save commit together.
	tx, err = b.d.Begin(b.ctx)
	require.NoError(t, err)
	_, err = tx.MessageInsertMany(b.ctx, []*relaydriver.MessageInsertParams{{Queue: "p", ID: 1, Now: b.now}})
	require.NoError(t, err)
	require.NoError(t, tx.CursorSave(b.ctx, &relaydriver.CursorSaveParams{Queue: "p", Watermark: 1, Now: b.now}))
	require.NoError(t, tx.Commit(b.ctx))
	require.Equal(t, []int64{1}, b.head("p"))
	c, err := b.ex.CursorGet(b.ctx, "p")
	require.NoError(t, err)
	require.Equal(t, int64(1), c.Watermark)
}

// A savepoint isolates one message's writes inside a batch transaction.
func testTxSavepoint(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3)
	tx, err := b.d.Begin(b.ctx)
	require.NoError(t, err)
	defer tx.Rollback(b.ctx) //nolint:errcheck

	require.Error(t, tx.Savepoint(b.ctx, "bad name; DROP TABLE relay_message"), "savepoint names are identifiers")

	b.complete2(tx, 1)
	require.NoError(t, tx.Savepoint(b.ctx, "msg_2"))
	b.complete2(tx, 2)
	_, err = tx.MessageInsertMany(b.ctx, []*relaydriver.MessageInsertParams{{Queue: "p", ID: 4, Now: b.now}})
	require.NoError(t, err)
	require.NoError(t, tx.RollbackTo(b.ctx, "msg_2"))
	require.NoError(t, tx.ReleaseSavepoint(b.ctx, "msg_2"))
	require.NoError(t, tx.Savepoint(b.ctx, "msg_3"))
	b.complete2(tx, 3)
	require.NoError(t, tx.ReleaseSavepoint(b.ctx, "msg_3"))
	require.NoError(t, tx.Commit(b.ctx))

	require.Equal(t, relaytype.StateSucceeded, b.get("p", 1).State)
	require.Equal(t, relaytype.StatePending, b.get("p", 2).State, "rolled back to the savepoint")
	require.Equal(t, relaytype.StateSucceeded, b.get("p", 3).State)
	_, err = b.ex.MessageGet(b.ctx, "p", 4)
	require.ErrorIs(t, err, relaytype.ErrNotFound)
}

func (b *bundle) complete2(tx relaydriver.ExecutorTx, id int64) {
	b.t.Helper()
	require.NoError(b.t, tx.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: id, State: relaytype.StateSucceeded, Now: b.now}))
}

// seed 000 §4.5 PRE-5: one holder per lock name; released locks can be taken
// again; different names are independent.
func testLock(t *testing.T, b *bundle) {
	lp := func(name, owner string) *relaydriver.LockParams {
		return &relaydriver.LockParams{Name: name, Owner: owner, TTL: time.Minute, Now: b.now}
	}
	l1, err := b.d.TryLock(b.ctx, lp("queue:a", "o1"))
	require.NoError(t, err)
	require.NoError(t, l1.Renew(b.ctx, b.now.Add(time.Second)))

	_, err = b.d.TryLock(b.ctx, lp("queue:a", "o2"))
	require.ErrorIs(t, err, relaytype.ErrLocked)

	l2, err := b.d.TryLock(b.ctx, lp("queue:b", "o2"))
	require.NoError(t, err, "different names are independent")

	require.NoError(t, l1.Release(b.ctx))
	require.NoError(t, l1.Release(b.ctx), "Release is idempotent")
	require.ErrorIs(t, l1.Renew(b.ctx, b.now.Add(2*time.Second)), relaytype.ErrLocked, "a released lock is lost")

	l3, err := b.d.TryLock(b.ctx, lp("queue:a", "o2"))
	require.NoError(t, err, "a released lock can be taken")
	require.NoError(t, l3.Renew(b.ctx, b.now.Add(2*time.Second)))
	require.NoError(t, l2.Renew(b.ctx, b.now.Add(2*time.Second)))
	require.NoError(t, l3.Release(b.ctx))
	require.NoError(t, l2.Release(b.ctx))
}

// The raw Querier runs the store's SQL ($1 placeholders work in both dialects);
// QueryRow without a row is ErrNotFound.
func testRawQuerier(t *testing.T, b *bundle) {
	b.insert("p", 3, 1, 2)
	rows, err := b.ex.Query(b.ctx, "SELECT id FROM relay_message WHERE queue = $1 ORDER BY id", "p")
	require.NoError(t, err)
	var got []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		got = append(got, id)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	require.Equal(t, []int64{1, 2, 3}, got)

	var n int64
	require.NoError(t, b.ex.QueryRow(b.ctx, "SELECT count(*) FROM relay_message WHERE queue = $1", "p").Scan(&n))
	require.Equal(t, int64(3), n)

	var id int64
	err = b.ex.QueryRow(b.ctx, "SELECT id FROM relay_message WHERE queue = $1", "nope").Scan(&id)
	require.ErrorIs(t, err, relaytype.ErrNotFound)

	affected, err := b.ex.Exec(b.ctx, "UPDATE relay_message SET key = $1 WHERE queue = $2 AND id > $3", "k", "p", int64(1))
	require.NoError(t, err)
	require.Equal(t, int64(2), affected)
	require.Equal(t, "k", b.get("p", 3).Key)

	// The same surface inside a transaction.
	tx, err := b.d.Begin(b.ctx)
	require.NoError(t, err)
	defer tx.Rollback(b.ctx) //nolint:errcheck
	affected, err = tx.Exec(b.ctx, "UPDATE relay_message SET key = $1 WHERE queue = $2", "t", "p")
	require.NoError(t, err)
	require.Equal(t, int64(3), affected)
	require.NoError(t, tx.QueryRow(b.ctx, "SELECT count(*) FROM relay_message WHERE key = $1", "t").Scan(&n))
	require.Equal(t, int64(3), n)
	require.NoError(t, tx.Rollback(b.ctx))
	require.Equal(t, "k", b.get("p", 3).Key)
}
