package shore_test

import (
	"net/http"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

// TestInflightGauges: a request held in the handler is counted in flight
// while it runs and not after; the peak keeps the highest count.
func TestInflightGauges(t *testing.T) {
	t.Parallel()
	held, release := make(chan struct{}), make(chan struct{})
	var once bool
	s := serve(t, setup(t), func(c *shore.Config) {
		shore.SetHold(c, func() {
			if !once {
				once = true
				close(held)
				<-release
			}
		})
	})
	s.addNode(t, "ship-1")
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.h.Collectors()...)
	gauge := func(name string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("no metric %s", name)
		return 0
	}
	require.Zero(t, gauge("relay_shipsync_shore_requests_in_flight_peak"))
	done := make(chan int, 1)
	c := s.client(t, "node-ship-1")
	body := s.encode(t, "ship-1", uuidN(1), event("ship-1", 1))
	go func() {
		status, _, _ := post(t, c, s.url+shore.PathBatches, body)
		done <- status
	}()
	<-held
	require.Equal(t, 1.0, gauge("relay_shipsync_shore_requests_in_flight"))
	require.Equal(t, 1.0, gauge("relay_shipsync_shore_requests_in_flight_peak"))
	close(release)
	require.Equal(t, http.StatusOK, <-done)
	require.Zero(t, gauge("relay_shipsync_shore_requests_in_flight"))
	require.Equal(t, 1.0, gauge("relay_shipsync_shore_requests_in_flight_peak"), "the peak stays")
}
