package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaylock"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// Engine processes one queue of a store. Create it with NewEngine, run it with
// Start/Stop (or drive it round by round with Work, as tests do). All methods
// are safe for concurrent use.
type Engine struct {
	d         relaydriver.Driver
	cfg       Config // defaulted and validated
	log       *slog.Logger
	gate      *LifecycleGate
	metrics   *metrics
	decoder   Decoder // cfg.Handler as a Decoder, or nil
	ignore    []ignoreRule
	deadClass map[relaytype.ErrorClass]bool
	// leases holds the claimed messages in flight and renews their leases.
	leases *leaseKeeper
	// stableID: Config.InstanceID was given (not generated), so a restart
	// can recognise its earlier incarnation's leases (see Start).
	stableID bool

	// wake is signalled (non-blocking) by Enqueue so an idle loop runs at once.
	wake chan struct{}

	// workMu serialises rounds: Work and the started loop never overlap, which
	// keeps ModeFIFO single-threaded (seed 000 §5.1). The fields below it are
	// guarded by it.
	workMu sync.Mutex
	// nextDue is when the FIFO head waiting for its backoff becomes ready (zero:
	// unknown); the loop sleeps until then or PollInterval, whichever is first.
	nextDue time.Time
	// lastExpiredScan is when a claim last searched for expired leases (zero:
	// never); claims in between skip that search (see claim).
	lastExpiredScan time.Time
	// metricsThrottle spaces the gauges' refreshes (see refreshMetrics).
	metricsThrottle service.RefreshThrottle
	// warnedW / warnedNoCursor rate-limit the watermark WARN to once per value.
	warnedW        int64
	warnedAny      bool
	warnedNoCursor bool

	mu        sync.Mutex // guards the lifecycle fields below
	started   bool
	stopped   bool
	stopCh    chan struct{} // closed by Stop: finish in-flight work, take no more
	cancelRun context.CancelFunc
	done      chan struct{} // closed when the loop has returned
	// instance is the instance lock held from Start until the loop returns
	// (claim modes with a stable InstanceID; nil otherwise).
	instance *relaylock.Held
	// runErr is why the loop ended on its own (the instance lock was lost);
	// Stop returns it. Written before done is closed.
	runErr error
}

// NewEngine validates cfg (naming the bad field on error) and returns an engine for
// cfg.Queue on store d. It does no I/O; Start checks the schema.
func NewEngine(d relaydriver.Driver, cfg Config) (*Engine, error) {
	if d == nil {
		return nil, errors.New("relay: NewEngine: nil driver")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	stableID := cfg.InstanceID != ""
	if !stableID {
		cfg.InstanceID = service.NewOwner()
	}
	e := &Engine{
		stableID:  stableID,
		d:         d,
		cfg:       cfg,
		log:       cfg.Logger,
		gate:      newLifecycleGate(),
		deadClass: make(map[relaytype.ErrorClass]bool),
		wake:      make(chan struct{}, 1),
	}
	e.leases = newLeaseKeeper(e)
	e.decoder, _ = cfg.Handler.(Decoder)
	for _, r := range cfg.IgnoreRules {
		rule, _ := parseIgnoreRule(r) // validated above
		e.ignore = append(e.ignore, rule)
	}
	for _, c := range cfg.DeadClasses {
		e.deadClass[c] = true
	}
	if cfg.Registerer != nil {
		m, err := newMetrics(cfg.Registerer, cfg.Queue)
		if err != nil {
			return nil, err
		}
		e.metrics = m
	}
	return e, nil
}

// Queue returns the queue the engine processes.
func (e *Engine) Queue() string { return e.cfg.Queue }

// Mode returns the engine's ordering mode.
func (e *Engine) Mode() Mode { return e.cfg.Mode }

// InstanceID returns the lease owner name of this engine.
func (e *Engine) InstanceID() string { return e.cfg.InstanceID }

// Gate returns the queue's lifecycle gate (replay, acknowledgement
// write-back). Never nil.
func (e *Engine) Gate() *LifecycleGate { return e.gate }

// ErrNoHandler is wrapped by the error of Start and Work on an engine whose
// Config.Handler is nil: such an engine only enqueues (and replays, and reads
// stats); it never processes.
var ErrNoHandler = errors.New("Config.Handler is nil; this engine only enqueues")

// errNoHandler is the error Start (op "Start") and Work return on a
// producer-only engine.
func (e *Engine) errNoHandler(op string) error {
	return fmt.Errorf("relay: %s queue %q: %w", op, e.cfg.Queue, ErrNoHandler)
}

// Start checks that the store's engine schema is current — an old schema is
// refused with an error wrapping relaytype.ErrSchemaOutdated — and starts the
// processing loop. An engine starts at most once.
//
// In ModePerKey and ModeUnordered with a stable Config.InstanceID (one the
// caller set), Start first takes the store lock of (Queue, InstanceID) and
// then releases every lease of the queue held by that InstanceID, so the
// messages an earlier incarnation left claimed when it died are processed at
// once instead of after their lease expires. Holding the lock proves that no
// other live engine uses the InstanceID (a dead one's lock is freed at once on
// PostgreSQL, with its session; on SQLite its lease row expires within
// InstanceLockTTL, which Start waits for): if the lock is still held after
// InstanceLockTTL, Start refuses with an error naming the InstanceID and
// wrapping relaytype.ErrLocked. The lock is renewed every InstanceLockTTL/3
// and released when the loop ends; if a renewal fails, the engine stops
// processing (logged at ERROR; Stop returns the cause), since another
// incarnation may then start and release its leases. ModeFIFO and generated
// InstanceIDs take no lock and release nothing.
//
// An engine without a Handler refuses to start with an error wrapping
// ErrNoHandler, before any I/O.
//
// ctx governs the check and the lock wait: the loop runs until Stop.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cfg.Handler == nil {
		return e.errNoHandler("Start")
	}
	if e.started {
		return errors.New("relay: Start: engine already started")
	}
	if err := relaymigrate.Check(ctx, e.d, relaymigrate.EngineLineOf(e.d)); err != nil {
		return fmt.Errorf("relay: Start queue %q: %w", e.cfg.Queue, err)
	}
	if e.cfg.Mode != ModeFIFO && e.stableID {
		held, err := e.claimInstance(ctx)
		if err != nil {
			return err
		}
		e.instance = held
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e.started = true
	e.stopCh = make(chan struct{})
	e.cancelRun = cancel
	e.done = make(chan struct{})
	go e.loop(runCtx)
	e.log.InfoContext(ctx, "relay: engine started", "queue", e.cfg.Queue,
		"mode", e.cfg.Mode.String(), "instance_id", e.cfg.InstanceID)
	return nil
}

