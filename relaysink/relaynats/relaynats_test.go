package relaynats_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysink/relaynats"
	"github.com/relayhq/relay/relaysink/relaysinktest"
)

// natsURL is the real NATS server with JetStream the tests run against:
// RELAYNATS_URL, default the local server.
func natsURL() string {
	if u := os.Getenv("RELAYNATS_URL"); u != "" {
		return u
	}
	return "nats://127.0.0.1:4222"
}

// TestConformance runs the sink suite against the real NATS server, one
// stream per case, the sink connected through a proxy of ours for the fault
// hooks.
func TestConformance(t *testing.T) {
	relaysinktest.Run(t, relaysinktest.Features{Tombstones: true, FailSome: true, Stall: true, OwnTimeout: true},
		relaysinktest.Harness{New: newBackend})
}

// env is one test's stream on the real server and a sink that reaches the
// server through a proxy.
type env struct {
	js     jetstream.JetStream // direct (not proxied) admin connection
	stream string
	proxy  *proxy
	sink   *relaynats.Sink
}

// setup connects to the real server (failing the test, never skipping, when
// it cannot), creates a stream named after the first topic over all topics
// (deleted in t.Cleanup), starts a proxy and a sink on it with timeout.
func setup(t *testing.T, topics []string, timeout time.Duration, cfg jetstream.StreamConfig) *env {
	t.Helper()
	nc, err := nats.Connect(natsURL(), nats.Timeout(5*time.Second))
	require.NoError(t, err, "relaynats tests need NATS with JetStream at %s (set RELAYNATS_URL, or start it: "+
		"start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server)", natsURL())
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)

	cfg.Name = "relaynats-" + strings.ReplaceAll(topics[0], ".", "_")
	cfg.Subjects = topics
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, createStream(ctx, t, js, cfg), "create stream %s (is JetStream enabled on %s?)", cfg.Name, natsURL())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, js.DeleteStream(ctx, cfg.Name))
	})

	u, err := url.Parse(natsURL())
	require.NoError(t, err)
	e := &env{js: js, stream: cfg.Name, proxy: newProxy(t, u.Host)}
	e.sink = e.newSink(t, timeout)
	return e
}

// createStream creates cfg's stream. The server's own failure to create a
// stream's file store (500, JSStreamStoreFailed: a transient file-system
// error on the server's side, seen once on a CI machine) is tried again, up
// to four times, each logged; any other error is returned at once.
func createStream(ctx context.Context, t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	const storeFailed jetstream.ErrorCode = 10049
	for attempt := 1; ; attempt++ {
		_, err := js.CreateStream(ctx, cfg)
		var apiErr *jetstream.APIError
		if err == nil || attempt == 4 || !errors.As(err, &apiErr) || apiErr.ErrorCode != storeFailed {
			return err
		}
		t.Logf("create stream %s, attempt %d: %v; trying again", cfg.Name, attempt, err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond): // the server's disk, not our backoff
		}
	}
}

// newSink returns another sink through e's proxy with the given Timeout,
// closed in t.Cleanup.
func (e *env) newSink(t *testing.T, timeout time.Duration) *relaynats.Sink {
	sink, err := relaynats.New(relaynats.Config{URL: "nats://" + e.proxy.addr(), Timeout: timeout})
	require.NoError(t, err)
	relaysinktest.CloseOnCleanup(t, sink)
	return sink
}

// newBackend is the suite's harness.
func newBackend(t *testing.T, topics []string) relaysinktest.Backend {
	// Longer than the suite's stall deadline, so BoundedTimeout proves that
	// Publish honours its ctx rather than this timeout.
	e := setup(t, topics, 30*time.Second, jetstream.StreamConfig{Storage: jetstream.FileStorage})
	return relaysinktest.Backend{
		Sink:    e.sink,
		Consume: e.consume,
		// Cut the sink's next three connections, each after 6 KB of
		// publishes: the server stores a prefix of what was sent on the
		// connection, the acks in flight are lost (ambiguous failures),
		// and re-published events already stored are deduplicated by
		// Nats-Msg-Id.
		FailSome: func(t *testing.T) { e.proxy.cut(3, 6<<10) },
		// Hold every byte both ways, connections open, until release.
		Stall:       func(t *testing.T) func() { return e.proxy.stall() },
		WithTimeout: func(t *testing.T, d time.Duration) relaysink.Sink { return e.newSink(t, d) },
	}
}

