// Package shipdemo runs the whole uplink of shipsync on one machine: a
// ship's MariaDB database with the trigger capture, the CDC topics on an
// in-process Kafka-API cluster (franz-go's kfake), the ship client with its
// SQLite state, the shore server over mutual TLS with its PostgreSQL inbox
// and applier, and the shore's MariaDB database. A workload writes the
// ship's tables while everything runs; when the chain is quiet, Run
// reconciles the two databases row by row and every event's result.
//
// It backs `relay shipsync demo` and the end-to-end test.
package shipdemo
