package relayservice

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaylock"
	"github.com/relayhq/relay/relaytype"
)

// StopTimeoutDefault is Config.StopTimeout when zero.
const StopTimeoutDefault = 10 * time.Second

// Intake is the part that brings messages into the engine's pipeline:
// *relayintake.Intake, or any loop with the same contract. Run runs until ctx
// ends and then returns nil (or ctx's error); any other error it returns is a
// failure that stops the Service.
type Intake interface {
	Run(ctx context.Context) error
}

// Notifier is implemented by an Intake that can wake the engine after each
// commit (*relayintake.Intake does). New calls SetNotify with the engine's
// Notify, so an engine with a long poll interval still takes new rows at once.
type Notifier interface {
	SetNotify(fn func())
}

// Config configures a Service. Driver and Engine are required; every other
// part is optional. Zero values take the documented defaults.
type Config struct {
	// Name is the pipeline lock's name. Default "pipeline:" + Engine.Queue().
	Name string
	// Owner names this instance in the lock (lease rows) and logs. Default
	// Engine.InstanceID().
	Owner string
	// Driver is the pipeline's store: it holds the lock and answers Stats.
	// Required.
	Driver relaydriver.Driver
	// Engine processes the pipeline. Required.
	Engine *relay.Engine
	// Intake, when set, runs last and is stopped first. If it implements
	// Notifier, New wires it to Engine.Notify.
	Intake Intake
	// Dispatchers deliver the outbox targets the engine's handler appends to.
	Dispatchers []*relay.Dispatcher
	// AckWriter, when set, writes processing marks back to the source.
	AckWriter *relay.AckWriter
	// Retention and Archiver, when set, run the maintenance loops.
	Retention *relay.Retention
	Archiver  *relay.Archiver
	// Jobs are app loops, each run on its own goroutine with a ctx that ends
	// when the Service stops. A job that returns nil has simply finished; one
	// that returns an error before its ctx ended stops the Service, and Run
	// returns that error.
	Jobs []func(ctx context.Context) error
	// Prepare, when set, runs once the lock is held and before any part starts:
	// the place for what must happen under the lock but before the intake
	// runs, such as cutover seeding (relayintake.Intake.Seed). Its error stops
	// Run.
	Prepare func(ctx context.Context) error
	// Shared runs the parts without the pipeline lock, so several instances run
	// the pipeline at once: for per-key and unordered engines, whose claims
	// are leased message by message, fed by producers rather than an Intake.
	// New refuses Shared with an Intake or a ModeFIFO engine, which need one
	// active instance. Dispatchers keep their own per-target lock either way
	// (one delivers, the others stand by). Default false.
	Shared bool
	// LockTTL is the lease length of lease-based locks (SQLite); see
	// relaylock.Params.TTL. Default relaylock.TTLDefault.
	LockTTL time.Duration
	// LockRetryEvery is how often a waiting instance tries the lock again.
	// Default relaylock.RetryEveryDefault.
	LockRetryEvery time.Duration
	// StopTimeout bounds the whole stop sequence; a part still running after it
	// is abandoned and reported in Run's error. Default StopTimeoutDefault.
	StopTimeout time.Duration
	// Clock drives the lock's lease and waits. Default relayclock.System{}.
	Clock relaytype.Clock
	// Logger receives start, stop and lock records. Default slog.Default().
	Logger *slog.Logger
}

// Service runs one pipeline's parts under its lock. Create it with New; run
// it with Run, at most once (the parts it runs start at most once).
// Active, Stats and Engine are safe for concurrent use with Run.
type Service struct {
	cfg    Config
	parts  []named // the Start/Stop parts in start order
	active atomic.Bool
	ran    atomic.Bool
}

