// Package relaypgx is relay's PostgreSQL store, built on pgx v5 and pgxpool.
//
// It implements every interface of relaydriver: the message inbox, the intake
// cursor and holes, FOR UPDATE SKIP LOCKED claims, migration bookkeeping and
// session advisory locks. The engine schema is embedded under
// migration/engine and every statement lives in the embedded queries.sql.
//
// Time is never read from the database clock: every timestamp a statement
// writes or compares arrives as a parameter. Timestamps are
// stored as timestamptz and returned in UTC; SQL NULL is the zero time.Time.
//
// Errors are mapped at the boundary: pgx.ErrNoRows becomes
// relaytype.ErrNotFound, unique violations relaytype.ErrConflict, and
// connection loss, serialization failures, deadlocks and timeouts wrap
// relaytype.ErrTransient with the original error kept in the chain.
package relaypgx
