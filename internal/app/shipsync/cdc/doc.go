// Package cdc decodes the change events of the Debezium MySQL connector, as
// a Kafka consumer receives them (record key, value and headers, JSON from
// Kafka Connect's JsonConverter), into Event: the op, the primary key in key
// order, the before and after row images as shipsyncpb.ColumnValue lists,
// the source position (binlog file/pos/row, GTID, server id, snapshot
// marker, change time) and the transaction block when the connector emits
// one. A later normaliser turns an Event into a shipsyncpb.ChangeEvent
// (event id, revisions, sequence); this package does none of that.
//
// Both JSON forms are read: with a schema (schemas.enable=true, an object
// of exactly "schema" and "payload") the column types come from the message;
// without one, from the caller's TypeMap, because a bare JSON value cannot
// tell a DECIMAL (base64 text) from a string or a DATE (a day number) from
// an integer, and the decoder never guesses. A null value is a tombstone
// (OpTombstone); a truncate (op "t") has no key and no row images; a
// primary-key change is two messages, a delete and a create, each decoded
// as what it is, with Debezium's key headers passed through.
//
// Value decoders are registered by Debezium connector major version (the
// leading number of source.version); a major no decoder is registered for
// is refused as UnsupportedVersion, so a future envelope change gets its
// own decoder rather than a silent misreading.
//
// Every failure is a *DecodeError classified by ErrorKind (Malformed,
// UnsupportedVersion, IncompatibleType, MissingKey, MissingType) and naming
// the field; error texts never carry row values. A caller must not advance
// its watermark past a message that failed to decode; it records the
// classification in its failure summary.
//
// Decoding is pure: no I/O, no clock, no Kafka client (GroupOpts only builds
// the consumer options the readers of these topics share). A Decoder is
// safe for concurrent use. docs/shipsync/cdc.md has the type mapping table.
package cdc
