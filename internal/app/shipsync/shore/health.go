package shore

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// HealthState is a subsystem's state, from best to worst.
type HealthState int

// Health states. They are observations: none moves a checkpoint or an
// event's result.
const (
	// Healthy: running and within its delay goals.
	Healthy HealthState = iota
	// Degraded: serving, but behind its goals or with a backlog.
	Degraded
	// Blocked: stopped by a permanent error or a missing precondition
	// (a database that does not answer); someone must act.
	Blocked
	// Offline: not reachable.
	Offline
)

func (s HealthState) String() string {
	return [...]string{"HEALTHY", "DEGRADED", "BLOCKED", "OFFLINE"}[s]
}

// MarshalText writes the state's name.
func (s HealthState) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Subsystem is one part of the shore and its state, with a short detail
// (counts and ages only: never a row, a key or a driver's error text).
type Subsystem struct {
	Name   string      `json:"name"`
	State  HealthState `json:"state"`
	Detail string      `json:"detail,omitempty"`
}

// HealthReport is the shore's health: every subsystem and the worst of
// them.
type HealthReport struct {
	Overall    HealthState `json:"overall"`
	Subsystems []Subsystem `json:"subsystems"`
	CheckedAt  time.Time   `json:"checked_at"`
}

// HealthConfig says what the shore runs and how late is too late.
type HealthConfig struct {
	Pool  *pgxpool.Pool
	Clock relaytype.Clock
	// Driver reads the apply queues' statistics.
	Driver relaydriver.Driver
	// Target pings the shore database (nil: this process applies nothing).
	Target func(context.Context) error
	// Arbiter: this process runs the conflict arbiter.
	Arbiter bool
	// ProcessingLag: the oldest event waiting to be applied may be this old
	// and processing still count as healthy (default 5 min).
	ProcessingLag time.Duration
	// ArbiterLag: a case may wait this long for a policy decision (default
	// 10 min).
	ArbiterLag time.Duration
	// DownlinkLag: a command to a node that is online may wait this long for
	// its result (default 1 h).
	DownlinkLag time.Duration
	// OnlineWithin: a node whose last heartbeat is this recent is online
	// (default three heartbeat intervals).
	OnlineWithin time.Duration
	// Every bounds how often the checks run; a report younger is served
	// again (default 15 s).
	Every time.Duration
	// Timeout bounds one check (default 2 s).
	Timeout time.Duration
}

// Health checks the shore's subsystems: receive (PostgreSQL answers),
// processing (the apply queues keep up; receiving while the applier falls
// behind is DEGRADED, never healthy), target (the shore database answers),
// arbiter (cases are decided in time; a case past its manual deadline),
// downlink (online nodes take their commands). Safe for concurrent use.
type Health struct {
	cfg  HealthConfig
	mu   sync.Mutex
	last *HealthReport
}

// NewHealth returns the health checks of cfg.
func NewHealth(cfg HealthConfig) *Health {
	cfg.ProcessingLag = cmp.Or(cfg.ProcessingLag, 5*time.Minute)
	cfg.ArbiterLag = cmp.Or(cfg.ArbiterLag, 10*time.Minute)
	cfg.DownlinkLag = cmp.Or(cfg.DownlinkLag, time.Hour)
	cfg.OnlineWithin = cmp.Or(cfg.OnlineWithin, 3*HeartbeatIntervalDefault)
	cfg.Every = cmp.Or(cfg.Every, 15*time.Second)
	cfg.Timeout = cmp.Or(cfg.Timeout, 2*time.Second)
	return &Health{cfg: cfg}
}

