package apply_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/testdb"
)

// groupTarget is a target database with the voyage table (BIGINT key) and
// leg (a key of a string and an integer), and the ledger.
func groupTarget(t *testing.T) (*apply.Target, *sql.DB) {
	t.Helper()
	mdb, dsn := testdb.MariaDBWithDSN(t)
	_, err := mdb.ExecContext(t.Context(), voyageDDL)
	require.NoError(t, err)
	_, err = mdb.ExecContext(t.Context(), "CREATE TABLE leg (ship VARCHAR(16) NOT NULL, n INT NOT NULL, note VARCHAR(20), "+
		apply.SyncColumns+", PRIMARY KEY (ship, n))")
	require.NoError(t, err)
	target, err := apply.OpenTarget(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = target.Close() })
	require.NoError(t, target.EnsureLedger(t.Context()))
	return target, mdb
}

var (
	voyageTable = &apply.Table{Name: "voyage", Columns: []string{"id", "note"}}
	legTable    = &apply.Table{Name: "leg", Columns: []string{"ship", "n", "note"}}
)

func intCol(name string, v int64) *pb.ColumnValue {
	return &pb.ColumnValue{Name: name, Value: &pb.ColumnValue_IntValue{IntValue: v}}
}

func strCol(name, v string) *pb.ColumnValue {
	return &pb.ColumnValue{Name: name, Value: &pb.ColumnValue_StringValue{StringValue: v}}
}

// vw is event n's write of voyage row id: an insert or update writes note
// (delete: note ignored); base and result are revision numbers (0: none).
func vw(n int, op apply.Op, id int64, base, result int, note string) apply.Conditional {
	w := apply.Conditional{Table: voyageTable, Op: op, Key: []*pb.ColumnValue{intCol("id", id)},
		Stamp: apply.Stamp{Revision: rev(result), Origin: "ship-1", EventID: uuidN(n)}, Ref: int64(n)}
	if base > 0 {
		w.Base = rev(base)
	}
	if op != apply.OpDelete {
		w.Values = []*pb.ColumnValue{intCol("id", id), strCol("note", note)}
	}
	return w
}

// lw is vw for the leg row (ship, leg).
func lw(n int, op apply.Op, ship string, leg int64, base, result int, note string) apply.Conditional {
	w := vw(n, op, 0, base, result, note)
	w.Table, w.Key = legTable, []*pb.ColumnValue{strCol("ship", ship), intCol("n", leg)}
	if op != apply.OpDelete {
		w.Values = []*pb.ColumnValue{strCol("note", note), intCol("n", leg), strCol("ship", ship)}
	}
	return w
}

// notes is the table's rows as "key=note@revision/event" in key order, the revision and the
// event by their numbers in hex (rev, uuidN).
func notes(t *testing.T, mdb *sql.DB, q string) []string {
	t.Helper()
	rows, err := mdb.QueryContext(t.Context(), q)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k, note, r, e string
		require.NoError(t, rows.Scan(&k, &note, &r, &e))
		out = append(out, k+"="+note+"@"+strings.TrimLeft(r[len(r)-4:], "0")+"/"+strings.TrimLeft(e[len(e)-4:], "0"))
	}
	require.NoError(t, rows.Err())
	return out
}

func voyageRows(t *testing.T, mdb *sql.DB) []string {
	return notes(t, mdb, "SELECT id, coalesce(note, ''), _sync_revision, _sync_event_id FROM voyage ORDER BY id")
}

func legRows(t *testing.T, mdb *sql.DB) []string {
	return notes(t, mdb, "SELECT concat(ship, '/', n), coalesce(note, ''), _sync_revision, _sync_event_id FROM leg ORDER BY ship, n")
}

func ledger(t *testing.T, mdb *sql.DB) int {
	t.Helper()
	var n int
	require.NoError(t, mdb.QueryRowContext(t.Context(), "SELECT count(*) FROM sync_applied_event").Scan(&n))
	return n
}

