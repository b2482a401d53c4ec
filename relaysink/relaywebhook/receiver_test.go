package relaywebhook_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysink/relaywebhook"
)

// at is when the receiver tests' sinks sign.
var at = time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)

// captured is one request of a real sink as it arrived, to send again, as
// is or changed, to a Receiver.
type captured struct {
	path   string // escaped
	header http.Header
	body   []byte
}

// capture publishes events with a sink on clock (v1 and v2 signatures) to a
// server that records each request and answers 204.
func capture(t *testing.T, clock *relayclock.Fake, events ...relaysink.Event) []captured {
	t.Helper()
	var (
		mu  sync.Mutex
		got []captured
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		mu.Lock()
		got = append(got, captured{path: r.URL.EscapedPath(), header: r.Header.Clone(), body: body})
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	sink, err := relaywebhook.New(relaywebhook.Config{URL: srv.URL + basePath, Secret: secret, Clock: clock, Concurrency: 1})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sink.Close(context.Background())) })
	for _, err := range sink.Publish(t.Context(), events) {
		require.NoError(t, err)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, len(events))
	return got
}

// hook is a Receiver's Handler on a real server, in front of a handler that
// records the events it is given and answers 204.
type hook struct {
	rv  *relaywebhook.Receiver
	srv *httptest.Server

	mu  sync.Mutex
	got []relaysink.Event
}

func newHook(t *testing.T, cfg relaywebhook.ReceiverConfig) *hook {
	t.Helper()
	cfg.Secret = secret
	rv, err := relaywebhook.NewReceiver(cfg)
	require.NoError(t, err)
	h := &hook{rv: rv}
	h.srv = httptest.NewServer(rv.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev, ok := relaywebhook.EventFromContext(r.Context())
		require.True(t, ok)
		body, err := io.ReadAll(r.Body)
		require.NoError(t, err)
		require.Equal(t, string(ev.Payload), string(body), "the body is restored for the handler")
		h.mu.Lock()
		h.got = append(h.got, ev)
		h.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})))
	t.Cleanup(h.srv.Close)
	return h
}

// send POSTs c to the hook, changed by change (may be nil), and returns the
// status.
func (h *hook) send(t *testing.T, c captured, change func(*captured)) int {
	t.Helper()
	c.header = c.header.Clone()
	c.body = bytes.Clone(c.body)
	if change != nil {
		change(&c)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, h.srv.URL+c.path, bytes.NewReader(c.body))
	require.NoError(t, err)
	for name, values := range c.header {
		if name != "Content-Length" {
			req.Header[name] = values
		}
	}
	resp, err := h.srv.Client().Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	return resp.StatusCode
}

func (h *hook) events() []relaysink.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]relaysink.Event(nil), h.got...)
}

// A Receiver passes what a real sink sends and hands the handler the event
// as published: odd keys and topics, an empty upsert, a tombstone.
func TestReceiverAcceptsSink(t *testing.T) {
	t.Parallel()
	clock := relayclock.NewFake(at)
	events := []relaysink.Event{
		{ID: "e1", Topic: "orders/eu", Key: "a b/ü%,1:", Seq: 1, Type: relaysink.Upsert, Payload: []byte(`{"n":1}`)},
		{ID: "e2", Topic: "orders/eu", Key: "a b/ü%,1:", Seq: 2, Type: relaysink.Upsert, Payload: []byte{}},
		{ID: "e3", Topic: "orders/eu", Key: "a b/ü%,1:", Seq: 3, Type: relaysink.Tombstone},
		{ID: "e4", Topic: "t", Key: "", Seq: 1, Type: relaysink.Upsert, Payload: []byte("x"), Headers: map[string]string{"x-tenant": "t-1"}},
	}
	h := newHook(t, relaywebhook.ReceiverConfig{Clock: clock})
	for _, c := range capture(t, clock, events...) {
		require.Equal(t, http.StatusNoContent, h.send(t, c, nil))
	}
	events[3].Headers = nil // not signed, not returned
	require.Equal(t, events, h.events())
	require.Nil(t, h.events()[2].Payload, "a tombstone is a nil payload")
	require.Equal(t, 4, h.rv.Remembered())
}

