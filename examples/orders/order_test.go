package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestApplyFollowsTheOrderLifecycle(t *testing.T) {
	o, err := Apply(nil, Event{EventID: "e1", OrderID: "o1", Kind: "created", AmountCents: 1250})
	require.NoError(t, err)
	require.Equal(t, &Order{ID: "o1", Status: "created", AmountCents: 1250, Version: 1, LastEventID: "e1"}, o)
	o, err = Apply(o, Event{EventID: "e2", OrderID: "o1", Kind: "paid"})
	require.NoError(t, err)
	require.Equal(t, &Order{ID: "o1", Status: "paid", AmountCents: 1250, Version: 2, LastEventID: "e2"}, o)
	o, err = Apply(o, Event{EventID: "e3", OrderID: "o1", Kind: "shipped"})
	require.NoError(t, err)
	require.Equal(t, int64(3), o.Version)

	for _, c := range []struct {
		cur  *Order
		kind string
		why  string
	}{
		{nil, "paid", "paid on an order that is absent"},
		{&Order{Status: "created"}, "created", "created on an order that is created"},
		{&Order{Status: "created"}, "shipped", "shipped on an order that is created"},
		{&Order{Status: "shipped"}, "cancelled", "cancelled on an order that is shipped"},
		{&Order{Status: "cancelled"}, "paid", "paid on an order that is cancelled"},
	} {
		_, err := Apply(c.cur, Event{EventID: "x", OrderID: "o", Kind: c.kind})
		require.True(t, errors.Is(err, ErrRejected), "%s: %v", c.why, err)
		require.Contains(t, err.Error(), c.why)
	}
}

func TestParseEventRefusesBadInputWithoutQuotingIt(t *testing.T) {
	long := strings.Repeat("x", maxIDLen+1)
	for body, want := range map[string]string{
		`not json`: "not a JSON event object",
		`{"order_id":"o","kind":"created","amount_cents":1}`:                 "event_id",
		`{"event_id":"` + long + `","order_id":"o","kind":"paid"}`:           "event_id",
		`{"event_id":"e","kind":"paid"}`:                                     "order_id",
		`{"event_id":"e","order_id":"o","kind":"refunded"}`:                  "kind must be",
		`{"event_id":"e","order_id":"o","kind":"created"}`:                   "needs amount_cents",
		`{"event_id":"e","order_id":"o","kind":"created","amount_cents":-5}`: "must not be negative",
	} {
		_, err := ParseEvent([]byte(body))
		require.ErrorContains(t, err, want, body)
		require.NotContains(t, err.Error(), long)
	}
	ev, err := ParseEvent([]byte(`{"event_id":"e","order_id":"o","kind":"created","amount_cents":5}`))
	require.NoError(t, err)
	require.Equal(t, Event{EventID: "e", OrderID: "o", Kind: "created", AmountCents: 5}, ev)
}

func FuzzParseEvent(f *testing.F) {
	f.Add([]byte(`{"event_id":"e","order_id":"o","kind":"created","amount_cents":5}`))
	f.Add([]byte(`{"event_id":"","order_id":"o"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := ParseEvent(body)
		if err != nil {
			if len(err.Error()) > 200 {
				t.Fatalf("error text of %d bytes", len(err.Error()))
			}
			return
		}
		if _, err := Apply(nil, ev); err != nil && !errors.Is(err, ErrRejected) {
			t.Fatalf("Apply: %v", err)
		}
	})
}
