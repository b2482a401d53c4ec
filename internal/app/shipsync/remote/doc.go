// Package remote is a ship's remote applier: it writes the shore's downlink
// commands — a shore change (a ChangeEvent) or a conflict's decision — into
// the ship's business database (MariaDB), conditionally, and answers each
// with its CommandAck (seed 004 §4.1 Remote Applier, §11.6, §12).
//
// A command's write is the shore applier's conditional write (package
// apply, shared): UPDATE and DELETE where the row is at the revision the
// command expects, INSERT where the row is absent, a DELETE stamped first
// so the captured delete names the command. It writes the command's own
// _sync_* values and makes no new revision: _sync_revision is the
// command's result revision (a decision's decided revision), _sync_origin
// the change's origin node (for a decision the shore's node id), and
// _sync_event_id the COMMAND's id — the ship's normaliser finds the
// command by that id in the client's applied_command table and suppresses
// the captured write instead of sending it back up (loop suppression).
// A row in the database's ledger (sync_applied_event, keyed by origin and
// command id) is written in the same transaction when the write changed a
// row, so a command whose write committed before the ship lost track of it
// is answered COMMAND_ALREADY_APPLIED when it is applied again.
//
// Results: COMMAND_APPLIED (written now), COMMAND_ALREADY_APPLIED (the
// ledger holds it, or the row is at its result revision with its stamp),
// COMMAND_CONFLICT_REPORTED with the ship's current revision and row (for
// a decision with REJECT_REASON_DECISION_STALE), COMMAND_REJECTED with a
// stable reason for a command the ship cannot apply. An error is an
// infrastructure failure (the database down, a table missing): nothing was
// decided, and the command is to be applied again later.
//
// The applier writes; recording the command, the order of commands and
// the acks are the client's (package client).
package remote
