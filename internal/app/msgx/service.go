package msgx

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/msgx/flightstore"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaylock"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relayservice"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysource"
	"github.com/relayhq/relay/relaytype"
)

// Options are what a Service runs on. Store, Mailbox and Sink are required.
type Options struct {
	// Config is the msgx configuration; it must be valid.
	Config Config
	// Store is the msgx PostgreSQL store: engine tables, flight state, outbox.
	Store *relaypgx.Driver
	// Mailbox is the shared MariaDB/MySQL mailbox (CMINMSGS, COUTMSGS), opened
	// with parseTime=true.
	Mailbox *sql.DB
	// Sink delivers both outbox targets (Kafka).
	Sink relaysink.Sink
	// Owner names this instance in the pipeline lock and logs.
	Owner string
	// LockTTL is the lease of lease-based locks (unused on PostgreSQL, whose
	// lock is a session advisory lock). Default relaylock.TTLDefault.
	LockTTL time.Duration
	// Clock is the only source of time. Default relayclock.System{}.
	Clock relaytype.Clock
	// Logger receives structured logs (never payloads). Default slog.Default().
	Logger *slog.Logger
	// Registerer receives every component's metrics (seed 000 §4.1, §5.1:
	// oldest unprocessed age, permanent holes, watermark lag, abandoned
	// acknowledgements). Default nil: no metrics.
	Registerer prometheus.Registerer
}

// Service is a whole msgx instance (seed 000): watermark intake over
// CMINMSGS, the strict FIFO pump with the Processor, the processing-mark
// write-back, the KAFKA:msg and KAFKA:schd dispatchers, outbox retention,
// engine archival, the request sender and the lifecycle job. They run as one
// relayservice.Service, which holds the pipeline lock (single active
// instance, §4.5) while they run.
type Service struct {
	o         Options
	cfg       Config
	table     *relaysource.SQLTable
	intake    *relayintake.Intake
	engine    *relay.Engine
	ack       *relay.AckWriter
	requester *Requester
	lifecycle *Lifecycle
	processor *Processor
	svc       *relayservice.Service
}

// Migrate brings the msgx store to the current schema: the engine line and
// the msgx line (flight state, requests, reference data, traces, history).
func Migrate(ctx context.Context, d *relaypgx.Driver, clock relaytype.Clock) (*relaymigrate.UpResult, error) {
	return relaymigrate.Up(ctx, d, clock, relaymigrate.EngineLineOf(d), flightstore.MigrationLine())
}

// MailboxTable returns the intake source and acknowledger over CMINMSGS:
// ID, MSGCONTENT (copied into the store at intake), RECEIVETIME, and the
// processing mark PROCFLAG/PROCTIME.
func MailboxTable(db *sql.DB, log *slog.Logger) (*relaysource.SQLTable, error) {
	return relaysource.NewSQLTable(db, relaysource.SQLTableConfig{
		Dialect: relaysource.DialectMySQL, Table: "CMINMSGS", IDColumn: "ID", PayloadColumn: "MSGCONTENT",
		ReceivedAtColumn: "RECEIVETIME", MarkColumn: "PROCFLAG", MarkTimeColumn: "PROCTIME", Logger: log,
	})
}

