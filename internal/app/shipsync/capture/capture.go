package capture

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relayservice"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysource"
	"github.com/relayhq/relay/relaytype"
)

// Defaults of Config.
const (
	// TopicPrefixDefault is Config.TopicPrefix when empty: topics are
	// "sync.cdc.<logical>.<db>.<table>".
	TopicPrefixDefault = "sync.cdc"
	// QueueDefault is Config.Queue when empty.
	QueueDefault = "shipsync-capture"
	// TargetDefault is Config.Target when empty.
	TargetDefault = "shipsync-capture"
	// PollIntervalDefault is Config.PollInterval when zero: the changelog
	// polling latency.
	PollIntervalDefault = 500 * time.Millisecond
	// MaxCommitDelayDefault is Config.MaxCommitDelay when zero: how long a
	// changelog id may stay invisible (its business transaction still open)
	// before the intake gives it up as a permanent hole. It must exceed the
	// longest business transaction that writes a captured table.
	MaxCommitDelayDefault = 5 * time.Minute
	// PruneEveryDefault is Config.PruneEvery when zero.
	PruneEveryDefault = time.Minute
	// PruneBatchDefault is Config.PruneBatch when zero.
	PruneBatchDefault = 1000
	// RetryAttempts is the attempt limit of the engine (a changelog row
	// failing for a transient reason, such as MariaDB unreachable while its
	// schema is read) and of the dispatcher (Kafka unreachable): in effect
	// unlimited, at RetryBackoff's last level. A change must never be given
	// up (DEAD) for an outage — its key's later changes would then overtake
	// it; only a permanent failure goes DEAD, at once.
	RetryAttempts = 1_000_000
)

// RetryBackoff is the retry schedule of the engine and the dispatcher: its
// last level repeats.
var RetryBackoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, time.Minute}

// logicalRE is what Config.Logical may be (it is a topic part and
// source.name).
var logicalRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Config configures a Capture. DB, Store, Sink and Logical are required.
type Config struct {
	// DB is the business database (MariaDB/MySQL), its default database
	// the one Install prepared. The capture only reads it, except Prune.
	DB *sql.DB
	// Store is the capture's own state (the engine's queue, watermark and
	// outbox): the embedded SQLite store on a ship. Migrate it first.
	Store relaydriver.Driver
	// Sink delivers the records (relaykafka).
	Sink relaysink.Sink
	// Logical is Debezium's topic.prefix: source.name and the topic part
	// after TopicPrefix. Required; [A-Za-z0-9_-].
	Logical string
	// TopicPrefix is prepended to "<logical>.<db>.<table>". Default
	// TopicPrefixDefault.
	TopicPrefix string
	// Queue and Target name the engine queue and outbox target. Defaults
	// QueueDefault and TargetDefault.
	Queue, Target string
	// MaxCommitDelay: see MaxCommitDelayDefault.
	MaxCommitDelay time.Duration
	// NoHoleProbe turns off the hole probe: by default a hole in the
	// changelog ids is released as soon as every InnoDB transaction open
	// when it was first seen has ended (a rolled-back change then stalls the
	// capture for about a second, not MaxCommitDelay); the probe reads
	// information_schema.INNODB_TRX and needs the PROCESS privilege. Without
	// it, or when the probe fails, holes wait MaxCommitDelay.
	NoHoleProbe bool
	// PollInterval is how often the changelog, the queue and the outbox are
	// polled when idle. Default PollIntervalDefault.
	PollInterval time.Duration
	// BatchSize is the most changelog rows one intake round reads. Default
	// relayintake.BatchSizeDefault.
	BatchSize int
	// PruneEvery is how often Run deletes changelog rows already in the
	// local store; negative turns pruning off. Default PruneEveryDefault.
	PruneEvery time.Duration
	// PruneBatch is the most rows one prune statement deletes. Default
	// PruneBatchDefault.
	PruneBatch int
	// Owner names this instance in the pipeline lock. Default "capture".
	Owner string
	// Clock is the only source of time. Default relayclock.System{}.
	Clock relaytype.Clock
	// Logger receives structured logs (never row values). Default
	// slog.Default().
	Logger *slog.Logger
	// Registerer receives the engine's metrics. Default nil: none.
	Registerer prometheus.Registerer
}

