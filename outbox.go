package relay

import (
	"context"
	"errors"
	"fmt"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// OutboxEvent is one event a transaction appends to the transactional
// outbox: relaytype.Event, the one event struct the store keeps and the sinks
// publish (see its fields). A Dispatcher of the same Target delivers it to its
// sink at least once, in commit order per Key. Seq is left 0: the store
// assigns it and AppendEventsTx returns it.
type OutboxEvent = relaytype.Event

// AppendEventResult is where AppendEventsTx put one event.
type AppendEventResult struct {
	// ID is the outbox row id the store allocated (relaydriver.OutboxRecord.ID):
	// unique in the store, with no ordering meaning across keys.
	ID int64
	// Seq is the event's position in its (Target, Key) sequence — 1, 2, 3 …
	// in commit order — delivered as relaysink.Event.Seq. It is final only if
	// tx commits: a rolled-back transaction consumes no number.
	Seq int64
}

// outboxTx is implemented by the handler's Tx: it exposes the engine's
// transaction and clock to AppendEventsTx without widening the Tx interface.
type outboxTx interface {
	outboxTx() (relaydriver.ExecutorTx, relaytype.Clock)
}

// AppendEventsTx appends events to the outbox inside tx, so they commit or roll
// back with the caller's own writes — never outside it (seed 000 §8.1, §5.3).
// tx is either the relay.Tx a Handler receives (the events then commit with the
// message's terminal state, and a Retry/Dead rolls them back), or a
// transaction the caller began: a driver's Begin, or its own pgx.Tx / *sql.Tx
// wrapped by the driver's WrapTx (see Tx). Events get their per-key sequence
// in the transaction, under the key's row lock (see docs/outbox.md). The
// created-at time is the engine's clock for a handler's Tx and the system
// clock for a transaction the caller began.
//
// It returns one result per event, in input order: the row id and the
// per-key sequence the store assigned (no events: an empty slice).
//
// A duplicate event ID fails with relaytype.ErrConflict; the caller must then
// roll its transaction back (a handler returns Retry or Dead). After the
// commit, a Dispatcher of this process can be woken with Notify.
func AppendEventsTx(ctx context.Context, tx Tx, events ...*OutboxEvent) ([]AppendEventResult, error) {
	ex, clock, err := resolveTx("AppendEventsTx", tx)
	if err != nil {
		return nil, err
	}
	if len(events) == 0 {
		return []AppendEventResult{}, nil
	}
	now := clock.Now()
	params := make([]*relaydriver.OutboxAppendParams, len(events))
	for i, e := range events {
		if e == nil {
			return nil, fmt.Errorf("relay: AppendEventsTx: events[%d] is nil", i)
		}
		p := &relaydriver.OutboxAppendParams{Event: *e, Now: now}
		if p.Type == "" {
			p.Type = relaytype.EventUpsert
		}
		if err := p.CheckAppend(); err != nil {
			return nil, fmt.Errorf("relay: AppendEventsTx: events[%d]: %w", i, err)
		}
		params[i] = p
	}
	appended, err := ex.OutboxAppend(ctx, params)
	if err != nil {
		if errors.Is(err, relaytype.ErrConflict) {
			return nil, fmt.Errorf("relay: AppendEventsTx: duplicate event id: %w", err)
		}
		return nil, fmt.Errorf("relay: AppendEventsTx: %w", err)
	}
	if len(appended) != len(events) {
		return nil, fmt.Errorf("relay: AppendEventsTx of %d events: the store answered for %d", len(events), len(appended))
	}
	out := make([]AppendEventResult, len(appended))
	for i, a := range appended {
		out[i] = AppendEventResult{ID: a.ID, Seq: a.Seq}
	}
	return out, nil
}
