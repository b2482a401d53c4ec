package relaysinktest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaysink"
)

// cases is every rule of the sink contract, one per subtest. needs returns why
// the case cannot run with f ("" when it can); topics is how many topics the
// case publishes to.
var cases = []struct {
	name   string
	topics int
	needs  func(f Features) string
	fn     func(b *bundle)
}{
	{name: "NameAndEmptyBatch", topics: 1, fn: testNameAndEmptyBatch},
	{name: "PerKeyOrder", topics: 1, fn: testPerKeyOrder},
	{name: "BatchPublish", topics: 1, fn: testBatchPublish},
	{name: "HeadersCarried", topics: 2, fn: testHeadersCarried},
	{name: "Tombstone", topics: 1, needs: needTombstones, fn: testTombstone},
	{name: "ConcurrentPublish", topics: 1, fn: testConcurrentPublish},
	{name: "AtLeastOnceUnderFailure", topics: 2, needs: needFailSome, fn: testAtLeastOnce},
	{name: "BoundedTimeout", topics: 1, needs: needStall, fn: testBoundedTimeout},
	{name: "OwnTimeout", topics: 1, needs: needOwnTimeout, fn: testOwnTimeout},
	{name: "InvalidEvent", topics: 1, fn: testInvalidEvent},
	{name: "Close", topics: 1, fn: testClose},
}

func needTombstones(f Features) string {
	if !f.Tombstones {
		return "Tombstones (the sink cannot deliver a null value)"
	}
	return ""
}

func needFailSome(f Features) string {
	if !f.FailSome {
		return "FailSome (the harness cannot make the broker reject publishes)"
	}
	return ""
}

func needStall(f Features) string {
	if !f.Stall {
		return "Stall (the harness cannot make the broker stop answering)"
	}
	return ""
}

func needOwnTimeout(f Features) string {
	if why := needStall(f); why != "" {
		return why
	}
	if !f.OwnTimeout {
		return "OwnTimeout (the harness cannot build a sink with a short timeout)"
	}
	return ""
}

// interleave returns the events of keys × seqs [from, to] on topic, keys
// interleaved pseudo-randomly (from rng) while each key stays in Seq order.
func interleave(rng *rand.Rand, topic string, keys []string, from, to int64) []relaysink.Event {
	next := make([]int64, len(keys))
	for i := range next {
		next[i] = from
	}
	var out []relaysink.Event
	live := len(keys)
	for live > 0 {
		k := rng.IntN(len(keys))
		for next[k] > to { // find a key with events left
			k = (k + 1) % len(keys)
		}
		out = append(out, Event(topic, keys[k], next[k]))
		next[k]++
		if next[k] > to {
			live--
		}
	}
	return out
}

// keyNames returns n key names with the given prefix.
func keyNames(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return keys
}

// A sink has a name, and an empty batch is an empty result, not an error.
func testNameAndEmptyBatch(b *bundle) {
	require.NotEmpty(b.t, b.b.Sink.Name())
	require.Empty(b.t, b.b.Sink.Publish(b.ctx, nil))
	require.Empty(b.t, b.b.Sink.Publish(b.ctx, []relaysink.Event{}))
}

// Several keys interleaved in one batch, over many batches: every event is
// confirmed, and on the broker each key's first occurrences are Seq 1, 2, 3 …
// with nothing missing.
func testPerKeyOrder(b *bundle) {
	topic := b.topics[0]
	rng := rand.New(rand.NewPCG(1, 2))
	keys := keyNames("k", 8)
	const batches, perBatch = 12, 5
	var all []relaysink.Event
	for i := range int64(batches) {
		batch := interleave(rng, topic, keys, i*perBatch+1, (i+1)*perBatch)
		b.publishOK(batch)
		all = append(all, batch...)
	}
	requireDelivered(b.t, all, b.consume(topic))
}

