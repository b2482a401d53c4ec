// Package normalize is the ship side of shipsync's rule runtime: it turns
// one decoded Debezium record (a *cdc.Event, read at a queue topic,
// partition and offset) into the platform's *shipsyncpb.ChangeEvent, or into
// a disposition saying why nothing is sent (Skip) or why the record must
// wait for an operator (Block).
//
// The steps follow seed 004 §8.3: find the table's rule and check its
// direction; check the change's origin and suppress the loop of the node's
// own remote applier (§12); apply the row filter and the dataset window
// (§14.1); select, transform and rename the columns; build the event with a
// stable UUIDv5 event id (§7.4), base and result revisions from the
// platform's _sync_revision column (§5.2, a DELETE's result being a
// deterministic tombstone revision), and check it with wire.ValidateEvent.
// Nothing is guessed: a missing revision, an unexplained origin or an
// unreadable business time is a Block with a stable reason code, never a
// filled-in value or a silent drop.
//
// Rules come from a JSON rules file (LoadRules) and are validated when
// loaded: an unknown field, transform or transform version, a key column
// excluded or transformed, a platform column named, a bad window or zone is
// refused with a *RuleError naming the rule and the field. Transforms are a
// whitelist of versioned pure functions; a rule runs no scripts and reaches
// no network.
//
// The package is pure: no I/O, no clock (the caller passes its trusted now),
// no network; the applied-command lookup is an interface the caller
// implements over its own state. A Normalizer and a RuleSet are immutable
// and safe for concurrent use. Outcome details and errors never carry a row
// value or a whole key. docs/shipsync/normalize.md has the file format, the
// id formulas and the disposition codes.
package normalize
