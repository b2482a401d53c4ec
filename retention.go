package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay/internal/metric"
	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of RetentionConfig. A zero field takes its default.
const (
	// SentRetentionDefault is how long SENT outbox events are kept after sent_at.
	SentRetentionDefault = 7 * 24 * time.Hour
	// RetentionEveryDefault is the pause between two retention passes.
	RetentionEveryDefault = time.Minute
	// RetentionBatchLimitDefault is how many rows one delete statement removes.
	RetentionBatchLimitDefault = 1000
)

// RetentionConfig configures a Retention job. Targets is required; every other
// zero field takes the default named in its comment.
type RetentionConfig struct {
	// Targets are the outbox targets whose SENT events are deleted. Required.
	Targets []string
	// SentRetention is how long a SENT event is kept, measured from its
	// sent_at (PARAM:msgx.pipeline.event-retention, seed 000 §8.3). Default
	// SentRetentionDefault (7 days).
	SentRetention time.Duration
	// Every is the pause on Clock between two passes of a started job.
	// Default RetentionEveryDefault (1 min).
	Every time.Duration
	// BatchLimit bounds each delete statement; a pass deletes in batches until
	// a batch comes back short. Default RetentionBatchLimitDefault (1000).
	BatchLimit int
	// Clock is the only source of time. Default relayclock.System{}.
	Clock relaytype.Clock
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer, when set, receives relay_outbox_retention_deleted_total{target}.
	// Default nil: no metrics.
	Registerer prometheus.Registerer
}

func (c RetentionConfig) withDefaults() RetentionConfig {
	c.Targets = slices.Clone(c.Targets)
	c.SentRetention = cmp.Or(c.SentRetention, SentRetentionDefault)
	c.Every = cmp.Or(c.Every, RetentionEveryDefault)
	c.BatchLimit = cmp.Or(c.BatchLimit, RetentionBatchLimitDefault)
	if c.Clock == nil {
		c.Clock = relayclock.System{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c *RetentionConfig) validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("relay: invalid RetentionConfig.%s: %s", field, fmt.Sprintf(format, args...))
	}
	switch {
	case len(c.Targets) == 0:
		return bad("Targets", "required")
	case slices.Contains(c.Targets, ""):
		return bad("Targets", "an empty target")
	case c.SentRetention < 0:
		return bad("SentRetention", "%s < 0", c.SentRetention)
	case c.Every < 0:
		return bad("Every", "%s < 0", c.Every)
	case c.BatchLimit < 1:
		return bad("BatchLimit", "%d < 1", c.BatchLimit)
	}
	return nil
}

// Retention is the outbox's maintenance job (seed 000 §8.3, §9.3): on its own
// goroutine, every Every, it deletes the SENT events of its Targets whose
// sent_at is older than SentRetention, in bounded batches. SENT is the
// terminal evidence; PENDING rows are never deleted, and DEAD rows are kept as
// the DLQ until an operator handles them. It takes no pipeline lock and never
// touches the FIFO, so it does not starve due messages. Latest-state rows
// (UpsertLatestTx) are not deleted: one row per key holds the version that
// keeps writes only forward. Run it with Start/Stop, or pass by pass with
// Work. Safe for concurrent use; passes never overlap.
type Retention struct {
	d       relaydriver.Driver
	cfg     RetentionConfig
	log     *slog.Logger
	deleted *prometheus.CounterVec // nil without a Registerer

	workMu sync.Mutex // serialises passes
	lc     *service.Lifecycle
}

// NewRetention validates cfg (naming the bad field) and returns a retention
// job on store d. It does no I/O.
func NewRetention(d relaydriver.Driver, cfg RetentionConfig) (*Retention, error) {
	if d == nil {
		return nil, errors.New("relay: NewRetention: nil driver")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Retention{d: d, cfg: cfg, log: cfg.Logger, lc: service.NewLifecycle("retention")}
	if cfg.Registerer != nil {
		c, err := metric.Register(cfg.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_outbox_retention_deleted_total",
			Help: "SENT outbox events deleted by the retention job after their retention.",
		}, []string{"target"}))
		if err != nil {
			return nil, err
		}
		r.deleted = c
		for _, t := range cfg.Targets {
			c.WithLabelValues(t) // export zeros so rates work from the start
		}
	}
	return r, nil
}

// Start checks that the store's engine schema is current (an old schema is
// refused with relaytype.ErrSchemaOutdated) and starts the job's goroutine: a
// pass at once, then one every Every, until Stop. A job starts at most once.
func (r *Retention) Start(ctx context.Context) error {
	err := r.lc.Start(ctx, r.d, func(ctx context.Context, stop <-chan struct{}) {
		if _, err := r.work(ctx, stop); err != nil && ctx.Err() == nil {
			r.log.ErrorContext(ctx, "relay: outbox retention pass failed", "error", err)
		}
	}, func() <-chan time.Time { return r.cfg.Clock.After(r.cfg.Every) })
	if err != nil {
		return err
	}
	r.log.InfoContext(ctx, "relay: outbox retention started", "targets", r.cfg.Targets,
		"sent_retention", r.cfg.SentRetention, "every", r.cfg.Every)
	return nil
}

// Stop asks the job to take no more batches and waits for the batch in
// flight. When ctx ends first it cancels the pass and returns ctx.Err(). Stop
// on a job never started returns nil; calling it again is harmless.
func (r *Retention) Stop(ctx context.Context) error { return r.lc.Stop(ctx) }

// Work runs one pass and returns how many events it deleted: for each target,
// the cutoff is Clock.Now() − SentRetention and SENT events with sent_at
// before it are deleted in batches of BatchLimit until a batch comes back
// short. A store error ends the pass (the rows not yet deleted go next pass).
func (r *Retention) Work(ctx context.Context) (int, error) {
	return r.work(ctx, nil)
}

func (r *Retention) work(ctx context.Context, stop <-chan struct{}) (int, error) {
	r.workMu.Lock()
	defer r.workMu.Unlock()
	cutoff := r.cfg.Clock.Now().Add(-r.cfg.SentRetention)
	ex := r.d.GetExecutor()
	total := 0
	for _, target := range r.cfg.Targets {
		for ctx.Err() == nil && !service.Stopping(stop) {
			n, err := ex.OutboxDeleteSent(ctx, target, cutoff, r.cfg.BatchLimit)
			if err != nil {
				return total, fmt.Errorf("relay: outbox retention of %q: %w", target, err)
			}
			total += n
			if r.deleted != nil && n > 0 {
				r.deleted.WithLabelValues(target).Add(float64(n))
			}
			if n > 0 {
				r.log.DebugContext(ctx, "relay: outbox retention deleted sent events", "target", target,
					"deleted", n, "sent_before", cutoff)
			}
			if n < r.cfg.BatchLimit {
				break
			}
		}
	}
	return total, ctx.Err()
}
