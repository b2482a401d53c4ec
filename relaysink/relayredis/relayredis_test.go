package relayredis_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysink/relayredis"
	"github.com/relayhq/relay/relaysink/relaysinktest"
)

// redisAddr is the real Redis server the tests use: TEST_REDIS_ADDR, default
// the local server.
func redisAddr() string {
	if a := os.Getenv("TEST_REDIS_ADDR"); a != "" {
		return a
	}
	return "127.0.0.1:6379"
}

// direct returns a client straight to Redis (not through a proxy), for
// reading streams back and cleaning up. It fails the test with a clear
// message when Redis cannot be reached.
func direct(t *testing.T) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: redisAddr(), DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("relayredis tests need a real Redis at %s (set TEST_REDIS_ADDR): %v", redisAddr(), err)
	}
	return c
}

// deleteStreams deletes streams in t.Cleanup (with its own context: the
// test's is done by then).
func deleteStreams(t *testing.T, c *redis.Client, streams ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, c.Del(ctx, streams...).Err(), "delete streams %v", streams)
	})
}

// TestConformance runs the sink suite against the real Redis, each case with
// its own streams and its own proxy in front of Redis for the fault hooks.
func TestConformance(t *testing.T) {
	relaysinktest.Run(t, relaysinktest.Features{Tombstones: true, FailSome: true, Stall: true, OwnTimeout: true},
		relaysinktest.Harness{New: newBackend})
}

// Fault sizes for FailSome: three connections are cut, each after 1500 bytes
// of replies. A connection's handshake replies (HELLO, CLIENT SETINFO) stay
// well under that; an XADD reply is about 22 bytes, so a 120-event batch
// gets some 50-60 confirmations and loses the rest of its replies.
const (
	failCuts     = 3
	failCutAfter = 1500
)

// newBackend builds one case's backend: a sink that dials Redis through the
// case's own proxy, Consume and cleanup straight on Redis.
func newBackend(t *testing.T, topics []string) relaysinktest.Backend {
	rdb := direct(t)
	deleteStreams(t, rdb, topics...)
	px := newProxy(t, redisAddr())
	return relaysinktest.Backend{
		// Longer than the suite's stall deadline, so BoundedTimeout proves
		// that Publish honours its ctx rather than this timeout.
		Sink: newSink(t, px, 30*time.Second),
		Consume: func(ctx context.Context, topic string) ([]relaysinktest.Delivered, error) {
			return consume(ctx, rdb, topic)
		},
		FailSome: func(t *testing.T) {
			px.cut(failCuts, failCutAfter)
			t.Cleanup(func() {
				// The suite checks that publishes failed; this checks
				// the failures were ours (every armed cut happened).
				require.Zero(t, px.cutsLeft(), "armed connection cuts that never happened")
			})
		},
		Stall:       func(t *testing.T) func() { return px.stall() },
		WithTimeout: func(t *testing.T, d time.Duration) relaysink.Sink { return newSink(t, px, d) },
	}
}

// newSink returns a sink that dials Redis through px with the given
// Timeout, closed in t.Cleanup.
func newSink(t *testing.T, px *proxy, timeout time.Duration) *relayredis.Sink {
	sink, err := relayredis.New(relayredis.Config{
		Addr:    px.addr(),
		Options: &redis.Options{DisableIdentity: true},
		Timeout: timeout,
	})
	require.NoError(t, err)
	relaysinktest.CloseOnCleanup(t, sink)
	return sink
}

