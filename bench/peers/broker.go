package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	wkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill-redisstream/pkg/redisstream"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysink/relaykafka"
	"github.com/relayhq/relay/relaysink/relayredis"
)

// Brokers of the outbox scenario.
const (
	brokerRedis = "redis"
	brokerKafka = "kafka"
)

// kafkaPartitions is the partition count of each run's topic.
const kafkaPartitions = 8

// broker is one run's destination: a fresh stream on the local Redis, or a
// topic on a fresh in-process kfake cluster. Each system's run gets its own,
// so that the read-back sees only that run's records.
type broker struct {
	kind    string
	topic   string
	redis   *redis.Client  // redis: the stream's server (also for the read-back)
	cluster *kfake.Cluster // kafka
}

// newBroker returns a fresh destination of kind.
func newBroker(kind, redisAddr string) (*broker, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	br := &broker{kind: kind, topic: "peers-outbox-" + hex.EncodeToString(b[:])}
	switch kind {
	case brokerRedis:
		br.redis = redis.NewClient(&redis.Options{Addr: redisAddr})
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := br.redis.Ping(ctx).Err(); err != nil {
			_ = br.redis.Close()
			return nil, fmt.Errorf("Redis at %s is not reachable: %w", redisAddr, err)
		}
	case brokerKafka:
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(kafkaPartitions, br.topic))
		if err != nil {
			return nil, fmt.Errorf("start in-process Kafka (kfake): %w", err)
		}
		br.cluster = c
	default:
		return nil, fmt.Errorf("unknown broker %q", kind)
	}
	return br, nil
}

// close deletes the stream (Redis keeps nothing of the run) or stops the
// cluster.
func (b *broker) close() error {
	var errs []error
	if b.redis != nil {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		errs = append(errs, b.redis.Del(ctx, b.topic).Err(), b.redis.Close())
	}
	if b.cluster != nil {
		b.cluster.Close()
	}
	return errors.Join(errs...)
}

// relaySink returns relay's own sink for the broker with its defaults
// (relayredis: pipelined XADD; relaykafka: franz-go idempotent producer,
// acks=all). The caller closes it.
func (b *broker) relaySink() (relaysink.Sink, error) {
	if b.kind == brokerRedis {
		return relayredis.New(relayredis.Config{Addr: b.redis.Options().Addr})
	}
	return relaykafka.New(relaykafka.Config{Brokers: b.cluster.ListenAddrs()})
}

// watermillPublisher returns the Forwarder's destination publisher with the
// package defaults: watermill-redisstream's (XADD per message, default
// marshaller), or watermill-kafka's sync producer (sarama, its
// DefaultSaramaSyncPublisherConfig) with the partitioning marshaler keyed by
// the event's key — without it every record would carry a nil key and go to
// a random partition, and no per-key order could hold. The caller closes it.
func (b *broker) watermillPublisher() (message.Publisher, error) {
	logger := watermill.NopLogger{}
	if b.kind == brokerRedis {
		// Its own client: the publisher's Close closes it.
		return redisstream.NewPublisher(redisstream.PublisherConfig{
			Client: redis.NewClient(&redis.Options{Addr: b.redis.Options().Addr})}, logger)
	}
	return wkafka.NewPublisher(wkafka.PublisherConfig{
		Brokers:               b.cluster.ListenAddrs(),
		Marshaler:             wkafka.NewWithPartitioningMarshaler(partitionKey),
		OverwriteSaramaConfig: saramaConfig(),
	}, logger)
}

// saramaConfig is watermill-kafka's default sync publisher configuration.
// kfake answers ApiVersions with the versions it implements, and sarama at
// the default V1_0_0_0 speaks produce v5 and metadata v5, which kfake serves;
// nothing needs changing (docs/benchmarks.md).
func saramaConfig() *sarama.Config { return wkafka.DefaultSaramaSyncPublisherConfig() }

func partitionKey(_ string, msg *message.Message) (string, error) {
	return msg.Metadata.Get(keyMetadata), nil
}

// verify reads the broker's copy of the run back and checks it.
func (b *broker) verify(ctx context.Context, s outboxSpec, res outboxResult) (outboxResult, error) {
	c := newStreamCheck(s)
	var err error
	if b.kind == brokerRedis {
		err = b.readRedis(ctx, c)
	} else {
		err = b.readKafka(ctx, c)
	}
	if err != nil {
		return res, err
	}
	return c.result(res)
}

// readRedis pages through the stream with XRANGE; both systems keep the
// payload in the field "payload".
func (b *broker) readRedis(ctx context.Context, c *streamCheck) error {
	const page = 10000
	from := "-"
	for {
		xs, err := b.redis.XRangeN(ctx, b.topic, from, "+", page).Result()
		if err != nil {
			return fmt.Errorf("read back stream %s: %w", b.topic, err)
		}
		for _, x := range xs {
			p, _ := x.Values["payload"].(string)
			if err := c.observe([]byte(p)); err != nil {
				return err
			}
		}
		if len(xs) < page {
			return nil
		}
		from = "(" + xs[len(xs)-1].ID
	}
}

// readKafka consumes every partition of the topic from the start up to its
// end offset (asked first), so duplicates past the last new event are read
// too. Both systems write the payload as the record value.
func (b *broker) readKafka(ctx context.Context, c *streamCheck) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.cluster.ListenAddrs()...), kgo.ConsumeTopics(b.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	end, err := b.endOffsets(ctx, cl)
	if err != nil {
		return err
	}
	var want int64
	for _, o := range end {
		want += o
	}
	for read := int64(0); read < want; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read back topic %s: %d of %d records: %w", b.topic, read, want, err)
		}
		for _, fe := range fs.Errors() {
			return fmt.Errorf("read back topic %s partition %d: %w", fe.Topic, fe.Partition, fe.Err)
		}
		var obsErr error
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < end[r.Partition] {
				read++
				if err := c.observe(r.Value); err != nil && obsErr == nil {
					obsErr = err
				}
			}
		})
		if obsErr != nil {
			return obsErr
		}
	}
	return nil
}

// endOffsets returns each partition's end offset (ListOffsets, latest).
func (b *broker) endOffsets(ctx context.Context, cl *kgo.Client) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = b.topic
	for p := range int32(kafkaPartitions) {
		pt := kmsg.NewListOffsetsRequestTopicPartition()
		pt.Partition, pt.Timestamp = p, -1
		t.Partitions = append(t.Partitions, pt)
	}
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", b.topic, err)
	}
	out := map[int32]int64{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return nil, fmt.Errorf("end offset of %s/%d: %w", rt.Topic, rp.Partition, err)
			}
			out[rp.Partition] = rp.Offset
		}
	}
	return out, nil
}