func (c *Config) validate() error {
	switch {
	case c.DB == nil:
		return errors.New("capture: Config.DB is required")
	case c.Store == nil:
		return errors.New("capture: Config.Store is required")
	case c.Sink == nil:
		return errors.New("capture: Config.Sink is required")
	case !logicalRE.MatchString(c.Logical):
		return errors.New("capture: Config.Logical must be 1-64 of [A-Za-z0-9_-]")
	case c.MaxCommitDelay < 0 || c.PollInterval < 0 || c.BatchSize < 0 || c.PruneBatch < 0:
		return errors.New("capture: Config.MaxCommitDelay, PollInterval, BatchSize and PruneBatch must not be negative")
	}
	return nil
}

// Capture runs the pipeline changelog → watermark intake → FIFO engine
// (the producer handler) → outbox → sink. Create it with New, run it with
// Run (or drive it with Step). Safe for concurrent use as documented per
// method.
type Capture struct {
	cfg        Config
	table      *relaysource.SQLTable
	intake     *relayintake.Intake
	engine     *relay.Engine
	dispatcher *relay.Dispatcher
	svc        *relayservice.Service

	seedOnce sync.Mutex
	seeded   bool
}

// Migrate brings the capture's store to the current engine schema.
func Migrate(ctx context.Context, d relaydriver.Driver, clock relaytype.Clock) error {
	_, err := relaymigrate.Up(ctx, d, clock, relaymigrate.EngineLineOf(d))
	return err
}

