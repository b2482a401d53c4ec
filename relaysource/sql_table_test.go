package relaysource_test

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaysource"
)

// openSQLite opens a fresh SQLite file standing for a foreign database.
func openSQLite(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "foreign.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func exec(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	_, err := db.ExecContext(context.Background(), query, args...)
	require.NoError(t, err, query)
}

func mailboxConfig(d relaysource.Dialect) relaysource.SQLTableConfig {
	return relaysource.SQLTableConfig{
		Dialect:          d,
		Table:            "CMINMSGS",
		IDColumn:         "ID",
		KeyColumn:        "FLID",
		PayloadColumn:    "CONTENT",
		ReceivedAtColumn: "RECEIVED_AT",
	}
}

func ids(rows []relaysource.Row) []int64 {
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

func TestSQLTableSQLiteReadAfter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openSQLite(t)
	exec(t, db, `CREATE TABLE CMINMSGS (ID INTEGER PRIMARY KEY, FLID TEXT, CONTENT BLOB, RECEIVED_AT DATETIME, MARK TEXT)`)
	// Inserted out of order, with a gap at 4 and processing marks on some rows.
	exec(t, db, `INSERT INTO CMINMSGS VALUES (5, 'F5', x'0501', '2024-03-01 10:00:05', 'DONE')`)
	exec(t, db, `INSERT INTO CMINMSGS VALUES (1, 'F1', x'01', '2024-03-01 10:00:01', NULL)`)
	exec(t, db, `INSERT INTO CMINMSGS VALUES (3, NULL, NULL, NULL, 'DONE')`)
	exec(t, db, `INSERT INTO CMINMSGS VALUES (2, 'F2', x'02', '2024-03-01 10:00:02', NULL)`)
	exec(t, db, `INSERT INTO CMINMSGS VALUES (6, 'F6', x'06', '2024-03-01 10:00:06', 'DONE')`)

	src, err := relaysource.NewSQLTable(db, mailboxConfig(relaysource.DialectSQLite))
	require.NoError(t, err)

	// Ascending, bounded, id > after; marked rows are returned too (seed 000 §4.1:
	// no predicate on the processing mark).
	rows, err := src.ReadAfter(ctx, 0, 3)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3}, ids(rows))
	require.Equal(t, "F1", rows[0].Key)
	require.Equal(t, []byte{0x01}, rows[0].Payload)
	require.Equal(t, time.Date(2024, 3, 1, 10, 0, 1, 0, time.UTC), rows[0].ReceivedAt)
	// NULL key, payload and received-at are fine.
	require.Equal(t, relaysource.Row{ID: 3}, rows[2])

	rows, err = src.ReadAfter(ctx, 3, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{5, 6}, ids(rows))

	rows, err = src.ReadAfter(ctx, 6, 10)
	require.NoError(t, err)
	require.Empty(t, rows)

	_, err = src.ReadAfter(ctx, 0, 0)
	require.Error(t, err, "a non-positive limit is refused")

	lo, hi, ok, err := src.Bounds(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(1), lo)
	require.Equal(t, int64(6), hi)
}

