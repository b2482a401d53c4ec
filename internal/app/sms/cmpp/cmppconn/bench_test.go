package cmppconn

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkSubmitPairs measures Submit + SubmitResp pairs per second over
// loopback TCP against the test ISMG, which answers at once (and coalesces
// its answers as the client coalesces its Submits), through a Pool of 1, 4
// and 8 connections with the default window of 16. Twice as many
// goroutines as window slots keep every window full. Each Submit is a
// typical segment: one destination, 140 bytes of content. Reported:
// pairs/s, and socket writes per pair on the client side (below 1 when
// writes carry several Submits).
func BenchmarkSubmitPairs(b *testing.B) {
	for _, v := range versions {
		for _, size := range []int{1, 4, 8} {
			b.Run(fmt.Sprintf("%s/conns=%d", v, size), func(b *testing.B) {
				srv := startISMG(b, ismgConfig{version: v})
				cfg := srv.clientConfig(nil)
				p, err := NewPool(PoolConfig{Conn: cfg, Size: size})
				require.NoError(b, err)
				require.NoError(b, p.Start(context.Background()))
				defer func() { _ = p.Stop(context.Background()) }()
				require.Eventually(b, func() bool { return p.Live() == size }, 10*time.Second, time.Millisecond)

				content := make([]byte, 140)
				for i := range content {
					content[i] = byte('a' + i%26)
				}
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ReportAllocs()
				b.ResetTimer()
				for range 2 * size * WindowDefault {
					wg.Go(func() {
						s := testSubmit("")
						s.MsgContent = content
						for next.Add(1) <= int64(b.N) {
							if _, err := p.Submit(context.Background(), s); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				var writes uint64
				for _, st := range p.Stats() {
					writes += st.Writes
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
				b.ReportMetric(float64(writes)/float64(b.N), "writes/pair")
			})
		}
	}
}
