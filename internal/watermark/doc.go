// Package watermark runs the intake of a sequence source (seed 000 §4): it reads
// a foreign table with increasing ids past the watermark W and enqueues every row
// into the store, advancing W only over contiguous ids.
//
// The rules it defends, each from seed 000 §4.1 unless noted:
//
//   - W is the contiguous upper bound of ids persisted locally: every id in
//     (start, W] is a message or a logged permanent hole. W never decreases.
//   - A hole at W+1 (a missing id with rows after it) is timed from its first
//     observation (holeSince, persisted in the cursor, so a restart keeps the
//     timing, §9.2). While it is younger than MaxCommitDelay, W stops before it
//     and nothing after it is enqueued — a late-committing smaller id must not
//     queue behind larger ones (FIFO).
//   - Once the hole is MaxCommitDelay old it is permanent: it is logged durably
//     (HoleInsert) and counted, and W jumps to the first row after it minus one.
//     The release skips only the hole itself, never an existing row, and a round
//     resolves at most one hole.
//   - A hole that appears after an old one was filled is timed from its own first
//     observation; it does not inherit the old wait.
//   - An unreadable source never moves W: it is an infrastructure failure, not
//     "no new messages" (step 1).
//   - Enqueue (insert if absent) and the cursor save are one transaction (step 5).
//   - Cutover seeding (min / zero / max / id) is explicit and refused on a
//     pipeline that already has a watermark or messages (§4.3).
//
// The watermark is a single overwritten row, so one pipeline must have exactly one
// active Intake (seed 000 §4.5 PRE-5); the caller holds the pipeline's exclusive
// lock (relaydriver.Driver.TryLock). As a last line of defence a round refuses to
// save when the cursor changed under it.
package watermark
