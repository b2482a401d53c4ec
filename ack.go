package relay

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay/internal/ack"
	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaysource"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of AckConfig. A zero field takes its default; R has none.
const (
	// AckMaxAttemptsAlertDefault is the attempt count at which an
	// acknowledgement's transient failures raise an alert (never an abandon): 10.
	AckMaxAttemptsAlertDefault = ack.MaxAttemptsAlertDefault
	// AckBatchSizeDefault is how many owed acknowledgements one round scans: 100.
	AckBatchSizeDefault = ack.BatchSizeDefault
)

// AckBackoffDefault is the default retry schedule of transient
// acknowledgement failures; the last level repeats.
var AckBackoffDefault = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}

// AckConfig configures an AckWriter. Queue, Gate and R are required; every
// other zero field takes the default named in its comment.
type AckConfig struct {
	// Queue whose terminal messages are acknowledged. Required.
	Queue string
	// Gate is the queue engine's Engine.Gate(): every acknowledgement batch
	// and every Reopen runs inside it, so replay and acknowledgement never
	// interleave (seed 000 §5.3, §9.1). Required.
	Gate *LifecycleGate
	// R is the forced-write window and the transient deadline (seed 000 §6.3):
	// a message enqueued more than R ago is tried every round whatever its
	// backoff, and a transient failure at or after EnqueuedAt+R abandons it
	// (TRANSIENT_DEADLINE). It is the source owner's number, so there is no
	// default; it must be positive. Measured from the local EnqueuedAt, never
	// the source's ReceivedAt (§6.1).
	R time.Duration
	// Backoff is the retry schedule of transient failures by attempt: after the
	// n-th failure the row waits Backoff[n-1]; the last level repeats. Every
	// level must be positive. Default AckBackoffDefault (1s, 5s, 30s, 2m, 10m).
	Backoff []time.Duration
	// MaxAttemptsAlert (PARAM backfill-max-attempts) only alerts: when a row's
	// transient failures reach it, a WARN is logged and
	// relay_ack_attempts_alerts_total counts it. It never abandons: abandonment
	// is by time (R), not by count (seed 000 §6.3). Default
	// AckMaxAttemptsAlertDefault (10).
	MaxAttemptsAlert int
	// BatchSize is how many owed acknowledgements one round scans. Default
	// AckBatchSizeDefault (100).
	BatchSize int
	// PollInterval is how long a started writer waits on Clock between idle
	// rounds (Notify wakes it at once). Default PollIntervalDefault (1s).
	PollInterval time.Duration
	// MarkFor returns the mark written for a terminal state. Default: the
	// state's name ("SUCCEEDED", "SKIPPED", "DEAD"). It must not return "".
	MarkFor func(relaytype.State) string
	// Clock is the only source of time. Default relayclock.System{}.
	Clock relaytype.Clock
	// Logger receives structured logs (never payloads). Default slog.Default().
	Logger *slog.Logger
	// Registerer, when set, receives relay_ack_total{queue,outcome},
	// relay_ack_abandoned_total{queue,reason} and
	// relay_ack_attempts_alerts_total{queue}. Default nil: no metrics.
	Registerer prometheus.Registerer
}

// AckWriter writes acknowledgements back to the source (seed 000 §6): for each
// terminal message that still owes one, it sets the source row's mark through
// a relaysource.Acknowledger and records the outcome in the store.
//
//   - written or already marked: acknowledged (AckAt set), never retried;
//   - missing row: abandoned at once (MISSING_ROW), logged at ERROR;
//   - transient error: retried with Backoff while Now − EnqueuedAt < R, then
//     abandoned (TRANSIENT_DEADLINE), logged at ERROR. Never abandoned by
//     attempt count; MaxAttemptsAlert only alerts.
//
// Abandoned is NOT acknowledged: an abandoned row keeps AckAt NULL, so it is
// no ground for the source owner to purge the row; it waits for a human, who
// reconciles it and either accepts it or calls Reopen.
//
// Every batch (scan, source writes, bookkeeping) runs inside the queue's
// LifecycleGate, as does Reopen, so a replay never interleaves with it. Run it
// with Start/Stop — its own goroutine, so it never takes time from processing
// — or round by round with Work. Safe for concurrent use; rounds never overlap.
type AckWriter struct {
	w *ack.Writer
}

