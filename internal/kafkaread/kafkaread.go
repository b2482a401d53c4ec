// Package kafkaread reads a topic back from Kafka up to the end offsets it
// finds when called — what tests, the demo's reconciliation and benchmarks
// need to check what a sink delivered.
package kafkaread

import (
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is one record read back: its partition, key, value (nil for a null
// value) and headers (later duplicates of a name win).
type Record struct {
	Partition int32
	Offset    int64
	Key       string
	Value     []byte
	Headers   map[string]string
}

// All reads every record of topic up to the partitions' end offsets at the
// time of the call and returns them partition by partition (ascending), each
// partition in offset order — so records of one key are in broker order. ctx
// bounds the whole read.
func All(ctx context.Context, brokers []string, topic string) ([]Record, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()

	ends, err := endOffsets(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	byPartition := map[int32][]Record{}
	next := map[int32]int64{}
	caughtUp := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return false
			}
		}
		return true
	}
	for !caughtUp() {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("kafkaread %s: %w (read %v of %v)", topic, err, next, ends)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return nil, fmt.Errorf("kafkaread %s: %w", topic, errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < next[r.Partition] {
				return
			}
			next[r.Partition] = r.Offset + 1
			headers := make(map[string]string, len(r.Headers))
			for _, h := range r.Headers {
				headers[h.Key] = string(h.Value)
			}
			byPartition[r.Partition] = append(byPartition[r.Partition],
				Record{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: r.Value, Headers: headers})
		})
	}
	parts := make([]int32, 0, len(byPartition))
	for p := range byPartition {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	var out []Record
	for _, p := range parts {
		out = append(out, byPartition[p]...)
	}
	return out, nil
}

// endOffsets returns the end (high watermark) offset of every partition of
// topic.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, error) {
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata %s: %w", topic, err)
	}
	if len(mresp.Topics) != 1 {
		return nil, fmt.Errorf("metadata %s: %d topics", topic, len(mresp.Topics))
	}
	if err := kerr.ErrorForCode(mresp.Topics[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("metadata %s: %w", topic, err)
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	for _, p := range mresp.Topics[0].Partitions {
		lp := kmsg.NewListOffsetsRequestTopicPartition()
		lp.Partition = p.Partition
		lp.Timestamp = -1 // latest
		lt.Partitions = append(lt.Partitions, lp)
	}
	lo.Topics = append(lo.Topics, lt)
	lresp, err := lo.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("list offsets %s: %w", topic, err)
	}
	ends := map[int32]int64{}
	for _, rt := range lresp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return nil, fmt.Errorf("list offsets %s/%d: %w", topic, rp.Partition, err)
			}
			ends[rp.Partition] = rp.Offset
		}
	}
	return ends, nil
}
