// Package dispatch is the outbox dispatcher: it delivers one target's events
// (or its latest-state rows) to a sink in per-key commit order under the
// target's store lock (seed 000 §8). The public API is relay.Dispatcher, a
// thin wrapper of Dispatcher; its documentation is the contract.
package dispatch

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay/internal/backoff"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaylock"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of Config (relay.DispatchBatchSizeDefault and the others).
const (
	BatchSizeDefault       = 2000
	MaxAttemptsDefault     = 10
	PublishTimeoutDefault  = 10 * time.Second
	StandbyIntervalDefault = time.Second
)

// Kind is what a dispatcher delivers (relay.DispatchKind).
type Kind string

// The kinds (relay.DispatchEvents, relay.DispatchLatest).
const (
	KindEvents Kind = "events"
	KindLatest Kind = "latest"
)

// Config is relay.DispatcherConfig; see its fields' documentation.
type Config struct {
	Target          string
	Kind            Kind
	BatchSize       int
	MaxAttempts     int
	Backoff         []time.Duration
	PublishTimeout  time.Duration
	PollInterval    time.Duration
	Owner           string
	LockTTL         time.Duration
	StandbyInterval time.Duration
	DigestKeys      bool
	DeleteDelivered bool
	service.Common
}

func (c Config) withDefaults() Config {
	c.Kind = cmp.Or(c.Kind, KindEvents)
	c.BatchSize = cmp.Or(c.BatchSize, BatchSizeDefault)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, MaxAttemptsDefault)
	c.Backoff = backoff.WithDefaults(c.Backoff, c.MaxAttempts)
	c.PublishTimeout = cmp.Or(c.PublishTimeout, PublishTimeoutDefault)
	c.PollInterval = cmp.Or(c.PollInterval, service.PollIntervalDefault)
	c.Common = c.Common.Defaults()
	if c.Owner == "" {
		c.Owner = service.NewOwner()
	}
	c.LockTTL = cmp.Or(c.LockTTL, relaylock.TTLDefault)
	c.StandbyInterval = cmp.Or(c.StandbyInterval, StandbyIntervalDefault)
	return c
}

func (c *Config) validate() error {
	bad := service.Invalid("DispatcherConfig")
	switch {
	case c.Target == "":
		return bad("Target", "required")
	case c.Kind != KindEvents && c.Kind != KindLatest:
		return bad("Kind", "%q is neither %q nor %q", c.Kind, KindEvents, KindLatest)
	case c.DeleteDelivered && c.Kind == KindLatest:
		return bad("DeleteDelivered", "only for %q: latest-state rows are kept, one per key", KindEvents)
	case c.BatchSize < 1:
		return bad("BatchSize", "%d < 1", c.BatchSize)
	case c.MaxAttempts < 1:
		return bad("MaxAttempts", "%d < 1", c.MaxAttempts)
	case backoff.TooLong(c.Backoff, c.MaxAttempts):
		return bad("Backoff", "%s", backoff.TooLongReason(c.Backoff, c.MaxAttempts))
	case c.PublishTimeout <= 0:
		return bad("PublishTimeout", "%s <= 0", c.PublishTimeout)
	case c.PollInterval <= 0:
		return bad("PollInterval", "%s <= 0", c.PollInterval)
	case c.LockTTL <= 0:
		return bad("LockTTL", "%s <= 0", c.LockTTL)
	case c.StandbyInterval <= 0:
		return bad("StandbyInterval", "%s <= 0", c.StandbyInterval)
	}
	if msg := backoff.Negative(c.Backoff); msg != "" {
		return bad("Backoff", "%s", msg)
	}
	return nil
}

// Dispatcher is relay.Dispatcher's implementation: a started loop that is
// active while it holds the target lock (standby otherwise), and Work, both
// running pipelined rounds of frozen batches (latest-state rounds for
// KindLatest).
type Dispatcher struct {
	d        relaydriver.Driver
	sink     relaysink.Sink
	cfg      Config
	log      *slog.Logger
	metrics  *metrics
	lockName string

	workMu sync.Mutex // serialises Work calls (and the started loop's rounds)
	cursor string     // the last key served: the next fetch's rotation point; guarded by workMu
	// metricsThrottle spaces the pending gauge's refreshes; guarded by workMu.
	metricsThrottle service.RefreshThrottle
	lc              *service.Lifecycle

	heldMu sync.Mutex
	// held is the started loop's lock context while it holds the target lock
	// (cancelled when the lock is lost or given up); nil otherwise. Work runs
	// under it instead of taking the lock again.
	held context.Context
}