// A request with any signed field changed is refused: the event id, key,
// sequence, topic (the URL path), type, body or timestamp. The first cases
// are the attack v1 allowed: a captured tombstone sent again under another
// key or event id, which v1 still verifies.
func TestReceiverRefusesChangedField(t *testing.T) {
	t.Parallel()
	clock := relayclock.NewFake(at)
	cs := capture(t, clock,
		relaysink.Event{ID: "e1", Topic: "orders", Key: "order-7", Seq: 4, Type: relaysink.Tombstone},
		relaysink.Event{ID: "e2", Topic: "orders", Key: "order-8", Seq: 1, Type: relaysink.Upsert, Payload: []byte(`{"total":10}`)})
	tomb, up := cs[0], cs[1]
	set := func(name, value string) func(*captured) {
		return func(c *captured) { c.header.Set(name, value) }
	}
	for _, tc := range []struct {
		name   string
		of     captured
		change func(*captured)
		want   int
	}{
		{"tombstone under another key", tomb, set(relaywebhook.HeaderKey, "order-9"), http.StatusUnauthorized},
		{"tombstone under another id", tomb, func(c *captured) {
			c.header.Set(relaysink.HeaderEventID, "e9")
			c.header.Set(relaywebhook.HeaderIdempotencyKey, "e9")
		}, http.StatusUnauthorized},
		{"id", up, func(c *captured) {
			c.header.Set(relaysink.HeaderEventID, "e9")
			c.header.Del(relaywebhook.HeaderIdempotencyKey)
		}, http.StatusUnauthorized},
		{"key", up, set(relaywebhook.HeaderKey, "order-9"), http.StatusUnauthorized},
		{"seq", up, set(relaysink.HeaderSeq, "2"), http.StatusUnauthorized},
		{"topic", up, func(c *captured) { c.path = basePath + "/payments" }, http.StatusUnauthorized},
		{"type", tomb, set(relaysink.HeaderType, string(relaysink.Upsert)), http.StatusUnauthorized},
		{"body", up, func(c *captured) { c.body = []byte(`{"total":99}`) }, http.StatusUnauthorized},
		{"timestamp", up, func(c *captured) {
			sig := c.header.Get(relaywebhook.HeaderSignatureV2)
			c.header.Set(relaywebhook.HeaderSignatureV2, strings.Replace(sig, "t="+unix(at), "t="+unix(at.Add(time.Second)), 1))
		}, http.StatusUnauthorized},
		{"v2 signature dropped", up, func(c *captured) { c.header.Del(relaywebhook.HeaderSignatureV2) }, http.StatusBadRequest},
		{"v1 put in its place", up, func(c *captured) {
			c.header.Set(relaywebhook.HeaderSignatureV2, c.header.Get(relaywebhook.HeaderSignature))
		}, http.StatusBadRequest},
		{"body on a tombstone", tomb, func(c *captured) { c.body = []byte("x") }, http.StatusBadRequest},
		{"idempotency key not the id", up, set(relaywebhook.HeaderIdempotencyKey, "e9"), http.StatusBadRequest},
		{"seq not a number", up, set(relaysink.HeaderSeq, "one"), http.StatusBadRequest},
		{"no id", up, func(c *captured) {
			c.header.Del(relaysink.HeaderEventID)
			c.header.Del(relaywebhook.HeaderIdempotencyKey)
		}, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHook(t, relaywebhook.ReceiverConfig{Clock: clock})
			require.Equal(t, tc.want, h.send(t, tc.of, tc.change))
			require.Empty(t, h.events())
			require.Zero(t, h.rv.Remembered())
			// Unchanged, the same request passes.
			require.Equal(t, http.StatusNoContent, h.send(t, tc.of, nil))
		})
	}

	// What v1 allowed: the tombstone's v1 signature verifies whatever its
	// key and id say, since it signs only the timestamp and empty body.
	require.NoError(t, relaywebhook.VerifySignature(secret, tomb.header.Get(relaywebhook.HeaderSignature), nil, at, 0))
}