func TestSQLTableOptionalColumns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openSQLite(t)
	exec(t, db, `CREATE TABLE mailbox (msg_id INTEGER PRIMARY KEY, body TEXT, at TEXT)`)
	exec(t, db, `INSERT INTO mailbox VALUES (7, 'secret body', '2024-03-01T10:00:00+02:00'), (8, 'x', '1709287200'), (9, 'y', '0000-00-00 00:00:00')`)

	// No payload column: the payload is not copied (msgx reads raw content later).
	src, err := relaysource.NewSQLTable(db, relaysource.SQLTableConfig{
		Dialect: relaysource.DialectSQLite, Table: "mailbox", IDColumn: "msg_id", ReceivedAtColumn: "at",
	})
	require.NoError(t, err)
	rows, err := src.ReadAfter(ctx, 0, 10)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	for _, r := range rows {
		require.Nil(t, r.Payload)
		require.Empty(t, r.Key)
	}
	require.Equal(t, time.Date(2024, 3, 1, 8, 0, 0, 0, time.UTC), rows[0].ReceivedAt, "text with a zone")
	require.Equal(t, time.Unix(1709287200, 0).UTC(), rows[1].ReceivedAt, "unix seconds")
	require.True(t, rows[2].ReceivedAt.IsZero(), "MySQL zero date reads as NULL")

	// Text without a zone is read in Location.
	exec(t, db, `INSERT INTO mailbox VALUES (10, 'z', '2024-03-01 10:00:00')`)
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	require.NoError(t, err)
	src, err = relaysource.NewSQLTable(db, relaysource.SQLTableConfig{
		Dialect: relaysource.DialectSQLite, Table: "mailbox", IDColumn: "msg_id", ReceivedAtColumn: "at", Location: shanghai,
	})
	require.NoError(t, err)
	rows, err = src.ReadAfter(ctx, 9, 10)
	require.NoError(t, err)
	require.Equal(t, time.Date(2024, 3, 1, 2, 0, 0, 0, time.UTC), rows[0].ReceivedAt)

	// A value that is not a date-time must not block intake (received-at is
	// display-only, seed 000 §1.2): the row reads with a NULL time and a warning
	// naming the row — never silently.
	exec(t, db, `INSERT INTO mailbox VALUES (11, 'w', 'yesterday'), (12, 'v', '2024-03-01 11:00:00')`)
	var logs bytes.Buffer
	src, err = relaysource.NewSQLTable(db, relaysource.SQLTableConfig{
		Dialect: relaysource.DialectSQLite, Table: "mailbox", IDColumn: "msg_id", ReceivedAtColumn: "at",
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	require.NoError(t, err)
	rows, err = src.ReadAfter(ctx, 10, 10)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Equal(t, int64(11), rows[0].ID)
	require.True(t, rows[0].ReceivedAt.IsZero())
	require.Equal(t, time.Date(2024, 3, 1, 11, 0, 0, 0, time.UTC), rows[1].ReceivedAt)
	require.Contains(t, logs.String(), "received-at unreadable")
	require.Contains(t, logs.String(), "id=11")
}

func TestSQLTableEmpty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := openSQLite(t)
	exec(t, db, `CREATE TABLE CMINMSGS (ID INTEGER PRIMARY KEY, FLID TEXT, CONTENT BLOB, RECEIVED_AT DATETIME)`)
	src, err := relaysource.NewSQLTable(db, mailboxConfig(relaysource.DialectSQLite))
	require.NoError(t, err)
	lo, hi, ok, err := src.Bounds(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	require.Zero(t, lo)
	require.Zero(t, hi)
	rows, err := src.ReadAfter(ctx, 0, 10)
	require.NoError(t, err)
	require.Empty(t, rows)
}

// seed 000 §4.1 step 1: an unreadable source is an error, never "no rows".
func TestSQLTableReadErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("missing table", func(t *testing.T) {
		db := openSQLite(t)
		src, err := relaysource.NewSQLTable(db, mailboxConfig(relaysource.DialectSQLite))
		require.NoError(t, err)
		_, err = src.ReadAfter(ctx, 0, 10)
		require.ErrorContains(t, err, "CMINMSGS")
		_, _, _, err = src.Bounds(ctx)
		require.Error(t, err)
	})
	t.Run("closed database", func(t *testing.T) {
		db := openSQLite(t)
		exec(t, db, `CREATE TABLE CMINMSGS (ID INTEGER PRIMARY KEY, FLID TEXT, CONTENT BLOB, RECEIVED_AT DATETIME)`)
		src, err := relaysource.NewSQLTable(db, mailboxConfig(relaysource.DialectSQLite))
		require.NoError(t, err)
		require.NoError(t, db.Close())
		_, err = src.ReadAfter(ctx, 0, 10)
		require.Error(t, err)
		_, _, _, err = src.Bounds(ctx)
		require.Error(t, err)
	})
	t.Run("non-unique id column", func(t *testing.T) {
		db := openSQLite(t)
		exec(t, db, `CREATE TABLE t (n INTEGER)`)
		exec(t, db, `INSERT INTO t VALUES (1), (2), (2), (3)`)
		src, err := relaysource.NewSQLTable(db, relaysource.SQLTableConfig{Dialect: relaysource.DialectSQLite, Table: "t", IDColumn: "n"})
		require.NoError(t, err)
		_, err = src.ReadAfter(ctx, 0, 10)
		require.ErrorContains(t, err, "out of order")
	})
	t.Run("cancelled context", func(t *testing.T) {
		db := openSQLite(t)
		exec(t, db, `CREATE TABLE CMINMSGS (ID INTEGER PRIMARY KEY, FLID TEXT, CONTENT BLOB, RECEIVED_AT DATETIME)`)
		src, err := relaysource.NewSQLTable(db, mailboxConfig(relaysource.DialectSQLite))
		require.NoError(t, err)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err = src.ReadAfter(cctx, 0, 10)
		require.ErrorIs(t, err, context.Canceled)
	})
}

