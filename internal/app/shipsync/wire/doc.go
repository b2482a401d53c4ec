// Package wire holds the hand-written rules of the shipsync data protocol
// around the generated messages of shipsyncpb: version parsing and the
// major/minor compatibility rule (ParseVersion, CheckVersion), upload batch
// encoding and decoding with its limits, zstd compression above a threshold,
// SHA-256 over the uncompressed event list and a bounded decompression
// (Codec), ChangeEvent validation that names the bad field without echoing
// values (ValidateEvent), and the mapping of its error classes to refusal
// bodies (ErrorBody). It is a pure codec: no I/O, no engine, no store.
// docs/shipsync/protocol.md states every rule.
package wire
