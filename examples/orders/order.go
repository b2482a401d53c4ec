package main

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Event is one order webhook: something that happened to an order, sent by
// a shop system that may send it twice.
type Event struct {
	// EventID is the sender's unique id of this event; the engine refuses a
	// second message with it at enqueue (the idempotency key).
	EventID string `json:"event_id"`
	// OrderID is the order the event is about; events of one order are applied
	// strictly in the order they were accepted.
	OrderID string `json:"order_id"`
	// Kind is created, paid, shipped or cancelled.
	Kind string `json:"kind"`
	// AmountCents is the order total (created only).
	AmountCents int64 `json:"amount_cents,omitempty"`
}

// Order is the current state of one order.
type Order struct {
	ID          string `json:"order_id"`
	Status      string `json:"status"`
	AmountCents int64  `json:"amount_cents"`
	// Version counts the events applied to the order.
	Version     int64  `json:"version"`
	LastEventID string `json:"last_event_id"`
}

// maxIDLen bounds event and order ids.
const maxIDLen = 128

// ErrRejected is wrapped by Apply's error when the event does not fit the
// order's state (paid before created, shipped after cancelled, …). Such an
// event is recorded as skipped with the reason; it changes nothing.
var ErrRejected = errors.New("rejected")

// ParseEvent decodes and checks one webhook body. Its errors quote no input
// beyond the field names.
func ParseEvent(body []byte) (Event, error) {
	var ev Event
	if err := json.Unmarshal(body, &ev); err != nil {
		return ev, errors.New("body is not a JSON event object")
	}
	switch {
	case ev.EventID == "" || len(ev.EventID) > maxIDLen:
		return ev, fmt.Errorf("event_id must have 1 to %d characters", maxIDLen)
	case ev.OrderID == "" || len(ev.OrderID) > maxIDLen:
		return ev, fmt.Errorf("order_id must have 1 to %d characters", maxIDLen)
	case ev.Kind != "created" && ev.Kind != "paid" && ev.Kind != "shipped" && ev.Kind != "cancelled":
		return ev, errors.New("kind must be created, paid, shipped or cancelled")
	case ev.AmountCents < 0:
		return ev, errors.New("amount_cents must not be negative")
	case ev.Kind == "created" && ev.AmountCents == 0:
		return ev, errors.New("a created event needs amount_cents")
	}
	return ev, nil
}

// Apply is the whole business rule, a pure function: the order after ev, or an
// error wrapping ErrRejected. cur is nil for an order not seen yet.
func Apply(cur *Order, ev Event) (*Order, error) {
	allowed := map[string][]string{
		"created":   {""},
		"paid":      {"created"},
		"shipped":   {"paid"},
		"cancelled": {"created", "paid"},
	}[ev.Kind]
	status := ""
	if cur != nil {
		status = cur.Status
	}
	ok := false
	for _, s := range allowed {
		ok = ok || s == status
	}
	if !ok {
		if status == "" {
			status = "absent"
		}
		return nil, fmt.Errorf("%w: %s on an order that is %s", ErrRejected, ev.Kind, status)
	}
	next := &Order{ID: ev.OrderID, Status: ev.Kind, LastEventID: ev.EventID, Version: 1}
	if cur != nil {
		next.AmountCents, next.Version = cur.AmountCents, cur.Version+1
	}
	if ev.Kind == "created" {
		next.AmountCents = ev.AmountCents
	}
	return next, nil
}
