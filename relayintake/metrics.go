package relayintake

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay/internal/metric"
)

// metrics holds one queue's series. Without a Registerer the collectors exist
// but are not registered, so the code never checks for nil.
type metrics struct {
	lag       prometheus.Gauge
	watermark prometheus.Gauge
	holes     prometheus.Counter
	rows      prometheus.Counter
	errors    prometheus.Counter
	late      prometheus.Counter
}

// Metric names. The only label is queue, a small configured set.
const (
	metricLag       = "relay_watermark_lag"
	metricWatermark = "relay_watermark"
	metricHoles     = "relay_permanent_holes_total"
	metricRows      = "relay_intake_rows_total"
	metricErrors    = "relay_intake_errors_total"
	metricLate      = "relay_intake_late_rows_total"
)

func newMetrics(reg prometheus.Registerer, queue string) (*metrics, error) {
	lag, err := metric.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricLag,
		Help: "Source max id minus the intake watermark W, updated each round.",
	}, []string{"queue"}))
	if err != nil {
		return nil, err
	}
	wm, err := metric.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricWatermark,
		Help: "The intake watermark W: every source id up to it is persisted or a logged permanent hole.",
	}, []string{"queue"}))
	if err != nil {
		return nil, err
	}
	holes, err := metric.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricHoles,
		Help: "Source ids released as permanent holes after the max commit delay.",
	}, []string{"queue"}))
	if err != nil {
		return nil, err
	}
	rows, err := metric.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricRows,
		Help: "Source rows enqueued as new messages by the intake (rows already present are not counted).",
	}, []string{"queue"}))
	if err != nil {
		return nil, err
	}
	errs, err := metric.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricErrors,
		Help: "Intake rounds that failed (source unreadable, store failure); the watermark did not move.",
	}, []string{"queue"}))
	if err != nil {
		return nil, err
	}
	late, err := metric.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricLate,
		Help: "Rows found in released permanent holes: committed after the max commit delay, not enqueued (ingest them with relay admin late-ingest).",
	}, []string{"queue"}))
	if err != nil {
		return nil, err
	}
	return &metrics{
		lag:       lag.WithLabelValues(queue),
		watermark: wm.WithLabelValues(queue),
		holes:     holes.WithLabelValues(queue),
		rows:      rows.WithLabelValues(queue),
		errors:    errs.WithLabelValues(queue),
		late:      late.WithLabelValues(queue),
	}, nil
}
