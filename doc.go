// Package relay is the processing core of the relay message-pipeline engine:
// a durable state machine per message, run in one of three ordering modes, that
// applies each message exactly once in effect.
//
// # Start here
//
// An app is a Handler plus wiring. Build an Engine with NewEngine (a store
// driver from relaydriver/relaypgx or relaydriver/relaysqlite, the name of the
// queue it processes, a Mode and the Handler); enqueue with Engine.Enqueue or
// EnqueueTx; inside the handler, write your tables through its Tx and append
// events with AppendEventsTx (one event struct, relaytype.Event, goes from
// there through the store to the sink); deliver them with a Dispatcher to a
// sink from relaysink/… ; run the whole pipeline with relayservice (which also holds the
// one-active-instance lock where the mode needs it), and feed a queue from
// a foreign table with relayintake. examples/orders is a whole app on this
// API alone, with its crash test; docs/architecture.md maps every package and
// the path of one message through them.
//
// Transactions: every function that writes in a transaction takes a Tx — the
// one a handler receives, a driver's Begin, or the caller's own pgx.Tx /
// *sql.Tx wrapped by the driver's WrapTx — so a raw driver transaction does
// not compile there; relaypgx.PgxTx and relaysqlite.SQLTx give a handler its
// driver's transaction, typed.
//
// A message is enqueued (Engine.Enqueue, or EnqueueTx in the caller's own
// transaction) as PENDING, optionally with a business identity that dedupes
// it at insert time. The engine hands it to a Handler inside a store
// transaction; the handler's writes, the terminal state (SUCCEEDED or SKIPPED)
// and the acknowledgement intent commit together, or not at all. A failure is
// recorded in one statement after the handler's writes were rolled back:
// FAILED with attempts+1 and the next attempt time from the backoff schedule,
// DEAD for classes that are not worth retrying (MALFORMED, PROTOCOL), and
// DEAD(EXHAUSTED) when the attempt limit is reached.
//
//	PENDING / FAILED → SUCCEEDED | SKIPPED | FAILED (backoff) | DEAD
//
// Before the transaction, a Handler that is also a Decoder has the message
// decoded; a non-empty Decoded.Identity is bound once to the message in an
// independent statement, and a second message with the same identity becomes
// SKIPPED duplicate-of:<id>; a Decoded.Kind matching an ignore rule becomes
// SKIPPED ignored:<rule>.
//
// # Identity at enqueue
//
// A producer that knows a message's business identity passes it as
// EnqueueParams.Identity, and the duplicate is found at insert time instead:
// when a message of the queue already holds the identity, no message is
// inserted and the EnqueueResult reports Duplicate with the holder's ID (a
// duplicate is not an error). Params of one call are decided in input order;
// on PostgreSQL a concurrent transaction enqueueing the same identity is
// waited for, so two transactions never both insert it. Both kinds of
// identity share one namespace per queue: an enqueued identity that a
// Decoder bound earlier is a duplicate, and a Decoder identity that a
// message was enqueued with makes the later message SKIPPED duplicate-of it.
// A message enqueued with an identity is bound from the start, so its own
// Decoder's identity is never bound over it.
//
// # Producer-only engines
//
// Config.Handler may be nil: such an engine enqueues (Enqueue, EnqueueTx),
// replays and reports Stats, for a process that only produces messages that
// other processes handle; its Start and Work return an error wrapping
// ErrNoHandler.
//
// Ordering modes:
//
//   - ModeFIFO: strict global order; a FAILED head waiting for its backoff
//     blocks everything behind it. One goroutine.
//   - ModePerKey: same key strictly in order, different keys in parallel; a
//     failing head pauses only its key.
//   - ModeUnordered: claims with FOR UPDATE SKIP LOCKED under a lease and
//     processes in parallel; several instances may share one store.
//
// Every time the engine reads comes from Config.Clock, and every time a store
// query stamps is passed to it as a parameter, so tests drive retries with a
// relayclock.Fake and Engine.Work instead of sleeping.
//
// # Failures and attempts
//
// An attempt is counted in exactly one place, the statement that records the
// failure: a commit that fails after the terminal state was
// written counts one INFRA attempt, not two. A store error while recording a
// failure is returned by Work (and logged once by a started engine); the
// message stays as it was and is retried by a later round. Nothing is made
// DEAD by age: only the attempt limit exhausts a message.
//
// # Metrics
//
// With Config.Registerer set, an engine exports (labels are bounded: queue,
// state, outcome):
//
//   - relay_backlog_messages{queue}: unfinished (PENDING+FAILED) messages;
//   - relay_backlog_oldest_unprocessed_seconds{queue}: age on Config.Clock of
//     the oldest unfinished message's enqueue time, 0 when there is none;
//   - relay_messages{queue,state}: messages per state, ARCHIVED included;
//   - relay_processed_total{queue,outcome}: decisions written, by outcome
//     succeeded, skipped, dead, retry or exhausted (a final failure counts as
//     retry and then exhausted).
//
// The gauges are refreshed from the store at the end of a Work round, at most
// once a second on Config.Clock (the aggregate reads the whole queue). The
// outbox Dispatcher exports relay_outbox_events_total{target,outcome} and
// relay_outbox_pending{target} (refreshed the same way, on its Clock); the
// AckWriter exports
// relay_ack_total{queue,outcome}, relay_ack_abandoned_total{queue,reason}
// and relay_ack_attempts_alerts_total{queue}.
//
// # Outbox and acknowledgements
//
// AppendEventsTx appends events to the transactional outbox in the caller's
// transaction; a Dispatcher delivers them to a relaysink.Sink at
// least once, in commit order per key (docs/outbox.md). An AckWriter writes the
// processing marks back to the source for terminal messages that recorded an
// acknowledgement intent (docs/ack.md).
//
// # Logging
//
// Logs go to Config.Logger with snake_case keys (queue, message_id,
// outcome, error_class, attempts …). Payloads are never logged.
package relay
