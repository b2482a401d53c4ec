package simulate_test

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/simulate"
	"github.com/relayhq/relay/internal/testdb"
)

func TestCreateMailbox(t *testing.T) {
	t.Parallel()
	db := testdb.MariaDB(t)
	ctx := t.Context()
	require.NoError(t, simulate.CreateMailbox(ctx, db))
	require.NoError(t, simulate.CreateMailbox(ctx, db), "IF NOT EXISTS: idempotent")

	rows, err := db.QueryContext(ctx, `SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, EXTRA
		FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME, ORDINAL_POSITION`)
	require.NoError(t, err)
	defer rows.Close()
	var got [][5]string
	for rows.Next() {
		var c [5]string
		require.NoError(t, rows.Scan(&c[0], &c[1], &c[2], &c[3], &c[4]))
		got = append(got, c)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, [][5]string{
		{"CMINMSGS", "ID", "bigint(20)", "NO", "auto_increment"},
		{"CMINMSGS", "MSGCONTENT", "mediumtext", "YES", ""},
		{"CMINMSGS", "RECEIVETIME", "datetime(3)", "YES", ""},
		{"CMINMSGS", "PROCFLAG", "varchar(16)", "YES", ""},
		{"CMINMSGS", "PROCTIME", "datetime(3)", "YES", ""},
		{"COUTMSGS", "ID", "bigint(20)", "NO", "auto_increment"},
		{"COUTMSGS", "MSGCONTENT", "mediumtext", "NO", ""},
		{"COUTMSGS", "CREATETIME", "datetime(3)", "NO", ""},
		{"COUTMSGS", "SENDFLAG", "varchar(16)", "YES", ""},
	}, got)
}

type mailboxRow struct {
	id       int64
	content  sql.NullString
	received sql.NullTime
	flag     sql.NullString
}

