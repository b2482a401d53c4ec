package relaykafka_test

import (
	"context"
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
	relaysinktest.Run(t, relaysinktest.Features{Tombstones: true, FailSome: true, Stall: true, OwnTimeout: true},
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

	return relaysinktest.Backend{
		// Longer than the suite's stall deadline, so BoundedTimeout proves
		// that Publish honours its ctx rather than this timeout.
		Sink: newSink(t, c, 30*time.Second),
		Consume: func(ctx context.Context, topic string) ([]relaysinktest.Delivered, error) {
			return consume(ctx, c.ListenAddrs(), topic)
		},
		FailSome:    func(t *testing.T) { failSome(c) },
		Stall:       func(t *testing.T) func() { return stall(c) },
		WithTimeout: func(t *testing.T, d time.Duration) relaysink.Sink { return newSink(t, c, d) },
	}
}

// newSink returns a sink on c with the given ProduceTimeout, closed in
// t.Cleanup. (The suite's OwnTimeout case releases its stall first, so the
// flush in Close gets through.)
func newSink(t *testing.T, c *kfake.Cluster, timeout time.Duration) *relaykafka.Sink {
	sink, err := relaykafka.New(relaykafka.Config{Brokers: c.ListenAddrs(), ProduceTimeout: timeout})
	require.NoError(t, err)
	relaysinktest.CloseOnCleanup(t, sink)
	return sink
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
func setup(t *testing.T, topic string) (*relaykafka.Sink, func() []relaysinktest.Delivered) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	sink := newSink(t, c, 5*time.Second)
	return sink, func() []relaysinktest.Delivered {
		t.Helper()
		ds, err := consume(t.Context(), c.ListenAddrs(), topic)
		require.NoError(t, err)
		return ds
	}
}

// A record too large for a batch fails before it is produced, and the later
// events of its key are not produced either; other keys go through.
func TestTooLargeBlocksItsKey(t *testing.T) {
	t.Parallel()
	sink, read := setup(t, "big")
	big := relaysinktest.Event("big", "k", 2)
	big.Payload = make([]byte, 2<<20)
	events := []relaysink.Event{
		relaysinktest.Event("big", "k", 1), big, relaysinktest.Event("big", "k", 3), relaysinktest.Event("big", "other", 1),
	}
	errs := sink.Publish(t.Context(), events)
	relaysinktest.RequireResult(t, events, errs)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], kerr.MessageTooLarge)
	require.ErrorContains(t, errs[1], "relaykafka: publish big key=k id=big/k/2: ")
	require.ErrorIs(t, errs[2], relaysink.ErrEarlierFailed)
	require.NoError(t, errs[3])
	require.ElementsMatch(t, []string{"k/1", "other/1"}, relaysinktest.KeySeqs(read()))
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
