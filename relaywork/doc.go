// Package relaywork keeps durable, revision-driven work records with leases
// and fencing tokens on PostgreSQL (pgx v5): one row per (queue, key) that is
// re-armed every time a new fact about the key arrives, processed by at most
// one worker at a time, where a worker whose lease expired can no longer
// commit side effects.
//
// It is not the engine's message queue: a message is processed once to a
// terminal state, while a work record lives as long as its key, goes back to
// pending whenever a fact arrives (Bump, in the transaction that stores the
// fact), and is processed from all the stored facts at once. Facts that
// arrive while a worker runs are never lost: Done leaves the row pending
// when the revision moved past the one claimed.
//
// The flow, per key:
//
//	Bump(tx, keys)        in the transaction that stores a fact: revision+1, idle → pending
//	Claim(owner, n)       a short transaction: pending/due rows → processing, fence+1
//	Lock(tx, claim)       FIRST statement of the side-effect transaction: refuses a stale holder (ErrFenced)
//	... domain writes ...
//	Done(tx, claim, wake) same transaction: idle (or pending when new facts came), attempts 0
//	Fail(claim, err)      on error: retry_wait with backoff, needs_review after MaxAttempts
//
// Lock order: the work row first (Lock), then the domain's rows. Bump and
// Ensure take several work rows in sorted key order. A transaction that
// follows both rules cannot deadlock against another that follows them.
//
// Time: Config.Clock, when set, stamps every statement (its Now is a query
// parameter), so tests are deterministic; when nil, the database's
// clock_timestamp() does, so several instances share one clock.
//
// Store.Run is a worker loop: it claims in batches, runs a handler per claim
// with bounded concurrency, renews each lease every Lease/3 and cancels a
// handler whose lease was lost (ErrLeaseLost). docs/work.md has the states,
// the guarantees and the test that defends each.
package relaywork
