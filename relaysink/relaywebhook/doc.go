// Package relaywebhook is the HTTP webhook sink: a relaysink.Sink that POSTs
// each event to Config.URL + "/" + Event.Topic (the topic path-escaped) with
// the standard library's net/http client.
//
// # The request
//
// The body is Event.Payload (empty for a tombstone), Content-Type
// application/octet-stream unless the event's own headers set one. The
// headers are the event's user headers, then the standard relaysink headers
// (relay-event-id, relay-seq, relay-type), HeaderKey (relay-key, the event key
// percent-encoded with url.PathEscape, so any key fits an HTTP header),
// Idempotency-Key (the event id) and the signatures under Config.Secret:
// HeaderSignatureV2 (Relay-Signature-V2, "t=<unix seconds>,v2=<hex
// HMAC-SHA256>" over the timestamp, event id, type, key, sequence, topic and
// body, length-prefixed; see SignV2) and, unless Config.DisableV1Signature,
// the older HeaderSignature (Relay-Signature, "t=<unix seconds>,v1=<hex
// HMAC-SHA256 of t + "." + body>"), which binds only the timestamp and body.
// A tombstone is an empty body with relay-type TOMBSTONE; a receiver tells it
// from an empty upsert by that header. A user header never replaces one of
// the sink's own (see Publish).
//
// # Receiving
//
// A Receiver checks a request before it is trusted: the v2 signature
// (constant-time), the timestamp within a tolerance of an injected clock, a
// bounded body, and no replay of a request it already verified within the
// tolerance window (bounded memory). Use Receiver.Verify in a handler or
// Receiver.Handler as middleware; VerifySignatureV2 is the stateless check
// for receivers not built on net/http, and VerifySignature checks v1 for
// receivers not yet moved to v2. Delivery is at least once: receivers dedupe
// by the verified event id.
//
// # Confirmation and order
//
// A 2xx answer confirms an event; any other status (redirects are not
// followed), a transport error or a timeout does not. Each request is bounded
// by Config.RequestTimeout and by Publish's ctx. Events of different keys go
// out in parallel, at most Config.Concurrency requests at a time for the whole
// sink; the events of one (topic, key) go strictly one after another, and the
// first failure of a key stops it: its later events in the batch are not sent
// and report relaysink.ErrEarlierFailed (the per-key prefix rule, see
// relaysink.EnforceKeyOrder).
package relaywebhook