// Stop asks the loop to take no more messages and waits for the work in flight
// (the current FIFO head, or the claimed batch) to finish. When ctx ends first,
// Stop cancels the in-flight handlers' ctx and returns ctx.Err() without waiting
// further; an interrupted attempt leaves its message as it was (claimed rows
// keep their lease until it expires, or until a restart with the same stable
// InstanceID releases them). The instance lock, if any, is released once the
// loop has returned. When the loop had already stopped because that lock was
// lost, Stop returns that cause (wrapping exclusive's ErrLost). Stop on an
// engine that was never started returns nil; calling it again is harmless.
func (e *Engine) Stop(ctx context.Context) error {
	e.mu.Lock()
	if !e.started {
		e.mu.Unlock()
		return nil
	}
	if !e.stopped {
		e.stopped = true
		close(e.stopCh)
	}
	done, cancel := e.done, e.cancelRun
	e.mu.Unlock()
	select {
	case <-done:
		cancel()
		return e.runErr
	case <-ctx.Done():
		cancel()
		return fmt.Errorf("relay: Stop queue %q: %w", e.cfg.Queue, ctx.Err())
	}
}

// loop runs rounds until Stop, sleeping on the clock between idle rounds.
// With an instance lock it stops when the lock is lost, and releases the lock
// once the last round has returned.
func (e *Engine) loop(ctx context.Context) {
	defer close(e.done)
	var lost <-chan struct{}
	if e.instance != nil {
		defer e.instance.Release(ctx)
		lost = e.instance.Lost()
	}
	ctx, cancel := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-lost:
			e.runErr = fmt.Errorf("relay: queue %q stopped: %w", e.cfg.Queue, e.instance.Err())
			e.log.ErrorContext(ctx, "relay: instance lock lost; engine stopped so that no other incarnation's work overlaps",
				"queue", e.cfg.Queue, "instance_id", e.cfg.InstanceID, "error", e.instance.Err())
			cancel()
		case <-ctx.Done():
		}
	}()
	defer func() {
		cancel()
		<-watched // runErr is written before done is closed
	}()
	for {
		_, err := e.work(ctx, e.stopCh)
		if err != nil && ctx.Err() == nil {
			// The only place a round's error is reported: work returns, never logs.
			e.log.ErrorContext(ctx, "relay: processing round failed", "queue", e.cfg.Queue, "error", err)
		}
		wait := e.cfg.PollInterval
		e.workMu.Lock()
		if due := e.nextDue; !due.IsZero() && err == nil {
			wait = min(wait, max(due.Sub(e.cfg.Clock.Now()), 0))
		}
		e.workMu.Unlock()
		select {
		case <-e.stopCh:
			return
		case <-ctx.Done():
			return
		case <-e.wake:
			if d := e.cfg.WakeDelay; d > 0 {
				// Let the messages enqueued meanwhile join this claim.
				select {
				case <-e.stopCh:
					return
				case <-ctx.Done():
					return
				case <-e.cfg.Clock.After(d):
				}
			}
		case <-e.cfg.Clock.After(wait):
		}
	}
}

