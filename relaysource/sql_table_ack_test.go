package relaysource_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaysource"
)

// cminmsgsMariaDB is the seed's mailbox shape on MariaDB (seed 000 §1.2).
const cminmsgsMariaDB = "CREATE TABLE CMINMSGS (ID BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, " +
	"MSGCONTENT MEDIUMTEXT NULL, RECEIVETIME DATETIME(3) NULL, PROCFLAG VARCHAR(16) NULL, " +
	"PROCTIME DATETIME(3) NULL) ENGINE=InnoDB"

// cminmsgsSQLite is the same shape in SQLite.
const cminmsgsSQLite = "CREATE TABLE CMINMSGS (ID INTEGER PRIMARY KEY AUTOINCREMENT, MSGCONTENT TEXT NULL, " +
	"RECEIVETIME DATETIME NULL, PROCFLAG VARCHAR(16) NULL, PROCTIME DATETIME NULL)"

// ackConfig is the mailbox with its mark columns.
func ackConfig(d relaysource.Dialect) relaysource.SQLTableConfig {
	return relaysource.SQLTableConfig{
		Dialect: d, Table: "CMINMSGS", IDColumn: "ID", ReceivedAtColumn: "RECEIVETIME",
		MarkColumn: "PROCFLAG", MarkTimeColumn: "PROCTIME",
	}
}

// markOf reads a row's PROCFLAG and PROCTIME.
func markOf(t *testing.T, db *sql.DB, id int64) (sql.NullString, sql.NullTime) {
	t.Helper()
	var (
		flag sql.NullString
		at   sql.NullTime
	)
	require.NoError(t, db.QueryRowContext(context.Background(), "SELECT PROCFLAG, PROCTIME FROM CMINMSGS WHERE ID = ?", id).Scan(&flag, &at))
	return flag, at
}

// ackMailbox returns a fresh CMINMSGS of dialect d (SQLite in a temporary
// file, MariaDB in a fresh database) holding rows 1..n: 1 without a mark, 2
// with an empty mark, 3 with mark 'OLD' at 2020-01-01, the others without.
func ackMailbox(t *testing.T, d relaysource.Dialect, n int) *sql.DB {
	t.Helper()
	var db *sql.DB
	if d == relaysource.DialectSQLite {
		db = openSQLite(t)
		exec(t, db, cminmsgsSQLite)
	} else {
		db = testdb.MariaDB(t)
		exec(t, db, cminmsgsMariaDB)
	}
	for id := 1; id <= n; id++ {
		var flag, at any
		switch id {
		case 2:
			flag = ""
		case 3:
			flag, at = "OLD", time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		exec(t, db, "INSERT INTO CMINMSGS (ID, MSGCONTENT, PROCFLAG, PROCTIME) VALUES (?, ?, ?, ?)", id, fmt.Sprint("m", id), flag, at)
	}
	return db
}

// testAcknowledgeOutcomes checks the seed's outcomes (§6.2) on a CMINMSGS
// table holding rows 1 (no mark), 2 (mark ”), 3 (mark 'OLD' at an old time).
func testAcknowledgeOutcomes(t *testing.T, db *sql.DB, d relaysource.Dialect) {
	ctx := context.Background()
	src, err := relaysource.NewSQLTable(db, ackConfig(d))
	require.NoError(t, err)
	at := time.Date(2025, 3, 1, 8, 0, 1, 250e6, time.UTC)

	out, err := src.Acknowledge(ctx, 1, "SUCCEEDED", at)
	require.NoError(t, err)
	require.Equal(t, relaysource.AckWritten, out)
	flag, when := markOf(t, db, 1)
	require.Equal(t, "SUCCEEDED", flag.String)
	require.True(t, when.Valid)
	require.True(t, at.Equal(when.Time), "PROCTIME: want %v, got %v", at, when.Time)

	out, err = src.Acknowledge(ctx, 2, "DEAD", at)
	require.NoError(t, err)
	require.Equal(t, relaysource.AckWritten, out, "an empty mark counts as not marked")

	out, err = src.Acknowledge(ctx, 3, "SUCCEEDED", at)
	require.NoError(t, err)
	require.Equal(t, relaysource.AckAlreadyMarked, out)
	flag, when = markOf(t, db, 3)
	require.Equal(t, "OLD", flag.String, "an existing mark is never overwritten")
	require.True(t, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC).Equal(when.Time), "nor its time")

	out, err = src.Acknowledge(ctx, 1, "SKIPPED", at.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, relaysource.AckAlreadyMarked, out, "a second acknowledgement is a success")
	flag, _ = markOf(t, db, 1)
	require.Equal(t, "SUCCEEDED", flag.String)

	out, err = src.Acknowledge(ctx, 99, "SUCCEEDED", at)
	require.NoError(t, err)
	require.Equal(t, relaysource.AckMissingRow, out)

	_, err = src.Acknowledge(ctx, 1, "", at)
	require.Error(t, err, "an empty mark would read as not marked")

	// Without a mark-time column only the mark is written.
	cfg := ackConfig(d)
	cfg.MarkTimeColumn = ""
	src, err = relaysource.NewSQLTable(db, cfg)
	require.NoError(t, err)
	out, err = src.Acknowledge(ctx, 4, "SUCCEEDED", at)
	require.NoError(t, err)
	require.Equal(t, relaysource.AckWritten, out)
	flag, when = markOf(t, db, 4)
	require.Equal(t, "SUCCEEDED", flag.String)
	require.False(t, when.Valid)

	// Without a mark column the source cannot acknowledge.
	cfg.MarkColumn = ""
	src, err = relaysource.NewSQLTable(db, cfg)
	require.NoError(t, err)
	_, err = src.Acknowledge(ctx, 5, "SUCCEEDED", at)
	require.ErrorContains(t, err, "MarkColumn")

	// A failure is an error (transient for the caller), never an outcome.
	require.NoError(t, db.Close())
	src, err = relaysource.NewSQLTable(db, ackConfig(d))
	require.NoError(t, err)
	_, err = src.Acknowledge(ctx, 5, "SUCCEEDED", at)
	require.Error(t, err)
}

