// Package relaydriver defines the seam between the relay engine and its stores.
// The engine sees only these interfaces; relaypgx (PostgreSQL, pgx v5) and
// relaysqlite (SQLite, modernc.org/sqlite) implement them, and
// relaydrivertest.Exercise holds both to one behaviour.
//
// Every time a query stamps or compares is passed in as a parameter (Now fields):
// the store never reads its own clock, so tests drive time.
//
// Errors are mapped at the boundary: a missing row is relaytype.ErrNotFound, a
// unique or state-guard refusal is relaytype.ErrConflict, and connection loss,
// serialization failures and deadlocks wrap relaytype.ErrTransient.
package relaydriver
