// Package relaysink defines the seam between the outbox dispatcher and the
// systems events are delivered to (Kafka, Redis Streams, NATS JetStream, HTTP
// webhooks). Each sink lives in its own package (relaykafka, …) and passes the
// one conformance suite in relaysinktest.
//
// Delivery is at least once: a sink may deliver an event again (the dispatcher
// retries what was not confirmed), so every event carries a stable ID that
// consumers dedupe by, and a per-key sequence Seq that lets a consumer check
// order.
package relaysink

import (
	"context"

	"github.com/relayhq/relay/relaytype"
)

// EventType says whether an event carries a new state or removes it. It is
// relaytype.EventType, declared once for the engine, the stores and the sinks.
type EventType = relaytype.EventType

const (
	// Upsert carries Payload as the key's new state or change notice.
	Upsert = relaytype.EventUpsert
	// Tombstone removes the key's state: Payload is nil and sinks that support it
	// deliver a null value (a Kafka tombstone on a compacted topic).
	Tombstone = relaytype.EventTombstone
)

// Standard header names every sink carries with each event (as Kafka record
// headers, Redis stream fields, NATS headers, HTTP headers).
const (
	// HeaderEventID carries Event.ID, the consumer's dedupe key.
	HeaderEventID = "relay-event-id"
	// HeaderSeq carries Event.Seq in decimal.
	HeaderSeq = "relay-seq"
	// HeaderType carries Event.Type.
	HeaderType = "relay-type"
)

// Event is one outbox event as a sink publishes it: relaytype.Event, the
// struct the engine appends and the store keeps. A sink reads ID, Topic, Key,
// Seq, Type, Headers and Payload (Target chose the sink and is not
// delivered). Event.Validate checks the contract every sink relies on.
type Event = relaytype.Event

// Sink delivers events to one external system. Implementations are safe for
// concurrent use.
type Sink interface {
	// Name names the sink in logs and metrics ("kafka", "redis", …).
	Name() string
	// Publish delivers events and returns one error per event, in input order:
	// nil when the system confirmed the event (durably accepted it), the reason
	// otherwise. Within the batch, events of one key are in ascending Seq. The
	// sink keeps per-key order: once an event of a key is not confirmed, no later
	// event of that key in the batch is confirmed either, and the sink does not
	// knowingly deliver one (an ambiguous failure, such as a timeout, may still
	// have delivered the event: that is at least once, and consumers dedupe by
	// ID). ctx bounds the whole call; a sink also bounds every external call by
	// its own timeout.
	//
	// Each error is a *PublishError wrapping the reason; the reasons all sinks
	// share are ErrClosed, ErrInvalidEvent, ErrEarlierFailed (every later
	// event of a key after its first unconfirmed one, see EnforceKeyOrder)
	// and ErrPublishTimeout, tested with errors.Is.
	Publish(ctx context.Context, events []Event) []error
	// Close flushes what it can within ctx and releases the sink's connections.
	// Publish after Close returns errors.
	Close(ctx context.Context) error
}