// A batch of 600 events is confirmed in one Publish call and all of it
// reaches the broker in per-key order.
func testBatchPublish(b *bundle) {
	topic := b.topics[0]
	batch := interleave(rand.New(rand.NewPCG(3, 4)), topic, keyNames("b", 20), 1, 30)
	require.Len(b.t, batch, 600)
	b.publishOK(batch)
	requireDelivered(b.t, batch, b.consume(topic))
}

// Each message carries the dedupe ID, Seq and Type as the standard headers,
// the user headers as given, the key and the payload; and it goes to the
// event's topic only.
func testHeadersCarried(b *bundle) {
	t0, t1 := b.topics[0], b.topics[1]
	withHeaders := Event(t0, "h", 1)
	withHeaders.Headers = map[string]string{"content-type": "application/json", "x-tenant": "t-42", "x-empty": ""}
	plain := Event(t0, "h", 2)
	other := Event(t1, "h", 1)
	b.publishOK([]relaysink.Event{withHeaders, plain, other})

	got := requireDelivered(b.t, []relaysink.Event{withHeaders, plain}, b.consume(t0))
	for _, ev := range []relaysink.Event{withHeaders, plain} {
		d := got[ev.ID]
		require.Equal(b.t, ev.Type, d.Type, "type of %s", ev.ID)
		require.Equal(b.t, ev.Payload, d.Payload, "payload of %s", ev.ID)
		require.Equal(b.t, ev.ID, d.Headers[relaysink.HeaderEventID])
		require.Equal(b.t, strconv.FormatInt(ev.Seq, 10), d.Headers[relaysink.HeaderSeq])
		require.Equal(b.t, string(ev.Type), d.Headers[relaysink.HeaderType])
		for name, value := range ev.Headers {
			v, ok := d.Headers[name]
			require.True(b.t, ok, "user header %q of %s not delivered", name, ev.ID)
			require.Equal(b.t, value, v, "user header %q of %s", name, ev.ID)
		}
	}
	requireDelivered(b.t, []relaysink.Event{other}, b.consume(t1))
}

// A tombstone reaches the broker as a null value with Type TOMBSTONE, in its
// key's order between upserts.
func testTombstone(b *bundle) {
	topic := b.topics[0]
	up1 := Event(topic, "t", 1)
	del := Event(topic, "t", 2)
	del.Type, del.Payload = relaysink.Tombstone, nil
	up3 := Event(topic, "t", 3)
	b.publishOK([]relaysink.Event{up1, del, up3})

	got := requireDelivered(b.t, []relaysink.Event{up1, del, up3}, b.consume(topic))
	require.Equal(b.t, relaysink.Tombstone, got[del.ID].Type)
	require.Nil(b.t, got[del.ID].Payload, "a tombstone must be a null value")
	require.Equal(b.t, relaysink.Upsert, got[up3.ID].Type)
	require.Equal(b.t, up3.Payload, got[up3.ID].Payload)
}

// The sink is safe for concurrent use: several goroutines publishing their
// own keys at once all get confirmations, and per-key order holds.
func testConcurrentPublish(b *bundle) {
	topic := b.topics[0]
	const writers, batches = 4, 5
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		results []struct {
			events []relaysink.Event
			errs   []error
		}
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 5))
			keys := keyNames(fmt.Sprintf("w%d", w), 3)
			for i := range int64(batches) {
				batch := interleave(rng, topic, keys, i*4+1, (i+1)*4)
				errs := b.b.Sink.Publish(b.ctx, batch)
				mu.Lock()
				results = append(results, struct {
					events []relaysink.Event
					errs   []error
				}{batch, errs})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	var all []relaysink.Event
	for _, r := range results {
		RequireResult(b.t, r.events, r.errs)
		for i, err := range r.errs {
			require.NoError(b.t, err, "event %s", r.events[i].ID)
		}
		all = append(all, r.events...)
	}
	requireDelivered(b.t, all, b.consume(topic))
}