// consume reads the whole stream topic with XRANGE, in entry-ID order (the
// order Redis appended the entries), and decodes each entry.
func consume(ctx context.Context, rdb *redis.Client, topic string) ([]relaysinktest.Delivered, error) {
	msgs, err := rdb.XRange(ctx, topic, "-", "+").Result()
	if err != nil {
		return nil, fmt.Errorf("xrange %s: %w", topic, err)
	}
	out := make([]relaysinktest.Delivered, 0, len(msgs))
	for _, m := range msgs {
		d, err := decode(m)
		if err != nil {
			return nil, fmt.Errorf("xrange %s: entry %s: %w", topic, m.ID, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// decode turns one stream entry back into a message: FieldKey is the key,
// the standard header fields and the HeaderFieldPrefix fields (prefix
// stripped) are the headers, and FieldPayload is the payload: absent means a
// null value (a tombstone), present and empty an empty payload.
func decode(m redis.XMessage) (relaysinktest.Delivered, error) {
	str := func(name string) (string, bool, error) {
		v, ok := m.Values[name]
		if !ok {
			return "", false, nil
		}
		s, isStr := v.(string)
		if !isStr {
			return "", true, fmt.Errorf("field %s is a %T", name, v)
		}
		return s, true, nil
	}
	key, ok, err := str(relayredis.FieldKey)
	if err != nil {
		return relaysinktest.Delivered{}, err
	}
	if !ok {
		return relaysinktest.Delivered{}, fmt.Errorf("no %s field", relayredis.FieldKey)
	}
	headers := map[string]string{}
	for name := range m.Values {
		var h string
		switch {
		case name == relaysink.HeaderEventID, name == relaysink.HeaderSeq, name == relaysink.HeaderType:
			h = name
		case strings.HasPrefix(name, relayredis.HeaderFieldPrefix):
			h = strings.TrimPrefix(name, relayredis.HeaderFieldPrefix)
		default:
			continue
		}
		v, _, err := str(name)
		if err != nil {
			return relaysinktest.Delivered{}, err
		}
		headers[h] = v
	}
	var payload []byte
	p, ok, err := str(relayredis.FieldPayload)
	if err != nil {
		return relaysinktest.Delivered{}, err
	}
	if ok {
		payload = append([]byte{}, p...) // non-nil even when empty
	}
	return relaysinktest.Decode(key, headers, payload)
}

// setup returns a sink that dials Redis through a proxy of its own, the
// proxy, a direct client, and a fresh stream name (deleted in t.Cleanup).
func setup(t *testing.T, cfg relayredis.Config) (*relayredis.Sink, *proxy, *redis.Client, string) {
	t.Helper()
	rdb := direct(t)
	stream := fmt.Sprintf("relayredis-test-%s-%d", strings.ToLower(t.Name()), time.Now().UnixNano())
	deleteStreams(t, rdb, stream)
	px := newProxy(t, redisAddr())
	cfg.Addr = px.addr()
	sink, err := relayredis.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	return sink, px, rdb, stream
}

// keySeqs reads stream back and returns relaysinktest.KeySeqs of it.
func keySeqs(t *testing.T, rdb *redis.Client, stream string) []string {
	t.Helper()
	ds, err := consume(t.Context(), rdb, stream)
	require.NoError(t, err)
	return relaysinktest.KeySeqs(ds)
}

// The entry layout consumers rely on: key, the standard headers, prefixed
// user headers, and a payload field that is absent for a tombstone and
// present (empty) for an empty upsert.
func TestEntryFields(t *testing.T) {
	t.Parallel()
	sink, _, rdb, stream := setup(t, relayredis.Config{})
	up := relaysinktest.Event(stream, "k", 1)
	up.Payload = []byte(`{"a":1}`)
	up.Headers = map[string]string{"key": "user-key", "payload": "user-payload", relaysink.HeaderSeq: "99"}
	empty := relaysinktest.Event(stream, "k", 2)
	empty.Payload = []byte{}
	nilUpsert := relaysinktest.Event(stream, "k", 3)
	nilUpsert.Payload = nil
	del := relaysinktest.Event(stream, "k", 4)
	del.Type, del.Payload = relaysink.Tombstone, nil
	for _, err := range sink.Publish(t.Context(), []relaysink.Event{up, empty, nilUpsert, del}) {
		require.NoError(t, err)
	}

	msgs, err := rdb.XRange(t.Context(), stream, "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, msgs, 4)
	require.Equal(t, map[string]any{
		"key": "k", "relay-event-id": up.ID, "relay-seq": "1", "relay-type": "UPSERT",
		"h:key": "user-key", "h:payload": "user-payload", // the user header relay-seq is dropped
		"payload": `{"a":1}`,
	}, msgs[0].Values)
	require.Equal(t, "", msgs[1].Values["payload"])
	require.Equal(t, "", msgs[2].Values["payload"], "an upsert without payload is an empty one, not a tombstone")
	_, hasPayload := msgs[3].Values["payload"]
	require.False(t, hasPayload, "a tombstone has no payload field")
	require.Equal(t, "TOMBSTONE", msgs[3].Values["relay-type"])

	d, err := decode(msgs[1])
	require.NoError(t, err)
	require.NotNil(t, d.Payload)
	require.Empty(t, d.Payload)
	d, err = decode(msgs[3])
	require.NoError(t, err)
	require.Nil(t, d.Payload)
}

// A connection broken part way through the replies: the events whose
// replies were read are confirmed, the rest fail (Redis did append them),
// so the confirmed events are a prefix of the batch and of every key.
func TestBrokenConnectionConfirmsRepliesRead(t *testing.T) {
	t.Parallel()
	sink, px, rdb, stream := setup(t, relayredis.Config{})
	var events []relaysink.Event
	for seq := int64(1); seq <= 30; seq++ {
		for _, key := range []string{"a", "b", "c", "d"} {
			e := relaysinktest.Event(stream, key, seq)
			e.Payload = []byte("x") // small: the whole pipeline reaches Redis before the cut
			events = append(events, e)
		}
	}
	px.cut(1, failCutAfter)
	errs := sink.Publish(t.Context(), events)
	relaysinktest.RequireResult(t, events, errs)
	require.Zero(t, px.cutsLeft())
	confirmed := 0
	for confirmed < len(errs) && errs[confirmed] == nil {
		confirmed++
	}
	require.Positive(t, confirmed, "no reply read before the cut")
	require.Less(t, confirmed, len(events), "the cut failed nothing")
	for i, err := range errs[confirmed:] {
		require.Error(t, err, "event %d confirmed after an unconfirmed one", confirmed+i)
	}
	require.ErrorContains(t, errs[confirmed], fmt.Sprintf("relayredis: publish %s key=", stream))
	// What Redis holds is the pipeline's prefix, in order: everything
	// confirmed, and usually (when the whole pipeline reached Redis before
	// the cut, as it does on an idle machine) the failed events too — the
	// failures are ambiguous, which is why the sink may not call them
	// unwritten. On a loaded machine the cut can land before the proxy
	// forwarded the pipeline's tail, so only the prefix is asserted.
	got := keySeqs(t, rdb, stream)
	require.GreaterOrEqual(t, len(got), confirmed)
	require.LessOrEqual(t, len(got), len(events))
	for i, ks := range got {
		require.Equal(t, fmt.Sprintf("%s/%d", events[i].Key, events[i].Seq), ks, "entry %d", i)
	}
}

// A Redis error on some XADDs of the pipeline (here WRONGTYPE: the topic's
// key is not a stream) fails those events only.
func TestRedisErrorFailsItsEvents(t *testing.T) {
	t.Parallel()
	sink, _, rdb, stream := setup(t, relayredis.Config{})
	notStream := stream + "-string"
	deleteStreams(t, rdb, notStream)
	require.NoError(t, rdb.Set(t.Context(), notStream, "x", 0).Err())

	events := []relaysink.Event{
		relaysinktest.Event(stream, "k", 1), relaysinktest.Event(notStream, "k", 1), relaysinktest.Event(stream, "k", 2), relaysinktest.Event(notStream, "k", 2),
	}
	errs := sink.Publish(t.Context(), events)
	relaysinktest.RequireResult(t, events, errs)
	require.NoError(t, errs[0])
	require.ErrorContains(t, errs[1], "WRONGTYPE")
	require.ErrorContains(t, errs[1], fmt.Sprintf("relayredis: publish %s key=k id=%s: ", notStream, events[1].ID))
	require.NoError(t, errs[2], "another topic's key is its own sequence")
	require.ErrorIs(t, errs[3], relaysink.ErrEarlierFailed)
	require.ErrorContains(t, errs[3], "WRONGTYPE", "its own reason stays")
	require.Equal(t, []string{"k/1", "k/2"}, keySeqs(t, rdb, stream))
}

// Config.MaxLen trims each stream on every XADD; exact unless MaxLenApprox.
func TestMaxLen(t *testing.T) {
	t.Parallel()
	sink, _, rdb, stream := setup(t, relayredis.Config{MaxLen: 5})
	var events []relaysink.Event
	for seq := int64(1); seq <= 12; seq++ {
		events = append(events, relaysinktest.Event(stream, "k", seq))
	}
	for _, err := range sink.Publish(t.Context(), events) {
		require.NoError(t, err)
	}
	require.Equal(t, []string{"k/8", "k/9", "k/10", "k/11", "k/12"}, keySeqs(t, rdb, stream))
}

// A cancelled ctx (no deadline) ends Publish too.
func TestPublishCancel(t *testing.T) {
	t.Parallel()
	sink, px, _, stream := setup(t, relayredis.Config{})
	release := px.stall()
	t.Cleanup(release)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan []error, 1)
	go func() { done <- sink.Publish(ctx, []relaysink.Event{relaysinktest.Event(stream, "k", 1)}) }()
	cancel()
	select {
	case errs := <-done:
		require.ErrorIs(t, errs[0], context.Canceled)
	case <-time.After(5 * time.Second):
		t.Fatal("Publish ignored its cancelled ctx")
	}
}

// Redis unreachable: every event fails with the dial error.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	sink, px, _, stream := setup(t, relayredis.Config{})
	px.close() // nothing listens on its port any more
	errs := sink.Publish(t.Context(), []relaysink.Event{relaysinktest.Event(stream, "k", 1), relaysinktest.Event(stream, "j", 1)})
	require.Error(t, errs[0])
	require.Error(t, errs[1])
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := relayredis.New(relayredis.Config{})
	require.ErrorContains(t, err, "Config.Addr")
	_, err = relayredis.New(relayredis.Config{Addr: "localhost:6379", Timeout: -time.Second})
	require.ErrorContains(t, err, "Config.Timeout")
	_, err = relayredis.New(relayredis.Config{Addr: "localhost:6379", MaxLen: -1})
	require.ErrorContains(t, err, "Config.MaxLen")
	s, err := relayredis.New(relayredis.Config{Addr: "localhost:6379"})
	require.NoError(t, err)
	require.Equal(t, "redis", s.Name())
	require.NoError(t, s.Close(t.Context()))
}
