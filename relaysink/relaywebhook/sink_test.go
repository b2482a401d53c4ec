package relaywebhook_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysink/relaysinktest"
	"github.com/relayhq/relay/relaysink/relaywebhook"
)

// The request carries the payload, the standard headers, the key, the user
// headers (never over the sink's own), Idempotency-Key and a signature
// stamped by the injected clock; a tombstone is an empty body typed
// TOMBSTONE; the topic is one escaped path segment.
func TestRequestShape(t *testing.T) {
	t.Parallel()
	clock := relayclock.NewFake(time.Date(2026, 5, 4, 3, 2, 1, 0, time.UTC))
	sink, rc := setup(t, relaywebhook.Config{Clock: clock})

	withHeaders := relaysinktest.Event("orders/eu", "a b/ü%", 1)
	withHeaders.Payload = []byte(`{"n":1}`)
	withHeaders.Headers = map[string]string{
		"content-type": "application/json", "x-tenant": "t-42", "x-empty": "",
		// Names of the sink's own headers and of HTTP framing: dropped.
		"relay-seq": "999", "Idempotency-Key": "forged", "relay-signature": "t=1,v1=00", "relay-signature-v2": "t=1,v2=00",
		"Host": "evil.example",
	}
	plain := relaysinktest.Event("orders/eu", "a b/ü%", 2)
	plain.Payload = []byte{}
	del := relaysinktest.Event("orders/eu", "a b/ü%", 3)
	del.Type, del.Payload = relaysink.Tombstone, nil
	errs := sink.Publish(t.Context(), []relaysink.Event{withHeaders, plain, del})
	require.Equal(t, []error{nil, nil, nil}, errs)

	reqs := rc.requestsSeen()
	require.Len(t, reqs, 3)
	stamp := "t=" + strconv.FormatInt(clock.Now().Unix(), 10)
	for i, want := range []relaysink.Event{withHeaders, plain, del} {
		r := reqs[i]
		require.Equal(t, "orders/eu", r.topic)
		require.Equal(t, want.ID, r.header.Get(relaysink.HeaderEventID))
		require.Equal(t, want.ID, r.header.Get("Idempotency-Key"))
		require.Equal(t, strconv.FormatInt(want.Seq, 10), r.header.Get(relaysink.HeaderSeq))
		require.Equal(t, string(want.Type), r.header.Get(relaysink.HeaderType))
		require.Equal(t, "a%20b%2F%C3%BC%25", r.header.Get(relaywebhook.HeaderKey))
		// Both signatures by default, stamped by the clock (the receiver
		// verified both).
		require.Equal(t, relaywebhook.Sign(secret, clock.Now(), want.Payload), r.header.Get(relaywebhook.HeaderSignature))
		require.Equal(t, relaywebhook.SignV2(secret, clock.Now(), want), r.header.Get(relaywebhook.HeaderSignatureV2))
		require.True(t, strings.HasPrefix(r.header.Get(relaywebhook.HeaderSignatureV2), stamp+",v2="))
		require.Equal(t, string(want.Payload), string(r.body))
	}
	require.Equal(t, "application/json", reqs[0].header.Get("Content-Type"))
	require.Equal(t, "t-42", reqs[0].header.Get("X-Tenant"))
	require.Contains(t, reqs[0].header, "X-Empty")
	require.Equal(t, "application/octet-stream", reqs[1].header.Get("Content-Type"))
	require.Empty(t, reqs[2].body)

	got := rc.delivered("orders/eu")
	require.Equal(t, []string{"a b/ü%/1", "a b/ü%/2", "a b/ü%/3"}, relaysinktest.KeySeqs(got))
	require.Equal(t, "a b/ü%", got[0].Key)
	require.Equal(t, []byte{}, got[1].Payload, "an empty upsert is an empty value")
	require.Nil(t, got[2].Payload, "a tombstone is a null value")
}

