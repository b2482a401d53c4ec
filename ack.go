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

	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/internal/metric"
	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaysource"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of AckConfig. A zero field takes its default; R has none.
const (
	// AckMaxAttemptsAlertDefault is the attempt count at which an
	// acknowledgement's transient failures raise an alert (never an abandon).
	AckMaxAttemptsAlertDefault = 10
	// AckBatchSizeDefault is how many owed acknowledgements one round scans.
	AckBatchSizeDefault = 100
)

// AckBackoffDefault is the default retry schedule of transient
// acknowledgement failures; the last level repeats.
var AckBackoffDefault = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}

// AckConfig configures an AckWriter. Pipeline, Gate and R are required; every
// other zero field takes the default named in its comment.
type AckConfig struct {
	// Pipeline whose terminal messages are acknowledged. Required.
	Pipeline string
	// Gate is the pipeline engine's Engine.Gate(): every acknowledgement batch
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
	// Registerer, when set, receives relay_ack_total{pipeline,outcome},
	// relay_ack_abandoned_total{pipeline,reason} and
	// relay_ack_attempts_alerts_total{pipeline}. Default nil: no metrics.
	Registerer prometheus.Registerer
}

func (c AckConfig) withDefaults() AckConfig {
	if c.Backoff == nil {
		c.Backoff = slices.Clone(AckBackoffDefault)
	} else {
		c.Backoff = slices.Clone(c.Backoff)
	}
	c.MaxAttemptsAlert = cmp.Or(c.MaxAttemptsAlert, AckMaxAttemptsAlertDefault)
	c.BatchSize = cmp.Or(c.BatchSize, AckBatchSizeDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	if c.MarkFor == nil {
		c.MarkFor = func(s relaytype.State) string { return string(s) }
	}
	if c.Clock == nil {
		c.Clock = relayclock.System{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c *AckConfig) validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("relay: invalid AckConfig.%s: %s", field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Pipeline == "":
		return bad("Pipeline", "required")
	case c.Gate == nil:
		return bad("Gate", "required (the engine's Gate(), so replay and acknowledgement never interleave)")
	case c.R <= 0:
		return bad("R", "%s must be positive (the source owner's forced-write window; no default)", c.R)
	case len(c.Backoff) == 0:
		return bad("Backoff", "needs at least one level")
	case c.MaxAttemptsAlert < 1:
		return bad("MaxAttemptsAlert", "%d < 1", c.MaxAttemptsAlert)
	case c.BatchSize < 1:
		return bad("BatchSize", "%d < 1", c.BatchSize)
	case c.PollInterval <= 0:
		return bad("PollInterval", "%s <= 0", c.PollInterval)
	}
	for i, d := range c.Backoff {
		if d <= 0 {
			return bad("Backoff", "level %d is not positive (%s)", i, d)
		}
	}
	return nil
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
// Every batch (scan, source writes, bookkeeping) runs inside the pipeline's
// LifecycleGate, as does Reopen, so a replay never interleaves with it. Run it
// with Start/Stop — its own goroutine, so it never takes time from processing
// — or round by round with Work. Safe for concurrent use; rounds never overlap.
type AckWriter struct {
	d       relaydriver.Driver
	src     relaysource.Acknowledger
	cfg     AckConfig
	log     *slog.Logger
	metrics *ackMetrics

	workMu sync.Mutex // serialises rounds
	lc     *service.Lifecycle
}

// NewAckWriter validates cfg (naming the bad field) and returns a writer of
// cfg.Pipeline on store d acknowledging into src. It does no I/O.
func NewAckWriter(d relaydriver.Driver, src relaysource.Acknowledger, cfg AckConfig) (*AckWriter, error) {
	if d == nil {
		return nil, errors.New("relay: NewAckWriter: nil driver")
	}
	if src == nil {
		return nil, errors.New("relay: NewAckWriter: nil source")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &AckWriter{d: d, src: src, cfg: cfg, log: cfg.Logger, lc: service.NewLifecycle(fmt.Sprintf("ack writer of %q", cfg.Pipeline))}
	if cfg.Registerer != nil {
		m, err := newAckMetrics(cfg.Registerer, cfg.Pipeline)
		if err != nil {
			return nil, err
		}
		w.metrics = m
	}
	return w, nil
}

// Pipeline returns the pipeline the writer acknowledges.
func (w *AckWriter) Pipeline() string { return w.cfg.Pipeline }

// Start checks that the store's engine schema is current (an old schema is
// refused with relaytype.ErrSchemaOutdated) and starts the acknowledgement
// loop in its own goroutine, which runs until Stop. A writer starts at most
// once.
func (w *AckWriter) Start(ctx context.Context) error {
	err := w.lc.Start(ctx, w.d, func(ctx context.Context, stop <-chan struct{}) {
		if _, err := w.work(ctx, stop); err != nil && ctx.Err() == nil {
			w.log.ErrorContext(ctx, "relay: ack round failed", "pipeline", w.cfg.Pipeline, "error", err)
		}
	}, func() <-chan time.Time { return w.cfg.Clock.After(w.cfg.PollInterval) })
	if err != nil {
		return err
	}
	w.log.InfoContext(ctx, "relay: ack writer started", "pipeline", w.cfg.Pipeline, "r", w.cfg.R)
	return nil
}

// Stop asks the loop to take no more batches and waits for the batch in
// flight. When ctx ends first it cancels the batch and returns ctx.Err(); a
// mark written but not yet recorded is found again later as already marked.
// Stop on a writer never started returns nil; calling it again is harmless.
func (w *AckWriter) Stop(ctx context.Context) error { return w.lc.Stop(ctx) }

// Notify wakes an idle started writer so messages that just became terminal
// are acknowledged without waiting for PollInterval. It never blocks.
func (w *AckWriter) Notify() { w.lc.Notify() }

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
func (w *AckWriter) Work(ctx context.Context) (int, error) {
	return w.work(ctx, nil)
}

func (w *AckWriter) work(ctx context.Context, stop <-chan struct{}) (int, error) {
	w.workMu.Lock()
	defer w.workMu.Unlock()
	total := 0
	for ctx.Err() == nil && !service.Stopping(stop) {
		n, err := w.round(ctx)
		total += n
		if err != nil {
			return total, err
		}
		if n == 0 {
			break
		}
	}
	return total, nil
}

// round acknowledges one batch inside the gate and returns how many rows
// reached an outcome (0: nothing was due).
func (w *AckWriter) round(ctx context.Context) (int, error) {
	n := 0
	err := w.cfg.Gate.Do(ctx, func(ctx context.Context) error {
		ex := w.d.GetExecutor()
		batch, err := ex.AckScan(ctx, &relaydriver.AckScanParams{
			Pipeline: w.cfg.Pipeline, Now: w.cfg.Clock.Now(), R: w.cfg.R, Limit: w.cfg.BatchSize,
		})
		if err != nil {
			return fmt.Errorf("relay: ack %q: scan: %w", w.cfg.Pipeline, err)
		}
		var acked []int64
		var rowErr error
		observe := w.acknowledge(ctx, batch)
		for i, m := range batch {
			if ctx.Err() != nil {
				break
			}
			outcome, srcErr := observe(i)
			ok, err := w.record(ctx, ex, m, outcome, srcErr)
			if err != nil {
				rowErr = err
				break
			}
			n++
			if ok {
				acked = append(acked, m.ID)
			}
		}
		if len(acked) > 0 {
			if _, err := ex.AckDone(ctx, &relaydriver.AckDoneParams{
				Pipeline: w.cfg.Pipeline, IDs: acked, Now: w.cfg.Clock.Now(),
			}); err != nil {
				return errors.Join(rowErr, fmt.Errorf("relay: ack %q: record %d acknowledgements: %w", w.cfg.Pipeline, len(acked), err))
			}
		}
		return rowErr
	})
	return n, err
}

// acknowledge writes the marks of batch in the source and returns what the
// source observed for batch[i]: one call for the whole batch when the source
// is a relaysource.BatchAcknowledger (its error then stands for every row),
// else one call per row as it is asked for.
func (w *AckWriter) acknowledge(ctx context.Context, batch []*relaytype.Message) func(i int) (relaysource.AckOutcome, error) {
	ba, ok := w.src.(relaysource.BatchAcknowledger)
	if !ok || len(batch) == 0 {
		return func(i int) (relaysource.AckOutcome, error) {
			m := batch[i]
			return w.src.Acknowledge(ctx, m.ID, w.cfg.MarkFor(m.State), w.cfg.Clock.Now())
		}
	}
	now := w.cfg.Clock.Now()
	items := make([]relaysource.AckItem, len(batch))
	for i, m := range batch {
		items[i] = relaysource.AckItem{ID: m.ID, Mark: w.cfg.MarkFor(m.State), At: now}
	}
	out, err := ba.AcknowledgeBatch(ctx, items)
	if err == nil && len(out) != len(batch) {
		err = fmt.Errorf("the source answered %d outcomes for %d rows", len(out), len(batch))
	}
	return func(i int) (relaysource.AckOutcome, error) {
		if err != nil {
			return 0, err
		}
		return out[i], nil
	}
}

// record handles what the source observed for message m — outcome, or the
// failure srcErr — recording a missing row or a transient failure. It reports
// whether m is acknowledged (the caller records it with the batch's AckDone).
// A returned error is a store error.
func (w *AckWriter) record(ctx context.Context, ex relaydriver.Executor, m *relaytype.Message, outcome relaysource.AckOutcome, srcErr error) (bool, error) {
	if srcErr == nil {
		faultpoint.Hit(faultpoint.AckAfterWrite)
		switch outcome {
		case relaysource.AckWritten, relaysource.AckAlreadyMarked:
			w.count(outcome.String())
			return true, nil
		case relaysource.AckMissingRow:
			w.count(outcome.String())
			return false, w.abandon(ctx, ex, m, relaydriver.AckReasonMissingRow, nil)
		default:
			srcErr = fmt.Errorf("unknown outcome %v", outcome)
		}
	}
	if ctx.Err() != nil {
		// Stopping, not a failure of the source: the row is tried again later.
		return false, ctx.Err()
	}
	w.count(ackOutcomeTransient)
	now := w.cfg.Clock.Now()
	if age := now.Sub(m.EnqueuedAt); age >= w.cfg.R {
		return false, w.abandon(ctx, ex, m, relaydriver.AckReasonTransientDeadline, srcErr)
	}
	level := w.cfg.Backoff[min(m.AckAttempts, len(w.cfg.Backoff)-1)]
	next := now.Add(level)
	err := ex.AckRetry(ctx, &relaydriver.AckRetryParams{Pipeline: w.cfg.Pipeline, ID: m.ID, NextAt: next, Now: now})
	if err != nil {
		if errors.Is(err, relaytype.ErrConflict) {
			// No longer owed (reopened or acknowledged meanwhile): nothing to record.
			return false, nil
		}
		return false, fmt.Errorf("relay: ack %q: record transient failure of %d: %w", w.cfg.Pipeline, m.ID, err)
	}
	attempts := m.AckAttempts + 1
	w.log.WarnContext(ctx, "relay: acknowledgement failed; retrying", "pipeline", w.cfg.Pipeline, "id", m.ID,
		"ack_attempts", attempts, "next_at", next, "deadline", m.EnqueuedAt.Add(w.cfg.R), "error", srcErr)
	if attempts == w.cfg.MaxAttemptsAlert {
		if w.metrics != nil {
			w.metrics.alerts.Inc()
		}
		w.log.WarnContext(ctx, "relay: acknowledgement reached max attempts; still retrying until R",
			"pipeline", w.cfg.Pipeline, "id", m.ID, "ack_attempts", attempts,
			"max_attempts_alert", w.cfg.MaxAttemptsAlert, "deadline", m.EnqueuedAt.Add(w.cfg.R), "error", srcErr)
	}
	return false, nil
}

// abandon stops automatic acknowledgement of m with reason and raises the
// alert: an ERROR log and relay_ack_abandoned_total. cause is the last
// transient error, if any.
func (w *AckWriter) abandon(ctx context.Context, ex relaydriver.Executor, m *relaytype.Message, reason string, cause error) error {
	err := ex.AckAbandon(ctx, &relaydriver.AckAbandonParams{
		Pipeline: w.cfg.Pipeline, ID: m.ID, Reason: reason, Now: w.cfg.Clock.Now(),
	})
	if errors.Is(err, relaytype.ErrConflict) {
		return nil // no longer owed: nothing to abandon
	}
	if err != nil {
		return fmt.Errorf("relay: ack %q: abandon %d (%s): %w", w.cfg.Pipeline, m.ID, reason, err)
	}
	if w.metrics != nil {
		w.metrics.abandoned.WithLabelValues(reason).Inc()
	}
	attrs := []any{"pipeline", w.cfg.Pipeline, "id", m.ID, "reason", reason, "ack_attempts", m.AckAttempts,
		"enqueued_at", m.EnqueuedAt}
	if cause != nil {
		attrs = append(attrs, "error", cause)
	}
	w.log.ErrorContext(ctx, "relay: acknowledgement abandoned; not acknowledged, needs reconciliation or reopen", attrs...)
	return nil
}

// AckReopenParams selects abandoned acknowledgements to reopen: IDs, or with
// IDs empty every abandoned row of the pipeline with Reason.
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
	if params == nil || (len(params.IDs) == 0 && params.Reason == "") {
		return 0, fmt.Errorf("relay: reopen acknowledgements of %q: IDs or Reason is required", w.cfg.Pipeline)
	}
	var n int
	err := w.cfg.Gate.Do(ctx, func(ctx context.Context) error {
		var err error
		n, err = w.d.GetExecutor().AckReopen(ctx, &relaydriver.AckReopenParams{
			Pipeline: w.cfg.Pipeline, IDs: slices.Clone(params.IDs), Reason: params.Reason, Now: w.cfg.Clock.Now(),
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("relay: reopen acknowledgements of %q: %w", w.cfg.Pipeline, err)
	}
	w.log.InfoContext(ctx, "relay: acknowledgements reopened", "pipeline", w.cfg.Pipeline, "ids", params.IDs,
		"reason", params.Reason, "reopened", n)
	if n > 0 {
		w.Notify()
	}
	return n, nil
}

// Outcome label of relay_ack_total for a transient failure; the others are
// relaysource.AckOutcome.String().
const ackOutcomeTransient = "transient"

type ackMetrics struct {
	outcomes  *prometheus.CounterVec // curried by pipeline
	abandoned *prometheus.CounterVec // curried by pipeline
	alerts    prometheus.Counter
}

func newAckMetrics(r prometheus.Registerer, pipeline string) (*ackMetrics, error) {
	outcomes, err := metric.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "relay_ack_total",
		Help: "Acknowledgement attempts per outcome (written, already_marked, missing_row, transient).",
	}, []string{"pipeline", "outcome"}))
	if err != nil {
		return nil, err
	}
	abandoned, err := metric.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "relay_ack_abandoned_total",
		Help: "Acknowledgements abandoned (NOT acknowledged) per reason (MISSING_ROW, TRANSIENT_DEADLINE).",
	}, []string{"pipeline", "reason"}))
	if err != nil {
		return nil, err
	}
	alerts, err := metric.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "relay_ack_attempts_alerts_total",
		Help: "Acknowledgements whose transient failures reached MaxAttemptsAlert (an alert only; they keep retrying until R).",
	}, []string{"pipeline"}))
	if err != nil {
		return nil, err
	}
	m := &ackMetrics{
		outcomes:  outcomes.MustCurryWith(prometheus.Labels{"pipeline": pipeline}),
		abandoned: abandoned.MustCurryWith(prometheus.Labels{"pipeline": pipeline}),
		alerts:    alerts.WithLabelValues(pipeline),
	}
	for _, o := range []string{relaysource.AckWritten.String(), relaysource.AckAlreadyMarked.String(),
		relaysource.AckMissingRow.String(), ackOutcomeTransient} {
		m.outcomes.WithLabelValues(o) // export zeros so rates work from the start
	}
	for _, r := range []string{relaydriver.AckReasonMissingRow, relaydriver.AckReasonTransientDeadline} {
		m.abandoned.WithLabelValues(r)
	}
	return m, nil
}

func (w *AckWriter) count(outcome string) {
	if w.metrics != nil {
		w.metrics.outcomes.WithLabelValues(outcome).Inc()
	}
}