// New validates cfg (the error names the bad field), applies the defaults and
// wires the intake to the engine's Notify. It does no I/O.
func New(cfg Config) (*Service, error) {
	switch {
	case cfg.Driver == nil:
		return nil, errors.New("relayservice: Config.Driver is required")
	case cfg.Engine == nil:
		return nil, errors.New("relayservice: Config.Engine is required")
	case cfg.Shared && cfg.Intake != nil:
		return nil, errors.New("relayservice: Config.Shared with an Intake: the intake's watermark needs one active instance")
	case cfg.Shared && cfg.Engine.Mode() == relay.ModeFIFO:
		return nil, errors.New("relayservice: Config.Shared with a ModeFIFO engine: global order needs one active instance")
	case cfg.LockTTL < 0:
		return nil, fmt.Errorf("relayservice: Config.LockTTL %v is negative", cfg.LockTTL)
	case cfg.LockRetryEvery < 0:
		return nil, fmt.Errorf("relayservice: Config.LockRetryEvery %v is negative", cfg.LockRetryEvery)
	case cfg.StopTimeout < 0:
		return nil, fmt.Errorf("relayservice: Config.StopTimeout %v is negative", cfg.StopTimeout)
	}
	for i, x := range cfg.Dispatchers {
		if x == nil {
			return nil, fmt.Errorf("relayservice: Config.Dispatchers[%d] is nil", i)
		}
	}
	for i, j := range cfg.Jobs {
		if j == nil {
			return nil, fmt.Errorf("relayservice: Config.Jobs[%d] is nil", i)
		}
	}
	cfg.Name = cmp.Or(cfg.Name, "pipeline:"+cfg.Engine.Queue())
	cfg.Owner = cmp.Or(cfg.Owner, cfg.Engine.InstanceID())
	cfg.LockTTL = cmp.Or(cfg.LockTTL, relaylock.TTLDefault)
	cfg.LockRetryEvery = cmp.Or(cfg.LockRetryEvery, relaylock.RetryEveryDefault)
	cfg.StopTimeout = cmp.Or(cfg.StopTimeout, StopTimeoutDefault)
	if cfg.Clock == nil {
		cfg.Clock = relayclock.System{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if n, ok := cfg.Intake.(Notifier); ok {
		n.SetNotify(cfg.Engine.Notify)
	}
	return &Service{cfg: cfg, parts: partsOf(cfg)}, nil
}

// Engine returns the pipeline's engine (replay, the admin API).
func (s *Service) Engine() *relay.Engine { return s.cfg.Engine }

// Active reports whether this instance holds the pipeline lock and runs the
// parts now (with Config.Shared: whether it runs the parts now). Mutations that must run in the active instance's lifecycle gate
// (replay, reopen; see relayadmin.Deps.Active) are allowed only then.
func (s *Service) Active() bool { return s.active.Load() }

// Run waits for the pipeline lock (not with Config.Shared), then starts the parts (see the package doc
// for the order) and keeps them running until ctx ends, the lock is lost or a
// part fails; then it stops them in reverse order within Config.StopTimeout
// and releases the lock.
//
// It returns nil after a stop by ctx (also when ctx ended while waiting for
// the lock); an error wrapping relaylock.ErrLost when the lock was lost; or
// the first part's failure (a Start error, an intake or job error, Prepare's
// error), joined with any error of the stop. ctx governs the wait and the
// running; the stop runs after ctx ended, bounded by StopTimeout. Run may be
// called only once.
func (s *Service) Run(ctx context.Context) error {
	if !s.ran.CompareAndSwap(false, true) {
		return errors.New("relayservice: Run called twice (the parts start at most once)")
	}
	if s.cfg.Shared {
		err := s.runActive(ctx)
		if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil
		}
		return err
	}
	err := relaylock.Run(ctx, s.cfg.Driver, relaylock.Params{Name: s.cfg.Name, Owner: s.cfg.Owner,
		TTL: s.cfg.LockTTL, RetryEvery: s.cfg.LockRetryEvery, Clock: s.cfg.Clock, Logger: s.cfg.Logger}, s.runActive)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) && !errors.Is(err, relaylock.ErrLost) {
		return nil
	}
	return err
}

// starter is a part with a Start/Stop lifecycle.
type starter interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// named is a part and how logs and errors name it.
type named struct {
	name string
	part starter
}

// loop is a running goroutine part (intake or job).
type loop struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
}

// runActive runs while the lock is held; ctx ends on shutdown or lock loss.
func (s *Service) runActive(ctx context.Context) (err error) {
	s.active.Store(true)
	defer s.active.Store(false)
	log := s.cfg.Logger.With("lock", s.cfg.Name)
	if s.cfg.Prepare != nil {
		if err := s.cfg.Prepare(ctx); err != nil {
			return fmt.Errorf("relayservice: %s: prepare: %w", s.cfg.Name, err)
		}
	}

	// failed ends when ctx ends or a goroutine part fails; its cause is the
	// first failure.
	failed, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	var started []named
	var loops []loop
	stop := func() error {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.StopTimeout)
		defer cancel()
		var errs []error
		for i := len(loops) - 1; i >= 0; i-- {
			l := loops[i]
			l.cancel()
			select {
			case <-l.done:
			case <-stopCtx.Done():
				errs = append(errs, fmt.Errorf("relayservice: %s: %s did not stop within %v", s.cfg.Name, l.name, s.cfg.StopTimeout))
			}
		}
		for i := len(started) - 1; i >= 0; i-- {
			if err := started[i].part.Stop(stopCtx); err != nil {
				errs = append(errs, fmt.Errorf("relayservice: %s: stop %s: %w", s.cfg.Name, started[i].name, err))
			}
		}
		return errors.Join(errs...)
	}

	for _, p := range s.parts {
		if err := p.part.Start(ctx); err != nil {
			return errors.Join(fmt.Errorf("relayservice: %s: start %s: %w", s.cfg.Name, p.name, err), stop())
		}
		started = append(started, p)
	}
	// Goroutine parts run on contexts of their own (keeping ctx's values), so
	// that stop ends them one by one in reverse order, not all at once.
	goLoop := func(name string, run func(ctx context.Context) error) {
		lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		l := loop{name: name, cancel: cancel, done: make(chan struct{})}
		loops = append(loops, l)
		go func() {
			defer close(l.done)
			err := run(lctx)
			if err != nil && lctx.Err() == nil {
				fail(fmt.Errorf("relayservice: %s: %s: %w", s.cfg.Name, name, err))
			}
		}()
	}
	for i, job := range s.cfg.Jobs {
		goLoop(fmt.Sprintf("job %d", i), job)
	}
	if s.cfg.Intake != nil {
		goLoop("intake", s.cfg.Intake.Run)
	}
	log.InfoContext(ctx, "relayservice: pipeline running", "owner", s.cfg.Owner, "parts", len(started), "loops", len(loops))

	<-failed.Done()
	cause := context.Cause(failed)
	if cause == context.Cause(ctx) {
		cause = nil // ctx ended first: a shutdown, or a lost lock that relaylock reports
	}
	log.InfoContext(ctx, "relayservice: stopping pipeline", "failure", cause)
	return errors.Join(cause, stop())
}

