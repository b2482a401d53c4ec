package relaysinktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaysink"
)

// Delivered is one message as a consumer read it back from the broker.
type Delivered struct {
	// ID is the relaysink.HeaderEventID header.
	ID string
	// Key is the message key (Kafka record key, the key field or header of
	// other sinks).
	Key string
	// Seq is the relaysink.HeaderSeq header, parsed.
	Seq int64
	// Type is the relaysink.HeaderType header.
	Type relaysink.EventType
	// Headers are all headers as the broker holds them, the standard ones
	// included.
	Headers map[string]string
	// Payload is the body; nil when the broker holds a null value.
	Payload []byte
}

// Decode builds a Delivered from a message as read back from a broker: its
// key, its headers (standard and user ones) and its payload (nil for a null
// value). It parses the standard headers and fails if one is missing or
// malformed, so every harness reads them the same way.
func Decode(key string, headers map[string]string, payload []byte) (Delivered, error) {
	d := Delivered{Key: key, Headers: headers, Payload: payload}
	id, ok := headers[relaysink.HeaderEventID]
	if !ok || id == "" {
		return d, fmt.Errorf("relaysinktest: message key=%s has no %s header", key, relaysink.HeaderEventID)
	}
	d.ID = id
	seq, ok := headers[relaysink.HeaderSeq]
	if !ok {
		return d, fmt.Errorf("relaysinktest: message %s has no %s header", id, relaysink.HeaderSeq)
	}
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil {
		return d, fmt.Errorf("relaysinktest: message %s: bad %s header %q: %w", id, relaysink.HeaderSeq, seq, err)
	}
	d.Seq = n
	typ, ok := headers[relaysink.HeaderType]
	if !ok {
		return d, fmt.Errorf("relaysinktest: message %s has no %s header", id, relaysink.HeaderType)
	}
	d.Type = relaysink.EventType(typ)
	return d, nil
}

// Backend is what one case gets from Harness.New: a sink on a fresh namespace,
// a way to read the broker back, and the fault hooks the case may need.
//
// The fault hooks live here rather than in Features because they act on the
// broker behind this very sink; a harness that shares one broker between
// cases scopes them to the case's topics.
type Backend struct {
	// Sink is the sink under test. The suite calls Close on it in some cases;
	// the harness closes it again in its cleanup (Close is idempotent).
	Sink relaysink.Sink

	// Consume returns every message the broker holds for topic at the time of
	// the call, each key's messages in broker order (for example partition by
	// partition, in offset order). The suite calls it only after the
	// publishes it checks were confirmed. A topic nothing was published to
	// returns no messages and no error.
	Consume func(ctx context.Context, topic string) ([]Delivered, error)

	// FailSome makes the broker reject some, but not all, of the publishes
	// that follow: at least one, finitely many, so that Publish reports
	// errors for some events while others are confirmed and re-publishing
	// eventually succeeds. A rejected event may still have been stored (an
	// ambiguous failure); the suite tolerates duplicates. Required when
	// Features.FailSome is set.
	FailSome func(t *testing.T)

	// Stall makes the broker stop answering publishes (connections stay
	// open, nothing is answered) until release is called; release must be
	// safe to call more than once. Required when Features.Stall is set.
	Stall func(t *testing.T) (release func())

	// WithTimeout returns another sink on this case's broker whose own
	// timeout (the one its errors report as relaysink.ErrPublishTimeout:
	// relaykafka's ProduceTimeout, relaywebhook's RequestTimeout, …) is d;
	// the harness closes it in t.Cleanup. Stall must hold it too. Required
	// when Features.OwnTimeout is set.
	WithTimeout func(t *testing.T, d time.Duration) relaysink.Sink
}

// Harness builds the backend for one case.
type Harness struct {
	// New returns a fresh Backend for one case and arranges its cleanup with
	// t.Cleanup. topics are the topics the case publishes to (unique to the
	// case and to this Run), so the harness can create them (Kafka topics,
	// a JetStream stream over those subjects, webhook routes) before the
	// sink is used. New is called once per case; cases run in parallel.
	New func(t *testing.T, topics []string) Backend
}

