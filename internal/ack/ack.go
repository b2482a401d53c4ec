// Package ack is the acknowledgement writer: it writes the marks of terminal
// messages back to their source and records the outcomes (seed 000 §6). The
// public API is relay.AckWriter, a thin wrapper of Writer; its documentation
// is the contract.
package ack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaysource"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of Config (relay.AckMaxAttemptsAlertDefault and the others).
const (
	MaxAttemptsAlertDefault = 10
	BatchSizeDefault        = 100
)

// Gate serialises acknowledgement batches with the queue's replays
// (relay.LifecycleGate).
type Gate interface {
	// Do runs fn while holding the gate exclusively; ctx bounds the wait.
	Do(ctx context.Context, fn func(ctx context.Context) error) error
}

// Config is relay.AckConfig; see its fields' documentation.
type Config struct {
	Queue            string
	Gate             Gate
	R                time.Duration
	Backoff          []time.Duration
	MaxAttemptsAlert int
	BatchSize        int
	PollInterval     time.Duration
	MarkFor          func(relaytype.State) string
	service.Common
}

func (c Config) withDefaults() Config {
	c.Backoff = slices.Clone(c.Backoff) // relay.NewAckWriter puts AckBackoffDefault in a nil one
	c.MaxAttemptsAlert = cmp.Or(c.MaxAttemptsAlert, MaxAttemptsAlertDefault)
	c.BatchSize = cmp.Or(c.BatchSize, BatchSizeDefault)
	c.PollInterval = cmp.Or(c.PollInterval, service.PollIntervalDefault)
	if c.MarkFor == nil {
		c.MarkFor = func(s relaytype.State) string { return string(s) }
	}
	c.Common = c.Common.Defaults()
	return c
}