// TestGroupedWrites: a batch whose writes all change their rows is written
// by the set-based statements — inserts, updates and deletes of two tables
// (one with a two-column key), the same row written three times in order,
// a row deleted and inserted again in the next batch (an insert over a
// tombstone) — each write with its ledger row.
func TestGroupedWrites(t *testing.T) {
	t.Parallel()
	target, mdb := groupTarget(t)
	ctx := t.Context()
	batch := []apply.Conditional{
		vw(1, apply.OpInsert, 1, 0, 1, "one"),
		vw(2, apply.OpInsert, 2, 0, 2, "two"),
		lw(3, apply.OpInsert, "a", 1, 0, 3, "leg a1"),
		vw(4, apply.OpUpdate, 1, 1, 4, "one-b"), // the same row as event 1, after it
		vw(5, apply.OpInsert, 3, 0, 5, "three"),
		lw(6, apply.OpInsert, "b", 1, 0, 6, "leg b1"),
		vw(7, apply.OpDelete, 2, 2, 7, ""),
		lw(8, apply.OpUpdate, "a", 1, 3, 8, "leg a1-b"),
		vw(9, apply.OpUpdate, 1, 4, 9, "one-c"), // and once more
		vw(10, apply.OpUpdate, 3, 5, 10, "three-b"),
	}
	require.NoError(t, target.RunGrouped(ctx, batch, t0))
	require.Equal(t, []string{"1=one-c@9/9", "3=three-b@a/a"}, voyageRows(t, mdb))
	require.Equal(t, []string{"a/1=leg a1-b@8/8", "b/1=leg b1@6/6"}, legRows(t, mdb))
	require.Equal(t, len(batch), ledger(t, mdb))

	// Row 2 was deleted (its tombstone allows an insert): inserted again,
	// then deleted and inserted within one batch.
	again := []apply.Conditional{
		vw(11, apply.OpInsert, 2, 0, 11, "two again"),
		vw(12, apply.OpDelete, 1, 9, 12, ""),
		vw(13, apply.OpInsert, 1, 0, 13, "one again"),
	}
	changed, refused, err := target.Apply(ctx, again, t0)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true}, changed)
	require.Equal(t, []error{nil, nil, nil}, refused)
	require.Equal(t, []string{"1=one again@d/d", "2=two again@b/b", "3=three-b@a/a"}, voyageRows(t, mdb))
	require.Equal(t, len(batch)+len(again), ledger(t, mdb))
}

// TestGroupedWritesSortOutMisses: a write that changes nothing amid
// successes — an update over another base revision, a delete of a row
// that is gone, an insert of a row that exists — makes the set-based form
// roll back, and the statement per write finds which: the others are
// written with their ledger rows, the misses change nothing and have none.
func TestGroupedWritesSortOutMisses(t *testing.T) {
	t.Parallel()
	target, mdb := groupTarget(t)
	ctx := t.Context()
	_, _, err := target.Apply(ctx, []apply.Conditional{
		vw(1, apply.OpInsert, 1, 0, 1, "one"), vw(2, apply.OpInsert, 2, 0, 2, "two"),
	}, t0)
	require.NoError(t, err)

	batch := []apply.Conditional{
		vw(3, apply.OpUpdate, 1, 1, 3, "one-b"),
		vw(4, apply.OpUpdate, 2, 99, 4, "two-b"), // base does not match
		vw(5, apply.OpInsert, 3, 0, 5, "three"),
		vw(6, apply.OpInsert, 1, 0, 6, "one again"), // the row exists
		vw(7, apply.OpDelete, 9, 1, 7, ""),          // no such row
		vw(8, apply.OpInsert, 4, 0, 8, "four"),
	}
	// The insert of an existing row fails the multi-row insert; without
	// it, the statements' counts tell that something did not change.
	require.ErrorContains(t, target.RunGrouped(ctx, batch, t0), "Duplicate entry")
	require.ErrorIs(t, target.RunGrouped(ctx, append(batch[:3:3], batch[4:]...), t0), apply.ErrNotAllChanged)
	require.Equal(t, []string{"1=one@1/1", "2=two@2/2"}, voyageRows(t, mdb), "the set-based attempt rolled back")
	require.Equal(t, 2, ledger(t, mdb))

	changed, refused, err := target.Apply(ctx, batch, t0)
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true, false, false, true}, changed)
	require.Equal(t, make([]error, len(batch)), refused)
	require.Equal(t, []string{"1=one-b@3/3", "2=two@2/2", "3=three@5/5", "4=four@8/8"}, voyageRows(t, mdb))
	require.Equal(t, 5, ledger(t, mdb))
	found, err := target.Inspect(ctx, []apply.Conditional{batch[1], batch[3], batch[4]})
	require.NoError(t, err)
	require.False(t, found[0].Applied || found[1].Applied || found[2].Applied)
	require.Equal(t, rev(2), found[0].Revision)
	require.Equal(t, rev(3), found[1].Revision)
	require.False(t, found[2].Exists)
}

