package client

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/relayhq/relay/internal/kafkaread"
)

// TestCommitsSavedCheckpoint: a terminal checkpoint saved by an earlier
// life whose group commit never happened (killed at before-offset-commit,
// or the commit failed) is committed by the next life without waiting for
// a new receipt on that partition, and again until the group acknowledged
// it; a checkpoint saved since is committed on the next call. Found by the ship-side crash harness (shipcrash): the group
// stayed behind the checkpoint for ever.
func TestCommitsSavedCheckpoint(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t.a"))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	brokers := cluster.ListenAddrs()
	kc, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t.a"),
		kgo.DisableAutoCommit())
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	ctx, cancel := context.WithCancel(t.Context())
	polled := make(chan struct{})
	go func() { // joins the group
		defer close(polled)
		for ctx.Err() == nil {
			kc.PollFetches(ctx)
		}
	}()
	t.Cleanup(func() { cancel(); <-polled })

	a0, a1 := TP{Topic: "t.a", Partition: 0}, TP{Topic: "t.a", Partition: 1}
	c := &Client{log: slog.New(slog.DiscardHandler), kc: kc, tr: newTracker(),
		toCommit: map[TP]int64{a0: 7, a1: 3}, committed: map[TP]int64{}}
	require.Eventually(t, func() bool {
		c.commitOffsets(ctx)
		got, err := kafkaread.Committed(ctx, brokers, "g")
		return err == nil && got["t.a"][0] == 7 && got["t.a"][1] == 3
	}, 20*time.Second, 50*time.Millisecond)
	// A commit the broker applied may still have been answered with an
	// error (one made while the member joined): the next pull commits
	// again until the group acknowledged it.
	require.Eventually(t, func() bool {
		c.commitOffsets(ctx)
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.committed[a0] == 7 && c.committed[a1] == 3
	}, 20*time.Second, 50*time.Millisecond)

	// A checkpoint saved since is committed on the next call.
	c.mu.Lock()
	c.toCommit[a1] = 9
	c.mu.Unlock()
	require.Eventually(t, func() bool {
		c.commitOffsets(ctx)
		got, err := kafkaread.Committed(ctx, brokers, "g")
		return err == nil && got["t.a"][1] == 9 && got["t.a"][0] == 7
	}, 10*time.Second, 50*time.Millisecond)
}
