// Package relaynats is the NATS JetStream sink: a relaysink.Sink on nats.go
// and its jetstream package. Each event becomes one message on the subject
// Event.Topic (a JetStream stream must cover it) with an empty body for a
// tombstone, the payload otherwise, and these headers: Nats-Msg-Id (the
// event ID, so JetStream drops a re-publish within the stream's duplicate
// window), the standard relaysink headers, HeaderKey with the event key, then
// Event.Headers.
//
// NATS has no null value: a consumer tells a tombstone from an empty payload
// by the relay-type header (TOMBSTONE), never by the body.
//
// Publish sends the whole batch with PublishMsgAsync on one connection (one
// round trip for the batch) and waits for every ack, bounded by ctx and
// Config.Timeout; each ack or error is mapped back to its event.
//
// # Order and dedupe
//
// The server handles one connection's messages to a stream in the order they
// were sent, so a key's stored messages follow its Seq. Two things could
// break that, and the sink rules both out:
//
//   - nats.go resends buffered messages after an automatic reconnect, after
//     messages lost with the old socket; and it re-publishes a message that
//     met "no responders" after a pause, behind later ones. The sink dials
//     with nats.NoReconnect and publishes with no retries: a lost connection
//     fails every unanswered event on it (ambiguously: it may be stored), and
//     the next Publish dials a fresh connection.
//   - JetStream dedupe by Nats-Msg-Id would keep a stale copy in the wrong
//     place: when event k/2 fails and k/3 (sent behind it in the same batch)
//     was stored anyway, the dispatcher re-publishes k/2 then k/3, and k/3
//     would be dropped as a duplicate of the copy stored before k/2. So the
//     sink remembers every event it sent behind an unconfirmed event of its
//     key and re-publishes it under a fresh Nats-Msg-Id (the relay-event-id
//     header does not change, so consumers still dedupe by it). That memory is
//     in process: after a restart, within the duplicate window, such an event
//     may be deduplicated against its early copy; a consumer that accepts
//     only each key's next relay-seq then sees it only once, before its
//     predecessor (documented residual risk).
package relaynats
