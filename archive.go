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

// Defaults of ArchiverConfig. A zero field takes its default.
const (
	// ArchiveAfterDefault is how long a settled terminal row stays in the
	// main table, measured from its updated_at, before it is archived: 7 days.
	ArchiveAfterDefault = maintenance.ArchiveAfterDefault
	// ArchiveEveryDefault is the pause between two archival passes: 1 min.
	ArchiveEveryDefault = maintenance.ArchiveEveryDefault
	// ArchiveLimitDefault is how many rows one archival transaction moves: 1000.
	ArchiveLimitDefault = maintenance.ArchiveLimitDefault
)

// ArchiverConfig configures an Archiver. Queue is required; every other
// zero field takes the default named in its comment.
type ArchiverConfig struct {
	// Queue is the queue whose terminal rows are archived. Required.
	Queue string
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
	// Registerer, when set, receives relay_archived_total{queue}. Default
	// nil: no metrics.
	Registerer prometheus.Registerer
}

// Archiver is the archival job of terminal processing rows (seed 000 §9.3
// "处理终态归档", PROC_STATE → PROC_STATE_HST): on its own goroutine, every
// Every, it moves the queue's terminal rows (SUCCEEDED, SKIPPED, DEAD)
// whose acknowledgement is settled and whose updated_at is older than After
// into relay_message_history, leaving an ARCHIVED shadow row with the id and
// identity so duplicates are still recognised (relaydriver.ArchiveExecutor
// has the exact predicate). A row with an abandoned, unreconciled
// acknowledgement is never archived. Each batch is one store transaction
// that re-checks every row's state before shadowing it, so a concurrent
// replay wins. It never takes the queue lock and never touches the FIFO
// pump, so it does not starve due messages. The history needs a retention
// job of its own (G-HST-RETENTION). Run it with Start/Stop, or pass by pass
// with Work. Safe for concurrent use; passes never overlap.
type Archiver struct {
	a *maintenance.Archiver
}

// NewArchiver validates cfg (naming the bad field) and returns an archival
// job on store d. It does no I/O.
func NewArchiver(d relaydriver.Driver, cfg ArchiverConfig) (*Archiver, error) {
	a, err := maintenance.NewArchiver(d, maintenance.ArchiverConfig{
		Queue: cfg.Queue, After: cfg.After, Every: cfg.Every, Limit: cfg.Limit,
		Common: service.Common{Clock: cfg.Clock, Logger: cfg.Logger, Registerer: cfg.Registerer},
	})
	if err != nil {
		return nil, err
	}
	return &Archiver{a: a}, nil
}

// Start checks that the store's engine schema is current (an old schema is
// refused with relaytype.ErrSchemaOutdated) and starts the job's goroutine: a
// pass at once, then one every Every, until Stop. A job starts at most once.
func (a *Archiver) Start(ctx context.Context) error { return a.a.Start(ctx) }

// Stop asks the job to take no more batches and waits for the batch in
// flight. When ctx ends first it cancels the pass and returns ctx.Err(). Stop
// on a job never started returns nil; calling it again is harmless.
func (a *Archiver) Stop(ctx context.Context) error { return a.a.Stop(ctx) }

// Work runs one pass and returns how many rows it archived: the threshold is
// Clock.Now() − After, and batches of Limit rows are archived, each in one
// transaction, until a batch comes back short. A store error ends the pass
// (the rows not yet archived go next pass).
func (a *Archiver) Work(ctx context.Context) (int, error) { return a.a.Work(ctx) }

// MaintenanceStats is what a maintenance job (Archiver, Retention) has done
// since it was created, in this process: passes run and failed, rows settled
// (archived or deleted), and the last pass's time, count and error. It is
// kept in memory and read without I/O.
type MaintenanceStats = service.PassStats

// Stats returns the job's progress so far (see MaintenanceStats).
func (a *Archiver) Stats() MaintenanceStats { return a.a.Stats() }