// partsOf lists cfg's Start/Stop parts in start order.
func partsOf(cfg Config) []named {
	ps := []named{{"engine", cfg.Engine}}
	for _, x := range cfg.Dispatchers {
		ps = append(ps, named{"dispatcher " + x.Target(), x})
	}
	if cfg.AckWriter != nil {
		ps = append(ps, named{"ack writer", cfg.AckWriter})
	}
	if cfg.Retention != nil {
		ps = append(ps, named{"retention", cfg.Retention})
	}
	if cfg.Archiver != nil {
		ps = append(ps, named{"archiver", cfg.Archiver})
	}
	return ps
}

// Stats is a snapshot of a pipeline's progress.
type Stats struct {
	// Active reports whether this instance held the pipeline lock.
	Active bool
	// Messages is the engine's view: messages per state, the oldest
	// unfinished one, the largest id.
	Messages *relaydriver.MessageStats
	// Cursor is the intake's watermark; nil without an Intake or before the
	// pipeline was seeded.
	Cursor *relaytype.Cursor
	// Intake is the intake's own Stats (cursor, permanent holes, the age of
	// the hole being waited for) when the Intake reports them, as
	// *relayintake.Intake does; nil otherwise.
	Intake *relayintake.Stats
	// Ack is the acknowledgement writer's Stats; nil without an AckWriter.
	Ack *relaydriver.AckStats
	// Archiver and Retention are the maintenance jobs' Stats; nil when the
	// Service runs none.
	Archiver, Retention *relay.MaintenanceStats
	// Outbox holds each dispatcher's Stats, keyed by target: its events (or,
	// for a latest-state dispatcher, its latest-state rows) per state, the
	// oldest pending age and whether this instance's dispatcher delivers.
	Outbox map[string]relay.DispatcherStats
}

// Stats reads the pipeline's progress from the store: the engine's stats,
// the intake's cursor (when there is an Intake) and every dispatcher target's
// outbox counts. It works whether or not this instance is active. ctx governs
// the reads.
func (s *Service) Stats(ctx context.Context) (*Stats, error) {
	st := &Stats{Active: s.Active(), Outbox: map[string]relay.DispatcherStats{}}
	var err error
	if st.Messages, err = s.cfg.Engine.Stats(ctx); err != nil {
		return nil, err
	}
	ex := s.cfg.Driver.GetExecutor()
	if sr, ok := s.cfg.Intake.(interface {
		Stats(context.Context) (*relayintake.Stats, error)
	}); ok {
		if st.Intake, err = sr.Stats(ctx); err != nil {
			return nil, err
		}
		st.Cursor = st.Intake.Cursor
	} else if s.cfg.Intake != nil {
		st.Cursor, err = ex.CursorGet(ctx, s.cfg.Engine.Queue())
		if errors.Is(err, relaytype.ErrNotFound) {
			st.Cursor, err = nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("relayservice: cursor of %q: %w", s.cfg.Engine.Queue(), err)
		}
	}
	if s.cfg.AckWriter != nil {
		if st.Ack, err = s.cfg.AckWriter.Stats(ctx); err != nil {
			return nil, err
		}
	}
	if s.cfg.Archiver != nil {
		a := s.cfg.Archiver.Stats()
		st.Archiver = &a
	}
	if s.cfg.Retention != nil {
		r := s.cfg.Retention.Stats()
		st.Retention = &r
	}
	for _, x := range s.cfg.Dispatchers {
		ob, err := x.Stats(ctx)
		if err != nil {
			return nil, fmt.Errorf("relayservice: outbox stats of %q: %w", x.Target(), err)
		}
		st.Outbox[x.Target()] = ob
	}
	return st, nil
}