// A non-2xx answer fails its event alone; the later events of its key are
// not sent; other keys go through. A redirect is an answer, not followed,
// even with a client of the caller's that follows redirects. Errors name the
// event but never show its payload.
func TestNon2xxBlocksItsKey(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		attempts = map[string]int{}
	)
	sink, rc := setup(t, relaywebhook.Config{Client: &http.Client{}})
	rc.setAnswer(func(d relaysinktest.Delivered) int {
		mu.Lock()
		defer mu.Unlock()
		attempts[d.ID]++
		switch d.Key {
		case "bad":
			return http.StatusInternalServerError
		case "moved":
			return http.StatusTemporaryRedirect
		}
		return 0
	})
	var events []relaysink.Event
	for seq := int64(1); seq <= 2; seq++ {
		for _, key := range []string{"ok", "bad", "moved"} {
			e := relaysinktest.Event("t", key, seq)
			e.Payload = []byte("secret-payload")
			events = append(events, e)
		}
	}
	errs := sink.Publish(t.Context(), events)
	relaysinktest.RequireResult(t, events, errs)
	require.NoError(t, errs[0])
	require.NoError(t, errs[3])
	var se *relaywebhook.StatusError
	require.ErrorAs(t, errs[1], &se)
	require.Equal(t, http.StatusInternalServerError, se.StatusCode)
	require.ErrorContains(t, errs[1], "relaywebhook: publish t key=bad id=t/bad/1: status 500")
	require.ErrorAs(t, errs[2], &se)
	require.Equal(t, http.StatusTemporaryRedirect, se.StatusCode)
	require.ErrorIs(t, errs[4], relaysink.ErrEarlierFailed)
	require.ErrorIs(t, errs[5], relaysink.ErrEarlierFailed)
	for _, err := range errs {
		if err != nil {
			require.NotContains(t, err.Error(), "secret-payload")
			require.NotContains(t, err.Error(), string(secret))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]int{"t/ok/1": 1, "t/ok/2": 1, "t/bad/1": 1, "t/moved/1": 1}, attempts,
		"later events of a failed key must not be sent, redirects not followed")
	require.Equal(t, []string{"ok/1", "ok/2"}, relaysinktest.KeySeqs(rc.delivered("t")))
}

// An event HTTP cannot carry (a header value with a line break, a header
// name that is no token, a topic that is no path segment) fails before
// sending and blocks only its own key. (The relaysink.Event contract itself
// is checked by the suite's InvalidEvent.)
func TestInvalidEventBlocksItsKey(t *testing.T) {
	t.Parallel()
	sink, rc := setup(t, relaywebhook.Config{})
	badValue := relaysinktest.Event("t", "c", 1)
	badValue.Headers = map[string]string{"x-note": "two\nlines"}
	badName := relaysinktest.Event("t", "d", 1)
	badName.Headers = map[string]string{"bad name": "v"}
	events := []relaysink.Event{
		badValue, badName, relaysinktest.Event("..", "e", 1), relaysinktest.Event("t", "ok", 1),
		relaysinktest.Event("t", "c", 2), relaysinktest.Event("t", "d", 2), relaysinktest.Event("..", "e", 2),
		relaysinktest.Event("t", "ok", 2),
	}
	errs := sink.Publish(t.Context(), events)
	relaysinktest.RequireResult(t, events, errs)
	for i := range 3 {
		require.ErrorIs(t, errs[i], relaysink.ErrInvalidEvent, "event %d", i)
		require.ErrorIs(t, errs[i+4], relaysink.ErrEarlierFailed, "event %d", i+4)
	}
	require.NoError(t, errs[3])
	require.NoError(t, errs[7])
	require.Equal(t, []string{"ok/1", "ok/2"}, relaysinktest.KeySeqs(rc.delivered("t")))
}

// Keys go in parallel up to Config.Concurrency requests for the whole sink,
// and never two requests of one key at once (the receiver fails the test on
// overlap).
func TestConcurrencyBound(t *testing.T) {
	t.Parallel()
	const limit = 3
	sink, rc := setup(t, relaywebhook.Config{Concurrency: limit})
	release := rc.stall()
	t.Cleanup(release)

	var batches [2][]relaysink.Event
	for b := range batches {
		for k := range 5 {
			for seq := int64(1); seq <= 3; seq++ {
				batches[b] = append(batches[b], relaysinktest.Event("t", fmt.Sprintf("p%d-k%d", b, k), seq))
			}
		}
	}
	results := make(chan []error, len(batches))
	for _, batch := range batches { // two concurrent calls share the limit
		go func() { results <- sink.Publish(t.Context(), batch) }()
	}
	require.Eventually(t, func() bool { now, _ := rc.inFlight(); return now >= limit },
		10*time.Second, time.Millisecond, "the sink never had %d requests in flight", limit)
	release()
	for range batches {
		for _, err := range <-results {
			require.NoError(t, err)
		}
	}
	_, peak := rc.inFlight()
	require.Equal(t, limit, peak)
	require.Len(t, rc.delivered("t"), 30)
}