func (c *Config) validate() error {
	bad := service.Invalid("AckConfig")
	switch {
	case c.Queue == "":
		return bad("Queue", "required")
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

// Writer is relay.AckWriter's implementation: rounds that scan owed
// acknowledgements, write their marks to the source and record the outcomes,
// each batch inside the Gate.
type Writer struct {
	*service.Passes // Start, Stop, Notify, Work
	d               relaydriver.Driver
	src             relaysource.Acknowledger
	cfg             Config
	log             *slog.Logger
	metrics         *metrics
}

// New validates cfg (naming the bad field) and returns a writer of
// cfg.Queue on store d acknowledging into src. It does no I/O.
func New(d relaydriver.Driver, src relaysource.Acknowledger, cfg Config) (*Writer, error) {
	if err := service.NotNil("NewAckWriter", service.Dep{Name: "driver", Value: d}, service.Dep{Name: "source", Value: src}); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &Writer{d: d, src: src, cfg: cfg, log: cfg.Logger}
	w.Passes = service.NewPasses(service.PassesConfig{
		What: fmt.Sprintf("ack writer of %q", cfg.Queue), Driver: d, Logger: cfg.Logger,
		Failed: "relay: ack round failed", Attrs: []any{"queue", cfg.Queue},
		Started: "relay: ack writer started", StartedAttrs: []any{"queue", cfg.Queue, "r", cfg.R},
		Idle: func() <-chan time.Time { return cfg.Clock.After(cfg.PollInterval) }, Clock: cfg.Clock,
	}, w.pass)
	if cfg.Registerer != nil {
		m, err := newMetrics(cfg.Registerer, cfg.Queue)
		if err != nil {
			return nil, err
		}
		w.metrics = m
	}
	return w, nil
}

// Queue returns the queue the writer acknowledges.
func (w *Writer) Queue() string { return w.cfg.Queue }

// Stats counts the queue's terminal messages by acknowledgement state.
func (w *Writer) Stats(ctx context.Context) (*relaydriver.AckStats, error) {
	st, err := w.d.GetExecutor().AckStats(ctx, w.cfg.Queue)
	if err != nil {
		return nil, fmt.Errorf("relay: ack stats of %q: %w", w.cfg.Queue, err)
	}
	return st, nil
}

// pass runs acknowledgement rounds until nothing is due now (a round that
// reached no outcome) and returns how many rows reached an outcome.
func (w *Writer) pass(ctx context.Context, stop <-chan struct{}) (int, error) {
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
func (w *Writer) round(ctx context.Context) (int, error) {
	n := 0
	err := w.cfg.Gate.Do(ctx, func(ctx context.Context) error {
		ex := w.d.GetExecutor()
		batch, err := ex.AckScan(ctx, &relaydriver.AckScanParams{
			Queue: w.cfg.Queue, Now: w.cfg.Clock.Now(), R: w.cfg.R, Limit: w.cfg.BatchSize,
		})
		if err != nil {
			return fmt.Errorf("relay: ack %q: scan: %w", w.cfg.Queue, err)
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
				Queue: w.cfg.Queue, IDs: acked, Now: w.cfg.Clock.Now(),
			}); err != nil {
				return errors.Join(rowErr, fmt.Errorf("relay: ack %q: record %d acknowledgements: %w", w.cfg.Queue, len(acked), err))
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
func (w *Writer) acknowledge(ctx context.Context, batch []*relaytype.Message) func(i int) (relaysource.AckOutcome, error) {
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
func (w *Writer) record(ctx context.Context, ex relaydriver.Executor, m *relaytype.Message, outcome relaysource.AckOutcome, srcErr error) (bool, error) {
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
	err := ex.AckRetry(ctx, &relaydriver.AckRetryParams{Queue: w.cfg.Queue, ID: m.ID, NextAt: next, Now: now})
	if err != nil {
		if errors.Is(err, relaytype.ErrConflict) {
			// No longer owed (reopened or acknowledged meanwhile): nothing to record.
			return false, nil
		}
		return false, fmt.Errorf("relay: ack %q: record transient failure of %d: %w", w.cfg.Queue, m.ID, err)
	}
	attempts := m.AckAttempts + 1
	w.log.WarnContext(ctx, "relay: acknowledgement failed; retrying", "queue", w.cfg.Queue, "id", m.ID,
		"ack_attempts", attempts, "next_at", next, "deadline", m.EnqueuedAt.Add(w.cfg.R), "error", srcErr)
	if attempts == w.cfg.MaxAttemptsAlert {
		if w.metrics != nil {
			w.metrics.alerts.Inc()
		}
		w.log.WarnContext(ctx, "relay: acknowledgement reached max attempts; still retrying until R",
			"queue", w.cfg.Queue, "id", m.ID, "ack_attempts", attempts,
			"max_attempts_alert", w.cfg.MaxAttemptsAlert, "deadline", m.EnqueuedAt.Add(w.cfg.R), "error", srcErr)
	}
	return false, nil
}

// abandon stops automatic acknowledgement of m with reason and raises the
// alert: an ERROR log and relay_ack_abandoned_total. cause is the last
// transient error, if any.
func (w *Writer) abandon(ctx context.Context, ex relaydriver.Executor, m *relaytype.Message, reason string, cause error) error {
	err := ex.AckAbandon(ctx, &relaydriver.AckAbandonParams{
		Queue: w.cfg.Queue, ID: m.ID, Reason: reason, Now: w.cfg.Clock.Now(),
	})
	if errors.Is(err, relaytype.ErrConflict) {
		return nil // no longer owed: nothing to abandon
	}
	if err != nil {
		return fmt.Errorf("relay: ack %q: abandon %d (%s): %w", w.cfg.Queue, m.ID, reason, err)
	}
	if w.metrics != nil {
		w.metrics.abandoned.WithLabelValues(reason).Inc()
	}
	attrs := []any{"queue", w.cfg.Queue, "id", m.ID, "reason", reason, "ack_attempts", m.AckAttempts,
		"enqueued_at", m.EnqueuedAt}
	if cause != nil {
		attrs = append(attrs, "error", cause)
	}
	w.log.ErrorContext(ctx, "relay: acknowledgement abandoned; not acknowledged, needs reconciliation or reopen", attrs...)
	return nil
}

// Reopen puts abandoned acknowledgements back into the scan inside the Gate:
// ids, or with ids empty every row abandoned for reason. It wakes a started
// writer when it reopened any.
func (w *Writer) Reopen(ctx context.Context, ids []int64, reason string) (int, error) {
	if len(ids) == 0 && reason == "" {
		return 0, fmt.Errorf("relay: reopen acknowledgements of %q: IDs or Reason is required", w.cfg.Queue)
	}
	var n int
	err := w.cfg.Gate.Do(ctx, func(ctx context.Context) error {
		var err error
		n, err = w.d.GetExecutor().AckReopen(ctx, &relaydriver.AckReopenParams{
			Queue: w.cfg.Queue, IDs: slices.Clone(ids), Reason: reason, Now: w.cfg.Clock.Now(),
		})
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("relay: reopen acknowledgements of %q: %w", w.cfg.Queue, err)
	}
	w.log.InfoContext(ctx, "relay: acknowledgements reopened", "queue", w.cfg.Queue, "ids", ids,
		"reason", reason, "reopened", n)
	if n > 0 {
		w.Notify()
	}
	return n, nil
}

// Outcome label of relay_ack_total for a transient failure; the others are
// relaysource.AckOutcome.String().
const ackOutcomeTransient = "transient"

type metrics struct {
	outcomes  *prometheus.CounterVec // curried by queue
	abandoned *prometheus.CounterVec // curried by queue
	alerts    prometheus.Counter
}

func newMetrics(r prometheus.Registerer, queue string) (*metrics, error) {
	reg := service.NewMetrics(r)
	outcomes := reg.Counter("relay_ack_total",
		"Acknowledgement attempts per outcome (written, already_marked, missing_row, transient).", "queue", "outcome")
	abandoned := reg.Counter("relay_ack_abandoned_total",
		"Acknowledgements abandoned (NOT acknowledged) per reason (MISSING_ROW, TRANSIENT_DEADLINE).", "queue", "reason")
	alerts := reg.Counter("relay_ack_attempts_alerts_total",
		"Acknowledgements whose transient failures reached MaxAttemptsAlert (an alert only; they keep retrying until R).", "queue")
	if err := reg.Err(); err != nil {
		return nil, err
	}
	m := &metrics{
		outcomes:  outcomes.MustCurryWith(prometheus.Labels{"queue": queue}),
		abandoned: abandoned.MustCurryWith(prometheus.Labels{"queue": queue}),
		alerts:    alerts.WithLabelValues(queue),
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

func (w *Writer) count(outcome string) {
	if w.metrics != nil {
		w.metrics.outcomes.WithLabelValues(outcome).Inc()
	}
}
