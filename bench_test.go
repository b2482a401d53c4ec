package relay_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relayclock"
)

// BenchmarkFIFO measures the global FIFO pump end to end: per message, a head
// read, a transaction with one handler INSERT, the terminal state in the same
// transaction, and a commit. Reported as msgs/s.
func BenchmarkFIFO(b *testing.B) {
	for _, s := range stores() {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/batch=%d", s.name, batch), func(b *testing.B) {
				benchFIFO(b, s, batch)
			})
		}
	}
}

func benchFIFO(b *testing.B, s store, batch int) {
	ctx := context.Background()
	d := s.open(b, true)
	e, err := relay.NewEngine(d, relay.Config{
		Queue:     "bench",
		FIFOBatch: batch,
		Clock:     relayclock.System{},
		Logger:    slog.New(slog.DiscardHandler),
		Handler: relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, dl *relay.Delivery) relay.Result {
			if err := insertProj(ctx, tx, dl.Message.ID); err != nil {
				return relay.Retry("", err)
			}
			return relay.Succeeded()
		}),
	})
	require.NoError(b, err)
	_, err = d.GetExecutor().Exec(ctx, "CREATE TABLE proj (id BIGINT PRIMARY KEY, v TEXT)")
	require.NoError(b, err)
	for start := 0; start < b.N; start += 1000 {
		ps := make([]*relay.EnqueueParams, 0, 1000)
		for i := start; i < min(start+1000, b.N); i++ {
			ps = append(ps, &relay.EnqueueParams{ID: int64(i + 1), Payload: []byte("payload")})
		}
		_, err := e.Enqueue(ctx, ps...)
		require.NoError(b, err)
	}
	b.ResetTimer()
	n, err := e.Work(ctx)
	b.StopTimer()
	require.NoError(b, err)
	require.Equal(b, b.N, n)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
