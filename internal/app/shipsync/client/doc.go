// Package client is the ship side of shipsync's uplink: it consumes the
// CDC topics (Debezium MySQL envelopes, or the trigger capture's), turns
// each record into a platform event under the node's rules (packages cdc
// and normalize), keeps the platform state in SQLite (Store: event_state,
// partition_watermark, applied_command, rule_snapshot, queue_metric),
// uploads batches to the shore over mutual TLS (Transport), pulls the
// receipts by cursor, and commits the consumer group only up to each
// partition's contiguous terminal checkpoint.
//
// The rules it keeps:
//
//   - Nothing is tracked in memory before it is saved: a poll's new events,
//     their stream sequence numbers and the read positions commit in one
//     SQLite transaction first.
//   - An event gets a source_sequence only if the shore could accept it;
//     one that fails validation is blocked unnumbered, so no stream ever
//     has a gap the node made itself.
//   - A blocked record (undecodable, refused by a rule or by the shore)
//     holds its partition's terminal checkpoint; reading goes on.
//   - RECEIVED is not success: an event is final only with its receipt,
//     and the group offset never passes the first event that is not.
//   - A restart resumes from the saved checkpoints; an event read again
//     finds its row by its stable id and keeps its number and state.
//   - Memory is bounded: payloads read and not yet received (by size),
//     events not yet final (per partition), fetches, the compressor.
//
// Scheduling (priority classes, ageing, windows, the token bucket, the
// clock-jump guard) is package flow's. See docs/shipsync/client.md.
package client
