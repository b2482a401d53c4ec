// Package relaysqlite is relay's embedded store: relaydriver.Driver on SQLite
// through modernc.org/sqlite (pure Go, no cgo; database/sql driver name
// "sqlite"). It is the store of the shipsync ship-side client and the
// zero-setup default of `relay demo`. It behaves like relaypgx;
// relaydrivertest.Exercise holds both to one behaviour.
//
// # Connections: one writer, many readers
//
// Open opens the database file twice:
//
//   - the writer, a *sql.DB limited to one connection, whose transactions all
//     begin IMMEDIATE (DSN _txlock=immediate): the write lock is taken at BEGIN,
//     so two writers never both read and then fail to upgrade with SQLITE_BUSY
//     — they queue for the one connection instead. Every write, every
//     transaction from Begin and raw Exec go here;
//   - the read pool, query-only connections that serve the pure reads of
//     GetExecutor (MessageGet, MessageListUnfinished, MessageStats,
//     MessageExists, CursorGet, HoleList, AppliedVersions, and raw Query /
//     QueryRow). In WAL mode they read the last committed state and proceed
//     while a write transaction is open. Raw Query/QueryRow through
//     GetExecutor therefore cannot write (INSERT … RETURNING must run in a
//     transaction from Begin).
//
// Because there is exactly one writer connection, a goroutine that holds a
// transaction from Begin must do all its writes through that ExecutorTx. A
// write through GetExecutor (or TryLock, Begin, Migrator().Apply) from the
// same goroutine waits for the writer it already holds: it blocks until its
// ctx ends and then fails with the ctx error (a deadline wraps
// relaytype.ErrTransient); without a ctx deadline it never returns. Reads
// through GetExecutor are fine (they see the last committed state, not the
// open transaction's).
//
// Claims: SQLite has no FOR UPDATE SKIP LOCKED (SupportsSkipLocked is false);
// the single writer serialises claims instead, each one short IMMEDIATE
// transaction that selects the ready rows and sets their lease in one
// UPDATE … RETURNING. SupportsListenNotify is false: the engine polls.
//
// # Time
//
// Every time column is INTEGER Unix microseconds UTC, NULL for the zero
// time.Time, converted only inside this package, so SQL comparisons are
// numeric. No statement reads SQLite's clock; every "now" comes from the
// params. Times read back are in UTC, truncated to the
// microsecond like PostgreSQL's timestamptz.
//
// # Placeholders
//
// modernc.org/sqlite binds $1, $2 … positionally: a parameter named $N (or
// ?N) takes the N-th argument, a repeated $N the same argument, and the
// order they appear in does not matter (verified by
// TestDollarPlaceholdersBindPositionally). Application SQL written with $N
// for PostgreSQL therefore binds the same way here; only the SQL dialect
// itself differs. This package's own queries use $N too, kept in the
// embedded queries.sql.
//
// # Locks
//
// SQLite has no session advisory locks, so TryLock holds a lease row in
// relay_lock that expires after LockParams.TTL unless renewed; the holder
// must Renew well within the TTL.
//
// # Errors
//
// sql.ErrNoRows maps to relaytype.ErrNotFound; a UNIQUE or PRIMARY KEY
// violation (SQLITE_CONSTRAINT_UNIQUE / _PRIMARYKEY) to relaytype.ErrConflict;
// SQLITE_BUSY / SQLITE_LOCKED and context.DeadlineExceeded wrap
// relaytype.ErrTransient. Other constraint failures (CHECK, NOT NULL) are
// bugs, not conflicts, and stay plain errors, as in relaypgx. The original
// error stays in the chain.
package relaysqlite