// Features says what the sink under test can do; a case that needs a feature
// that is off is skipped with the reason.
type Features struct {
	// Tombstones: the sink delivers a Tombstone as a null value.
	Tombstones bool
	// FailSome: Backend.FailSome can make the broker reject publishes.
	FailSome bool
	// Stall: Backend.Stall can make the broker stop answering.
	Stall bool
	// OwnTimeout: Backend.WithTimeout builds a sink with a short timeout
	// of its own (used together with Stall).
	OwnTimeout bool
}

// Run runs the conformance suite: one parallel subtest per case, each with
// its own Backend and topics.
func Run(t *testing.T, f Features, h Harness) {
	t.Helper()
	require.NotNil(t, h.New, "Harness.New")
	nonce := newNonce(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if c.needs != nil {
				if why := c.needs(f); why != "" {
					t.Skipf("feature off: %s", why)
				}
			}
			topics := make([]string, c.topics)
			for i := range topics {
				topics[i] = fmt.Sprintf("relaysinktest-%s-%s-%d", strings.ToLower(c.name), nonce, i)
			}
			b := h.New(t, topics)
			require.NotNil(t, b.Sink, "Backend.Sink")
			require.NotNil(t, b.Consume, "Backend.Consume")
			if f.FailSome {
				require.NotNil(t, b.FailSome, "Features.FailSome is set but Backend.FailSome is nil")
			}
			if f.Stall {
				require.NotNil(t, b.Stall, "Features.Stall is set but Backend.Stall is nil")
			}
			if f.OwnTimeout {
				require.NotNil(t, b.WithTimeout, "Features.OwnTimeout is set but Backend.WithTimeout is nil")
			}
			c.fn(&bundle{t: t, ctx: t.Context(), b: b, topics: topics})
		})
	}
}

// newNonce returns a short random string that keeps this Run's topics apart
// from earlier runs against a persistent broker.
func newNonce(t *testing.T) string {
	var b [4]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return hex.EncodeToString(b[:])
}

// bundle is one case's backend and topics.
type bundle struct {
	t      *testing.T
	ctx    context.Context
	b      Backend
	topics []string
}

// Event returns the Upsert of key at seq on topic, with the deterministic
// ID "<topic>/<key>/<seq>" and a small JSON payload naming key and seq. The
// suite's events are all built by it; sink tests use it for theirs and set
// fields (Payload, Type, Headers) as a test needs.
func Event(topic, key string, seq int64) relaysink.Event {
	return relaysink.Event{
		ID:      fmt.Sprintf("%s/%s/%d", topic, key, seq),
		Topic:   topic,
		Key:     key,
		Seq:     seq,
		Type:    relaysink.Upsert,
		Payload: fmt.Appendf(nil, `{"key":%q,"seq":%d}`, key, seq),
	}
}

// publish publishes events on the case's sink with the case's context,
// checks the result (RequireResult), and returns the errors.
func (b *bundle) publish(events []relaysink.Event) []error {
	b.t.Helper()
	return b.publishOn(b.b.Sink, events)
}

// publishOn is publish on another sink of the case.
func (b *bundle) publishOn(sink relaysink.Sink, events []relaysink.Event) []error {
	b.t.Helper()
	errs := sink.Publish(b.ctx, events)
	RequireResult(b.t, events, errs)
	return errs
}

// publishOK publishes events and requires every one confirmed.
func (b *bundle) publishOK(events []relaysink.Event) {
	b.t.Helper()
	RequireConfirmed(b.t, events, b.publish(events))
}

// RequireConfirmed checks a Publish result with RequireResult and requires
// every event confirmed.
func RequireConfirmed(t *testing.T, events []relaysink.Event, errs []error) {
	t.Helper()
	RequireResult(t, events, errs)
	for i, err := range errs {
		require.NoError(t, err, "event %d (%s) not confirmed", i, events[i].ID)
	}
}

