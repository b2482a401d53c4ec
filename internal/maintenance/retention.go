package maintenance

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relaydriver"
)

// Defaults of RetentionConfig (relay.SentRetentionDefault and the others).
const (
	SentRetentionDefault       = 7 * 24 * time.Hour
	RetentionEveryDefault      = time.Minute
	RetentionBatchLimitDefault = 1000
)

// RetentionConfig is relay.RetentionConfig; see its fields' documentation.
type RetentionConfig struct {
	Targets       []string
	SentRetention time.Duration
	Every         time.Duration
	BatchLimit    int
	service.Common
}

func (c RetentionConfig) withDefaults() RetentionConfig {
	c.Targets = slices.Clone(c.Targets)
	c.SentRetention = cmp.Or(c.SentRetention, SentRetentionDefault)
	c.Every = cmp.Or(c.Every, RetentionEveryDefault)
	c.BatchLimit = cmp.Or(c.BatchLimit, RetentionBatchLimitDefault)
	c.Common = c.Common.Defaults()
	return c
}

func (c *RetentionConfig) validate() error {
	bad := service.Invalid("RetentionConfig")
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

// Retention is relay.Retention's implementation: passes that delete each
// target's SENT events older than SentRetention in batches of BatchLimit.
type Retention struct {
	*service.Passes // Start, Stop, Work
	d               relaydriver.Driver
	cfg             RetentionConfig
	log             *slog.Logger
	deleted         *prometheus.CounterVec // nil without a Registerer
}

// NewRetention validates cfg (naming the bad field) and returns a retention
// job on store d. It does no I/O.
func NewRetention(d relaydriver.Driver, cfg RetentionConfig) (*Retention, error) {
	if err := service.NotNil("NewRetention", service.Dep{Name: "driver", Value: d}); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Retention{d: d, cfg: cfg, log: cfg.Logger}
	r.Passes = service.NewPasses(service.PassesConfig{
		What: "retention", Driver: d, Logger: cfg.Logger, Failed: "relay: outbox retention pass failed",
		Started:      "relay: outbox retention started",
		StartedAttrs: []any{"targets", cfg.Targets, "sent_retention", cfg.SentRetention, "every", cfg.Every},
		Idle:         func() <-chan time.Time { return cfg.Clock.After(cfg.Every) },
		Clock:        cfg.Clock,
	}, r.pass)
	if cfg.Registerer != nil {
		m := service.NewMetrics(cfg.Registerer)
		c := m.Counter("relay_outbox_retention_deleted_total",
			"SENT outbox events deleted by the retention job after their retention.", "target")
		if err := m.Err(); err != nil {
			return nil, err
		}
		r.deleted = c
		for _, t := range cfg.Targets {
			c.WithLabelValues(t) // export zeros so rates work from the start
		}
	}
	return r, nil
}

// pass deletes, per target, batches of BatchLimit SENT events older than
// Clock.Now() − SentRetention until a batch comes back short.
func (r *Retention) pass(ctx context.Context, stop <-chan struct{}) (int, error) {
	cutoff := r.cfg.Clock.Now().Add(-r.cfg.SentRetention)
	ex := r.d.GetExecutor()
	total := 0
	for _, target := range r.cfg.Targets {
		n, err := service.Drain(ctx, stop, r.cfg.BatchLimit, func() (int, error) {
			n, err := ex.OutboxDeleteSent(ctx, target, cutoff, r.cfg.BatchLimit)
			if err != nil {
				return 0, fmt.Errorf("relay: outbox retention of %q: %w", target, err)
			}
			if r.deleted != nil && n > 0 {
				r.deleted.WithLabelValues(target).Add(float64(n))
			}
			if n > 0 {
				r.log.DebugContext(ctx, "relay: outbox retention deleted sent events", "target", target,
					"deleted", n, "sent_before", cutoff)
			}
			return n, nil
		})
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, ctx.Err()
}