// Work runs processing rounds until nothing is ready now and returns how many
// attempts reached an outcome (succeeded, skipped, dead, retry or exhausted).
// It is what the started loop runs between waits; tests call it directly and
// move a relayclock.Fake between calls. ctx governs the whole call (handlers
// get a child of it). A store error stops the round and is returned; the
// message concerned stays as it was and is retried by a later round. Work calls
// are serialised with each other and with the started loop. An engine without
// a Handler returns an error wrapping ErrNoHandler and touches nothing.
func (e *Engine) Work(ctx context.Context) (int, error) {
	if e.cfg.Handler == nil {
		return 0, e.errNoHandler("Work")
	}
	return e.work(ctx, nil)
}

func (e *Engine) work(ctx context.Context, stop <-chan struct{}) (int, error) {
	e.workMu.Lock()
	defer e.workMu.Unlock()
	var n int
	var err error
	if e.cfg.Mode == ModeFIFO {
		n, err = e.workFIFO(ctx, stop)
	} else {
		n, err = e.workClaim(ctx, stop)
	}
	if ctx.Err() == nil {
		e.refreshMetrics(ctx)
	}
	return n, err
}

// EnqueueParams is one message to enqueue.
type EnqueueParams struct {
	// ID orders the message; 0 lets the store allocate one. An ID already present
	// in the queue is left untouched ("insert if absent") and returned as is,
	// not as a duplicate, whatever Identity says.
	ID int64
	// Key is the ordering key of ModePerKey ("" is a key like any other).
	Key string
	// Identity is the message's business identity, checked at insert: when a
	// message of the queue already holds it — enqueued with it, or bound
	// later from a Decoder's Decoded.Identity, ARCHIVED messages included — no
	// message is inserted and the result reports a duplicate of that message.
	// A message enqueued with an Identity is bound to it from the start, so a
	// Decoder's identity for it is not bound (see Decoded.Identity). Empty: no
	// identity at enqueue (a Decoder may still bind one while processing).
	Identity string
	// Payload is the message body stored with it (may be nil).
	Payload []byte
	// ReceivedAt is the source's receive time (zero: unknown, stored NULL).
	ReceivedAt time.Time
}

// EnqueueResult is the outcome of one EnqueueParams. A duplicate is not an
// error: it is this result with Duplicate set.
type EnqueueResult struct {
	// ID is the enqueued message: the new one (its allocated id when
	// EnqueueParams.ID was 0), the one already present with EnqueueParams.ID,
	// or, for a duplicate, the message that already holds the identity.
	ID int64
	// Duplicate reports that no message was inserted because message ID of the
	// queue already holds EnqueueParams.Identity (River's
	// UniqueSkippedAsDuplicate).
	Duplicate bool
}

// Enqueue inserts messages into the engine's queue in one store transaction
// and returns one result per param in input order. Enqueued time is
// Clock.Now(). Params are decided as if enqueued one by one in order: of two
// params with one Identity the first is inserted and the second is its
// duplicate. A started engine is woken at once. Enqueue works on an engine
// without a Handler.
func (e *Engine) Enqueue(ctx context.Context, params ...*EnqueueParams) ([]EnqueueResult, error) {
	tx, err := e.d.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("relay: enqueue: begin: %w", err)
	}
	res, err := e.EnqueueTx(ctx, tx, params...)
	if err != nil {
		return nil, errors.Join(err, tx.Rollback(ctx))
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("relay: enqueue: commit: %w", err)
	}
	e.Notify()
	return res, nil
}

// EnqueueTx inserts messages in the caller's transaction, so they commit (or
// not) with the caller's own writes; results are as for Enqueue. The messages
// become visible when the caller commits; call Notify after the commit to have
// a started engine of this process pick them up at once rather than at its
// next poll. On PostgreSQL a param whose Identity another open transaction has
// just enqueued waits for that transaction: if it commits, the param is its
// duplicate; if it rolls back, the param is inserted — so two transactions
// never both enqueue one identity. A duplicate leaves the caller's transaction
// usable.
func (e *Engine) EnqueueTx(ctx context.Context, tx Tx, params ...*EnqueueParams) ([]EnqueueResult, error) {
	ex, _, err := resolveTx("EnqueueTx", tx)
	if err != nil {
		return nil, err
	}
	if len(params) == 0 {
		return nil, nil
	}
	ins, err := InsertParams(e.cfg.Queue, e.cfg.Clock.Now(), params...)
	if err != nil {
		return nil, err
	}
	res, err := ex.MessageInsertMany(ctx, ins)
	if err != nil {
		return nil, fmt.Errorf("relay: enqueue into %q: %w", e.cfg.Queue, err)
	}
	if len(res.IDs) != len(params) || len(res.Duplicate) != len(params) {
		return nil, fmt.Errorf("relay: enqueue into %q: the store answered for %d of %d messages",
			e.cfg.Queue, len(res.IDs), len(params))
	}
	out := make([]EnqueueResult, len(params))
	for i := range out {
		out[i] = EnqueueResult{ID: res.IDs[i], Duplicate: res.Duplicate[i]}
	}
	return out, nil
}