// A request sent again within the window is refused; the sink's own
// redelivery of the event, signed a second later, passes (at least once).
// After the window the old request is refused as expired and forgotten.
func TestReceiverReplay(t *testing.T) {
	t.Parallel()
	clock := relayclock.NewFake(at)
	ev := relaysink.Event{ID: "e1", Topic: "orders", Key: "order-7", Seq: 1, Type: relaysink.Upsert, Payload: []byte(`{"total":10}`)}
	first := capture(t, clock, ev)[0]
	h := newHook(t, relaywebhook.ReceiverConfig{Clock: clock, Tolerance: time.Minute})

	require.Equal(t, http.StatusNoContent, h.send(t, first, nil))
	require.Equal(t, http.StatusConflict, h.send(t, first, nil))
	// Unsigned headers changed do not make it a new request.
	require.Equal(t, http.StatusConflict, h.send(t, first, func(c *captured) { c.header.Set("X-Retry", "1") }))
	require.Len(t, h.events(), 1)

	clock.Advance(time.Second)
	again := capture(t, clock, ev)[0]
	require.Equal(t, http.StatusNoContent, h.send(t, again, nil), "a redelivery signed anew passes")
	require.Equal(t, http.StatusConflict, h.send(t, again, nil))
	require.Equal(t, []relaysink.Event{ev, ev}, h.events())
	require.Equal(t, 2, h.rv.Remembered())

	clock.Advance(time.Minute - time.Second) // first: 60 s old, the edge
	require.Equal(t, http.StatusConflict, h.send(t, first, nil))
	clock.Advance(time.Second)
	require.Equal(t, http.StatusUnauthorized, h.send(t, first, nil), "expired")
	require.Equal(t, 1, h.rv.Remembered(), "the first entry expired with its timestamp")
	clock.Advance(time.Second)
	require.Equal(t, http.StatusUnauthorized, h.send(t, again, nil), "expired")
	require.Zero(t, h.rv.Remembered())
	require.Len(t, h.events(), 2)
}

// Verify returns the errors Handler maps to statuses: replay, expiry, the
// memory cap (and room again once entries expire).
func TestReceiverVerifyErrors(t *testing.T) {
	t.Parallel()
	clock := relayclock.NewFake(at)
	var events []relaysink.Event
	for i := range 3 {
		events = append(events, relaysink.Event{ID: fmt.Sprintf("e%d", i), Topic: "t", Key: "k", Seq: int64(i + 1), Type: relaysink.Upsert, Payload: []byte("secret-payload")})
	}
	cs := capture(t, clock, events...)
	rv, err := relaywebhook.NewReceiver(relaywebhook.ReceiverConfig{Secret: secret, Clock: clock, MaxRemembered: 2})
	require.NoError(t, err)
	verify := func(c captured) error {
		r := httptest.NewRequest(http.MethodPost, "http://hooks.example"+c.path, bytes.NewReader(c.body))
		r.Header = c.header.Clone()
		ev, err := rv.Verify(r)
		if err == nil {
			require.Equal(t, c.header.Get(relaysink.HeaderEventID), ev.ID)
		}
		return err
	}
	require.NoError(t, verify(cs[0]))
	require.NoError(t, verify(cs[1]))
	err = verify(cs[0])
	require.ErrorIs(t, err, relaywebhook.ErrReplayed)
	require.ErrorContains(t, err, `id="e0"`)
	err = verify(cs[2])
	require.ErrorIs(t, err, relaywebhook.ErrReplayMemoryFull)
	for _, err := range []error{err, verify(cs[0])} {
		require.NotContains(t, err.Error(), "secret-payload")
		require.NotContains(t, err.Error(), string(secret))
	}

	clock.Advance(relaywebhook.DefaultSignatureTolerance + time.Second)
	require.ErrorIs(t, verify(cs[2]), relaywebhook.ErrSignatureExpired)
	require.Zero(t, rv.Remembered())
	fresh := capture(t, clock, events[2])[0]
	require.NoError(t, verify(fresh), "room again once the old entries expired")
}