// New validates cfg (naming the bad field) and returns a dispatcher of
// cfg.Target on store d delivering to sink. It does no I/O.
func New(d relaydriver.Driver, sink relaysink.Sink, cfg Config) (*Dispatcher, error) {
	if err := service.NotNil("NewDispatcher", service.Dep{Name: "driver", Value: d}, service.Dep{Name: "sink", Value: sink}); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	x := &Dispatcher{d: d, sink: sink, cfg: cfg, log: cfg.Logger, lc: service.NewLifecycle(fmt.Sprintf("dispatcher %q", cfg.Target)),
		lockName: fmt.Sprintf("outbox:%s:%s", cfg.Kind, cfg.Target)}
	if cfg.Registerer != nil {
		m, err := newMetrics(cfg.Registerer, cfg.Target)
		if err != nil {
			return nil, err
		}
		x.metrics = m
	}
	return x, nil
}

// Target returns the target the dispatcher delivers.
func (x *Dispatcher) Target() string { return x.cfg.Target }

// errStopping is the cause that ends a standby's wait for the lock on Stop.
var errStopping = errors.New("relay: dispatcher stopping")

// errDispatcherEnded reports to a waiting Start that the loop ended before it
// was ready.
var errDispatcherEnded = errors.New("relay: dispatcher loop ended before it was ready")

// Start starts the dispatch loop after the schema check and returns once it
// is active (holding the lock and, where the store has LISTEN/NOTIFY,
// listening) or a standby; see relay.Dispatcher.Start.
func (x *Dispatcher) Start(ctx context.Context) error {
	ready := make(chan error, 1)
	var once sync.Once
	report := func(err error) (first bool) {
		once.Do(func() { ready <- err; first = true })
		return first
	}
	err := x.lc.StartRun(ctx, x.d, func(ctx context.Context, stop, wake <-chan struct{}) {
		defer report(errDispatcherEnded)
		x.run(ctx, stop, wake, report)
	})
	if err != nil {
		return err
	}
	select {
	case err = <-ready:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		return errors.Join(fmt.Errorf("relay: Start dispatcher %q: %w", x.cfg.Target, err), x.lc.Stop(ctx))
	}
	x.log.InfoContext(ctx, "relay: dispatcher started", "target", x.cfg.Target, "sink", x.sink.Name(),
		"owner", x.cfg.Owner, "active", x.Active())
	return nil
}

// Stop stops the loop (draining the round in flight unless ctx ends first),
// which gives the target lock up.
func (x *Dispatcher) Stop(ctx context.Context) error { return x.lc.Stop(ctx) }

// Notify wakes an idle started dispatcher; it never blocks.
func (x *Dispatcher) Notify() { x.lc.Notify() }

// Active reports whether the started loop holds the target lock.
func (x *Dispatcher) Active() bool {
	x.heldMu.Lock()
	defer x.heldMu.Unlock()
	return x.held != nil && x.held.Err() == nil
}

// Stats is relay.DispatcherStats.
type Stats struct {
	Pending, Sent, Dead int64
	OldestPending       time.Duration
	Active              bool
}

// Stats reads the target's counts and oldest pending age from the store.
func (x *Dispatcher) Stats(ctx context.Context) (Stats, error) {
	active := x.Active()
	stats := x.d.GetExecutor().OutboxStats
	if x.cfg.Kind == KindLatest {
		stats = x.d.GetExecutor().LatestStats
	}
	st, err := stats(ctx, x.cfg.Target)
	if err != nil {
		return Stats{}, fmt.Errorf("relay: dispatcher %q: stats: %w", x.cfg.Target, err)
	}
	out := Stats{Pending: st.Pending, Sent: st.Sent, Dead: st.Dead, Active: active}
	if !st.OldestPendingAt.IsZero() {
		out.OldestPending = max(x.cfg.Clock.Now().Sub(st.OldestPendingAt), 0)
	}
	return out, nil
}

