package client

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/relayhq/relay/internal/kafkaread"
	"github.com/relayhq/relay/relayclock"
)

// TestCommitsSavedCheckpoint: a terminal checkpoint saved by an earlier
// life whose group commit never happened (killed at before-offset-commit,
// or the commit failed) is committed by the next life without waiting for
// a new receipt on that partition, and again until the group acknowledged
// it; a checkpoint saved since — by any path, receipts or not — is
// committed on the next call. Found by the ship-side crash harness (shipcrash): the group
// stayed behind the checkpoint for ever.
func TestCommitsSavedCheckpoint(t *testing.T) {
	t.Parallel()
	brokers, kc := groupClient(t, 2)
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
	st, err := OpenStore(ctx, filepath.Join(t.TempDir(), "client.db"), "g", relayclock.System{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	save := func(tp TP, next int64) {
		require.NoError(t, st.saveMarks(ctx, []Watermark{{TP: tp, ReadNext: next, ReceivedNext: next,
			TerminalNext: next, NextSeq: 1}}))
	}
	save(a0, 7) // saved by an earlier life, never committed
	save(a1, 3)
	c := &Client{cfg: Config{Store: st}, log: slog.New(slog.DiscardHandler), kc: kc, tr: newTracker(),
		committed: map[TP]int64{}}
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

	// A checkpoint saved since, by any path, is committed on the next call.
	save(a1, 9)
	require.Eventually(t, func() bool {
		c.commitOffsets(ctx)
		got, err := kafkaread.Committed(ctx, brokers, "g")
		return err == nil && got["t.a"][1] == 9 && got["t.a"][0] == 7
	}, 10*time.Second, 50*time.Millisecond)
}

// groupClient starts a kfake cluster with topic "t.a" of the given
// partitions and returns its brokers and a client of group "g" on it,
// without auto-commit.
func groupClient(t *testing.T, partitions int32) ([]string, *kgo.Client) {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "t.a"))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	brokers := cluster.ListenAddrs()
	kc, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t.a"),
		kgo.DisableAutoCommit())
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	return brokers, kc
}