// New builds a Capture; it does no I/O.
func New(cfg Config) (*Capture, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.TopicPrefix = cmp.Or(cfg.TopicPrefix, TopicPrefixDefault)
	cfg.Queue = cmp.Or(cfg.Queue, QueueDefault)
	cfg.Target = cmp.Or(cfg.Target, TargetDefault)
	cfg.MaxCommitDelay = cmp.Or(cfg.MaxCommitDelay, MaxCommitDelayDefault)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, PollIntervalDefault)
	cfg.PruneEvery = cmp.Or(cfg.PruneEvery, PruneEveryDefault)
	cfg.PruneBatch = cmp.Or(cfg.PruneBatch, PruneBatchDefault)
	cfg.Owner = cmp.Or(cfg.Owner, "capture")
	if cfg.Clock == nil {
		cfg.Clock = relayclock.System{}
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	c := &Capture{cfg: cfg}
	var err error
	if c.table, err = relaysource.NewSQLTable(cfg.DB, relaysource.SQLTableConfig{Dialect: relaysource.DialectMySQL,
		Table: "_sync_changelog", IDColumn: "id", PayloadColumn: "payload", Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	if c.intake, err = relayintake.New(cfg.Store, c.table, relayintake.Config{Queue: cfg.Queue, BatchSize: cfg.BatchSize,
		MaxCommitDelay: cfg.MaxCommitDelay, ProbeHoles: !cfg.NoHoleProbe, PollInterval: cfg.PollInterval, Clock: cfg.Clock,
		Logger: cfg.Logger, Registerer: cfg.Registerer}); err != nil {
		return nil, err
	}
	p := &producer{db: cfg.DB, logical: cfg.Logical, topic: cfg.TopicPrefix + "." + cfg.Logical, target: cfg.Target,
		clock: cfg.Clock, codecs: map[int64]*codec{}}
	if c.engine, err = relay.NewEngine(cfg.Store, relay.Config{Queue: cfg.Queue, Mode: relay.ModeFIFO, Handler: p,
		Watermarked: true, FIFOBatch: 64, MaxAttempts: RetryAttempts, Backoff: RetryBackoff,
		PollInterval: cfg.PollInterval, InstanceID: cfg.Owner, Clock: cfg.Clock, Logger: cfg.Logger,
		Registerer: cfg.Registerer}); err != nil {
		return nil, err
	}
	if c.dispatcher, err = relay.NewDispatcher(cfg.Store, cfg.Sink, relay.DispatcherConfig{Target: cfg.Target,
		Kind: relay.DispatchEvents, MaxAttempts: RetryAttempts, Backoff: RetryBackoff,
		// The key is the row's primary key: it stays out of the logs.
		DigestKeys:   true,
		PollInterval: cfg.PollInterval, Clock: cfg.Clock, Logger: cfg.Logger, Registerer: cfg.Registerer}); err != nil {
		return nil, err
	}
	retention, err := relay.NewRetention(cfg.Store, relay.RetentionConfig{Targets: []string{cfg.Target},
		Clock: cfg.Clock, Logger: cfg.Logger, Registerer: cfg.Registerer})
	if err != nil {
		return nil, err
	}
	archiver, err := relay.NewArchiver(cfg.Store, relay.ArchiverConfig{Queue: cfg.Queue, Clock: cfg.Clock,
		Logger: cfg.Logger, Registerer: cfg.Registerer})
	if err != nil {
		return nil, err
	}
	var jobs []func(context.Context) error
	if cfg.PruneEvery > 0 {
		jobs = append(jobs, c.pruneJob)
	}
	if c.svc, err = relayservice.New(relayservice.Config{Name: "capture:" + cfg.Queue, Owner: cfg.Owner,
		Driver: cfg.Store, Intake: c.intake, Engine: c.engine, Dispatchers: []*relay.Dispatcher{c.dispatcher},
		Retention: retention, Archiver: archiver, Jobs: jobs, Prepare: c.seed, Clock: cfg.Clock,
		Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	return c, nil
}

// Engine returns the FIFO engine (stats, dead letters, replay).
func (c *Capture) Engine() *relay.Engine { return c.engine }

// Topics returns the topics of the tables installed in db's default
// database: "<prefix>.<logical>.<db>.<table>" (prefix "" means
// TopicPrefixDefault), for creating them before the capture runs — the
// Kafka sink does not ask the broker to create topics. ctx governs the
// reads.
func Topics(ctx context.Context, db *sql.DB, prefix, logical string) ([]string, error) {
	schema, err := currentDatabase(ctx, db)
	if err != nil {
		return nil, err
	}
	tables, err := strColumn(ctx, db, stmts["TableMetaList"], schema)
	if err != nil {
		return nil, fmt.Errorf("capture: installed tables: %w", err)
	}
	out := make([]string, len(tables))
	for i, t := range tables {
		out[i] = cmp.Or(prefix, TopicPrefixDefault) + "." + logical + "." + schema + "." + t
	}
	return out, nil
}

// Active reports whether this instance holds the pipeline lock and runs
// the capture: admin mutations (replay) are allowed only then.
func (c *Capture) Active() bool { return c.svc.Active() }

// Intake returns the changelog intake (watermark, holes).
func (c *Capture) Intake() *relayintake.Intake { return c.intake }

// Run takes the pipeline lock, seeds the watermark on first start and runs
// intake, engine, dispatcher, outbox retention, message archival and the
// prune job until ctx
// ends (relayservice.Service.Run). It may be called once.
func (c *Capture) Run(ctx context.Context) error { return c.svc.Run(ctx) }

// seed stores the first watermark on first start: zero. Every changelog
// row was written after install, so the capture reads them all; "min"
// would be wrong, since a transaction still open may hold an id below the
// smallest visible one. If the changelog's ids do not start at 1 (pruned
// before this state file existed, or a re-created changelog), the missing
// range is one hole, released after MaxCommitDelay. A restart keeps its
// watermark.
func (c *Capture) seed(ctx context.Context) error {
	c.seedOnce.Lock()
	defer c.seedOnce.Unlock()
	if c.seeded {
		return nil
	}
	_, err := c.intake.Seed(ctx, relayintake.SeedZero)
	switch {
	case errors.Is(err, relaytype.ErrSeedRefused): // seeded before: carry on
	case err != nil:
		return fmt.Errorf("capture: seed: %w", err)
	}
	c.seeded = true
	return nil
}

// Step runs one round of every stage in turn — seed if needed, an intake
// round, the engine, the dispatcher — and returns how much it moved (rows
// enqueued + messages processed + events sent). Tests and demos drive the
// pipeline with it on their own clock instead of Run; do not use both at
// once. ctx governs every call.
func (c *Capture) Step(ctx context.Context) (int, error) {
	if err := c.seed(ctx); err != nil {
		return 0, err
	}
	res, err := c.intake.RunOnce(ctx)
	if err != nil {
		return 0, err
	}
	processed, err := c.engine.Work(ctx)
	if err != nil {
		return 0, err
	}
	sent, err := c.dispatcher.Work(ctx)
	if err != nil {
		return 0, err
	}
	return res.Enqueued + processed + sent, nil
}

// Prune is PruneChangelog on this capture's database, store and queue.
func (c *Capture) Prune(ctx context.Context) (int64, error) {
	return PruneChangelog(ctx, c.cfg.DB, c.cfg.Store, PruneOpts{Queue: c.cfg.Queue, Batch: c.cfg.PruneBatch})
}

// PruneOpts are PruneChangelog's options.
type PruneOpts struct {
	// Queue is the capture's queue. Default QueueDefault.
	Queue string
	// Batch is the most rows one statement deletes. Default
	// PruneBatchDefault.
	Batch int
}

// PruneChangelog deletes changelog rows at or below the capture's watermark
// in store — their content is in the local store already, the engine's
// inbox — except rows at permanent-hole ids not ingested yet (a late row
// the intake's late check must still find), at most Batch rows a statement
// until none is left. It returns how many it deleted. It is safe while the
// capture runs. ctx governs every call.
func PruneChangelog(ctx context.Context, db *sql.DB, store relaydriver.Driver, o PruneOpts) (int64, error) {
	o.Queue = cmp.Or(o.Queue, QueueDefault)
	o.Batch = cmp.Or(o.Batch, PruneBatchDefault)
	ex := store.GetExecutor()
	cur, err := ex.CursorGet(ctx, o.Queue)
	if errors.Is(err, relaytype.ErrNotFound) {
		return 0, nil // not seeded: nothing read yet
	}
	if err != nil {
		return 0, fmt.Errorf("capture: prune: watermark: %w", err)
	}
	w := cur.Watermark
	holes, err := ex.HoleList(ctx, o.Queue)
	if err != nil {
		return 0, fmt.Errorf("capture: prune: holes: %w", err)
	}
	var keep []string
	for _, h := range holes {
		if h.IngestedAt.IsZero() && h.ID <= w {
			keep = append(keep, strconv.FormatInt(h.ID, 10))
		}
	}
	const maxKeep = 500
	if len(keep) > maxKeep { // prune below the oldest instead of a huge list
		first, _ := strconv.ParseInt(keep[0], 10, 64)
		w, keep = first-1, nil
	}
	keepSQL := ""
	if len(keep) > 0 {
		keepSQL = "AND id NOT IN (" + strings.Join(keep, ",") + ")"
	}
	q, err := render("ChangelogPrune", map[string]string{"Keep": keepSQL, "Limit": strconv.Itoa(o.Batch)})
	if err != nil {
		return 0, err
	}
	var total int64
	for {
		r, err := db.ExecContext(ctx, q, w)
		if err != nil {
			return total, fmt.Errorf("capture: prune: %w", err)
		}
		n, _ := r.RowsAffected()
		total += n
		if n < int64(o.Batch) {
			return total, nil
		}
	}
}

// pruneJob runs Prune every PruneEvery until ctx ends; a failed pass is
// logged and retried at the next.
func (c *Capture) pruneJob(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.cfg.Clock.After(c.cfg.PruneEvery):
		}
		n, err := c.Prune(ctx)
		if err != nil && ctx.Err() == nil {
			c.cfg.Logger.WarnContext(ctx, "capture: prune failed", "error", err)
		} else if n > 0 {
			c.cfg.Logger.DebugContext(ctx, "capture: changelog pruned", "rows", n)
		}
	}
}
