package relaykafka_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/relayhq/relay/internal/kafkaread"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysink/relaykafka"
	"github.com/relayhq/relay/relaysink/relaysinktest"
)

// partitions per topic: more than one, so keys land on different partitions
// and a fault on one partition fails some keys of a batch but not others.
const partitions = 3

// TestConformance runs the sink suite against an in-process kfake cluster per
// case.
func TestConformance(t *testing.T) {
	relaysinktest.Run(t, relaysinktest.Features{Tombstones: true, FailSome: true, Stall: true},
		relaysinktest.Harness{New: newBackend})
}

// newBackend starts a one-broker kfake cluster with the case's topics and a
// sink on it.
func newBackend(t *testing.T, topics []string) relaysinktest.Backend {
	opts := []kfake.Opt{kfake.NumBrokers(1)}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(partitions, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	require.NoError(t, err)
	t.Cleanup(c.Close)

	sink, err := relaykafka.New(relaykafka.Config{
		Brokers: c.ListenAddrs(),
		// Longer than the suite's stall deadline, so BoundedTimeout proves
		// that Publish honours its ctx rather than this timeout.
		ProduceTimeout: 30 * time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, sink.Close(ctx))
	})

	return relaysinktest.Backend{
		Sink: sink,
		Consume: func(ctx context.Context, topic string) ([]relaysinktest.Delivered, error) {
			return consume(ctx, c.ListenAddrs(), topic)
		},
		FailSome: func(t *testing.T) { failSome(c) },
		Stall:    func(t *testing.T) func() { return stall(c) },
	}
}

// failSome rejects partition 1's batch in the next three produce requests
// with a non-retriable error (the broker does not append it), and answers
// partition 2's batch once with REQUEST_TIMED_OUT after appending it, which
// kgo retries and the broker deduplicates by producer sequence.
func failSome(c *kfake.Cluster) {
	c.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Partitions: []int32{1}, Err: kerr.InvalidRecord, Count: 3},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Partitions: []int32{2}, Err: kerr.RequestTimedOut, Count: 1},
	)
}

// stall holds every produce request without an answer until release is
// called; then the held requests are handled normally.
func stall(c *kfake.Cluster) (release func()) {
	released := make(chan struct{})
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { <-released })
		return nil, nil, false // not handled: the cluster answers it
	})
	var once sync.Once
	return func() { once.Do(func() { close(released) }) }
}

// consume reads every record of topic back (internal/kafkaread) and decodes
// the relay headers, each key in broker order.
func consume(ctx context.Context, brokers []string, topic string) ([]relaysinktest.Delivered, error) {
	recs, err := kafkaread.All(ctx, brokers, topic)
	if err != nil {
		return nil, err
	}
	out := make([]relaysinktest.Delivered, 0, len(recs))
	for _, r := range recs {
		d, err := relaysinktest.Decode(r.Key, r.Headers, r.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// setup returns a sink on a fresh kfake cluster with topic, and a consume
// function for it.
func setup(t *testing.T, topic string) (*relaykafka.Sink, *kfake.Cluster, func() []relaysinktest.Delivered) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	sink, err := relaykafka.New(relaykafka.Config{Brokers: c.ListenAddrs(), ProduceTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sink.Close(context.Background())) })
	return sink, c, func() []relaysinktest.Delivered {
		t.Helper()
		ds, err := consume(t.Context(), c.ListenAddrs(), topic)
		require.NoError(t, err)
		return ds
	}
}

func ev(topic, key string, seq int64, payload []byte) relaysink.Event {
	return relaysink.Event{
		ID: fmt.Sprintf("%s/%d", key, seq), Topic: topic, Key: key, Seq: seq,
		Type: relaysink.Upsert, Payload: payload,
	}
}

func ids(ds []relaysinktest.Delivered) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

// An invalid event fails alone, and the later events of its key are not
// produced at all (the sink knows before sending); other keys go through.
func TestInvalidEventBlocksItsKey(t *testing.T) {
	t.Parallel()
	sink, _, read := setup(t, "inv")
	bad := ev("inv", "a", 2, []byte("x"))
	bad.ID = ""
	events := []relaysink.Event{
		ev("inv", "a", 1, []byte("x")), ev("inv", "b", 1, []byte("x")),
		bad, ev("inv", "b", 2, []byte("x")), ev("inv", "a", 3, []byte("x")),
	}
	errs := sink.Publish(t.Context(), events)
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.ErrorIs(t, errs[2], relaykafka.ErrInvalidEvent)
	require.NoError(t, errs[3])
	require.ErrorIs(t, errs[4], relaykafka.ErrEarlierFailed)
	require.ElementsMatch(t, []string{"a/1", "b/1", "b/2"}, ids(read()))
}

// A record too large for a batch fails before it is produced, and the later
// events of its key are not produced either; other keys go through.
func TestTooLargeBlocksItsKey(t *testing.T) {
	t.Parallel()
	sink, _, read := setup(t, "big")
	events := []relaysink.Event{
		ev("big", "k", 1, []byte("small")),
		ev("big", "k", 2, make([]byte, 2<<20)),
		ev("big", "k", 3, []byte("small")),
		ev("big", "other", 1, []byte("small")),
	}
	errs := sink.Publish(t.Context(), events)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], kerr.MessageTooLarge)
	require.ErrorContains(t, errs[1], "relaykafka: produce big key=k id=k/2: ")
	require.ErrorIs(t, errs[2], relaykafka.ErrEarlierFailed)
	require.NoError(t, errs[3])
	require.ElementsMatch(t, []string{"k/1", "other/1"}, ids(read()))
}

// Config.ProduceTimeout bounds Publish even when ctx has no deadline.
func TestProduceTimeout(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "slow"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	sink, err := relaykafka.New(relaykafka.Config{Brokers: c.ListenAddrs(), ProduceTimeout: 200 * time.Millisecond})
	require.NoError(t, err)
	// Close is covered by the suite; here its flush is also bounded by 200ms.
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	release := stall(c)
	t.Cleanup(release) // before Close, so Close can flush

	errs := sink.Publish(context.Background(), []relaysink.Event{ev("slow", "k", 1, nil), ev("slow", "k", 2, nil)})
	for _, err := range errs {
		require.ErrorIs(t, err, relaykafka.ErrProduceTimeout)
	}
}

// Publish after Close wraps ErrClosed.
func TestClosedError(t *testing.T) {
	t.Parallel()
	sink, _, _ := setup(t, "closed")
	require.NoError(t, sink.Close(t.Context()))
	for _, err := range sink.Publish(t.Context(), []relaysink.Event{ev("closed", "k", 1, nil)}) {
		require.ErrorIs(t, err, relaykafka.ErrClosed)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := relaykafka.New(relaykafka.Config{})
	require.Error(t, err)
	_, err = relaykafka.New(relaykafka.Config{Brokers: []string{"localhost:9092"}, ProduceTimeout: -time.Second})
	require.Error(t, err)
	_, err = relaykafka.New(relaykafka.Config{Brokers: []string{"localhost:9092"}, Opts: []kgo.Opt{kgo.DisableIdempotentWrite()}})
	require.ErrorContains(t, err, "idempotent")
	_, err = relaykafka.New(relaykafka.Config{Brokers: []string{"localhost:9092"}, Opts: []kgo.Opt{kgo.TransactionalID("x")}})
	require.ErrorContains(t, err, "transactional")
	s, err := relaykafka.New(relaykafka.Config{Brokers: []string{"localhost:9092"}})
	require.NoError(t, err)
	require.Equal(t, "kafka", s.Name())
	require.NoError(t, s.Close(t.Context()))
}
