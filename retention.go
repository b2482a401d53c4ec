package relay

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay/internal/maintenance"
	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of RetentionConfig. A zero field takes its default.
const (
	// SentRetentionDefault is how long SENT outbox events are kept after
	// sent_at: 7 days.
	SentRetentionDefault = maintenance.SentRetentionDefault
	// RetentionEveryDefault is the pause between two retention passes: 1 min.
	RetentionEveryDefault = maintenance.RetentionEveryDefault
	// RetentionBatchLimitDefault is how many rows one delete statement
	// removes: 1000.
	RetentionBatchLimitDefault = maintenance.RetentionBatchLimitDefault
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

// Retention is the outbox's maintenance job (seed 000 §8.3, §9.3): on its own
// goroutine, every Every, it deletes the SENT events of its Targets whose
// sent_at is older than SentRetention, in bounded batches. SENT is the
// terminal evidence; PENDING rows are never deleted, and DEAD rows are kept as
// the DLQ until an operator handles them. It takes no queue lock and never
// touches the FIFO, so it does not starve due messages. Latest-state rows
// (UpsertLatestTx) are not deleted: one row per key holds the version that
// keeps writes only forward. Run it with Start/Stop, or pass by pass with
// Work. Safe for concurrent use; passes never overlap.
type Retention struct {
	r *maintenance.Retention
}

// NewRetention validates cfg (naming the bad field) and returns a retention
// job on store d. It does no I/O.
func NewRetention(d relaydriver.Driver, cfg RetentionConfig) (*Retention, error) {
	r, err := maintenance.NewRetention(d, maintenance.RetentionConfig{
		Targets: cfg.Targets, SentRetention: cfg.SentRetention, Every: cfg.Every, BatchLimit: cfg.BatchLimit,
		Common: service.Common{Clock: cfg.Clock, Logger: cfg.Logger, Registerer: cfg.Registerer},
	})
	if err != nil {
		return nil, err
	}
	return &Retention{r: r}, nil
}

// Start checks that the store's engine schema is current (an old schema is
// refused with relaytype.ErrSchemaOutdated) and starts the job's goroutine: a
// pass at once, then one every Every, until Stop. A job starts at most once.
func (r *Retention) Start(ctx context.Context) error { return r.r.Start(ctx) }

// Stop asks the job to take no more batches and waits for the batch in
// flight. When ctx ends first it cancels the pass and returns ctx.Err(). Stop
// on a job never started returns nil; calling it again is harmless.
func (r *Retention) Stop(ctx context.Context) error { return r.r.Stop(ctx) }

// Work runs one pass and returns how many events it deleted: for each target,
// the cutoff is Clock.Now() − SentRetention and SENT events with sent_at
// before it are deleted in batches of BatchLimit until a batch comes back
// short. A store error ends the pass (the rows not yet deleted go next pass).
func (r *Retention) Work(ctx context.Context) (int, error) { return r.r.Work(ctx) }

// Stats returns the job's progress so far: passes, events deleted, and the
// last pass's time, count and error (see MaintenanceStats).
func (r *Retention) Stats() MaintenanceStats { return r.r.Stats() }
