package shore

import (
	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// metrics are the shore's Prometheus series. Labels are bounded: the
// endpoint (batches, heartbeat, config), an ErrorCode name or "ok", and a
// ReceiveStatus name — never a node id.
type metrics struct {
	requests *prometheus.CounterVec
	events   *prometheus.CounterVec
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
	}
}

// Collectors returns the handler's Prometheus collectors, to register.
func (h *Handler) Collectors() []prometheus.Collector {
	return []prometheus.Collector{h.m.requests, h.m.events}
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
