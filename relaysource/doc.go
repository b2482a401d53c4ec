// Package relaysource defines the sequence sources relay's watermark intake reads:
// foreign tables whose rows carry increasing ids (such as the shared MySQL
// mailbox CMINMSGS), and SQLTable, their implementation over database/sql
// for MySQL/MariaDB (github.com/go-sql-driver/mysql) and SQLite
// (modernc.org/sqlite, driver name "sqlite").
//
// A source only reads, except that an Acknowledger writes the processing mark
// back once a message is terminal, never overwriting an existing
// mark. Reads never filter on a processing mark: the intake's one
// fast path is "id > W order by id limit n", and which rows
// are missing is decided by the watermark, not by flags another system writes.
// A source never turns a failed read into "no rows": an unreadable source must
// never move the watermark.
//
// The caller registers the database/sql driver (blank-import
// github.com/go-sql-driver/mysql or modernc.org/sqlite) and owns the *sql.DB.
package relaysource
