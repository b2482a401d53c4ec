// Package maintenance holds the engine's maintenance jobs: the Archiver of
// terminal processing rows and the Retention of sent outbox events. The
// public API is relay.Archiver and relay.Retention, thin wrappers of these;
// their documentation is the contract.
package maintenance

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relaydriver"
)

// Defaults of ArchiverConfig (relay.ArchiveAfterDefault and the others).
const (
	ArchiveAfterDefault = 7 * 24 * time.Hour
	ArchiveEveryDefault = time.Minute
	ArchiveLimitDefault = 1000
)

// ArchiverConfig is relay.ArchiverConfig; see its fields' documentation.
type ArchiverConfig struct {
	Queue string
	After time.Duration
	Every time.Duration
	Limit int
	service.Common
}

func (c ArchiverConfig) withDefaults() ArchiverConfig {
	c.After = cmp.Or(c.After, ArchiveAfterDefault)
	c.Every = cmp.Or(c.Every, ArchiveEveryDefault)
	c.Limit = cmp.Or(c.Limit, ArchiveLimitDefault)
	c.Common = c.Common.Defaults()
	return c
}

func (c *ArchiverConfig) validate() error {
	bad := service.Invalid("ArchiverConfig")
	switch {
	case c.Queue == "":
		return bad("Queue", "required")
	case c.After < 0:
		return bad("After", "%s < 0", c.After)
	case c.Every < 0:
		return bad("Every", "%s < 0", c.Every)
	case c.Limit < 1:
		return bad("Limit", "%d < 1", c.Limit)
	}
	return nil
}

// Archiver is relay.Archiver's implementation: passes that move a queue's
// settled terminal rows older than After into the history table in batches
// of Limit, each one transaction (relaydriver.ArchiveExecutor).
type Archiver struct {
	*service.Passes // Start, Stop, Work
	d               relaydriver.Driver
	cfg             ArchiverConfig
	log             *slog.Logger
	archived        prometheus.Counter // nil without a Registerer
}

// NewArchiver validates cfg (naming the bad field) and returns an archival
// job on store d. It does no I/O.
func NewArchiver(d relaydriver.Driver, cfg ArchiverConfig) (*Archiver, error) {
	if err := service.NotNil("NewArchiver", service.Dep{Name: "driver", Value: d}); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a := &Archiver{d: d, cfg: cfg, log: cfg.Logger}
	a.Passes = service.NewPasses(service.PassesConfig{
		What: fmt.Sprintf("archiver of %q", cfg.Queue), Driver: d, Logger: cfg.Logger,
		Failed: "relay: archival pass failed", Attrs: []any{"queue", cfg.Queue},
		Started: "relay: archiver started", StartedAttrs: []any{"queue", cfg.Queue, "after", cfg.After, "every", cfg.Every},
		Idle: func() <-chan time.Time { return cfg.Clock.After(cfg.Every) }, Clock: cfg.Clock,
	}, a.pass)
	if cfg.Registerer != nil {
		m := service.NewMetrics(cfg.Registerer)
		c := m.Counter("relay_archived_total",
			"Terminal messages moved to relay_message_history by the archival job.", "queue")
		if err := m.Err(); err != nil {
			return nil, err
		}
		a.archived = c.WithLabelValues(cfg.Queue) // exported at zero so rates work from the start
	}
	return a, nil
}

// pass archives batches of Limit rows older than Clock.Now() − After until a
// batch comes back short.
func (a *Archiver) pass(ctx context.Context, stop <-chan struct{}) (int, error) {
	now := a.cfg.Clock.Now()
	before := now.Add(-a.cfg.After)
	ex := a.d.GetExecutor()
	total, err := service.Drain(ctx, stop, a.cfg.Limit, func() (int, error) {
		n, err := ex.MessageArchive(ctx, &relaydriver.MessageArchiveParams{
			Queue: a.cfg.Queue, TerminalBefore: before, Limit: a.cfg.Limit, Now: now,
		})
		if err != nil {
			return 0, fmt.Errorf("relay: archive %q: %w", a.cfg.Queue, err)
		}
		if a.archived != nil && n > 0 {
			a.archived.Add(float64(n))
		}
		if n > 0 {
			a.log.DebugContext(ctx, "relay: archived terminal messages", "queue", a.cfg.Queue,
				"archived", n, "terminal_before", before)
		}
		return n, nil
	})
	if err != nil {
		return total, err
	}
	return total, ctx.Err()
}
