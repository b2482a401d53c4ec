package relaytype

import (
	"errors"
	"fmt"
)

// ErrInvalidEvent: an event breaks the Event contract (see Event.Validate and
// Event.CheckAppend). Sinks return it, wrapped, for an event they cannot
// carry (relaysink.ErrInvalidEvent is this value).
var ErrInvalidEvent = errors.New("invalid event")

// Event is one outbox event. The same struct travels the whole way: a
// transaction appends it (relay.AppendEventsTx; relay.OutboxEvent is this
// type), the store keeps it (relaydriver.OutboxRecord embeds it beside the
// delivery state), the dispatcher hands it to a sink (relaysink.Event is this
// type) and the sink publishes it.
type Event struct {
	// ID is the stable, unique event id consumers dedupe by. Required.
	ID string
	// Target names the dispatcher, and so the sink, that delivers the event
	// (one dispatcher per target). Required to append; sinks ignore it.
	Target string
	// Topic is the destination inside the sink: a Kafka topic, a Redis
	// stream, a NATS subject, a webhook path. Required by every sink.
	Topic string
	// Key is the ordering key: the events of one (Target, Key) are numbered
	// 1, 2, 3 … in commit order and delivered in that order. Events without a
	// key share the empty key.
	Key string
	// Seq is the event's number in its (Target, Key) sequence. The store
	// assigns it when the event is appended (AppendEventsTx returns it);
	// it is 0 on an event not yet appended, and must be.
	Seq int64
	// Type is EventUpsert or EventTombstone; an empty Type is appended as
	// EventUpsert.
	Type EventType
	// Headers are delivered with the event, as given.
	Headers map[string]string
	// Payload is the body; nil for an EventTombstone.
	Payload []byte
}

// Validate checks ev against the contract every sink relies on: a non-empty
// ID (the consumers' dedupe key), a non-empty Topic and a Type that is
// EventUpsert or EventTombstone. The error wraps ErrInvalidEvent and names
// the broken field. Sinks call it before sending and add the checks of their
// own system (a NATS subject, HTTP header characters).
func (ev Event) Validate() error {
	switch {
	case ev.ID == "":
		return fmt.Errorf("%w: empty ID", ErrInvalidEvent)
	case ev.Topic == "":
		return fmt.Errorf("%w: empty topic", ErrInvalidEvent)
	case ev.Type != EventUpsert && ev.Type != EventTombstone:
		return fmt.Errorf("%w: type %q", ErrInvalidEvent, ev.Type)
	}
	return nil
}

// CheckAppend checks ev as an event to append: a non-empty ID and Target, a
// Type that is EventUpsert or EventTombstone (the caller defaults an empty
// one first), no payload on a tombstone, and Seq 0 (the store assigns it).
// The error wraps ErrInvalidEvent and names the broken field.
func (ev *Event) CheckAppend() error {
	switch {
	case ev.ID == "":
		return fmt.Errorf("%w: ID is empty", ErrInvalidEvent)
	case ev.Target == "":
		return fmt.Errorf("%w: Target is empty", ErrInvalidEvent)
	case ev.Type != EventUpsert && ev.Type != EventTombstone:
		return fmt.Errorf("%w: Type %q is neither %s nor %s", ErrInvalidEvent, ev.Type, EventUpsert, EventTombstone)
	case ev.Type == EventTombstone && ev.Payload != nil:
		return fmt.Errorf("%w: a %s carries no payload", ErrInvalidEvent, EventTombstone)
	case ev.Seq != 0:
		return fmt.Errorf("%w: Seq %d is set; the store assigns it", ErrInvalidEvent, ev.Seq)
	}
	return nil
}
