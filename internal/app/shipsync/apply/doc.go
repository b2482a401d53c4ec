// Package apply is the shore's target applier: it takes the events the inbox
// released (the engine queue shore.ApplyQueue, per record key in source
// order, keys in parallel) and writes each one to the shore's business
// database (MariaDB/MySQL) conditionally, then records the outcome.
//
// The shore database and PostgreSQL cannot share a transaction, so the
// apply is a recoverable state machine (seed 004 §10.3):
//
//  1. lock the record heads of the batch in PostgreSQL (the engine
//     transaction holds the events' leases);
//  2. an event with a receipt is finished; one whose job says
//     TARGET_COMMITTED only needs finalizing;
//  3. Decide compares the event's base revision with the record head: a
//     mismatch is a conflict without touching the target;
//  4. otherwise the target write runs with the revision in its WHERE clause
//     (INSERT: the row must not exist; DELETE: the row is first stamped with
//     the event's id and origin, so the captured delete names the event),
//     together with a row in the target's applied-event ledger
//     (sync_applied_event) written only when the write changed a row — one
//     transaction for the whole batch. It is first tried set-based (one
//     multi-row statement per table, operation and column list, one
//     multi-row ledger insert), committed only when every write changed
//     its row; otherwise it is rolled back and run again as one statement
//     and one ledger statement per write, which tells the writes apart;
//  5. TARGET_COMMITTED is recorded for the written events at once, on its
//     own (so a crash after it finalizes without asking the target);
//  6. a write that changed no row is looked up: the ledger holding the event
//     means an earlier attempt wrote it (a crash between the target commit
//     and step 5); otherwise the target row as found is conflict evidence;
//  7. record heads, receipts, conflicts and the jobs' terminal states are
//     written in the engine transaction, which commits them with the
//     events' terminal state.
//
// A crash anywhere leaves the event unfinished in the engine queue; the next
// attempt goes through the same steps and learns what happened from the job
// (step 5) or the ledger (step 6), so an event takes effect on the target at
// most once and ends with exactly one receipt.
//
// The conditional write itself (Target, Conditional, Target.Apply and
// Target.Inspect) is shared with a ship's remote applier (package remote),
// which writes downlink commands into the ship's database the same way,
// its ledger rows keyed by the command's id.
package apply