// The body is read up to MaxBodyBytes, whether the request announces its
// length or not; Handler answers 413 beyond.
func TestReceiverBodyLimit(t *testing.T) {
	t.Parallel()
	clock := relayclock.NewFake(at)
	fits := relaysink.Event{ID: "e1", Topic: "t", Key: "k", Seq: 1, Type: relaysink.Upsert, Payload: bytes.Repeat([]byte("a"), 16)}
	over := relaysink.Event{ID: "e2", Topic: "t", Key: "k", Seq: 2, Type: relaysink.Upsert, Payload: bytes.Repeat([]byte("a"), 17)}
	cs := capture(t, clock, fits, over)
	h := newHook(t, relaywebhook.ReceiverConfig{Clock: clock, MaxBodyBytes: 16})
	require.Equal(t, http.StatusNoContent, h.send(t, cs[0], nil))
	require.Equal(t, http.StatusRequestEntityTooLarge, h.send(t, cs[1], nil))

	// Without a Content-Length the limit holds while reading.
	r := httptest.NewRequest(http.MethodPost, "http://hooks.example"+cs[1].path, io.MultiReader(bytes.NewReader(cs[1].body)))
	r.Header, r.ContentLength = cs[1].header.Clone(), -1
	_, err := h.rv.Verify(r)
	require.ErrorIs(t, err, relaywebhook.ErrBodyTooLarge)

	// The default is DefaultMaxBodyBytes.
	rv, err := relaywebhook.NewReceiver(relaywebhook.ReceiverConfig{Secret: secret, Clock: clock})
	require.NoError(t, err)
	r = httptest.NewRequest(http.MethodPost, "http://hooks.example/t", bytes.NewReader(make([]byte, relaywebhook.DefaultMaxBodyBytes+1)))
	_, err = rv.Verify(r)
	require.ErrorIs(t, err, relaywebhook.ErrBodyTooLarge)
}

// With DisableV1Signature the sink sends only v2, which a Receiver accepts;
// by default it sends both and v1 verifies with the old scheme.
func TestV1Compatibility(t *testing.T) {
	t.Parallel()
	clock := relayclock.NewFake(at)
	ev := relaysink.Event{ID: "e1", Topic: "t", Key: "k", Seq: 1, Type: relaysink.Upsert, Payload: []byte("p")}

	both := capture(t, clock, ev)[0]
	require.NoError(t, relaywebhook.VerifySignature(secret, both.header.Get(relaywebhook.HeaderSignature), both.body, at, 0))
	require.Equal(t, relaywebhook.Sign(secret, at, ev.Payload), both.header.Get(relaywebhook.HeaderSignature))

	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	sink, err := relaywebhook.New(relaywebhook.Config{URL: srv.URL, Secret: secret, Clock: clock, DisableV1Signature: true})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sink.Close(context.Background())) })
	require.Equal(t, []error{nil}, sink.Publish(t.Context(), []relaysink.Event{ev}))
	require.NotContains(t, got, relaywebhook.HeaderSignature)
	require.Equal(t, relaywebhook.SignV2(secret, at, ev), got.Get(relaywebhook.HeaderSignatureV2))
}

func TestReceiverConfig(t *testing.T) {
	t.Parallel()
	good := relaywebhook.ReceiverConfig{Secret: []byte("s3cr3t-value")}
	for name, mutate := range map[string]func(*relaywebhook.ReceiverConfig){
		"ReceiverConfig.Secret":        func(c *relaywebhook.ReceiverConfig) { c.Secret = nil },
		"ReceiverConfig.Tolerance":     func(c *relaywebhook.ReceiverConfig) { c.Tolerance = time.Millisecond },
		"ReceiverConfig.MaxBodyBytes":  func(c *relaywebhook.ReceiverConfig) { c.MaxBodyBytes = -1 },
		"ReceiverConfig.MaxRemembered": func(c *relaywebhook.ReceiverConfig) { c.MaxRemembered = -1 },
	} {
		cfg := good
		mutate(&cfg)
		_, err := relaywebhook.NewReceiver(cfg)
		require.ErrorContains(t, err, name)
	}
	_, err := relaywebhook.NewReceiver(good)
	require.NoError(t, err)
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(format, good)
		require.NotContains(t, out, "s3cr3t-value", format)
		require.Contains(t, out, "<redacted>", format)
	}
}
