package kafkaread

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Committed returns the offsets consumer group has committed, by topic and
// partition (a partition without a commit is absent). ctx bounds the call.
func Committed(ctx context.Context, brokers []string, group string) (map[string]map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	req.Topics = nil // every topic
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("kafkaread: offset fetch %s: %w", group, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("kafkaread: offset fetch %s: %w", group, err)
	}
	out := map[string]map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("kafkaread: offset fetch %s %s/%d: %w", group, t.Topic, p.Partition, err)
			}
			if p.Offset < 0 {
				continue
			}
			if out[t.Topic] == nil {
				out[t.Topic] = map[int32]int64{}
			}
			out[t.Topic][p.Partition] = p.Offset
		}
	}
	return out, nil
}

// Ends returns the end offset (high watermark) of every partition of topic.
// ctx bounds the call.
func Ends(ctx context.Context, brokers []string, topic string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := endOffsets(ctx, cl, topic)
	if err != nil {
		return nil, fmt.Errorf("kafkaread: %w", err)
	}
	return ends, nil
}