// A cancelled ctx sends nothing.
func TestCancelledContext(t *testing.T) {
	t.Parallel()
	sink, rc := setup(t, relaywebhook.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	errs := sink.Publish(ctx, []relaysink.Event{relaysinktest.Event("t", "k", 1), relaysinktest.Event("t", "k", 2), relaysinktest.Event("t", "j", 1)})
	require.ErrorIs(t, errs[0], context.Canceled)
	require.ErrorIs(t, errs[1], relaysink.ErrEarlierFailed)
	require.ErrorIs(t, errs[2], context.Canceled)
	require.Empty(t, rc.requestsSeen())
}

// Close waits for Publish calls in flight within its ctx, then cancels them:
// their events fail with ErrClosed. Later calls fail with ErrClosed; Close
// is idempotent.
func TestCloseCancelsInFlight(t *testing.T) {
	t.Parallel()
	sink, rc := setup(t, relaywebhook.Config{})
	t.Cleanup(rc.stall())
	done := make(chan []error, 1)
	go func() {
		done <- sink.Publish(context.Background(), []relaysink.Event{relaysinktest.Event("t", "k", 1), relaysinktest.Event("t", "k", 2)})
	}()
	require.Eventually(t, func() bool { now, _ := rc.inFlight(); return now == 1 }, 10*time.Second, time.Millisecond)

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, sink.Close(ctx), context.DeadlineExceeded)
	errs := <-done
	require.ErrorIs(t, errs[0], relaysink.ErrClosed)
	require.ErrorIs(t, errs[1], relaysink.ErrEarlierFailed)

	require.NoError(t, sink.Close(t.Context()))
	for _, err := range sink.Publish(t.Context(), []relaysink.Event{relaysinktest.Event("t", "k", 1)}) {
		require.ErrorIs(t, err, relaysink.ErrClosed)
		require.ErrorContains(t, err, "relaywebhook: publish t key=k id=t/k/1: ")
	}
}

// A sink whose receiver is gone fails its events (a transport error) rather
// than hanging or confirming.
func TestReceiverDown(t *testing.T) {
	t.Parallel()
	sink, rc := setup(t, relaywebhook.Config{RequestTimeout: 5 * time.Second})
	rc.srv.Close()
	errs := sink.Publish(t.Context(), []relaysink.Event{relaysinktest.Event("t", "k", 1), relaysinktest.Event("t", "k", 2)})
	require.Error(t, errs[0])
	require.ErrorIs(t, errs[1], relaysink.ErrEarlierFailed)
}

func TestConfig(t *testing.T) {
	t.Parallel()
	good := relaywebhook.Config{URL: "https://hooks.example/relay", Secret: []byte("s3cr3t-value")}
	for name, mutate := range map[string]func(*relaywebhook.Config){
		"Config.URL is required": func(c *relaywebhook.Config) { c.URL = "" },
		"scheme":                 func(c *relaywebhook.Config) { c.URL = "ftp://hooks.example" },
		"no host":                func(c *relaywebhook.Config) { c.URL = "http:///relay" },
		"query":                  func(c *relaywebhook.Config) { c.URL = "https://hooks.example/relay?x=1" },
		"Config.Secret":          func(c *relaywebhook.Config) { c.Secret = nil },
		"Config.RequestTimeout":  func(c *relaywebhook.Config) { c.RequestTimeout = -time.Second },
		"Config.Concurrency":     func(c *relaywebhook.Config) { c.Concurrency = -1 },
	} {
		cfg := good
		mutate(&cfg)
		_, err := relaywebhook.New(cfg)
		require.ErrorContains(t, err, name)
	}
	s, err := relaywebhook.New(good)
	require.NoError(t, err)
	require.Equal(t, "webhook", s.Name())
	require.NoError(t, s.Close(t.Context()))

	withPassword := good
	withPassword.URL = "https://user:hunter2@hooks.example/relay"
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(format, withPassword)
		require.NotContains(t, out, "s3cr3t-value", format)
		require.NotContains(t, out, "hunter2", format)
		require.Contains(t, out, "hooks.example", format)
	}
}
