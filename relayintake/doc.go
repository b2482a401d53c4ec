// Package relayintake is the watermark intake of a sequence source: it reads a
// foreign table whose rows carry increasing ids (a shared mailbox table, say)
// past the watermark W and enqueues every row into a relay queue, advancing
// W only over contiguous ids. Create an Intake with New, seed the queue once
// with Intake.Seed, then run it with Intake.Run (or round by round with
// Intake.RunOnce).
//
// Why a watermark and not "read what is unmarked": the source allocates an id
// when a row is inserted, not when its transaction commits, so a smaller id can
// become visible after a larger one. Reading "id > the largest id seen" would
// skip that late row for ever; the watermark instead waits for it, for a
// bounded time.
//
// The rules it keeps:
//
//   - W is the contiguous upper bound of ids persisted locally: every id in
//     (start, W] is a message or a logged permanent hole. W never decreases.
//   - A hole at W+1 (a missing id with rows after it) is timed from its first
//     observation (holeSince, persisted in the cursor, so a restart keeps the
//     timing). While it is younger than Config.MaxCommitDelay, W stops before
//     it and nothing after it is enqueued — a late-committing smaller id must
//     not queue behind larger ones, or FIFO order would break.
//   - Once the hole is MaxCommitDelay old it is permanent: every missing id is
//     logged durably (relay_hole) and counted, and W jumps to the first row
//     after it minus one. The release skips only the hole itself, never an
//     existing row, and a round resolves at most one hole.
//   - A row that commits after its hole was released (a late row) is missed
//     by design, but never silently: a bounded periodic check of recently
//     released holes marks it found, counts it and logs it once; it is enqueued
//     only when an operator asks (Intake.IngestLate), under its own id.
//   - A hole that appears after an old one was filled is timed from its own first
//     observation; it does not inherit the old wait.
//   - An unreadable source never moves W: it is an infrastructure failure, not
//     "no new messages".
//   - Enqueue (insert if absent, with the source's id and received-at) and the
//     cursor save are one transaction, so a crash between them is impossible.
//   - Cutover seeding (min / zero / max / an id) is an explicit operator
//     decision and is refused on a queue that already has a watermark or
//     messages, so a restarted or upgraded instance is never re-seeded.
//
// The watermark is a single overwritten row and holes are timed in one place,
// so one queue must have exactly one active Intake: run it under the
// queue's lock (package relaylock, or relayservice which takes it for you).
// As a last line of defence a round refuses to save when the cursor changed
// under it (ErrCursorMoved).
package relayintake
