package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay/internal/metric"
	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of ArchiverConfig. A zero field takes its default.
const (
	// ArchiveAfterDefault is how long a settled terminal row stays in the
	// main table, measured from its updated_at, before it is archived.
	ArchiveAfterDefault = 7 * 24 * time.Hour
	// ArchiveEveryDefault is the pause between two archival passes.
	ArchiveEveryDefault = time.Minute
	// ArchiveLimitDefault is how many rows one archival transaction moves.
	ArchiveLimitDefault = 1000
)

// ArchiverConfig configures an Archiver. Pipeline is required; every other
// zero field takes the default named in its comment.
type ArchiverConfig struct {
	// Pipeline is the pipeline whose terminal rows are archived. Required.
	Pipeline string
	// After is the archival threshold, counted from the terminal state and
	// its acknowledgement settlement (updated_at), not from enqueueing (seed
	// 000 §9.3 ordering rule 4). Default ArchiveAfterDefault (7 days).
	After time.Duration
	// Every is the pause on Clock between two passes of a started job.
	// Default ArchiveEveryDefault (1 min).
	Every time.Duration
	// Limit bounds each archival transaction; a pass archives in batches
	// until a batch comes back short. Default ArchiveLimitDefault (1000).
	Limit int
	// Clock is the only source of time. Default relayclock.System{}.
	Clock relaytype.Clock
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer, when set, receives relay_archived_total{pipeline}. Default
	// nil: no metrics.
	Registerer prometheus.Registerer
}

func (c ArchiverConfig) withDefaults() ArchiverConfig {
	c.After = cmp.Or(c.After, ArchiveAfterDefault)
	c.Every = cmp.Or(c.Every, ArchiveEveryDefault)
	c.Limit = cmp.Or(c.Limit, ArchiveLimitDefault)
	if c.Clock == nil {
		c.Clock = relayclock.System{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c *ArchiverConfig) validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("relay: invalid ArchiverConfig.%s: %s", field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Pipeline == "":
		return bad("Pipeline", "required")
	case c.After < 0:
		return bad("After", "%s < 0", c.After)
	case c.Every < 0:
		return bad("Every", "%s < 0", c.Every)
	case c.Limit < 1:
		return bad("Limit", "%d < 1", c.Limit)
	}
	return nil
}

// Archiver is the archival job of terminal processing rows (seed 000 §9.3
// "处理终态归档", PROC_STATE → PROC_STATE_HST): on its own goroutine, every
// Every, it moves the pipeline's terminal rows (SUCCEEDED, SKIPPED, DEAD)
// whose acknowledgement is settled and whose updated_at is older than After
// into relay_message_history, leaving an ARCHIVED shadow row with the id and
// identity so duplicates are still recognised (relaydriver.ArchiveExecutor
// has the exact predicate). A row with an abandoned, unreconciled
// acknowledgement is never archived. Each batch is one store transaction
// that re-checks every row's state before shadowing it, so a concurrent
// replay wins. It never takes the pipeline lock and never touches the FIFO
// pump, so it does not starve due messages. The history needs a retention
// job of its own (G-HST-RETENTION). Run it with Start/Stop, or pass by pass
// with Work. Safe for concurrent use; passes never overlap.
type Archiver struct {
	d        relaydriver.Driver
	cfg      ArchiverConfig
	log      *slog.Logger
	archived prometheus.Counter // nil without a Registerer

	workMu sync.Mutex // serialises passes
	lc     *service.Lifecycle
}

// NewArchiver validates cfg (naming the bad field) and returns an archival
// job on store d. It does no I/O.
func NewArchiver(d relaydriver.Driver, cfg ArchiverConfig) (*Archiver, error) {
	if d == nil {
		return nil, errors.New("relay: NewArchiver: nil driver")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a := &Archiver{d: d, cfg: cfg, log: cfg.Logger, lc: service.NewLifecycle(fmt.Sprintf("archiver of %q", cfg.Pipeline))}
	if cfg.Registerer != nil {
		c, err := metric.Register(cfg.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "relay_archived_total",
			Help: "Terminal messages moved to relay_message_history by the archival job.",
		}, []string{"pipeline"}))
		if err != nil {
			return nil, err
		}
		a.archived = c.WithLabelValues(cfg.Pipeline) // exported at zero so rates work from the start
	}
	return a, nil
}

// Start checks that the store's engine schema is current (an old schema is
// refused with relaytype.ErrSchemaOutdated) and starts the job's goroutine: a
// pass at once, then one every Every, until Stop. A job starts at most once.
func (a *Archiver) Start(ctx context.Context) error {
	err := a.lc.Start(ctx, a.d, func(ctx context.Context, stop <-chan struct{}) {
		if _, err := a.work(ctx, stop); err != nil && ctx.Err() == nil {
			a.log.ErrorContext(ctx, "relay: archival pass failed", "pipeline", a.cfg.Pipeline, "error", err)
		}
	}, func() <-chan time.Time { return a.cfg.Clock.After(a.cfg.Every) })
	if err != nil {
		return err
	}
	a.log.InfoContext(ctx, "relay: archiver started", "pipeline", a.cfg.Pipeline,
		"after", a.cfg.After, "every", a.cfg.Every)
	return nil
}

// Stop asks the job to take no more batches and waits for the batch in
// flight. When ctx ends first it cancels the pass and returns ctx.Err(). Stop
// on a job never started returns nil; calling it again is harmless.
func (a *Archiver) Stop(ctx context.Context) error { return a.lc.Stop(ctx) }

// Work runs one pass and returns how many rows it archived: the threshold is
// Clock.Now() − After, and batches of Limit rows are archived, each in one
// transaction, until a batch comes back short. A store error ends the pass
// (the rows not yet archived go next pass).
func (a *Archiver) Work(ctx context.Context) (int, error) {
	return a.work(ctx, nil)
}

func (a *Archiver) work(ctx context.Context, stop <-chan struct{}) (int, error) {
	a.workMu.Lock()
	defer a.workMu.Unlock()
	now := a.cfg.Clock.Now()
	before := now.Add(-a.cfg.After)
	ex := a.d.GetExecutor()
	total := 0
	for ctx.Err() == nil && !service.Stopping(stop) {
		n, err := ex.MessageArchive(ctx, &relaydriver.MessageArchiveParams{
			Pipeline: a.cfg.Pipeline, TerminalBefore: before, Limit: a.cfg.Limit, Now: now,
		})
		if err != nil {
			return total, fmt.Errorf("relay: archive %q: %w", a.cfg.Pipeline, err)
		}
		total += n
		if a.archived != nil && n > 0 {
			a.archived.Add(float64(n))
		}
		if n > 0 {
			a.log.DebugContext(ctx, "relay: archived terminal messages", "pipeline", a.cfg.Pipeline,
				"archived", n, "terminal_before", before)
		}
		if n < a.cfg.Limit {
			break
		}
	}
	return total, ctx.Err()
}
