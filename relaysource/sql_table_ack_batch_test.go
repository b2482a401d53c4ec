package relaysource_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaysource"
)

// testAcknowledgeBatch checks AcknowledgeBatch on rows 1 (no mark), 2 (mark
// ”), 3 (mark 'OLD'), 4 and 5 (no mark): each item's outcome is what
// Acknowledge would observe, in order (a duplicate in the batch sees its own
// earlier write), and a failing item writes nothing of the batch. failing is
// an item the database refuses.
func testAcknowledgeBatch(t *testing.T, db *sql.DB, d relaysource.Dialect, failing relaysource.AckItem) {
	ctx := context.Background()
	src, err := relaysource.NewSQLTable(db, ackConfig(d))
	require.NoError(t, err)
	at := time.Date(2025, 3, 1, 8, 0, 1, 250e6, time.UTC)

	// All or nothing: the failing item rolls back the marks before it.
	_, err = src.AcknowledgeBatch(ctx, []relaysource.AckItem{{ID: 4, Mark: "SUCCEEDED", At: at}, failing})
	require.Error(t, err)
	flag, _ := markOf(t, db, 4)
	require.False(t, flag.Valid, "a failed batch wrote row 4")

	out, err := src.AcknowledgeBatch(ctx, []relaysource.AckItem{
		{ID: 1, Mark: "SUCCEEDED", At: at},
		{ID: 2, Mark: "DEAD", At: at},
		{ID: 3, Mark: "SUCCEEDED", At: at},
		{ID: 99, Mark: "SUCCEEDED", At: at},
		{ID: 1, Mark: "SKIPPED", At: at.Add(time.Hour)},
		{ID: 5, Mark: "SKIPPED", At: at},
	})
	require.NoError(t, err)
	require.Equal(t, []relaysource.AckOutcome{relaysource.AckWritten, relaysource.AckWritten, relaysource.AckAlreadyMarked,
		relaysource.AckMissingRow, relaysource.AckAlreadyMarked, relaysource.AckWritten}, out)
	for id, want := range map[int64]string{1: "SUCCEEDED", 2: "DEAD", 3: "OLD", 5: "SKIPPED"} {
		flag, when := markOf(t, db, id)
		require.Equal(t, want, flag.String, "row %d", id)
		if id != 3 {
			require.True(t, at.Equal(when.Time), "PROCTIME of %d: want %v, got %v", id, at, when.Time)
		}
	}

	_, err = src.AcknowledgeBatch(ctx, []relaysource.AckItem{{ID: 4, Mark: "SUCCEEDED", At: at}, {ID: 4, Mark: "", At: at}})
	require.ErrorContains(t, err, "empty")
	flag, _ = markOf(t, db, 4)
	require.False(t, flag.Valid, "an empty mark refuses the batch before anything is written")
	out, err = src.AcknowledgeBatch(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, out)
}

func TestAcknowledgeBatchSQLite(t *testing.T) {
	t.Parallel()
	db := ackMailbox(t, relaysource.DialectSQLite, 6)
	exec(t, db, "CREATE TRIGGER refuse_6 BEFORE UPDATE ON CMINMSGS WHEN NEW.ID = 6 BEGIN SELECT RAISE(ABORT, 'row 6 refused'); END")
	testAcknowledgeBatch(t, db, relaysource.DialectSQLite, relaysource.AckItem{ID: 6, Mark: "SUCCEEDED", At: time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)})
}

func TestAcknowledgeBatchMariaDB(t *testing.T) {
	t.Parallel()
	db := ackMailbox(t, relaysource.DialectMySQL, 6)
	// PROCFLAG is VARCHAR(16): a longer mark is refused (strict mode).
	testAcknowledgeBatch(t, db, relaysource.DialectMySQL, relaysource.AckItem{ID: 6, Mark: "A-MARK-LONGER-THAN-16", At: time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)})
}
