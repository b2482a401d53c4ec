// Package flightstore is the PostgreSQL persistence of the msgx domain (seed
// 000): the authoritative flight state FLIGHT_SCHD with its detail tables
// (§11), the flight history FLIGHT_SCHD_HST (§9.3, D1), static reference data
// REF_MASTER and upstream request tracking REQ_TRACK (§7.2), the schedule
// trace SCHD_SNAP_LOG (§7.1), and PIPELINE_LOCK (§5.3, INV-18).
//
// Every function takes a Querier — the caller's pgx.Tx in the pipeline, so
// that state, outbox events and the message's terminal state commit together
// (INV-17) — and does I/O in as few round trips as it can: Load and Save each
// send one pgx.Batch, whatever the number of flights and detail tables. No
// function reads the clock; every stamped time is a parameter.
//
// Conventions of flight.State hold in the database: an empty string, a zero
// time.Time and a nil *int are NULL; times come back in UTC with microsecond
// precision (PostgreSQL's); an empty collection comes back nil. ORDINAL is the
// position in the slice, from 1 (INV-14).
//
// Errors are wrapped with the operation ("flightstore: save FLID X: …");
// unique violations wrap relaytype.ErrConflict, connection loss, deadlocks,
// serialization failures and timeouts wrap relaytype.ErrTransient, and the
// guards of the current state wrap ErrOperationDayChanged and ErrStaleVersion.
//
// The package is safe for concurrent use; it holds no state besides its parsed
// statements. The schema is the migration line Line ("msgx", MigrationLine),
// PostgreSQL only.
package flightstore
