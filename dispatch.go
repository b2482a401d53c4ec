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
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of DispatcherConfig. A zero field takes its default.
const (
	// DispatchBatchSizeDefault is how many events one round fetches (and one
	// sink call publishes). Measured in docs/outbox.md: the relay rate rises
	// up to about 2,000 and is flat beyond.
	DispatchBatchSizeDefault = 2000
	// DispatchMaxAttemptsDefault is the default delivery attempt limit.
	DispatchMaxAttemptsDefault = 10
	// PublishTimeoutDefault bounds one sink Publish call.
	PublishTimeoutDefault = 10 * time.Second
)

// DispatcherConfig configures a Dispatcher. Target is required; every other zero
// field takes the default named in its comment.
type DispatcherConfig struct {
	// Target names the outbox events this dispatcher delivers (OutboxEvent.Target),
	// e.g. "kafka:msg". Required.
	Target string
	// Kind is what the dispatcher delivers: DispatchEvents (the outbox's
	// events, the default) or DispatchLatest (the target's latest-state rows,
	// seed 000 §8.2; see latest.go).
	Kind DispatchKind
	// BatchSize is how many events one round fetches and publishes in one sink
	// call. Default DispatchBatchSizeDefault (2000).
	BatchSize int
	// MaxAttempts is the delivery attempt limit: an event whose delivery failed
	// MaxAttempts times becomes DEAD, kept as the DLQ (seed 000 §8.1). Default
	// DispatchMaxAttemptsDefault (10).
	MaxAttempts int
	// Backoff is the retry schedule: after the n-th failed delivery the event (and
	// so its key) waits Backoff[n-1]. It must have exactly MaxAttempts-1 levels,
	// like Config.Backoff (seed 000 §9.1). Default DoublingBackoff(1s,
	// MaxAttempts-1).
	Backoff []time.Duration
	// PublishTimeout bounds each sink Publish call on Clock; events not
	// confirmed by then count as failed. Default PublishTimeoutDefault (10s).
	PublishTimeout time.Duration
	// PollInterval is how long a started dispatcher waits on Clock between idle
	// rounds (Notify wakes it at once). Default PollIntervalDefault (1s).
	PollInterval time.Duration
	// Clock is the only source of time. Default relayclock.System{}.
	Clock relaytype.Clock
	// Logger receives structured logs (never payloads). Default slog.Default().
	Logger *slog.Logger
	// Registerer, when set, receives relay_outbox_events_total{target,outcome}
	// and relay_outbox_pending{target}. Default nil: no metrics.
	Registerer prometheus.Registerer
}

