// Package shore is the shore side of shipsync's uplink: the node registry
// (which nodes and which client certificates may connect), the receive inbox
// and the HTTP API ships upload to over mutual TLS.
//
// Ingress (POST /sync/v1/batches) authenticates the node from its verified
// client certificate and the registry, decodes and checks the batch with
// wire.Codec, validates each event, inserts the events idempotently keyed
// (origin_node_id, event_id) in one PostgreSQL transaction together with the
// batch's answer, and answers per event only after that commit. A resent
// batch id is answered with the stored answer.
//
// The tables are the migration line "shipsync" (MigrationLine); SQL lives in
// queries.sql.
package shore
