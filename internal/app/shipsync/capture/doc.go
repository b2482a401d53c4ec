// Package capture is the Debezium-format change capture for ship databases
// that run without Debezium: triggers on the captured MariaDB/MySQL tables
// maintain the platform's _sync_* metadata and append every row change to
// the changelog table _sync_changelog in the business transaction; the
// engine's watermark intake reads the changelog (late commits, holes) into
// a FIFO queue on the local store; the producer handler turns each row into
// the records the Debezium MySQL connector would write — JsonConverter
// {"schema","payload"} key and value, op c/u/d, a primary-key change as
// delete + tombstone + create with the key headers, a tombstone after each
// delete — and appends them to the outbox in the engine's transaction; the
// engine's dispatcher delivers them to a Kafka-API topic per table
// ("sync.cdc.<logical>.<db>.<table>"), in order per key.
//
// Install and Uninstall prepare the database; New, Run (or Step) capture;
// SchemaFor is the column type mapping. A changelog row the producer cannot
// convert becomes DEAD(MALFORMED) with a reason that names the table and
// column, never a value. docs/shipsync/capture.md has the metadata rule,
// the costs compared with Debezium and the guarantees.
package capture
