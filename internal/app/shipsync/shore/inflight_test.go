package shore_test

import (
	"net/http"
	"testing"
	"time"

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
	gauge := gauges(t, s.h)
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

// gauges returns a reader of h's gauges by name.
func gauges(t *testing.T, h *shore.Handler) func(name string) float64 {
	reg := prometheus.NewRegistry()
	reg.MustRegister(h.Collectors()...)
	return func(name string) float64 {
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
}

// TestConnectedAndReconnectQueue: a node is connected while it made a
// request in the last two heartbeat intervals; a request answered 429 is
// in the reconnect queue until its Retry-After has passed.
func TestConnectedAndReconnectQueue(t *testing.T) {
	t.Parallel()
	s := serve(t, setup(t), func(c *shore.Config) {
		c.Limits = shore.Limits{NodeRate: 1, NodeBurst: 1}
		c.HeartbeatInterval = 10 * time.Second
	})
	s.addNode(t, "ship-1")
	s.addNode(t, "ship-2")
	gauge := gauges(t, s.h)
	const connected, queue = "relay_shipsync_shore_connected_nodes", "relay_shipsync_shore_reconnect_queue_depth"
	require.Zero(t, gauge(connected))
	c := s.client(t, "node-ship-1")
	status, _, _ := post(t, c, s.url+shore.PathBatches, s.encode(t, "ship-1", uuidN(1), event("ship-1", 1)))
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, 1.0, gauge(connected))
	require.Zero(t, gauge(queue))
	status, hdr, _ := post(t, c, s.url+shore.PathBatches, s.encode(t, "ship-1", uuidN(2), event("ship-1", 2)))
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, "1", hdr.Get("Retry-After"))
	require.Equal(t, 1.0, gauge(queue), "told to come back in a second")

	s.clock.Advance(15 * time.Second)
	require.Zero(t, gauge(queue), "its Retry-After has passed")
	status, _, _ = post(t, s.client(t, "node-ship-2"), s.url+shore.PathBatches, s.encode(t, "ship-2", uuidN(3), event("ship-2", 3)))
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, 2.0, gauge(connected), "ship-1 was seen 15 s ago, within two intervals of 10 s")
	s.clock.Advance(10 * time.Second)
	require.Equal(t, 1.0, gauge(connected), "ship-1 was last seen 25 s ago")
}