func (x *Dispatcher) lockParams() relaylock.Params {
	return relaylock.Params{Name: x.lockName, Owner: x.cfg.Owner, TTL: x.cfg.LockTTL,
		RetryEvery: x.cfg.StandbyInterval, Clock: x.cfg.Clock, Logger: x.log}
}

// run is the started loop: standby until it holds the target lock, active
// (serve) while it does, standby again when the lock is lost, until Stop.
// report tells Start the first time the loop is ready: active and listening,
// or standby; it reports whether that report was the first.
func (x *Dispatcher) run(ctx context.Context, stop, wake <-chan struct{}, report func(error) bool) {
	// Stop ends a standby's wait for the lock at once; an active dispatcher
	// still drains its round (serve ignores this cause).
	waitCtx, cancelWait := context.WithCancelCause(ctx)
	defer cancelWait(nil)
	go func() {
		select {
		case <-stop:
			cancelWait(errStopping)
		case <-waitCtx.Done():
		}
	}()
	inStandby := false // the standby transition is logged once
	for {
		p := x.lockParams()
		p.OnWaiting = func() {
			if !inStandby {
				inStandby = true
				x.log.InfoContext(ctx, "relay: dispatcher standby: another dispatcher holds the target",
					"target", x.cfg.Target, "lock", x.lockName, "owner", x.cfg.Owner)
			}
			report(nil)
		}
		// Run returns only when the lock was lost (ErrLost), on Stop, or when
		// ctx ended (a Stop whose ctx ended first).
		err := relaylock.Run(waitCtx, x.d, p, func(lctx context.Context) error {
			inStandby = false
			return x.serve(ctx, lctx, stop, wake, report)
		})
		if service.Stopping(stop) || ctx.Err() != nil {
			return
		}
		inStandby = true
		x.log.WarnContext(ctx, "relay: dispatcher lost its target lock; standby", "target", x.cfg.Target,
			"lock", x.lockName, "owner", x.cfg.Owner, "error", err)
		// Let another dispatcher take the target before trying again: a
		// standby tries every StandbyInterval, so waiting twice that gives
		// each standby at least one attempt first (waiting only one interval
		// raced them, and the dispatcher that had just lost its connection
		// could take the target straight back).
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-x.cfg.Clock.After(2 * x.cfg.StandbyInterval):
		}
	}
}