// RequireResult checks the shape of one Publish result against the
// relaysink.Sink contract: one error per event; every error a
// *relaysink.PublishError naming its event; and the per-key prefix rule:
// after the first unconfirmed event of a (topic, key), every later event of
// that (topic, key) wraps relaysink.ErrEarlierFailed. A key's sequence is
// per topic (the dispatcher orders by destination and partition key), so the
// rule is checked per (Topic, Key).
func RequireResult(t *testing.T, events []relaysink.Event, errs []error) {
	t.Helper()
	require.Len(t, errs, len(events), "Publish must return one error per event")
	firstFailed := map[[2]string]int{}
	for i, ev := range events {
		if errs[i] != nil {
			var pe *relaysink.PublishError
			require.ErrorAs(t, errs[i], &pe, "event %d (%s)", i, ev.ID)
			require.Equal(t, [3]string{ev.Topic, ev.Key, ev.ID}, [3]string{pe.Topic, pe.Key, pe.ID},
				"the PublishError of event %d names another event", i)
		}
		k := [2]string{ev.Topic, ev.Key}
		if j, ok := firstFailed[k]; ok {
			require.ErrorIs(t, errs[i], relaysink.ErrEarlierFailed, "event %d (%s) after event %d (%s) of key %q failed (%v)",
				i, ev.ID, j, events[j].ID, ev.Key, errs[j])
			continue
		}
		if errs[i] != nil {
			firstFailed[k] = i
		}
	}
}

// CloseOnCleanup closes sink in t.Cleanup, within 10 s of its own (the
// test's context is done by then), and fails the test if Close returns an
// error. Harnesses and sink tests use it for every sink they build.
func CloseOnCleanup(t *testing.T, sink relaysink.Sink) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, sink.Close(ctx), "close sink %s", sink.Name())
	})
}

// KeySeqs returns "<key>/<seq>" of each message, in order: what a test
// compares a topic's read-back with.
func KeySeqs(ds []Delivered) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s/%d", d.Key, d.Seq))
	}
	return out
}

// consume reads topic back.
func (b *bundle) consume(topic string) []Delivered {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	ds, err := b.b.Consume(ctx, topic)
	require.NoError(b.t, err, "consume %s", topic)
	return ds
}

// requireDelivered checks what a consumer read back from topic against the
// events that were published (and confirmed) to it: every event's ID is
// there, and after dedupe by ID each key's first occurrences are exactly its
// events in Seq order. It returns the first occurrence of each ID.
func requireDelivered(t *testing.T, want []relaysink.Event, got []Delivered) map[string]Delivered {
	t.Helper()
	wantByKey := map[string][]int64{}
	wantIDs := map[string]relaysink.Event{}
	for _, ev := range want {
		wantByKey[ev.Key] = append(wantByKey[ev.Key], ev.Seq)
		wantIDs[ev.ID] = ev
	}
	first := map[string]Delivered{}
	gotByKey := map[string][]int64{}
	for _, d := range got {
		if _, dup := first[d.ID]; dup {
			continue
		}
		first[d.ID] = d
		ev, ok := wantIDs[d.ID]
		require.True(t, ok, "delivered an event that was never published: %s", d.ID)
		require.Equal(t, ev.Key, d.Key, "key of %s", d.ID)
		require.Equal(t, ev.Seq, d.Seq, "seq of %s", d.ID)
		gotByKey[d.Key] = append(gotByKey[d.Key], d.Seq)
	}
	for id := range wantIDs {
		_, ok := first[id]
		require.True(t, ok, "event %s confirmed but never delivered", id)
	}
	for key, seqs := range wantByKey {
		require.Equal(t, seqs, gotByKey[key], "first occurrences of key %q out of order", key)
	}
	return first
}
