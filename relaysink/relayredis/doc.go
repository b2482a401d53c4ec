// Package relayredis is the Redis Streams sink: a relaysink.Sink on go-redis
// v9. Each Event.Topic is one stream (the topic is the stream key), and each
// event is one entry, appended with XADD and an auto-generated ID ("*"), whose
// fields are, in this order:
//
//	key             Event.Key
//	relay-event-id  Event.ID (the consumer's dedupe key)
//	relay-seq       Event.Seq in decimal
//	relay-type      Event.Type (UPSERT or TOMBSTONE)
//	h:<name>        one field per user header (Event.Headers), sorted by name
//	payload         Event.Payload; absent for a tombstone
//
// A stream entry cannot hold a null value, so a tombstone is an entry without
// the payload field, while an upsert always has it, empty when its payload is
// empty: a consumer tells a null value (no FieldPayload) from an empty one
// (FieldPayload = "") by the field's presence, and relay-type says the same.
// User headers carry the HeaderFieldPrefix so that a header named "key" or
// "payload" cannot collide with the entry's own fields; a user header named
// like a standard header is dropped, as relaykafka does.
//
// Publish sends the whole batch as one pipeline (one round trip on one
// connection) and maps each XADD reply to its event. Redis executes a
// pipeline's commands in order, so the events of a key are appended in Seq
// order. The client never retries (XADD is not idempotent: a retried
// pipeline would append its confirmed prefix again); re-publishing what was
// not confirmed is the dispatcher's job.
//
// Redis 7 has no producer-side idempotency (XADD IDMP arrives in Redis 8.6),
// so delivery is at least once and consumers dedupe by the relay-event-id
// field; a consumer that needs strict per-key order accepts only each key's
// next relay-seq (see docs/sinks.md).
package relayredis