// TestGroupedWritesRetried: a batch written and committed on the target
// whose process died before PostgreSQL heard of it (before
// TARGET_COMMITTED) is run again: nothing changes, no ledger row is added,
// and the ledger answers for every write.
func TestGroupedWritesRetried(t *testing.T) {
	t.Parallel()
	target, mdb := groupTarget(t)
	ctx := t.Context()
	_, _, err := target.Apply(ctx, []apply.Conditional{vw(1, apply.OpInsert, 1, 0, 1, "one"), vw(2, apply.OpInsert, 2, 0, 2, "two")}, t0)
	require.NoError(t, err)
	batch := []apply.Conditional{
		vw(3, apply.OpUpdate, 1, 1, 3, "one-b"),
		vw(4, apply.OpDelete, 2, 2, 4, ""),
		vw(5, apply.OpInsert, 3, 0, 5, "three"),
		lw(6, apply.OpInsert, "a", 1, 0, 6, "leg a1"),
	}
	changed, _, err := target.Apply(ctx, batch, t0)
	require.NoError(t, err)
	require.Equal(t, []bool{true, true, true, true}, changed)
	rows, legs := voyageRows(t, mdb), legRows(t, mdb)

	changed, refused, err := target.Apply(ctx, batch, t0)
	require.NoError(t, err)
	require.Equal(t, []bool{false, false, false, false}, changed)
	require.Equal(t, make([]error, len(batch)), refused)
	require.Equal(t, rows, voyageRows(t, mdb))
	require.Equal(t, legs, legRows(t, mdb))
	require.Equal(t, 2+len(batch), ledger(t, mdb))
	found, err := target.Inspect(ctx, batch)
	require.NoError(t, err)
	for i, f := range found {
		require.True(t, f.Applied, "write %d", i)
	}
}

// TestGroupedWritesRefused: a value the target cannot hold amid successes
// is refused alone; the others are written.
func TestGroupedWritesRefused(t *testing.T) {
	t.Parallel()
	target, mdb := groupTarget(t)
	batch := []apply.Conditional{
		vw(1, apply.OpInsert, 1, 0, 1, "one"),
		vw(2, apply.OpInsert, 2, 0, 2, strings.Repeat("x", 21)), // note is VARCHAR(20)
		vw(3, apply.OpInsert, 3, 0, 3, "three"),
	}
	changed, refused, err := target.Apply(t.Context(), batch, t0)
	require.NoError(t, err)
	require.Equal(t, []bool{true, false, true}, changed)
	require.Nil(t, refused[0])
	require.Nil(t, refused[2])
	var re *apply.RefusedError
	require.ErrorAs(t, refused[1], &re)
	require.Equal(t, []string{"1=one@1/1", "3=three@3/3"}, voyageRows(t, mdb))
	require.Equal(t, 2, ledger(t, mdb))
}
