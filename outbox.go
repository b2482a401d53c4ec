package relay

import (
	"context"
	"errors"
	"fmt"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaytype"
)

// OutboxEvent is one event a transaction appends to the transactional outbox
// (seed 000 §8.1). A Dispatcher of the same Target delivers it to its sink at
// least once, in commit order per Key.
type OutboxEvent struct {
	// ID is the stable, unique event id consumers dedupe by. Required.
	ID string
	// Target names the Dispatcher (sink) that delivers the event. Required.
	Target string
	// Topic is the destination inside the sink (Kafka topic, stream, subject).
	Topic string
	// Key is the ordering (partition) key: events of one (Target, Key) get the
	// sequence 1, 2, 3 … in commit order and are delivered in that order.
	Key string
	// Type is relaysink.Upsert (the default when empty) or relaysink.Tombstone.
	Type relaysink.EventType
	// Headers are delivered with the event.
	Headers map[string]string
	// Payload is the body; must be nil for a Tombstone.
	Payload []byte
}

// outboxTx is implemented by the handler's Tx: it exposes the engine's
// transaction and clock to EnqueueEventsTx without widening the Tx interface.
type outboxTx interface {
	outboxTx() (relaydriver.ExecutorTx, relaytype.Clock)
}

// EnqueueEventsTx appends events to the outbox inside tx, so they commit or roll
// back with the caller's own writes — never outside it (seed 000 §8.1, §5.3).
// tx is either the relay.Tx a Handler receives (the events then commit with the
// message's terminal state, and a Retry/Dead rolls them back), or a
// relaydriver.ExecutorTx the caller began; anything else is an error. Events get
// their per-key sequence in the transaction, under the key's row lock (see
// docs/outbox.md). The created-at time is the engine's clock for a handler's
// Tx and the system clock for a bare ExecutorTx.
//
// A duplicate event ID fails with relaytype.ErrConflict; the caller must then
// roll its transaction back (a handler returns Retry or Dead). After the
// commit, a Dispatcher of this process can be woken with Notify.
func EnqueueEventsTx(ctx context.Context, tx any, events ...*OutboxEvent) error {
	var (
		ex    relaydriver.ExecutorTx
		clock relaytype.Clock
	)
	switch t := tx.(type) {
	case outboxTx:
		ex, clock = t.outboxTx()
	case relaydriver.ExecutorTx:
		ex, clock = t, relayclock.System{}
	}
	if ex == nil {
		return fmt.Errorf("relay: EnqueueEventsTx: tx %T is neither the handler's relay.Tx nor a relaydriver.ExecutorTx", tx)
	}
	if len(events) == 0 {
		return nil
	}
	now := clock.Now()
	params := make([]*relaydriver.OutboxAppendParams, len(events))
	for i, e := range events {
		if e == nil {
			return fmt.Errorf("relay: EnqueueEventsTx: events[%d] is nil", i)
		}
		typ := e.Type
		if typ == "" {
			typ = relaysink.Upsert
		}
		switch {
		case e.ID == "":
			return fmt.Errorf("relay: EnqueueEventsTx: events[%d].ID is empty", i)
		case e.Target == "":
			return fmt.Errorf("relay: EnqueueEventsTx: events[%d].Target is empty", i)
		case typ != relaysink.Upsert && typ != relaysink.Tombstone:
			return fmt.Errorf("relay: EnqueueEventsTx: events[%d].Type %q is neither %s nor %s", i, typ, relaysink.Upsert, relaysink.Tombstone)
		case typ == relaysink.Tombstone && e.Payload != nil:
			return fmt.Errorf("relay: EnqueueEventsTx: events[%d]: a %s carries no payload", i, relaysink.Tombstone)
		}
		params[i] = &relaydriver.OutboxAppendParams{
			EventID: e.ID, Target: e.Target, Topic: e.Topic, Key: e.Key, Type: string(typ),
			Headers: e.Headers, Payload: e.Payload, Now: now,
		}
	}
	if _, err := ex.OutboxAppend(ctx, params); err != nil {
		if errors.Is(err, relaytype.ErrConflict) {
			return fmt.Errorf("relay: EnqueueEventsTx: duplicate event id: %w", err)
		}
		return fmt.Errorf("relay: EnqueueEventsTx: %w", err)
	}
	return nil
}