// serve is the active dispatcher, holding the target lock for as long as ctx
// lives: LISTEN first (so nothing committed from here on waits for a poll),
// then rounds until Stop, each after a Notify, a notification or
// PollInterval. When the lock is lost ctx is cancelled: the round in flight
// stops at once — its sink call is cancelled and nothing more is marked — and
// serve returns.
func (x *Dispatcher) serve(runCtx, lctx context.Context, stop, wake <-chan struct{}, report func(error) bool) error {
	// lctx also ends on Stop (errStopping, for the standby's wait); the
	// rounds must then drain rather than be cut off, so they run on a ctx
	// that ends only when the lock is lost or runCtx ends (a Stop whose ctx
	// ended first). The lock is not re-proved while the last round drains.
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(lctx))
	defer cancel(nil)
	defer context.AfterFunc(lctx, func() {
		if cause := context.Cause(lctx); !errors.Is(cause, errStopping) {
			cancel(cause)
		}
	})()
	defer context.AfterFunc(runCtx, func() { cancel(context.Cause(runCtx)) })()
	x.heldMu.Lock()
	x.held = ctx
	x.heldMu.Unlock()
	defer func() {
		x.heldMu.Lock()
		x.held = nil
		x.heldMu.Unlock()
	}()
	x.log.InfoContext(ctx, "relay: dispatcher active: holds the target", "target", x.cfg.Target,
		"lock", x.lockName, "owner", x.cfg.Owner)

	if l, ok := x.d.(relaydriver.Listener); ok && x.d.SupportsListenNotify() {
		listening := make(chan error, 1)
		go x.listen(ctx, l, listening)
		select {
		case err := <-listening:
			if report(err) && err != nil {
				// Start fails and stops the loop: deliver nothing meanwhile.
				select {
				case <-stop:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	} else {
		report(nil)
	}
	for {
		if _, err := x.work(ctx, stop); err != nil && ctx.Err() == nil {
			x.log.ErrorContext(ctx, "relay: dispatch round failed", "target", x.cfg.Target, "error", err)
		}
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		case <-x.cfg.Clock.After(x.cfg.PollInterval):
		}
	}
}

// listen wakes the loop whenever a transaction that appended events for this
// target commits (LISTEN/NOTIFY on PostgreSQL), so idle-to-delivered latency
// is milliseconds, not PollInterval. It sends the outcome of its first LISTEN
// on first (nil once LISTEN is in effect). Polling stays on as the fallback:
// when the listening connection is lost it is re-opened after PollInterval,
// and events committed meanwhile are found by the next poll. It runs until
// ctx ends.
func (x *Dispatcher) listen(ctx context.Context, l relaydriver.Listener, first chan<- error) {
	for ctx.Err() == nil {
		ch, err := l.ListenOutbox(ctx, x.cfg.Target)
		if first != nil {
			first <- err
			first = nil
		}
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

// Work runs dispatch rounds until nothing is ready, under the started loop's
// lock when it is active, else taking the lock for the call (ErrLocked when
// another dispatcher holds it); see relay.Dispatcher.Work for the rounds.
//
// Rounds of events (KindEvents) are pipelined: a batch is settled on a
// goroutine of its own while the next batch is fetched and published, and the
// next fetch leaves out every key of a batch not yet settled, so a key is
// never in two batches at once and its order and failure pause hold exactly as
// without the queue.
func (x *Dispatcher) Work(ctx context.Context) (int, error) {
	x.heldMu.Lock()
	held := x.held
	x.heldMu.Unlock()
	if held != nil {
		wctx, cancel := context.WithCancelCause(ctx)
		defer cancel(nil)
		defer context.AfterFunc(held, func() { cancel(context.Cause(held)) })()
		n, err := x.work(wctx, nil)
		if cause := context.Cause(wctx); ctx.Err() == nil && cause != nil {
			err = errors.Join(err, fmt.Errorf("relay: dispatch %q: %w", x.cfg.Target, cause))
		}
		return n, err
	}
	p := x.lockParams()
	p.Owner += "/work" // not the started loop's owner: a SQLite lease lets its owner in again
	p.NoWait = true
	var n int
	err := relaylock.Run(ctx, x.d, p, func(ctx context.Context) error {
		var err error
		n, err = x.work(ctx, nil)
		return err
	})
	if errors.Is(err, relaytype.ErrLocked) {
		return 0, fmt.Errorf("relay: dispatch %q: another dispatcher is active: %w", x.cfg.Target, err)
	}
	return n, err
}

func (x *Dispatcher) work(ctx context.Context, stop <-chan struct{}) (int, error) {
	x.workMu.Lock()
	defer x.workMu.Unlock()
	var (
		total int
		err   error
	)
	if x.cfg.Kind == KindLatest {
		for ctx.Err() == nil && !service.Stopping(stop) {
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
	for firstErr == nil && ctx.Err() == nil && !service.Stopping(stop) {
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
		events[i] = r.Event
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
// The SENT marks (with DeleteDelivered: the deletes) commit asynchronously
// (OutboxMarkSentParams.Async): a crash may lose the last marks, and their
// events are delivered again. Failure records (attempts, backoff, DEAD)
// commit durably.
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
			sent = append(sent, r.RowID)
		default:
			blocked[r.Key] = true
			failed = append(failed, i)
		}
	}
	ex := x.d.GetExecutor()
	now := x.cfg.Clock.Now()
	// A cancelled ctx is a Stop that could not wait or a lost target lock:
	// another dispatcher may be delivering now, so nothing more is written
	// (the batch stays PENDING and goes again: at least once).
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("relay: dispatch %q: settle: %w", x.cfg.Target, context.Cause(ctx))
	}
	if len(sent) > 0 {
		if _, err := ex.OutboxMarkSent(ctx, &relaydriver.OutboxMarkSentParams{IDs: sent, Now: now, Async: true,
			Delete: x.cfg.DeleteDelivered}); err != nil {
			return 0, fmt.Errorf("relay: dispatch %q: mark %d events sent: %w", x.cfg.Target, len(sent), err)
		}
		x.count(outcomeSentLabel, len(sent))
	}
	n := len(sent)
	for _, i := range failed {
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("relay: dispatch %q: settle: %w", x.cfg.Target, context.Cause(ctx))
		}
		r := batch[i]
		text := x.errText(errs[i])
		next := now
		if r.Attempts < len(x.cfg.Backoff) {
			next = now.Add(x.cfg.Backoff[r.Attempts]) // after the (Attempts+1)-th failure
		}
		res, err := ex.OutboxFail(ctx, &relaydriver.OutboxFailParams{
			ID: r.RowID, Error: text, NextAttemptAt: next, MaxAttempts: x.cfg.MaxAttempts, Now: now,
		})
		if err != nil {
			return n, fmt.Errorf("relay: dispatch %q: record failure of event %s: %w", x.cfg.Target, r.ID, err)
		}
		n++
		if res.Dead {
			x.count(outcomeDeadLabel, 1)
			x.log.ErrorContext(ctx, "relay: outbox event dead", "target", x.cfg.Target, "event_id", r.ID,
				x.keyAttr(r.Key), "seq", r.Seq, "attempts", res.Attempts, "error", text)
			continue
		}
		x.count(outcomeRetryLabel, 1)
		x.log.WarnContext(ctx, "relay: outbox delivery failed; key paused", "target", x.cfg.Target,
			"event_id", r.ID, x.keyAttr(r.Key), "seq", r.Seq, "attempts", res.Attempts,
			"next_attempt_at", next, "error", text)
	}
	return n, nil
}

// publish calls the sink once, bounded by PublishTimeout on the clock, and
// returns one error per event (a sink answering with the wrong number of
// results fails the whole batch).
func (x *Dispatcher) publish(ctx context.Context, events []relaysink.Event) []error {
	pctx, stop := service.WithClockTimeout(ctx, x.cfg.Clock, x.cfg.PublishTimeout, errPublishTimeout)
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

type metrics struct {
	events  *prometheus.CounterVec // curried by target
	pending prometheus.Gauge
}

func newMetrics(r prometheus.Registerer, target string) (*metrics, error) {
	reg := service.NewMetrics(r)
	events := reg.Counter("relay_outbox_events_total",
		"Outbox events that reached a delivery outcome (sent, retry, dead).", "target", "outcome")
	pending := reg.Gauge("relay_outbox_pending",
		"PENDING outbox events of the target (including those waiting for a retry).", "target")
	if err := reg.Err(); err != nil {
		return nil, err
	}
	m := &metrics{
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
// service.RefreshInterval of the dispatcher's clock (the count reads the whole
// target, and a busy dispatcher is woken after every commit that appends to
// it); a failure is logged, not returned. Caller holds workMu.
func (x *Dispatcher) refreshMetrics(ctx context.Context) {
	if x.metrics == nil || !x.metricsThrottle.Due(x.cfg.Clock.Now()) {
		return
	}
	stats := x.d.GetExecutor().OutboxStats
	if x.cfg.Kind == KindLatest {
		stats = x.d.GetExecutor().LatestStats
	}
	st, err := stats(ctx, x.cfg.Target)
	if err != nil {
		x.log.WarnContext(ctx, "relay: refresh outbox metrics", "target", x.cfg.Target, "error", err)
		return
	}
	x.metrics.pending.Set(float64(st.Pending))
}

// keyAttr is the log attribute of an event's key: the key, or with
// DigestKeys its digest.
func (x *Dispatcher) keyAttr(key string) slog.Attr {
	if !x.cfg.DigestKeys {
		return slog.String("key", key)
	}
	return slog.String("key_digest", keyDigest(key))
}

// errText is a delivery failure's text for the logs and the row's
// last_error (relaytype.ErrorText). With DigestKeys a sink's PublishError,
// whose text names the event's key, names its digest instead.
func (x *Dispatcher) errText(err error) string {
	var pe *relaysink.PublishError
	if x.cfg.DigestKeys && errors.As(err, &pe) {
		err = fmt.Errorf("%s: publish %s key_digest=%s id=%s: %w", pe.Sink, pe.Topic, keyDigest(pe.Key), pe.ID, pe.Err)
	}
	return relaytype.ErrorText(err)
}

// keyDigest is the first 8 bytes of key's SHA-256, in hex.
func keyDigest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}