func readMailbox(t *testing.T, db *sql.DB) []mailboxRow {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT ID, MSGCONTENT, RECEIVETIME, PROCFLAG FROM CMINMSGS ORDER BY ID`)
	require.NoError(t, err)
	defer rows.Close()
	var out []mailboxRow
	for rows.Next() {
		var r mailboxRow
		require.NoError(t, rows.Scan(&r.id, &r.content, &r.received, &r.flag))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestWrite writes a small day into a real mailbox and checks it row by row:
// ids and contents, real holes, late commits after later ids (observed from
// another connection), NULL receive times, and the expected marks.
func TestWrite(t *testing.T) {
	t.Parallel()
	db := testdb.MariaDB(t)
	ctx := t.Context()
	require.NoError(t, simulate.CreateMailbox(ctx, db))
	plan := simulate.NewPlan(simulate.Options{Flights: 100, Seed: 5, LateBy: 150 * time.Millisecond})
	o, counts := plan.Options(), plan.Counts()
	msgs := plan.Messages()

	// After every insert, another connection records the visible ids.
	var snapshots [][]int64
	progressCalls := 0
	written, err := plan.Write(ctx, db, 0, func(done, total int) {
		progressCalls++
		require.Equal(t, progressCalls, done)
		require.Equal(t, len(msgs), total)
		var ids []int64
		for _, r := range readMailbox(t, db) {
			ids = append(ids, r.id)
		}
		snapshots = append(snapshots, ids)
	})
	require.NoError(t, err)
	require.Equal(t, len(msgs), progressCalls)

	// Exactly the committed messages, in plan order, with their contents.
	rows := readMailbox(t, db)
	require.Len(t, rows, counts.Committed)
	require.Len(t, written.Rows, counts.Committed)
	nullReceived := 0
	for i, r := range rows {
		idx, ok := written.Index[r.id]
		require.True(t, ok, "row %d not in Written", r.id)
		m := msgs[idx]
		require.NotEqual(t, simulate.CategoryRollback, m.Category)
		require.Equal(t, m.Outcome, written.Rows[r.id])
		if i > 0 {
			require.Greater(t, idx, written.Index[rows[i-1].id], "mailbox-id order is plan order")
		}
		require.Equal(t, m.Raw == nil, !r.content.Valid, "row %d: NULL content iff nil Raw", r.id)
		require.Equal(t, string(m.Raw), r.content.String, "row %d", r.id)
		require.Equal(t, m.NullReceiveTime, !r.received.Valid, "row %d", r.id)
		if !r.received.Valid {
			nullReceived++
		}
		require.False(t, r.flag.Valid, "PROCFLAG is the pipeline's to write")
	}
	require.Equal(t, counts.NullReceiveTime, nullReceived)

	// Holes: one per rollback, never visible, and the only gaps between rows.
	require.Len(t, written.Holes, o.Rollbacks)
	all := slices.Collect(func(yield func(int64) bool) {
		for _, r := range rows {
			if !yield(r.id) {
				return
			}
		}
	})
	for _, h := range written.Holes {
		require.NotContains(t, all, h)
		require.Greater(t, h, all[0])
		require.Less(t, h, all[len(all)-1], "a row follows every hole")
	}
	require.Len(t, append(slices.Clone(all), written.Holes...), int(all[len(all)-1]-all[0]+1), "no other gaps")

	// Late commits: each seen missing while a higher id was visible.
	require.Len(t, written.Late, o.Late)
	for _, l := range written.Late {
		require.True(t, msgs[l.Index].Late)
		require.Equal(t, l.Index, written.Index[l.ID])
		require.Greater(t, l.MaxVisibleBefore, l.ID, "a later row committed first")
		require.False(t, l.VisibleBefore)
		require.GreaterOrEqual(t, l.HeldFor, o.LateBy)
		observed := false
		for _, snap := range snapshots {
			if snap[len(snap)-1] > l.ID && !slices.Contains(snap, l.ID) {
				observed = true
				break
			}
		}
		require.True(t, observed, "late row %d was never seen missing behind a later row", l.ID)
	}

	// Marks: nothing marked yet; marked as expected; one wrong mark shows.
	diffs, err := written.CheckMarks(ctx, db)
	require.NoError(t, err)
	require.Len(t, diffs, counts.Committed)
	require.Contains(t, diffs[0], "not marked")
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	for id, want := range written.Rows {
		_, err := tx.ExecContext(ctx, `UPDATE CMINMSGS SET PROCFLAG = ?, PROCTIME = NOW(3) WHERE ID = ?`, string(want), id)
		require.NoError(t, err)
	}
	require.NoError(t, tx.Commit())
	diffs, err = written.CheckMarks(ctx, db)
	require.NoError(t, err)
	require.Empty(t, diffs)
	for id, want := range written.Rows {
		if want == simulate.Skipped {
			_, err := db.ExecContext(ctx, `UPDATE CMINMSGS SET PROCFLAG = 'SUCCEEDED' WHERE ID = ?`, id)
			require.NoError(t, err)
			diffs, err = written.CheckMarks(ctx, db)
			require.NoError(t, err)
			require.Len(t, diffs, 1)
			require.Contains(t, diffs[0], "PROCFLAG SUCCEEDED, want SKIPPED")
			break
		}
	}
}

func TestWriteRate(t *testing.T) {
	t.Parallel()
	db := testdb.MariaDB(t)
	ctx := t.Context()
	require.NoError(t, simulate.CreateMailbox(ctx, db))
	plan := simulate.NewPlan(simulate.Options{Flights: 10, Updates: 15, Rollbacks: -1, Late: -1, Seed: 2})
	n := len(plan.Messages())
	const rate = 100.0
	start := time.Now()
	written, err := plan.Write(ctx, db, rate, nil)
	require.NoError(t, err)
	require.Len(t, written.Rows, n)
	require.GreaterOrEqual(t, time.Since(start), time.Duration(float64(n-1)/rate*float64(time.Second)))

	_, err = plan.Write(ctx, db, -1, nil)
	require.ErrorContains(t, err, "rate")
}

// TestWriteCanceled: a canceled Write rolls back the late inserts still
// open; they become holes and Written still describes the mailbox exactly.
func TestWriteCanceled(t *testing.T) {
	t.Parallel()
	db := testdb.MariaDB(t)
	require.NoError(t, simulate.CreateMailbox(t.Context(), db))
	plan := simulate.NewPlan(simulate.Options{Flights: 100, Seed: 8, LateBy: time.Minute})
	firstLate := slices.IndexFunc(plan.Messages(), func(m simulate.Message) bool { return m.Late })
	require.GreaterOrEqual(t, firstLate, 0)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	written, err := plan.Write(ctx, db, 0, func(done, _ int) {
		if done == firstLate+3 {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	require.NotNil(t, written)
	rows := readMailbox(t, db)
	require.Len(t, rows, len(written.Rows))
	for _, r := range rows {
		require.Contains(t, written.Rows, r.id)
	}
	done := firstLate + 3
	holes := 0
	for _, m := range plan.Messages()[:done] {
		if m.Category == simulate.CategoryRollback || m.Late {
			holes++
		}
	}
	require.Len(t, written.Holes, holes, "the rollbacks and the late inserts rolled back by the cancel")
	for _, idx := range written.Index {
		require.False(t, plan.Messages()[idx].Late, "late row (plan #%d) rolled back", idx)
	}
	for _, h := range written.Holes {
		require.NotContains(t, written.Rows, h)
	}
}