// Each read is bounded by ReadTimeout even when the caller's ctx has no
// deadline. The "table" is a view over an endless recursive CTE, so the read
// would otherwise never finish.
func TestSQLTableReadTimeout(t *testing.T) {
	t.Parallel()
	db := openSQLite(t)
	exec(t, db, `CREATE VIEW endless AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x AS id FROM c`)
	src, err := relaysource.NewSQLTable(db, relaysource.SQLTableConfig{
		Dialect: relaysource.DialectSQLite, Table: "endless", IDColumn: "id", ReadTimeout: 100 * time.Millisecond,
	})
	require.NoError(t, err)
	_, err = src.ReadAfter(context.Background(), 0, 10)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestSQLTableConfigValidation(t *testing.T) {
	t.Parallel()
	db := openSQLite(t)
	good := mailboxConfig(relaysource.DialectSQLite)
	for name, tc := range map[string]struct {
		mutate func(*relaysource.SQLTableConfig)
		want   string
	}{
		"no table":            {func(c *relaysource.SQLTableConfig) { c.Table = "" }, "Table"},
		"no id":               {func(c *relaysource.SQLTableConfig) { c.IDColumn = "" }, "IDColumn"},
		"injection in table":  {func(c *relaysource.SQLTableConfig) { c.Table = "t; DROP TABLE x" }, "Table"},
		"quote in id":         {func(c *relaysource.SQLTableConfig) { c.IDColumn = "id`" }, "IDColumn"},
		"space in key":        {func(c *relaysource.SQLTableConfig) { c.KeyColumn = "a b" }, "KeyColumn"},
		"dash in payload":     {func(c *relaysource.SQLTableConfig) { c.PayloadColumn = "a-b" }, "PayloadColumn"},
		"quote in received":   {func(c *relaysource.SQLTableConfig) { c.ReceivedAtColumn = `a"` }, "ReceivedAtColumn"},
		"leading digit":       {func(c *relaysource.SQLTableConfig) { c.IDColumn = "1id" }, "IDColumn"},
		"two qualifiers":      {func(c *relaysource.SQLTableConfig) { c.Table = "a.b.c" }, "Table"},
		"unknown dialect":     {func(c *relaysource.SQLTableConfig) { c.Dialect = "oracle" }, "Dialect"},
		"negative timeout":    {func(c *relaysource.SQLTableConfig) { c.ReadTimeout = -time.Second }, "ReadTimeout"},
		"non-ascii id column": {func(c *relaysource.SQLTableConfig) { c.IDColumn = "idé" }, "IDColumn"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := good
			tc.mutate(&cfg)
			_, err := relaysource.NewSQLTable(db, cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := relaysource.NewSQLTable(nil, good)
	require.Error(t, err)
}

func TestSQLTableMariaDB(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.MariaDB(t)
	exec(t, db, "CREATE TABLE CMINMSGS (ID BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, FLID VARCHAR(32) NULL, "+
		"CONTENT MEDIUMTEXT NULL, RECEIVED_AT DATETIME(3) NULL, MARK CHAR(1) NULL) ENGINE=InnoDB")
	exec(t, db, "INSERT INTO CMINMSGS (FLID, CONTENT, RECEIVED_AT, MARK) VALUES "+
		"('F1', '<msg/>', '2024-03-01 10:00:01.250', 'Y'), (NULL, NULL, NULL, NULL), ('F3', 'c', '2024-03-01 10:00:03', NULL)")
	var schema string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&schema))

	for _, table := range []string{"CMINMSGS", schema + ".CMINMSGS"} {
		cfg := mailboxConfig(relaysource.DialectMySQL)
		cfg.Table = table
		src, err := relaysource.NewSQLTable(db, cfg)
		require.NoError(t, err)
		rows, err := src.ReadAfter(ctx, 0, 2)
		require.NoError(t, err)
		require.Equal(t, []relaysource.Row{
			{ID: 1, Key: "F1", Payload: []byte("<msg/>"), ReceivedAt: time.Date(2024, 3, 1, 10, 0, 1, 250e6, time.UTC)},
			{ID: 2},
		}, rows)
		rows, err = src.ReadAfter(ctx, 2, 2)
		require.NoError(t, err)
		require.Equal(t, []int64{3}, ids(rows))
		lo, hi, ok, err := src.Bounds(ctx)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, [2]int64{1, 3}, [2]int64{lo, hi})
	}

	// A missing table on the real server is an error too.
	cfg := mailboxConfig(relaysource.DialectMySQL)
	cfg.Table = "NOPE"
	src, err := relaysource.NewSQLTable(db, cfg)
	require.NoError(t, err)
	_, err = src.ReadAfter(ctx, 0, 10)
	require.ErrorContains(t, err, "NOPE")
}