// New builds a Service; nothing runs until Run.
func New(o Options) (*Service, error) {
	if o.Store == nil || o.Mailbox == nil || o.Sink == nil {
		return nil, errors.New("msgx: Options.Store, Mailbox and Sink are required")
	}
	cfg := o.Config
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = relayclock.System{}
	}
	o.Logger = cmp.Or(o.Logger, slog.Default())
	o.LockTTL = cmp.Or(o.LockTTL, relaylock.TTLDefault)
	s := &Service{o: o, cfg: cfg}
	var err error
	if s.table, err = MailboxTable(o.Mailbox, o.Logger); err != nil {
		return nil, err
	}
	lateWindow := cfg.LateCheckWindow
	if lateWindow == 0 {
		lateWindow = -1 // off (relayintake reads 0 as its default)
	}
	if s.intake, err = relayintake.New(o.Store, s.table, relayintake.Config{Queue: cfg.Pipeline, BatchSize: cfg.ClaimBatch,
		MaxCommitDelay: cfg.MaxCommitDelay, LateCheckWindow: lateWindow, LateCheckInterval: cfg.LateCheckInterval,
		LateCheckLimit: cfg.LateCheckLimit, PollInterval: cfg.PollInterval, Clock: o.Clock, Logger: o.Logger,
		Registerer: o.Registerer}); err != nil {
		return nil, err
	}
	s.requester = NewRequester(cfg, o.Store.Pool(), o.Mailbox, o.Clock, o.Logger)
	s.processor = NewProcessor(cfg, ProcessorDeps{Clock: o.Clock, Logger: o.Logger, TraceDB: o.Store.Pool(), Sends: s.requester})
	if s.engine, err = relay.NewEngine(o.Store, relay.Config{Queue: cfg.Pipeline, Mode: relay.ModeFIFO, Handler: s.processor,
		MaxAttempts: cfg.MaxAttempts, Backoff: cfg.Backoff, IgnoreRules: cfg.IgnoreRules, AckIntent: true,
		Watermarked: true, FIFOBatch: cfg.FIFOBatch, PollInterval: cfg.PollInterval, HandlerTimeout: cfg.HandlerTimeout,
		InstanceID: o.Owner, Clock: o.Clock, Logger: o.Logger, Registerer: o.Registerer}); err != nil {
		return nil, err
	}
	if s.ack, err = relay.NewAckWriter(o.Store, s.table, relay.AckConfig{Queue: cfg.Pipeline, Gate: s.engine.Gate(),
		R: cfg.BackfillDeadline, MaxAttemptsAlert: cfg.BackfillMaxAttempts, BatchSize: cfg.BackfillBatch,
		PollInterval: cfg.PollInterval, Clock: o.Clock, Logger: o.Logger, Registerer: o.Registerer}); err != nil {
		return nil, err
	}
	var dispatchers []*relay.Dispatcher
	for _, t := range []struct {
		target string
		kind   relay.DispatchKind
		batch  int
	}{{TargetMsg, relay.DispatchEvents, cfg.MsgBatch}, {TargetSchd, relay.DispatchLatest, cfg.SchdFlushLimit}} {
		x, err := relay.NewDispatcher(o.Store, o.Sink, relay.DispatcherConfig{Target: t.target, Kind: t.kind,
			BatchSize: t.batch, PollInterval: cfg.PollInterval, Clock: o.Clock, Logger: o.Logger, Registerer: o.Registerer})
		if err != nil {
			return nil, err
		}
		dispatchers = append(dispatchers, x)
	}
	retention, err := relay.NewRetention(o.Store, relay.RetentionConfig{Targets: []string{TargetMsg, TargetSchd},
		SentRetention: cfg.EventRetention, Every: cfg.LifecycleEvery, Clock: o.Clock, Logger: o.Logger,
		Registerer: o.Registerer})
	if err != nil {
		return nil, err
	}
	archiver, err := relay.NewArchiver(o.Store, relay.ArchiverConfig{Queue: cfg.Pipeline, After: cfg.ArchiveAfter,
		Every: cfg.LifecycleEvery, Clock: o.Clock, Logger: o.Logger, Registerer: o.Registerer})
	if err != nil {
		return nil, err
	}
	s.lifecycle = NewLifecycle(cfg, o.Store, o.Store.Pool(), o.Clock, o.Logger)
	if s.svc, err = relayservice.New(relayservice.Config{Name: "pipeline:" + cfg.Pipeline, Owner: o.Owner,
		Driver: o.Store, Intake: s.intake, Engine: s.engine, Dispatchers: dispatchers, AckWriter: s.ack,
		Retention: retention, Archiver: archiver, Jobs: []func(context.Context) error{s.sendRequests, s.runLifecycle},
		Prepare: s.seed, LockTTL: o.LockTTL, Clock: o.Clock, Logger: o.Logger}); err != nil {
		return nil, err
	}
	return s, nil
}

// Active reports whether this instance holds the pipeline lock and runs the
// pipeline: admin mutations (replay, reopen) are allowed only then.
func (s *Service) Active() bool { return s.svc.Active() }

// Engine returns the FIFO engine (admin API, replay).
func (s *Service) Engine() *relay.Engine { return s.engine }

// Intake returns the watermark intake (admin API, late-row ingest).
func (s *Service) Intake() *relayintake.Intake { return s.intake }

// AckWriter returns the processing-mark write-back (admin API, reopen).
func (s *Service) AckWriter() *relay.AckWriter { return s.ack }

// Requester returns the outbound request sender.
func (s *Service) Requester() *Requester { return s.requester }

// Lifecycle returns the maintenance job.
func (s *Service) Lifecycle() *Lifecycle { return s.lifecycle }

// Stats reads the pipeline's progress: messages per state, the watermark and
// both outbox targets' counts (relayservice.Service.Stats). ctx governs the
// reads.
func (s *Service) Stats(ctx context.Context) (*relayservice.Stats, error) { return s.svc.Stats(ctx) }

// Run waits for the pipeline lock, then runs every role until ctx ends or
// the lock is lost, and stops them within a bounded time
// (relayservice.Service.Run). It returns nil after a clean stop by ctx and an
// error wrapping relaylock.ErrLost when the lock was lost. Run may be called
// once.
func (s *Service) Run(ctx context.Context) error { return s.svc.Run(ctx) }

// seed makes the configured cutover decision under the pipeline lock, before
// the intake starts.
func (s *Service) seed(ctx context.Context) error {
	if s.cfg.CutoverWatermark == "" {
		return nil
	}
	log := s.o.Logger
	w, err := s.intake.Seed(ctx, s.cfg.CutoverWatermark)
	switch {
	case errors.Is(err, relaytype.ErrSeedRefused):
		// seed 000 §4.3: an instance with a watermark or messages is never
		// re-seeded; a restart with the same setting simply carries on.
		log.WarnContext(ctx, "msgx: cutover seeding refused: the pipeline already has a watermark or messages; setting ignored",
			"mode", s.cfg.CutoverWatermark)
	case err != nil:
		return fmt.Errorf("msgx: cutover seeding %q: %w", s.cfg.CutoverWatermark, err)
	default:
		log.InfoContext(ctx, "msgx: watermark seeded", "mode", s.cfg.CutoverWatermark, "watermark", w)
	}
	return nil
}

// sendRequests is the request sender's job: a pass every poll interval.
func (s *Service) sendRequests(ctx context.Context) error {
	runEvery(ctx, s.o.Clock, s.cfg.PollInterval, s.o.Logger, "request sender", func(ctx context.Context) error {
		_, _, err := s.requester.Pass(ctx)
		return err
	})
	return nil
}

// runLifecycle is the maintenance job: a pass every lifecycle interval.
func (s *Service) runLifecycle(ctx context.Context) error {
	runEvery(ctx, s.o.Clock, s.cfg.LifecycleEvery, s.o.Logger, "lifecycle", func(ctx context.Context) error {
		_, err := s.lifecycle.Pass(ctx)
		return err
	})
	return nil
}