// NewAckWriter validates cfg (naming the bad field) and returns a writer of
// cfg.Queue on store d acknowledging into src. It does no I/O.
func NewAckWriter(d relaydriver.Driver, src relaysource.Acknowledger, cfg AckConfig) (*AckWriter, error) {
	backoff := cfg.Backoff
	if backoff == nil {
		backoff = AckBackoffDefault
	}
	var gate ack.Gate
	if cfg.Gate != nil {
		gate = cfg.Gate
	}
	w, err := ack.New(d, src, ack.Config{
		Queue: cfg.Queue, Gate: gate, R: cfg.R, Backoff: backoff, MaxAttemptsAlert: cfg.MaxAttemptsAlert,
		BatchSize: cfg.BatchSize, PollInterval: cfg.PollInterval, MarkFor: cfg.MarkFor,
		Common: service.Common{Clock: cfg.Clock, Logger: cfg.Logger, Registerer: cfg.Registerer},
	})
	if err != nil {
		return nil, err
	}
	return &AckWriter{w: w}, nil
}

// Queue returns the queue the writer acknowledges.
func (w *AckWriter) Queue() string { return w.w.Queue() }

// Stats counts the queue's terminal messages by acknowledgement state —
// owing, abandoned (not acknowledged; Reopen makes them owing again) and
// acknowledged — in one statement over the queue's terminal rows. It works
// whether or not the writer runs; ctx governs the read.
func (w *AckWriter) Stats(ctx context.Context) (*relaydriver.AckStats, error) { return w.w.Stats(ctx) }

// Start checks that the store's engine schema is current (an old schema is
// refused with relaytype.ErrSchemaOutdated) and starts the acknowledgement
// loop in its own goroutine, which runs until Stop. A writer starts at most
// once.
func (w *AckWriter) Start(ctx context.Context) error { return w.w.Start(ctx) }

// Stop asks the loop to take no more batches and waits for the batch in
// flight. When ctx ends first it cancels the batch and returns ctx.Err(); a
// mark written but not yet recorded is found again later as already marked.
// Stop on a writer never started returns nil; calling it again is harmless.
func (w *AckWriter) Stop(ctx context.Context) error { return w.w.Stop(ctx) }

// Notify wakes an idle started writer so messages that just became terminal
// are acknowledged without waiting for PollInterval. It never blocks.
func (w *AckWriter) Notify() { w.w.Notify() }

// Work runs acknowledgement rounds until nothing is due now and returns how
// many rows reached an outcome (written, already marked, missing row or
// transient). Each round scans one batch (AckScan: seed 000 §6.1 predicate and
// fair order), writes its marks — in one source transaction when the source is
// a relaysource.BatchAcknowledger (a failed batch is a transient failure of
// each of its rows), else row by row — and records the outcomes, all inside
// the LifecycleGate; the rows acknowledged in a batch are recorded with
// one AckDone. A store error ends the call; rows not yet recorded are tried
// again later (the source write is idempotent). Tests call Work directly and
// move a relayclock.Fake between calls.
func (w *AckWriter) Work(ctx context.Context) (int, error) { return w.w.Work(ctx) }

// AckReopenParams selects abandoned acknowledgements to reopen: IDs, or with
// IDs empty every abandoned row of the queue with Reason.
type AckReopenParams struct {
	// IDs, when set, reopens these messages (whatever their reason).
	IDs []int64
	// Reason, with IDs empty, reopens every row abandoned for it
	// (relaydriver.AckReasonMissingRow or AckReasonTransientDeadline).
	Reason string
}

// Reopen puts abandoned acknowledgements back into the scan at once (seed 000
// §6.3: the human recovery path), inside the LifecycleGate, and returns how
// many it reopened. Their attempt counts are kept. A reopened row older than R
// whose source still fails transiently is abandoned again by the next round:
// reopen after fixing the cause. It wakes a started writer.
func (w *AckWriter) Reopen(ctx context.Context, params *AckReopenParams) (int, error) {
	if params == nil {
		return w.w.Reopen(ctx, nil, "")
	}
	return w.w.Reopen(ctx, params.IDs, params.Reason)
}