// Under injected broker failures, a dispatcher that re-publishes every key
// from its first unconfirmed event gets every event confirmed; every Publish
// result keeps the confirmed-prefix rule; and the consumer sees every ID with
// each key's first occurrences in Seq order (duplicates allowed).
func testAtLeastOnce(b *bundle) {
	const perKey, window, maxRounds = 30, 10, 100
	type stream struct {
		topic, key string
		confirmed  int64 // highest confirmed Seq; the next to publish is confirmed+1
	}
	var streams []*stream
	byName := map[[2]string]*stream{}
	for _, topic := range b.topics {
		for _, key := range keyNames("f", 6) {
			s := &stream{topic: topic, key: key}
			streams = append(streams, s)
			byName[[2]string{topic, key}] = s
		}
	}
	rng := rand.New(rand.NewPCG(6, 7))

	b.b.FailSome(b.t)
	failed, rounds := 0, 0
	for ; ; rounds++ {
		require.Less(b.t, rounds, maxRounds, "events still unconfirmed after %d rounds", maxRounds)
		// The dispatcher's batch: each stream from its first unconfirmed
		// event, up to a window, streams interleaved.
		var batch []relaysink.Event
		for _, i := range rng.Perm(len(streams)) {
			s := streams[i]
			for seq := s.confirmed + 1; seq <= min(s.confirmed+window, perKey); seq++ {
				batch = append(batch, Event(s.topic, s.key, seq))
			}
		}
		if len(batch) == 0 {
			break
		}
		errs := b.publish(batch)
		// Confirmed events of a key form a prefix (checked by publish), so
		// the stream advances over the confirmed run from its first event.
		blocked := map[*stream]bool{}
		for i, ev := range batch {
			s := byName[[2]string{ev.Topic, ev.Key}]
			if errs[i] != nil {
				failed++
				blocked[s] = true
				continue
			}
			if !blocked[s] {
				require.Equal(b.t, s.confirmed+1, ev.Seq, "confirmations of %s/%s out of order", s.topic, s.key)
				s.confirmed = ev.Seq
			}
		}
	}
	require.Positive(b.t, failed, "FailSome made no publish fail: the case proved nothing")

	for _, topic := range b.topics {
		var want []relaysink.Event
		for _, s := range streams {
			if s.topic != topic {
				continue
			}
			for seq := int64(1); seq <= perKey; seq++ {
				want = append(want, Event(topic, s.key, seq))
			}
		}
		got := b.consume(topic)
		requireDelivered(b.t, want, got)
		b.t.Logf("%s: %d events, %d messages read back (duplicates allowed)", topic, len(want), len(got))
	}
	b.t.Logf("%d rounds, %d unconfirmed results", rounds, failed)
}

// Publish against a broker that does not answer returns by its ctx deadline
// (plus a margin for a loaded machine) with an error for every event; once
// the broker answers again, re-publishing confirms the events and each is
// delivered, in order, at least once.
func testBoundedTimeout(b *bundle) {
	topic := b.topics[0]
	events := interleave(rand.New(rand.NewPCG(8, 9)), topic, keyNames("s", 3), 1, 3)

	release := b.b.Stall(b.t)
	b.t.Cleanup(release) // runs before the harness closes the sink

	const deadline, margin = 300 * time.Millisecond, 5 * time.Second
	ctx, cancel := context.WithTimeout(b.ctx, deadline)
	defer cancel()
	done := make(chan []error, 1)
	go func() { done <- b.b.Sink.Publish(ctx, events) }()
	var errs []error
	select {
	case errs = <-done:
	case <-time.After(deadline + margin):
		b.t.Fatalf("Publish did not return within %v of its %v ctx deadline", margin, deadline)
	}
	RequireResult(b.t, events, errs)
	for i, err := range errs {
		require.Error(b.t, err, "event %d (%s) confirmed by a broker that does not answer", i, events[i].ID)
	}

	release()
	b.publishOK(events)
	requireDelivered(b.t, events, b.consume(topic))
}

