// Package snapshot runs shipsync snapshot tasks on a ship: a rule's table
// read in primary-key order, chunk by chunk, and sent as SNAPSHOT events
// with stable ids, then the rule's changes captured since the task began
// replayed on top (docs/shipsync/snapshot.md).
//
// A task pins the rule version and the CDC start position (the next offset
// of each of the rule's topic partitions), waits until every change before
// that position has its final result, sends the baseline, and holds the
// rule's changes from the pinned position on — the catch-up barrier — until
// the shore has applied the whole baseline. It then replays them
// (CATCHING_UP), skipping the changes a snapshot row already contains, until
// the rule's lag is under a threshold (COMPLETED). Every step is persisted
// in the client's SQLite database; a crash at any point resumes from there.
package snapshot