func (c DispatcherConfig) withDefaults() DispatcherConfig {
	c.Kind = cmp.Or(c.Kind, DispatchEvents)
	c.BatchSize = cmp.Or(c.BatchSize, DispatchBatchSizeDefault)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, DispatchMaxAttemptsDefault)
	if c.Backoff == nil {
		c.Backoff = DoublingBackoff(BackoffFirstDefault, c.MaxAttempts-1)
	} else {
		c.Backoff = slices.Clone(c.Backoff)
	}
	c.PublishTimeout = cmp.Or(c.PublishTimeout, PublishTimeoutDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	if c.Clock == nil {
		c.Clock = relayclock.System{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c *DispatcherConfig) validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("relay: invalid DispatcherConfig.%s: %s", field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Target == "":
		return bad("Target", "required")
	case c.Kind != DispatchEvents && c.Kind != DispatchLatest:
		return bad("Kind", "%q is neither %q nor %q", c.Kind, DispatchEvents, DispatchLatest)
	case c.BatchSize < 1:
		return bad("BatchSize", "%d < 1", c.BatchSize)
	case c.MaxAttempts < 1:
		return bad("MaxAttempts", "%d < 1", c.MaxAttempts)
	case len(c.Backoff) != c.MaxAttempts-1:
		return bad("Backoff", "%d levels for MaxAttempts %d; want exactly MaxAttempts-1 = %d",
			len(c.Backoff), c.MaxAttempts, c.MaxAttempts-1)
	case c.PublishTimeout <= 0:
		return bad("PublishTimeout", "%s <= 0", c.PublishTimeout)
	case c.PollInterval <= 0:
		return bad("PollInterval", "%s <= 0", c.PollInterval)
	}
	for i, d := range c.Backoff {
		if d < 0 {
			return bad("Backoff", "level %d is negative (%s)", i, d)
		}
	}
	return nil
}

// Dispatcher delivers the outbox events of one Target to a sink (seed 000
// §8.1): it freezes the batch it fetched, publishes it in one sink call, marks
// SENT only what the sink confirmed, and retries the rest with backoff — a
// failing head pauses only its own key — until DEAD at MaxAttempts (kept as the
// DLQ). Delivery is at least once in per-key commit order; consumers dedupe by
// event ID. Run it with Start/Stop, or with Work. Safe for concurrent use;
// Work calls never overlap (within one, a batch is settled while the next one,
// of other keys, is fetched and published; see Work). Run one dispatcher per
// Target (per-key order across instances is not coordinated yet).
type Dispatcher struct {
	d       relaydriver.Driver
	sink    relaysink.Sink
	cfg     DispatcherConfig
	log     *slog.Logger
	metrics *dispatchMetrics

	workMu sync.Mutex // serialises Work calls (and the started loop's rounds)
	cursor string     // the last key served: the next fetch's rotation point; guarded by workMu
	// metricsThrottle spaces the pending gauge's refreshes; guarded by workMu.
	metricsThrottle refreshThrottle
	lc              *lifecycle
}

// NewDispatcher validates cfg (naming the bad field) and returns a dispatcher
// of cfg.Target on store d delivering to sink. It does no I/O.
func NewDispatcher(d relaydriver.Driver, sink relaysink.Sink, cfg DispatcherConfig) (*Dispatcher, error) {
	if d == nil {
		return nil, errors.New("relay: NewDispatcher: nil driver")
	}
	if sink == nil {
		return nil, errors.New("relay: NewDispatcher: nil sink")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	x := &Dispatcher{d: d, sink: sink, cfg: cfg, log: cfg.Logger, lc: newLifecycle(fmt.Sprintf("dispatcher %q", cfg.Target))}
	if cfg.Registerer != nil {
		m, err := newDispatchMetrics(cfg.Registerer, cfg.Target)
		if err != nil {
			return nil, err
		}
		x.metrics = m
	}
	return x, nil
}

// Target returns the target the dispatcher delivers.
func (x *Dispatcher) Target() string { return x.cfg.Target }

// Start checks that the store's engine schema is current (an old schema is
// refused with relaytype.ErrSchemaOutdated) and starts the dispatch loop, which
// runs until Stop. A dispatcher starts at most once.
func (x *Dispatcher) Start(ctx context.Context) error {
	// The listener's goroutine lives exactly as long as the loop: it is started
	// by the first round, on the loop's own ctx.
	var listenOnce sync.Once
	err := x.lc.start(ctx, x.d, func(ctx context.Context, stop <-chan struct{}) {
		if l, ok := x.d.(relaydriver.Listener); ok && x.d.SupportsListenNotify() {
			listenOnce.Do(func() { go x.listen(ctx, l) })
		}
		if _, err := x.work(ctx, stop); err != nil && ctx.Err() == nil {
			x.log.ErrorContext(ctx, "relay: dispatch round failed", "target", x.cfg.Target, "error", err)
		}
	}, func() <-chan time.Time { return x.cfg.Clock.After(x.cfg.PollInterval) })
	if err != nil {
		return err
	}
	x.log.InfoContext(ctx, "relay: dispatcher started", "target", x.cfg.Target, "sink", x.sink.Name())
	return nil
}

// Stop asks the loop to take no more batches and waits for the round in flight.
// When ctx ends first it cancels the round (the sink call's ctx) and returns
// ctx.Err(); unconfirmed events stay PENDING and are sent again later. Stop on a
// dispatcher never started returns nil; calling it again is harmless. Stop does
// not close the sink.
func (x *Dispatcher) Stop(ctx context.Context) error { return x.lc.stop(ctx) }

// Notify wakes an idle started dispatcher so events committed just now are
// delivered without waiting for PollInterval. It never blocks.
func (x *Dispatcher) Notify() { x.lc.notify() }

// listen wakes the loop whenever a transaction that appended events for this
// target commits (LISTEN/NOTIFY on PostgreSQL), so idle-to-delivered latency
// is milliseconds, not PollInterval. Polling stays on as the fallback: when
// the listening connection is lost it is re-opened after PollInterval, and
// events committed meanwhile are found by the next poll.
func (x *Dispatcher) listen(ctx context.Context, l relaydriver.Listener) {
	for ctx.Err() == nil {
		ch, err := l.ListenOutbox(ctx, x.cfg.Target)
		if err != nil {
			x.log.WarnContext(ctx, "relay: outbox listen failed; polling", "target", x.cfg.Target, "error", err)
		} else {
			x.Notify() // anything committed before LISTEN took effect
			for range ch {
				x.Notify()
			}
			if ctx.Err() == nil {
				x.log.WarnContext(ctx, "relay: outbox listener lost; polling until it is back", "target", x.cfg.Target)
			}
		}
		select {
		case <-ctx.Done():
		case <-x.cfg.Clock.After(x.cfg.PollInterval):
		}
	}
}

// Work runs dispatch rounds until nothing is ready and returns how many events
// reached an outcome (sent, retry or dead). Each round fetches a batch — frozen:
// only what that fetch returned is published and marked; events committed
// meanwhile wait for a later round — publishes it in one sink call bounded by
// PublishTimeout, then settles it: marks every confirmed event SENT in one
// statement, and for each key not wholly confirmed records one failure on its
// first unconfirmed event (its later events stay PENDING behind it).
//
// Rounds of events (DispatchEvents) are pipelined: a batch is settled on a
// goroutine of its own while the next batch is fetched and published, and the
// next fetch leaves out every key of a batch not yet settled, so a key is
// never in two batches at once and its order and failure pause hold exactly as
// without the pipeline. Work returns after every batch it published is
// settled. A store error ends the call; events not yet marked are delivered
// again later (at least once).
func (x *Dispatcher) Work(ctx context.Context) (int, error) {
	return x.work(ctx, nil)
}

func (x *Dispatcher) work(ctx context.Context, stop <-chan struct{}) (int, error) {
	x.workMu.Lock()
	defer x.workMu.Unlock()
	var (
		total int
		err   error
	)
	if x.cfg.Kind == DispatchLatest {
		for ctx.Err() == nil && !stopping(stop) {
			var n int
			n, err = x.latestRound(ctx)
			total += n
			if err != nil || n == 0 {
				break
			}
		}
	} else {
		total, err = x.workEvents(ctx, stop)
	}
	if ctx.Err() == nil {
		x.refreshMetrics(ctx)
	}
	return total, err
}

// errPublishTimeout is the cause of a sink call's ctx when PublishTimeout passed.
var errPublishTimeout = errors.New("relay: sink publish timed out")

// settled is the outcome of settling one batch.
type settled struct {
	keys []string // the batch's keys, in flight until now
	n    int      // events that reached an outcome
	err  error
}

// workEvents runs pipelined rounds of outbox events until nothing is ready
// (and every published batch is settled), stop is closed or ctx ends.
//
// One batch at a time is settled in the background (at most
// dispatchSettleDepth); the loop fetches and publishes the next batch
// meanwhile. inflight holds the keys of every batch fetched and not yet
// settled; the fetch skips them. A key therefore re-enters a batch only after
// its previous batch's SENT marks and failure records are committed, so the
// next fetch sees its true head (or its backoff), exactly as in a sequential
// round.
func (x *Dispatcher) workEvents(ctx context.Context, stop <-chan struct{}) (int, error) {
	var (
		total    int
		firstErr error
		inflight = map[string]bool{}
		done     = make(chan settled, dispatchSettleDepth)
		running  int // settles started and not yet received
	)
	receive := func() {
		r := <-done
		running--
		total += r.n
		for _, k := range r.keys {
			delete(inflight, k)
		}
		if r.err != nil && firstErr == nil {
			firstErr = r.err
		}
	}
	for firstErr == nil && ctx.Err() == nil && !stopping(stop) {
		batch, err := x.fetchEvents(ctx, inflight)
		if err != nil {
			firstErr = err
			break
		}
		if len(batch) == 0 {
			if running == 0 {
				break // nothing ready, nothing in flight
			}
			// The keys in flight may have more events: fetch again once
			// their batch is settled.
			receive()
			continue
		}
		x.cursor = batch[len(batch)-1].Key
		keys := batchKeys(batch)
		for _, k := range keys {
			inflight[k] = true
		}
		errs := x.publishEvents(ctx, batch)
		faultpoint.Hit(faultpoint.DispatchAfterConfirm)
		if running == dispatchSettleDepth {
			receive()
			if firstErr != nil {
				// The batch just published is not marked: it stays
				// PENDING and is delivered again (at least once).
				break
			}
		}
		running++
		go func() {
			n, err := x.settleEvents(ctx, batch, errs)
			done <- settled{keys: keys, n: n, err: err}
		}()
	}
	for running > 0 {
		receive()
	}
	return total, firstErr
}

// dispatchSettleDepth is how many batches may be settling (their SENT marks
// and failure records being written) while the next one is fetched and
// published. The marks are the largest cost of a round (a new row version and
// four index entries per event: docs/outbox.md, "Dispatcher throughput"); two
// settling batches let PostgreSQL write them on two connections at once. A
// dispatcher thus uses up to three store connections.
const dispatchSettleDepth = 2

// fetchEvents fetches the next frozen batch: rotation from the last key of
// the previous batch, leaving out the keys in flight.
func (x *Dispatcher) fetchEvents(ctx context.Context, inflight map[string]bool) ([]*relaydriver.OutboxRecord, error) {
	var skip []string
	for k := range inflight {
		skip = append(skip, k)
	}
	batch, err := x.d.GetExecutor().OutboxFetch(ctx, &relaydriver.OutboxFetchParams{
		Target: x.cfg.Target, Limit: x.cfg.BatchSize, Now: x.cfg.Clock.Now(), AfterKey: x.cursor, SkipKeys: skip,
	})
	if err != nil {
		return nil, fmt.Errorf("relay: dispatch %q: fetch: %w", x.cfg.Target, err)
	}
	return batch, nil
}

// batchKeys returns the distinct keys of a batch.
func batchKeys(batch []*relaydriver.OutboxRecord) []string {
	seen := make(map[string]bool, len(batch))
	var keys []string
	for _, r := range batch {
		if !seen[r.Key] {
			seen[r.Key] = true
			keys = append(keys, r.Key)
		}
	}
	return keys
}

// publishEvents publishes a batch in one sink call and returns one error per
// event.
func (x *Dispatcher) publishEvents(ctx context.Context, batch []*relaydriver.OutboxRecord) []error {
	events := make([]relaysink.Event, len(batch))
	for i, r := range batch {
		events[i] = relaysink.Event{
			ID: r.EventID, Topic: r.Topic, Key: r.Key, Seq: r.Seq, Type: relaysink.EventType(r.Type),
			Headers: r.Headers, Payload: r.Payload,
		}
	}
	return x.publish(ctx, events)
}

// settleEvents writes the outcome of a published batch and returns how many
// events reached an outcome.
//
// Per key, the confirmed prefix is sent; the first unconfirmed event fails.
// A confirmed event after an unconfirmed one of its key breaks the sink
// contract; it stays PENDING and goes again after its predecessor (at least
// once; consumers dedupe by ID) rather than being marked out of order.
//
// The SENT marks commit asynchronously (OutboxMarkSentParams.Async): a crash
// may lose the last marks, and their events are delivered again. Failure
// records (attempts, backoff, DEAD) commit durably.
func (x *Dispatcher) settleEvents(ctx context.Context, batch []*relaydriver.OutboxRecord, errs []error) (int, error) {
	var (
		sent    []int64
		failed  []int // indexes into batch
		blocked = map[string]bool{}
	)
	for i, r := range batch {
		switch {
		case blocked[r.Key]:
		case errs[i] == nil:
			sent = append(sent, r.ID)
		default:
			blocked[r.Key] = true
			failed = append(failed, i)
		}
	}
	ex := x.d.GetExecutor()
	now := x.cfg.Clock.Now()
	if len(sent) > 0 {
		if _, err := ex.OutboxMarkSent(ctx, &relaydriver.OutboxMarkSentParams{IDs: sent, Now: now, Async: true}); err != nil {
			return 0, fmt.Errorf("relay: dispatch %q: mark %d events sent: %w", x.cfg.Target, len(sent), err)
		}
		x.count(outcomeSentLabel, len(sent))
	}
	n := len(sent)
	for _, i := range failed {
		r := batch[i]
		next := now
		if r.Attempts < len(x.cfg.Backoff) {
			next = now.Add(x.cfg.Backoff[r.Attempts]) // after the (Attempts+1)-th failure
		}
		res, err := ex.OutboxFail(ctx, &relaydriver.OutboxFailParams{
			ID: r.ID, Error: errs[i].Error(), NextAttemptAt: next, MaxAttempts: x.cfg.MaxAttempts, Now: now,
		})
		if err != nil {
			return n, fmt.Errorf("relay: dispatch %q: record failure of event %s: %w", x.cfg.Target, r.EventID, err)
		}
		n++
		if res.Dead {
			x.count(outcomeDeadLabel, 1)
			x.log.ErrorContext(ctx, "relay: outbox event dead", "target", x.cfg.Target, "event_id", r.EventID,
				"key", r.Key, "seq", r.Seq, "attempts", res.Attempts, "error", errs[i].Error())
			continue
		}
		x.count(outcomeRetryLabel, 1)
		x.log.WarnContext(ctx, "relay: outbox delivery failed; key paused", "target", x.cfg.Target,
			"event_id", r.EventID, "key", r.Key, "seq", r.Seq, "attempts", res.Attempts,
			"next_attempt_at", next, "error", errs[i].Error())
	}
	return n, nil
}

// publish calls the sink once, bounded by PublishTimeout on the clock, and
// returns one error per event (a sink answering with the wrong number of
// results fails the whole batch).
func (x *Dispatcher) publish(ctx context.Context, events []relaysink.Event) []error {
	pctx, stop := withClockTimeout(ctx, x.cfg.Clock, x.cfg.PublishTimeout, errPublishTimeout)
	defer stop()
	errs := x.sink.Publish(pctx, events)
	if len(errs) != len(events) {
		err := fmt.Errorf("relay: sink %s returned %d results for %d events", x.sink.Name(), len(errs), len(events))
		errs = make([]error, len(events))
		for i := range errs {
			errs[i] = err
		}
	}
	if errors.Is(context.Cause(pctx), errPublishTimeout) {
		for i, err := range errs {
			if err != nil {
				errs[i] = fmt.Errorf("%w after %s: %w", errPublishTimeout, x.cfg.PublishTimeout, err)
			}
		}
	}
	return errs
}

// Outcome labels of relay_outbox_events_total.
const (
	outcomeSentLabel  = "sent"
	outcomeRetryLabel = "retry"
	outcomeDeadLabel  = "dead"
)

type dispatchMetrics struct {
	events  *prometheus.CounterVec // curried by target
	pending prometheus.Gauge
}

func newDispatchMetrics(r prometheus.Registerer, target string) (*dispatchMetrics, error) {
	events, err := metric.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "relay_outbox_events_total",
		Help: "Outbox events that reached a delivery outcome (sent, retry, dead).",
	}, []string{"target", "outcome"}))
	if err != nil {
		return nil, err
	}
	pending, err := metric.Register(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "relay_outbox_pending",
		Help: "PENDING outbox events of the target (including those waiting for a retry).",
	}, []string{"target"}))
	if err != nil {
		return nil, err
	}
	m := &dispatchMetrics{
		events:  events.MustCurryWith(prometheus.Labels{"target": target}),
		pending: pending.WithLabelValues(target),
	}
	for _, o := range []string{outcomeSentLabel, outcomeRetryLabel, outcomeDeadLabel} {
		m.events.WithLabelValues(o) // export zeros so rates work from the start
	}
	return m, nil
}

func (x *Dispatcher) count(outcome string, n int) {
	if x.metrics != nil && n > 0 {
		x.metrics.events.WithLabelValues(outcome).Add(float64(n))
	}
}

// refreshMetrics sets the pending gauge, at most once per
// metricsRefreshInterval of the dispatcher's clock (the count reads the whole
// target, and a busy dispatcher is woken after every commit that appends to
// it); a failure is logged, not returned. Caller holds workMu.
func (x *Dispatcher) refreshMetrics(ctx context.Context) {
	if x.metrics == nil || !x.metricsThrottle.due(x.cfg.Clock.Now()) {
		return
	}
	stats := x.d.GetExecutor().OutboxStats
	if x.cfg.Kind == DispatchLatest {
		stats = x.d.GetExecutor().LatestStats
	}
	st, err := stats(ctx, x.cfg.Target)
	if err != nil {
		x.log.WarnContext(ctx, "relay: refresh outbox metrics", "target", x.cfg.Target, "error", err)
		return
	}
	x.metrics.pending.Set(float64(st.Pending))
}
