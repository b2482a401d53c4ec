package relaykafka_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaysink/relaykafka"
	"github.com/relayhq/relay/relaytype"
)

// TestPipelineToKafka runs the whole write path on real parts: a FIFO engine on
// PostgreSQL whose handler appends an outbox event per message in the engine's
// transaction, a dispatcher, and the Kafka sink on a kfake cluster that rejects
// some produce requests. Every committed event must reach Kafka, per key in
// commit order; the events of an attempt that was rolled back must not.
func TestPipelineToKafka(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := testdb.PGDriver(t)
	clock := relayclock.NewFake(time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))

	const topic, n, keys = "flights", 300, 12
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	sink, err := relaykafka.New(relaykafka.Config{Brokers: cluster.ListenAddrs(), ProduceTimeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sink.Close(context.Background())) })

	var flakyCalls atomic.Int32
	handler := relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, del *relay.Delivery) relay.Result {
		id := del.Message.ID
		ev := &relay.OutboxEvent{ID: "m-" + strconv.FormatInt(id, 10), Target: "kafka", Topic: topic,
			Key: string(del.Message.Payload), Payload: []byte(strconv.FormatInt(id, 10))}
		if _, err := relay.AppendEventsTx(ctx, tx, ev); err != nil {
			return relay.Retry(relaytype.ClassInfra, err)
		}
		if id == 42 && flakyCalls.Add(1) == 1 {
			// The event above is rolled back with this attempt.
			return relay.Retry(relaytype.ClassInfra, errors.New("transient"))
		}
		return relay.Succeeded()
	})
	engine, err := relay.NewEngine(d, relay.Config{Queue: "p", Handler: handler, FIFOBatch: 16, Clock: clock,
		MaxAttempts: 3, Backoff: []time.Duration{time.Second, time.Second}})
	require.NoError(t, err)
	params := make([]*relay.EnqueueParams, n)
	for i := range params {
		params[i] = &relay.EnqueueParams{ID: int64(i + 1), Payload: []byte(fmt.Sprintf("F%02d", i%keys))}
	}
	_, err = engine.Enqueue(ctx, params...)
	require.NoError(t, err)

	dispatcher, err := relay.NewDispatcher(d, sink, relay.DispatcherConfig{Target: "kafka", BatchSize: 64, Clock: clock,
		MaxAttempts: 5, Backoff: []time.Duration{time.Second, time.Second, time.Second, time.Second}})
	require.NoError(t, err)
	// The broker rejects partition 1's batches for a while: delivery must retry.
	cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Partitions: []int32{1}, Err: kerr.InvalidRecord, Count: 3})

	for range 50 {
		processed, err := engine.Work(ctx)
		require.NoError(t, err)
		sent, err := dispatcher.Work(ctx)
		require.NoError(t, err)
		st, err := engine.Stats(ctx)
		require.NoError(t, err)
		if st.Backlog() == 0 && processed == 0 && sent == 0 {
			break
		}
		clock.Advance(time.Second) // due backoffs of messages and events
	}
	st, err := engine.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(n), st.Counts[relaytype.StateSucceeded])
	require.Equal(t, int32(2), flakyCalls.Load())

	delivered, err := consume(ctx, cluster.ListenAddrs(), topic)
	require.NoError(t, err)
	// A consumer that accepts only each key's next sequence (duplicates and
	// anything out of order are dropped) must end with every event, in commit
	// order (here: message id order), and no event twice.
	next := map[string]int64{}
	lastID := map[string]int64{}
	seen := map[string]bool{}
	for _, ev := range delivered {
		if ev.Seq != next[ev.Key]+1 {
			require.LessOrEqual(t, ev.Seq, next[ev.Key], "key %s: seq %d arrived before seq %d", ev.Key, ev.Seq, next[ev.Key]+1)
			continue // a redelivery
		}
		next[ev.Key] = ev.Seq
		id, err := strconv.ParseInt(string(ev.Payload), 10, 64)
		require.NoError(t, err)
		require.Greater(t, id, lastID[ev.Key], "key %s out of commit order", ev.Key)
		lastID[ev.Key] = id
		require.False(t, seen[ev.ID], "event %s accepted twice", ev.ID)
		seen[ev.ID] = true
	}
	require.Len(t, seen, n, "every committed event delivered")
	for i := 0; i < keys; i++ {
		key := fmt.Sprintf("F%02d", i)
		want := int64(n / keys)
		require.Equal(t, want, next[key], "key %s: sequence 1..%d without gaps (the rolled-back attempt used no number)", key, want)
	}
}
