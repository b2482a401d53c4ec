package shore

import (
	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

// metrics are the shore's Prometheus series. Labels are bounded: the
// endpoint (batches, heartbeat, config), an ErrorCode name or "ok", and a
// ReceiveStatus name, the event list's form — never a node id.
type metrics struct {
	requests *prometheus.CounterVec
	events   *prometheus.CounterVec
	batches  *prometheus.CounterVec
	// inflight: requests admitted by the global limits and not yet
	// answered (seed 004 §18 sync_server_requests_in_flight).
	inflight prometheus.Gauge
}

func newMetrics() *metrics {
	return &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_shipsync_shore_requests_total",
			Help: "Data API requests answered, by endpoint and outcome (ok or the ErrorBody code).",
		}, []string{"endpoint", "outcome"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_shipsync_shore_events_total",
			Help: "Events answered in upload responses (resent batches included), by receive status.",
		}, []string{"status"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_shipsync_shore_batches_total",
			Help: "Upload batches decoded, by the form of their event list: rows (protocol 1.0) or columns (1.1).",
		}, []string{"form"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "relay_shipsync_shore_requests_in_flight",
			Help: "Data API requests admitted by the global limits and not yet answered.",
		}),
	}
}

// Collectors returns the handler's Prometheus collectors, to register.
func (h *Handler) Collectors() []prometheus.Collector {
	gauge := func(name, help string, f func() int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
	}
	return []prometheus.Collector{h.m.requests, h.m.events, h.m.batches, h.m.inflight,
		gauge("relay_shipsync_shore_requests_in_flight_peak",
			"The most data API requests in flight at once since the process started (a sampled gauge misses short peaks).",
			h.lim.peakInflight),
		gauge("relay_shipsync_shore_connected_nodes",
			"Nodes with an authenticated request in the last two heartbeat intervals.",
			func() int { return h.lim.connected(h.cfg.Clock.Now(), 2*h.cfg.HeartbeatInterval) }),
		gauge("relay_shipsync_shore_reconnect_queue_depth",
			"Requests answered 429 whose Retry-After has not passed yet: clients told to come back, not yet due.",
			func() int { return h.retries.depth(h.cfg.Clock.Now()) }),
	}
}

// Batch forms, the label of relay_shipsync_shore_batches_total.
const (
	FormRows    = "rows"
	FormColumns = "columns"
)

func (h *Handler) countBatch(b *wire.Batch) {
	form := FormRows
	if b.Columns {
		form = FormColumns
	}
	h.m.batches.WithLabelValues(form).Inc()
}

func (h *Handler) count(rq request, code pb.ErrorCode) {
	outcome := "ok"
	if code != pb.ErrorCode_ERROR_CODE_UNSPECIFIED {
		outcome = code.String()
	}
	h.m.requests.WithLabelValues(rq.endpoint, outcome).Inc()
}

func (h *Handler) countEvents(resp *pb.UploadResponse) {
	for _, st := range resp.Statuses {
		h.m.events.WithLabelValues(st.Status.String()).Inc()
	}
}
