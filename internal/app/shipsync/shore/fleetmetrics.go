package shore

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// FleetMetrics exports the fleet's state from the shore's PostgreSQL as
// Prometheus gauges: nodes connected, the backlog the nodes report per
// rule, the oldest waiting change, the fleet's effective throughput,
// conflicts by state and rule, rule releases by state and the ETAs (the
// longest P50 by confidence and how many nodes cannot be predicted).
// Labels are rules, states and confidences only — node ids, event ids,
// keys and conflict ids never become labels. A scrape reads the database
// at most once per Every; a failed read is counted and the last figures
// are served.
type FleetMetrics struct {
	reg *Registry
	// OnlineWithin is how recent a heartbeat counts as connected (default
	// three heartbeat intervals).
	OnlineWithin time.Duration
	// Every bounds how often the database is read (default 30 s).
	Every time.Duration

	mu     sync.Mutex
	at     time.Time
	last   []prometheus.Metric
	errors prometheus.Counter
}

// NewFleetMetrics returns the fleet gauges read through reg.
func NewFleetMetrics(reg *Registry) *FleetMetrics {
	return &FleetMetrics{reg: reg, OnlineWithin: 3 * HeartbeatIntervalDefault, Every: 30 * time.Second,
		errors: prometheus.NewCounter(prometheus.CounterOpts{Name: "relay_shipsync_fleet_read_errors_total",
			Help: "Reads of the fleet gauges that failed (the previous figures were served)."})}
}

var (
	fleetConnected = prometheus.NewDesc("relay_shipsync_connected_nodes",
		"Active nodes whose last heartbeat is recent.", nil, nil)
	fleetNodes       = prometheus.NewDesc("relay_shipsync_nodes", "Registered nodes by state.", []string{"state"}, nil)
	fleetQueueEvents = prometheus.NewDesc("relay_shipsync_queue_events",
		"Events the active nodes last reported not yet terminal, by rule and state (READY, RETRY_WAIT, RECEIVED, "+
			"BLOCKED; empty from nodes that report per rule only).", []string{"rule", "state"}, nil)
	fleetQueueBytes = prometheus.NewDesc("relay_shipsync_queue_bytes",
		"Raw bytes of those events, by rule and state.", []string{"rule", "state"}, nil)
	fleetOldest = prometheus.NewDesc("relay_shipsync_oldest_waiting_seconds",
		"Age of the oldest capture any active node reports waiting, by rule.", []string{"rule"}, nil)
	fleetThroughput = prometheus.NewDesc("relay_shipsync_effective_throughput_bytes_per_second",
		"Sum over nodes of their effective upload throughput (bytes per active second) in the samples of the last 30 minutes.", nil, nil)
	fleetConflicts = prometheus.NewDesc("relay_shipsync_conflicts", "Conflict cases by state and rule.",
		[]string{"state", "rule"}, nil)
	fleetReleases = prometheus.NewDesc("relay_shipsync_rule_versions", "Rule release versions by state.",
		[]string{"state"}, nil)
	fleetETA = prometheus.NewDesc("relay_shipsync_eta_seconds",
		"The longest P50 time to drain among nodes with a backlog, by the estimate's confidence (ok or low).",
		[]string{"confidence"}, nil)
	fleetUnpredictable = prometheus.NewDesc("relay_shipsync_eta_unpredictable_nodes",
		"Nodes with a backlog whose drain cannot be predicted (not shrinking, or the window never opens enough).", nil, nil)
)

// Describe implements prometheus.Collector.
func (f *FleetMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{fleetConnected, fleetNodes, fleetQueueEvents, fleetQueueBytes, fleetOldest,
		fleetThroughput, fleetConflicts, fleetReleases, fleetETA, fleetUnpredictable} {
		ch <- d
	}
	f.errors.Describe(ch)
}

// Collect implements prometheus.Collector.
func (f *FleetMetrics) Collect(ch chan<- prometheus.Metric) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.reg.clock.Now()
	if f.last == nil || now.Sub(f.at) >= f.Every {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ms, err := f.read(ctx, now)
		cancel()
		if err != nil {
			f.errors.Inc()
		} else {
			f.last, f.at = ms, now
		}
	}
	for _, m := range f.last {
		ch <- m
	}
	f.errors.Collect(ch)
}

// read computes every gauge.
func (f *FleetMetrics) read(ctx context.Context, now time.Time) ([]prometheus.Metric, error) {
	var out []prometheus.Metric
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		out = append(out, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...))
	}
	pool := f.reg.pool
	each := func(stmt string, scan []any, fn func(), args ...any) error {
		rows, err := pool.Query(ctx, stmts[stmt], args...)
		if err != nil {
			return err
		}
		_, err = pgx.ForEachRow(rows, scan, func() error { fn(); return nil })
		return err
	}
	var state, rule string
	var n, bytes int64
	var oldest *time.Time
	var connected int64
	if err := pool.QueryRow(ctx, stmts["FleetConnected"], now.Add(-f.OnlineWithin)).Scan(&connected); err != nil {
		return nil, err
	}
	gauge(fleetConnected, float64(connected))
	if err := each("FleetNodes", []any{&state, &n}, func() { gauge(fleetNodes, float64(n), state) }); err != nil {
		return nil, err
	}
	oldestByRule := map[string]time.Time{}
	if err := each("FleetBacklog", []any{&rule, &state, &n, &bytes, &oldest}, func() {
		gauge(fleetQueueEvents, float64(n), rule, state)
		gauge(fleetQueueBytes, float64(bytes), rule, state)
		if o, ok := oldestByRule[rule]; oldest != nil && (!ok || oldest.Before(o)) {
			oldestByRule[rule] = *oldest
		}
	}); err != nil {
		return nil, err
	}
	for rule, o := range oldestByRule {
		gauge(fleetOldest, max(0, now.Sub(o).Seconds()), rule)
	}
	var rate float64
	if err := pool.QueryRow(ctx, stmts["FleetThroughput"], now.Add(-30*time.Minute)).Scan(&rate); err != nil {
		return nil, err
	}
	gauge(fleetThroughput, rate)
	if err := each("FleetConflicts", []any{&state, &rule, &n}, func() { gauge(fleetConflicts, float64(n), state, rule) }); err != nil {
		return nil, err
	}
	if err := each("FleetReleases", []any{&state, &n}, func() { gauge(fleetReleases, float64(n), state) }); err != nil {
		return nil, err
	}
	var node string
	var nodes []string
	if err := each("FleetNodesWithBacklog", []any{&node}, func() { nodes = append(nodes, node) }); err != nil {
		return nil, err
	}
	longest := map[string]float64{"ok": 0, "low": 0}
	unpredictable := 0
	for _, id := range nodes {
		nb, err := f.reg.Backlog(ctx, id)
		if err != nil {
			return nil, err
		}
		e := nb.ETA
		if !e.Predictable {
			unpredictable++
			continue
		}
		conf := "ok"
		if e.LowConfidence {
			conf = "low"
		}
		longest[conf] = max(longest[conf], e.P50.Sub(now).Seconds())
	}
	for conf, v := range longest {
		gauge(fleetETA, v, conf)
	}
	gauge(fleetUnpredictable, float64(unpredictable))
	return out, nil
}
