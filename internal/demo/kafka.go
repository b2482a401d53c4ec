package demo

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/kafkaread"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysink/relaykafka"
)

// kafkaStage is the demo's outbox stage: an in-process Kafka cluster (kfake:
// franz-go's real Kafka protocol implementation, no setup), the Kafka sink and
// a dispatcher of the handler's outbox target.
type kafkaStage struct {
	cluster    *kfake.Cluster
	sink       *relaykafka.Sink
	dispatcher *relay.Dispatcher
}

func startKafka(_ context.Context, o Options, target string) (*kafkaStage, error) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, EventTopic))
	if err != nil {
		return nil, fmt.Errorf("demo: start in-process Kafka: %w", err)
	}
	sink, err := relaykafka.New(relaykafka.Config{Brokers: cluster.ListenAddrs()})
	if err != nil {
		cluster.Close()
		return nil, err
	}
	disp, err := relay.NewDispatcher(o.Store, sink, relay.DispatcherConfig{Target: target, BatchSize: 1000,
		PollInterval: 20 * time.Millisecond, Clock: o.Clock, Logger: o.Logger, Registerer: o.Registerer})
	if err != nil {
		cluster.Close()
		return nil, err
	}
	return &kafkaStage{cluster: cluster, sink: sink, dispatcher: disp}, nil
}

func (k *kafkaStage) brokers() []string { return k.cluster.ListenAddrs() }

func (k *kafkaStage) close(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = k.sink.Close(ctx)
	k.cluster.Close()
}

// ReconcileKafka reads the event topic back and checks it like a strict
// consumer would: per key it accepts only the next relay-seq (a redelivery is
// dropped; a gap or an inversion is a failure), and the accepted events must be
// exactly the applied messages — one per succeeded message, each key's values
// adding up to the planned total.
func (r *Report) ReconcileKafka(ctx context.Context, brokers []string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	recs, err := kafkaread.All(ctx, brokers, EventTopic)
	if err != nil {
		return fmt.Errorf("demo: read events back: %w", err)
	}
	r.kafka = true
	next := map[string]int64{}
	totals := map[string]int64{}
	ids := map[string]bool{}
	for _, rec := range recs {
		seq, err := strconv.ParseInt(rec.Headers[relaysink.HeaderSeq], 10, 64)
		if err != nil {
			r.fail("event at %d/%d has no valid %s header", rec.Partition, rec.Offset, relaysink.HeaderSeq)
			continue
		}
		switch {
		case seq <= next[rec.Key]:
			r.EventRedeliveries++
			continue
		case seq > next[rec.Key]+1:
			r.fail("key %s: event seq %d arrived before seq %d", rec.Key, seq, next[rec.Key]+1)
			continue
		}
		next[rec.Key] = seq
		id := rec.Headers[relaysink.HeaderEventID]
		if ids[id] {
			r.fail("event %s accepted twice", id)
		}
		ids[id] = true
		v, err := strconv.ParseInt(string(rec.Value), 10, 64)
		if err != nil {
			r.fail("event %s: value %q is not a number", id, rec.Value)
			continue
		}
		totals[rec.Key] += v
		r.EventsDelivered++
	}
	if r.EventsDelivered != r.plan.Succeeded {
		r.fail("%d events delivered in order, %d messages applied", r.EventsDelivered, r.plan.Succeeded)
	}
	for key, want := range r.plan.Totals {
		if totals[key] != want {
			r.fail("key %s: events add up to %d, planned %d", key, totals[key], want)
		}
	}
	return nil
}