// Publish after Close fails every event; Close is idempotent; what was
// confirmed before Close stays delivered.
func testClose(b *bundle) {
	topic := b.topics[0]
	before := []relaysink.Event{Event(topic, "c", 1), Event(topic, "c", 2)}
	b.publishOK(before)

	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	require.NoError(b.t, b.b.Sink.Close(ctx))
	require.NoError(b.t, b.b.Sink.Close(ctx), "a second Close")

	after := []relaysink.Event{Event(topic, "c", 3), Event(topic, "d", 1)}
	errs := b.publish(after)
	for i, err := range errs {
		require.ErrorIs(b.t, err, relaysink.ErrClosed, "event %d (%s) after Close", i, after[i].ID)
	}
	requireDelivered(b.t, before, b.consume(topic))
}

// The sink's own timeout (not ctx's) ends a Publish against a broker that
// does not answer: each key's first event wraps relaysink.ErrPublishTimeout,
// its later ones relaysink.ErrEarlierFailed; re-published once the broker
// answers, every event is delivered in order.
func testOwnTimeout(b *bundle) {
	topic := b.topics[0]
	// Long enough for a first publish on a loaded machine, which also
	// opens the connections the stalled publish then waits on.
	const own, margin = 2 * time.Second, 5 * time.Second
	sink := b.b.WithTimeout(b.t, own)
	warm := []relaysink.Event{Event(topic, "w", 1)}
	RequireConfirmed(b.t, warm, b.publishOn(sink, warm))

	release := b.b.Stall(b.t)
	b.t.Cleanup(release) // runs before the harness closes the sinks
	events := interleave(rand.New(rand.NewPCG(10, 11)), topic, keyNames("o", 3), 1, 2)
	done := make(chan []error, 1)
	go func() { done <- sink.Publish(b.ctx, events) }() // b.ctx has no deadline
	var errs []error
	select {
	case errs = <-done:
	case <-time.After(own + margin):
		b.t.Fatalf("Publish did not return within %v of the sink's own %v timeout", margin, own)
	}
	RequireResult(b.t, events, errs)
	for i, ev := range events {
		if ev.Seq == 1 {
			require.ErrorIs(b.t, errs[i], relaysink.ErrPublishTimeout, "event %d (%s)", i, ev.ID)
		}
	}

	release()
	b.publishOK(events)
	requireDelivered(b.t, append(warm, events...), b.consume(topic))
}

// An event that breaks the relaysink.Event contract (no ID, an unknown type)
// fails with relaysink.ErrInvalidEvent and is not sent; the later events of
// its key fail with relaysink.ErrEarlierFailed and are not sent either;
// other keys go through.
func testInvalidEvent(b *bundle) {
	topic := b.topics[0]
	noID := Event(topic, "a", 2)
	noID.ID = ""
	badType := Event(topic, "b", 2)
	badType.Type = "MERGE"
	events := []relaysink.Event{
		Event(topic, "a", 1), Event(topic, "b", 1), Event(topic, "c", 1),
		noID, badType, Event(topic, "c", 2),
		Event(topic, "a", 3), Event(topic, "b", 3), Event(topic, "c", 3),
	}
	errs := b.publish(events)
	for _, i := range []int{0, 1, 2, 5, 8} {
		require.NoError(b.t, errs[i], "event %d (%s)", i, events[i].ID)
	}
	require.ErrorIs(b.t, errs[3], relaysink.ErrInvalidEvent, "an event without ID")
	require.ErrorIs(b.t, errs[4], relaysink.ErrInvalidEvent, "an event of type MERGE")
	// errs[6] and errs[7] wrap ErrEarlierFailed (checked by publish).
	requireDelivered(b.t, []relaysink.Event{events[0], events[1], events[2], events[5], events[8]}, b.consume(topic))
}