// consume reads the stream with an ordered consumer from its first message
// up to its last sequence at the time of the call, and returns the messages
// on topic in stream order.
func (e *env) consume(ctx context.Context, topic string) ([]relaysinktest.Delivered, error) {
	st, err := e.js.Stream(ctx, e.stream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", e.stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("stream %s info: %w", e.stream, err)
	}
	last := info.State.LastSeq
	if info.State.Msgs == 0 {
		return nil, nil
	}
	cons, err := e.js.OrderedConsumer(ctx, e.stream, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("ordered consumer on %s: %w", e.stream, err)
	}
	var out []relaysinktest.Delivered
	for {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("consume %s (up to seq %d): %w", topic, last, err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return nil, err
		}
		if msg.Subject() == topic {
			d, err := decode(msg)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		if meta.Sequence.Stream >= last {
			return out, nil
		}
	}
}

// decode turns a stored message into a Delivered. NATS has no null body: a
// message whose relay-type header is TOMBSTONE is a tombstone (nil payload),
// any other body is the payload, an empty one included.
func decode(msg jetstream.Msg) (relaysinktest.Delivered, error) {
	headers := make(map[string]string, len(msg.Headers()))
	for name, vs := range msg.Headers() {
		if len(vs) > 0 {
			headers[name] = vs[0]
		}
	}
	payload := msg.Data()
	if headers[relaysink.HeaderType] == string(relaysink.Tombstone) {
		payload = nil
	} else if payload == nil {
		payload = []byte{}
	}
	return relaysinktest.Decode(headers[relaynats.HeaderKey], headers, payload)
}

// uniqueTopic returns a subject no earlier run used.
func uniqueTopic(t *testing.T, prefix string) string {
	t.Helper()
	var b [4]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return "relaynats-" + prefix + "-" + hex.EncodeToString(b[:])
}

// nextSeqOnly is the strict-order consumer of docs/sinks.md: per key it
// accepts only the next relay-seq and drops everything else.
func nextSeqOnly(ds []relaysinktest.Delivered) []string {
	next := map[string]int64{}
	var out []string
	for _, d := range ds {
		if d.Seq == next[d.Key]+1 {
			next[d.Key] = d.Seq
			out = append(out, fmt.Sprintf("%s/%d", d.Key, d.Seq))
		}
	}
	return out
}

// When the server rejects an event but stores a later one of its key (here a
// stream size limit the later, smaller message fits), the later one is
// reported unconfirmed; once the earlier one goes through, the later one is
// stored again under a fresh Nats-Msg-Id rather than deduplicated against its
// misplaced copy, so a next-seq-only consumer sees the key whole and in order.
func TestRejectedEventRepublishedBehindPredecessor(t *testing.T) {
	t.Parallel()
	topic := uniqueTopic(t, "redo")
	e := setup(t, []string{topic}, 10*time.Second, jetstream.StreamConfig{MaxMsgSize: 1024, Storage: jetstream.FileStorage})
	events := []relaysink.Event{
		relaysinktest.Event(topic, "k", 1),
		relaysinktest.Event(topic, "k", 2),
		relaysinktest.Event(topic, "k", 3),
		relaysinktest.Event(topic, "o", 1),
	}
	events[1].Payload = make([]byte, 2048)
	errs := e.sink.Publish(t.Context(), events)
	relaysinktest.RequireResult(t, events, errs)
	require.NoError(t, errs[0])
	require.ErrorContains(t, errs[1], fmt.Sprintf("relaynats: publish %s key=k id=%s: ", topic, events[1].ID))
	require.ErrorIs(t, errs[2], relaysink.ErrEarlierFailed)
	require.NoError(t, errs[3])
	got, err := e.consume(t.Context(), topic)
	require.NoError(t, err)
	require.Equal(t, []string{"k/1", "k/3", "o/1"}, relaysinktest.KeySeqs(got), "the server stored k/3 behind the rejected k/2")

	st, err := e.js.Stream(t.Context(), e.stream)
	require.NoError(t, err)
	info, err := st.Info(t.Context())
	require.NoError(t, err)
	cfg := info.Config
	cfg.MaxMsgSize = -1
	_, err = e.js.UpdateStream(t.Context(), cfg)
	require.NoError(t, err)

	for i, err := range e.sink.Publish(t.Context(), events[1:3]) {
		require.NoError(t, err, "re-publish %d", i)
	}
	got, err = e.consume(t.Context(), topic)
	require.NoError(t, err)
	require.Equal(t, []string{"k/1", "k/3", "o/1", "k/2", "k/3"}, relaysinktest.KeySeqs(got))
	require.NotEqual(t, got[1].Headers[jetstream.MsgIDHeader], got[4].Headers[jetstream.MsgIDHeader])
	require.Equal(t, got[1].ID, got[4].ID, "relay-event-id stays the event ID")
	require.Equal(t, []string{"k/1", "o/1", "k/2", "k/3"}, nextSeqOnly(got))

	// Confirmed, k/3 leaves the redo memory: a later re-publish is
	// deduplicated again.
	require.NoError(t, e.sink.Publish(t.Context(), events[2:3])[0])
	again, err := e.consume(t.Context(), topic)
	require.NoError(t, err)
	require.Len(t, again, len(got))
}

// An event NATS cannot carry (a header value with a line break, a reserved
// Nats-* header) is invalid: it fails alone, before sending, and the later
// events of its key are not sent at all; other keys go through. (The
// relaysink.Event contract itself is checked by the suite's InvalidEvent.)
func TestInvalidEventBlocksItsKey(t *testing.T) {
	t.Parallel()
	topic := uniqueTopic(t, "inv")
	e := setup(t, []string{topic}, 10*time.Second, jetstream.StreamConfig{Storage: jetstream.FileStorage})
	lineBreak := relaysinktest.Event(topic, "a", 2)
	lineBreak.Headers = map[string]string{"x-note": "two\nlines"}
	reserved := relaysinktest.Event(topic, "b", 2)
	reserved.Headers = map[string]string{"Nats-Expected-Stream": "other"}
	events := []relaysink.Event{
		relaysinktest.Event(topic, "a", 1), relaysinktest.Event(topic, "b", 1),
		lineBreak, reserved, relaysinktest.Event(topic, "c", 1), relaysinktest.Event(topic, "a", 3), relaysinktest.Event(topic, "b", 3),
	}
	errs := e.sink.Publish(t.Context(), events)
	relaysinktest.RequireResult(t, events, errs)
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.ErrorIs(t, errs[2], relaysink.ErrInvalidEvent)
	require.ErrorIs(t, errs[3], relaysink.ErrInvalidEvent)
	require.NoError(t, errs[4])
	require.ErrorIs(t, errs[5], relaysink.ErrEarlierFailed)
	require.ErrorIs(t, errs[6], relaysink.ErrEarlierFailed)
	got, err := e.consume(t.Context(), topic)
	require.NoError(t, err)
	require.Equal(t, []string{"a/1", "b/1", "c/1"}, relaysinktest.KeySeqs(got))
}

// A lost connection fails the unanswered events as ErrConnectionLost, and the
// next Publish dials again.
func TestConnectionLostRedials(t *testing.T) {
	t.Parallel()
	topic := uniqueTopic(t, "lost")
	e := setup(t, []string{topic}, 10*time.Second, jetstream.StreamConfig{Storage: jetstream.FileStorage})
	var batch []relaysink.Event
	for i := int64(1); i <= 100; i++ {
		batch = append(batch, relaysinktest.Event(topic, "k", i))
	}
	require.NoError(t, errors.Join(e.sink.Publish(t.Context(), batch[:1])...))
	e.proxy.cut(1, 2<<10)
	start := time.Now()
	errs := e.sink.Publish(t.Context(), batch)
	first := slices.IndexFunc(errs, func(err error) bool { return err != nil })
	require.GreaterOrEqual(t, first, 0, "the cut failed nothing")
	// Lost while waiting for its ack, or (the closure seen first) when
	// handed to the closed connection; either way the rest of the key
	// follows it.
	if !errors.Is(errs[first], relaynats.ErrConnectionLost) {
		require.ErrorIs(t, errs[first], nats.ErrConnectionClosed)
	}
	for i := first; i < len(errs); i++ {
		require.Error(t, errs[i], "event %d confirmed behind a lost one", i)
	}
	t.Logf("cut: %d of %d confirmed, then %v", first, len(errs), time.Since(start))
	start = time.Now()
	require.NoError(t, errors.Join(e.sink.Publish(t.Context(), batch)...))
	got, err := e.consume(t.Context(), topic)
	require.NoError(t, err)
	require.Len(t, nextSeqOnly(got), 100)
	t.Logf("re-publish and consume: %v", time.Since(start))
}

// A server that cannot be reached fails every event, wrapped with context.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	s, err := relaynats.New(relaynats.Config{URL: "nats://127.0.0.1:1", Timeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
	for _, err := range s.Publish(t.Context(), []relaysink.Event{relaysinktest.Event("x", "k", 1), relaysinktest.Event("x", "k", 2)}) {
		require.ErrorContains(t, err, "relaynats: publish x key=k id=x/k/")
	}
}

// New refuses a config without URL or with a negative timeout, and does not
// dial.
func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := relaynats.New(relaynats.Config{})
	require.ErrorContains(t, err, "Config.URL")
	_, err = relaynats.New(relaynats.Config{URL: natsURL(), Timeout: -time.Second})
	require.ErrorContains(t, err, "Config.Timeout")
	s, err := relaynats.New(relaynats.Config{URL: natsURL()})
	require.NoError(t, err)
	require.Equal(t, "nats", s.Name())
	require.NoError(t, s.Close(t.Context()))
}
