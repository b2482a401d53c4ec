package relay

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relaytype"
)

// metrics holds the collectors documented under "Metrics" in the package doc.
// The gauges are refreshed from MessageStats at the end of a Work round (each
// idle round of a started engine), at most once per service.RefreshInterval.
type metrics struct {
	backlog   prometheus.Gauge
	oldest    prometheus.Gauge
	states    *prometheus.GaugeVec // curried by queue
	processed *prometheus.CounterVec
}

var allStates = []relaytype.State{
	relaytype.StatePending, relaytype.StateFailed, relaytype.StateSucceeded,
	relaytype.StateSkipped, relaytype.StateDead, relaytype.StateArchived,
}

func newMetrics(r prometheus.Registerer, queue string) (*metrics, error) {
	reg := service.NewMetrics(r)
	backlog := reg.Gauge("relay_backlog_messages",
		"Unfinished (PENDING and FAILED) messages of the queue.", "queue")
	oldest := reg.Gauge("relay_backlog_oldest_unprocessed_seconds",
		"Age of the oldest unfinished message's enqueue time (0 when none).", "queue")
	states := reg.Gauge("relay_messages",
		"Messages of the queue per processing state.", "queue", "state")
	processed := reg.Counter("relay_processed_total",
		"Processing attempts that reached an outcome (succeeded, skipped, dead, retry, exhausted).", "queue", "outcome")
	if err := reg.Err(); err != nil {
		return nil, err
	}
	m := &metrics{
		backlog:   backlog.WithLabelValues(queue),
		oldest:    oldest.WithLabelValues(queue),
		states:    states.MustCurryWith(prometheus.Labels{"queue": queue}),
		processed: processed.MustCurryWith(prometheus.Labels{"queue": queue}),
	}
	for _, o := range []outcome{outcomeSucceeded, outcomeSkipped, outcomeDead, outcomeRetry, outcomeExhausted} {
		m.processed.WithLabelValues(o.String()) // export zeros so rates work from the start
	}
	return m, nil
}

// refreshMetrics reads the queue's aggregate and sets the gauges, at most
// once per service.RefreshInterval of the engine's clock. A failure is logged
// (not returned): metrics must not stop processing. Caller holds workMu.
func (e *Engine) refreshMetrics(ctx context.Context) {
	if e.metrics == nil || !e.metricsThrottle.Due(e.cfg.Clock.Now()) {
		return
	}
	st, err := e.Stats(ctx)
	if err != nil {
		e.log.WarnContext(ctx, "relay: refresh metrics", "queue", e.cfg.Queue, "error", err)
		return
	}
	e.metrics.backlog.Set(float64(st.Backlog()))
	age := 0.0
	if !st.OldestUnfinishedEnqueuedAt.IsZero() {
		age = max(e.cfg.Clock.Now().Sub(st.OldestUnfinishedEnqueuedAt).Seconds(), 0)
	}
	e.metrics.oldest.Set(age)
	for _, s := range allStates {
		e.metrics.states.WithLabelValues(string(s)).Set(float64(st.Counts[s]))
	}
}