func TestAcknowledgeSQLite(t *testing.T) {
	t.Parallel()
	testAcknowledgeOutcomes(t, ackMailbox(t, relaysource.DialectSQLite, 5), relaysource.DialectSQLite)
}

func TestAcknowledgeMariaDB(t *testing.T) {
	t.Parallel()
	testAcknowledgeOutcomes(t, ackMailbox(t, relaysource.DialectMySQL, 5), relaysource.DialectMySQL)
}

// Acknowledge is bounded by ReadTimeout: a row locked by another transaction
// makes it fail with the deadline (a transient error), not hang.
func TestAcknowledgeTimeoutMariaDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.MariaDB(t)
	exec(t, db, cminmsgsMariaDB)
	exec(t, db, "INSERT INTO CMINMSGS (MSGCONTENT) VALUES ('a')")
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback() //nolint:errcheck
	_, err = tx.ExecContext(ctx, "UPDATE CMINMSGS SET MSGCONTENT = 'locked' WHERE ID = 1")
	require.NoError(t, err)

	cfg := ackConfig(relaysource.DialectMySQL)
	cfg.ReadTimeout = 200 * time.Millisecond
	src, err := relaysource.NewSQLTable(db, cfg)
	require.NoError(t, err)
	_, err = src.Acknowledge(ctx, 1, "SUCCEEDED", time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestAcknowledgeConfigValidation(t *testing.T) {
	t.Parallel()
	db := openSQLite(t)
	cfg := ackConfig(relaysource.DialectSQLite)
	cfg.MarkColumn = "PROC FLAG"
	_, err := relaysource.NewSQLTable(db, cfg)
	require.ErrorContains(t, err, "MarkColumn")
	cfg = ackConfig(relaysource.DialectSQLite)
	cfg.MarkTimeColumn = "x'"
	_, err = relaysource.NewSQLTable(db, cfg)
	require.ErrorContains(t, err, "MarkTimeColumn")
	cfg.MarkColumn = ""
	cfg.MarkTimeColumn = "PROCTIME"
	_, err = relaysource.NewSQLTable(db, cfg)
	require.ErrorContains(t, err, "requires MarkColumn")
	require.Equal(t, "written", relaysource.AckWritten.String())
	require.Equal(t, "already_marked", relaysource.AckAlreadyMarked.String())
	require.Equal(t, "missing_row", relaysource.AckMissingRow.String())
}