// Report returns the current health (at most Every old).
func (h *Health) Report(ctx context.Context) HealthReport {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.cfg.Clock.Now()
	if h.last != nil && now.Sub(h.last.CheckedAt) < h.cfg.Every {
		return *h.last
	}
	r := HealthReport{CheckedAt: now}
	add := func(name string, st HealthState, detail string) {
		r.Subsystems = append(r.Subsystems, Subsystem{Name: name, State: st, Detail: detail})
		r.Overall = max(r.Overall, st)
	}
	cctx, cancel := context.WithTimeout(ctx, h.cfg.Timeout)
	defer cancel()
	if err := h.cfg.Pool.Ping(cctx); err != nil {
		add("receive", Blocked, "PostgreSQL does not answer: uploads are refused with a retryable error")
		add("processing", Blocked, "PostgreSQL does not answer")
	} else {
		add("receive", Healthy, "")
		st, detail := h.processing(cctx, now)
		add("processing", st, detail)
		if h.cfg.Arbiter {
			st, detail := h.arbiter(cctx, now)
			add("arbiter", st, detail)
		}
		st, detail = h.downlink(cctx, now)
		add("downlink", st, detail)
	}
	if h.cfg.Target != nil {
		if err := h.cfg.Target(cctx); err != nil {
			add("target", Blocked, "the shore database does not answer: applying waits")
		} else {
			add("target", Healthy, "")
		}
	}
	h.last = &r
	return r
}

// processing judges the apply queues.
func (h *Health) processing(ctx context.Context, now time.Time) (HealthState, string) {
	if h.cfg.Driver == nil {
		return Healthy, ""
	}
	var waiting, dead int64
	var oldest time.Time
	for _, q := range []string{ApplyQueue, UrgentApplyQueue} {
		st, err := h.cfg.Driver.GetExecutor().MessageStats(ctx, q)
		if err != nil {
			return Blocked, "the apply queue cannot be read"
		}
		waiting += st.Backlog()
		dead += st.Counts[relaytype.StateDead]
		if o := st.OldestUnfinishedEnqueuedAt; !o.IsZero() && (oldest.IsZero() || o.Before(oldest)) {
			oldest = o
		}
	}
	switch {
	case dead > 0:
		return Blocked, fmt.Sprintf("%d event(s) dead in the apply queue: they need an operator", dead)
	case waiting > 0 && now.Sub(oldest) > h.cfg.ProcessingLag:
		return Degraded, fmt.Sprintf("%d event(s) waiting to be applied, the oldest for %s", waiting,
			now.Sub(oldest).Round(time.Second))
	case waiting > 0:
		return Healthy, fmt.Sprintf("%d event(s) waiting to be applied", waiting)
	}
	return Healthy, ""
}

// arbiter judges the conflict cases.
func (h *Health) arbiter(ctx context.Context, now time.Time) (HealthState, string) {
	var late, overdue int64
	if err := h.cfg.Pool.QueryRow(ctx, stmts["HealthArbiter"], now.Add(-h.cfg.ArbiterLag), now).Scan(&late, &overdue); err != nil {
		return Blocked, "the conflict cases cannot be read"
	}
	switch {
	case late > 0:
		return Degraded, fmt.Sprintf("%d case(s) waiting more than %s for a policy decision", late, h.cfg.ArbiterLag)
	case overdue > 0:
		return Degraded, fmt.Sprintf("%d case(s) past their manual-decision deadline", overdue)
	}
	return Healthy, ""
}

// downlink judges the commands of the online nodes.
func (h *Health) downlink(ctx context.Context, now time.Time) (HealthState, string) {
	var late int64
	if err := h.cfg.Pool.QueryRow(ctx, stmts["HealthDownlink"], now.Add(-h.cfg.DownlinkLag),
		now.Add(-h.cfg.OnlineWithin)).Scan(&late); err != nil {
		return Blocked, "the downlink commands cannot be read"
	}
	if late > 0 {
		return Degraded, fmt.Sprintf("%d command(s) to online nodes without a result after %s", late, h.cfg.DownlinkLag)
	}
	return Healthy, ""
}

var healthDesc = prometheus.NewDesc("relay_shipsync_shore_health",
	"Each subsystem's health: 0 HEALTHY, 1 DEGRADED, 2 BLOCKED, 3 OFFLINE (subsystem overall is the worst).",
	[]string{"subsystem"}, nil)

// Describe implements prometheus.Collector.
func (h *Health) Describe(ch chan<- *prometheus.Desc) { ch <- healthDesc }

// Collect implements prometheus.Collector.
func (h *Health) Collect(ch chan<- prometheus.Metric) {
	r := h.Report(context.Background())
	ch <- prometheus.MustNewConstMetric(healthDesc, prometheus.GaugeValue, float64(r.Overall), "overall")
	for _, s := range r.Subsystems {
		ch <- prometheus.MustNewConstMetric(healthDesc, prometheus.GaugeValue, float64(s.State), s.Name)
	}
}
