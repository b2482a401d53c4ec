package shore_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

// BenchmarkIngress uploads batches of 500 new events over mutual TLS on
// loopback from 4 nodes at once into the PostgreSQL inbox and reports
// events received (committed) per second. One b.N is one batch.
func BenchmarkIngress(b *testing.B) {
	const nodes, perBatch = 4, 500
	s := serve(b, setup(b), func(c *shore.Config) {
		c.Limits = shore.Limits{NodeRate: 1e6, GlobalRate: 1e6}
	})
	clients := make([]*http.Client, nodes)
	for i := range nodes {
		id := fmt.Sprintf("ship-%d", i)
		s.addNode(b, id)
		clients[i] = s.client(b, "node-"+id)
	}
	// Bodies are encoded before the clock starts: the benchmark measures
	// the shore, not the ship's encoder.
	bodies := make([][]byte, b.N)
	for n := range b.N {
		node := fmt.Sprintf("ship-%d", n%nodes)
		evs := make([]*pb.ChangeEvent, perBatch)
		for i := range evs {
			evs[i] = event(node, n*perBatch+i+1)
			// Each node's batches go in order: its stream is contiguous, as
			// a ship's is, so every event is released at once.
			k := uint64((n/nodes)*perBatch + i + 1)
			evs[i].SourceSequence, evs[i].SourcePosition = k, proto.Uint64(k)
		}
		bodies[n] = s.encode(b, node, uuidN(1<<40+n), evs...)
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	errs := make(chan error, nodes)
	for w := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := w; n < b.N; n += nodes {
				req, _ := http.NewRequest(http.MethodPost, s.url+shore.PathBatches, bytes.NewReader(bodies[n]))
				req.Header.Set("Content-Type", shore.ContentType)
				resp, err := clients[w].Do(req)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("HTTP %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		require.NoError(b, err)
	}
	b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "events/s")
}