// InsertParams returns the store's insert parameters for enqueueing params
// into queue with enqueue time now: the one place that turns EnqueueParams
// into relaydriver.MessageInsertParams. EnqueueTx uses it, and so does a writer
// that runs its own insert in its own transaction (relayintake saves its
// cursor in the same transaction) so that it enqueues exactly as the engine
// does. The insert is "insert if absent": an ID already present is left
// untouched. A nil element is an error naming its index. It does no I/O.
func InsertParams(queue string, now time.Time, params ...*EnqueueParams) ([]*relaydriver.MessageInsertParams, error) {
	ins := make([]*relaydriver.MessageInsertParams, len(params))
	for i, p := range params {
		if p == nil {
			return nil, fmt.Errorf("relay: enqueue: params[%d] is nil", i)
		}
		ins[i] = &relaydriver.MessageInsertParams{
			Queue: queue, ID: p.ID, Key: p.Key, Identity: p.Identity, Payload: p.Payload,
			ReceivedAt: p.ReceivedAt, Now: now,
		}
	}
	return ins, nil
}

// Notify wakes the started loop if it is idle, so newly committed messages are
// processed without waiting for PollInterval. It never blocks; a loop that is
// busy runs another round anyway. Enqueue and Replay call it themselves.
func (e *Engine) Notify() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// ReplayParams selects messages to replay.
type ReplayParams struct {
	// Classes are the error classes to replay; required, and each must be in
	// Config.ReplayableClasses.
	Classes []relaytype.ErrorClass
	// IDs, when set, limits the replay to these messages.
	IDs []int64
}

// ErrReplayRefused is wrapped by Replay's error when a class is outside the
// whitelist.
var ErrReplayRefused = errors.New("relay: replay refused")

// Replay moves FAILED and DEAD messages of the given classes back to PENDING,
// resetting attempts, next attempt time, error and acknowledgement facts but
// keeping the identity, so the message is not its own duplicate (seed 000
// §9.1). Terminal successes and skips never move: replaying a succeeded message
// changes nothing. It refuses (ErrReplayRefused) any class outside
// Config.ReplayableClasses and runs inside the LifecycleGate. Note that a
// replayed FIFO message runs after later messages already did: replay does not
// restore history order (seed 000 §9.1).
func (e *Engine) Replay(ctx context.Context, params *ReplayParams) (int, error) {
	if params == nil || len(params.Classes) == 0 {
		return 0, fmt.Errorf("%w: no error class given (replayable: %v)", ErrReplayRefused, e.cfg.ReplayableClasses)
	}
	for _, c := range params.Classes {
		if !slices.Contains(e.cfg.ReplayableClasses, c) {
			return 0, fmt.Errorf("%w: class %q is not replayable on queue %q (replayable: %v)",
				ErrReplayRefused, c, e.cfg.Queue, e.cfg.ReplayableClasses)
		}
	}
	var n int
	err := e.gate.Do(ctx, func(ctx context.Context) error {
		var err error
		n, err = e.d.GetExecutor().MessageReplay(ctx, &relaydriver.MessageReplayParams{
			Queue:   e.cfg.Queue,
			Classes: slices.Clone(params.Classes),
			IDs:     slices.Clone(params.IDs),
			Now:     e.cfg.Clock.Now(),
		})
		return err
	})
	if err != nil {
		return n, fmt.Errorf("relay: replay %v on %q: %w", params.Classes, e.cfg.Queue, err)
	}
	e.log.InfoContext(ctx, "relay: replayed", "queue", e.cfg.Queue, "classes", params.Classes, "replayed", n)
	if n > 0 {
		e.Notify()
	}
	return n, nil
}

// Stats aggregates the queue: messages per state and the oldest unfinished
// message's enqueue time.
func (e *Engine) Stats(ctx context.Context) (*relaydriver.MessageStats, error) {
	st, err := e.d.GetExecutor().MessageStats(ctx, e.cfg.Queue)
	if err != nil {
		return nil, fmt.Errorf("relay: stats of %q: %w", e.cfg.Queue, err)
	}
	return st, nil
}
