package demo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	_ "modernc.org/sqlite" // the source table's driver

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relayservice"
	"github.com/relayhq/relay/relaysource"
	"github.com/relayhq/relay/relaytype"
)

// Options configure one demo run. Zero values take the defaults in Run.
type Options struct {
	// Store is the engine's store, already open. Run migrates it.
	Store relaydriver.Driver
	// Queue names the run's queue (unique per run on a shared store).
	Queue string
	// Dir holds the source database file.
	Dir string
	// Plan shapes the generated source.
	Plan PlanOptions
	// MaxCommitDelay ages holes (default 500ms); LateAfter is how long after the
	// rows behind it a late row commits (default a fifth of MaxCommitDelay,
	// well inside it).
	MaxCommitDelay time.Duration
	LateAfter      time.Duration
	// Chunk rows are written every ChunkEvery (defaults 500 rows, 10ms).
	Chunk      int
	ChunkEvery time.Duration
	// Timeout bounds the whole run (default 5m).
	Timeout time.Duration
	// Progress is how often a progress line is printed (default 500ms).
	Progress time.Duration
	// Clock drives the engine and intake.
	Clock relaytype.Clock
	// Logger receives the engine's logs.
	Logger *slog.Logger
	// Registerer receives the engine's and intake's metrics (may be nil).
	Registerer prometheus.Registerer
	// Kafka adds the outbox stage: the handler appends a change event per
	// applied message and a dispatcher delivers them to an in-process Kafka
	// (kfake) cluster, which the reconciliation reads back.
	Kafka bool
}

// Run executes the demo pipeline and writes progress and the reconciliation to
// out. It returns the report, and an error when the run failed or the
// reconciliation found a mismatch.
func Run(ctx context.Context, o Options, out io.Writer) (*Report, error) {
	o.defaults()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()

	line, err := MigrationLine(o.Store.Name())
	if err != nil {
		return nil, err
	}
	if _, err := relaymigrate.Up(ctx, o.Store, o.Clock, relaymigrate.EngineLineOf(o.Store), line); err != nil {
		return nil, err
	}
	plan := NewPlan(o.Plan)

	src, err := OpenSource(ctx, filepath.Join(o.Dir, "source.db"))
	if err != nil {
		return nil, err
	}
	defer src.Close()
	table, err := relaysource.NewSQLTable(src, relaysource.SQLTableConfig{
		Dialect: relaysource.DialectSQLite, Table: "source_messages", IDColumn: "id",
		PayloadColumn: "payload", ReceivedAtColumn: "received_at",
	})
	if err != nil {
		return nil, err
	}
	intake, err := relayintake.New(o.Store, table, relayintake.Config{
		Queue: o.Queue, BatchSize: 1000, MaxCommitDelay: o.MaxCommitDelay,
		PollInterval: 20 * time.Millisecond, Clock: o.Clock, Logger: o.Logger, Registerer: o.Registerer,
	})
	if err != nil {
		return nil, err
	}
	// seed 000 §4.3: cutover seeding is explicit; the demo starts from zero so
	// that id 1 onwards follows the hole rules.
	if _, err := intake.Seed(ctx, relayintake.SeedZero); err != nil {
		return nil, err
	}
	handler := &Handler{Queue: o.Queue}
	var kafka *kafkaStage
	if o.Kafka {
		handler.Target = "kafka-" + o.Queue
		if kafka, err = startKafka(ctx, o, handler.Target); err != nil {
			return nil, err
		}
		defer kafka.close(context.WithoutCancel(ctx))
	}
	engine, err := relay.NewEngine(o.Store, relay.Config{
		Queue: o.Queue, Mode: relay.ModeFIFO, Handler: handler,
		MaxAttempts: 3, Backoff: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
		IgnoreRules: IgnoreRules, Watermarked: true, PollInterval: 20 * time.Millisecond, FIFOBatch: 16,
		Clock: o.Clock, Logger: o.Logger, Registerer: o.Registerer,
	})
	if err != nil {
		return nil, err
	}

	var dispatchers []*relay.Dispatcher
	if kafka != nil {
		dispatchers = append(dispatchers, kafka.dispatcher)
	}
	svc, err := relayservice.New(relayservice.Config{Driver: o.Store, Intake: intake, Engine: engine,
		Dispatchers: dispatchers, Clock: o.Clock, Logger: o.Logger})
	if err != nil {
		return nil, err
	}

	fmt.Fprintf(out, "relay demo: queue %s on %s store; %d ids (%d rows, %d late, %d permanent holes); max commit delay %s\n",
		o.Queue, o.Store.Name(), o.Plan.N, len(plan.Rows), countLate(plan), len(plan.PermanentHoles), o.MaxCommitDelay)

	start := o.Clock.Now()
	writerDone := make(chan error, 1)
	go func() { writerDone <- writeSource(ctx, src, plan, o) }()

	// The service runs on a context of its own: it must keep running (and then
	// stop cleanly) even when the run's timeout ends the progress loop.
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	runDone := make(chan error, 1)
	go func() { runDone <- svc.Run(runCtx) }()

	lastID := plan.Rows[len(plan.Rows)-1].ID
	writing := true
	var runErr error
wait:
	for {
		select {
		case err := <-writerDone:
			writing = false
			if err != nil {
				runErr = fmt.Errorf("demo: write source: %w", err)
				break wait
			}
		case <-o.Clock.After(o.Progress):
		case <-ctx.Done():
			runErr = fmt.Errorf("demo: did not finish within %s: %w", o.Timeout, ctx.Err())
			break wait
		case err := <-runDone:
			// The pipeline stopped by itself: a part failed.
			runDone <- err
			runErr = fmt.Errorf("demo: pipeline stopped before the end: %w", err)
			break wait
		}
		p, err := progress(ctx, svc)
		if err != nil {
			runErr = err
			break wait
		}
		events := ""
		if kafka != nil {
			events = fmt.Sprintf(" events sent=%d pending=%d", p.sent, p.pending)
		}
		fmt.Fprintf(out, "  %6.1fs  W=%-7d enqueued=%-7d done=%-7d backlog=%-6d holes=%d%s\n",
			o.Clock.Now().Sub(start).Seconds(), p.watermark, p.enqueued, p.done, p.backlog, p.holes, events)
		if !writing && p.watermark >= lastID && p.backlog == 0 && p.pending == 0 {
			break
		}
	}
	elapsed := o.Clock.Now().Sub(start)
	stopRun()
	if err := <-runDone; err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("demo: pipeline: %w", err))
	}
	if runErr != nil {
		return nil, runErr
	}

	rep, err := Reconcile(context.WithoutCancel(ctx), o.Store, src, o.Queue, plan)
	if err != nil {
		return nil, err
	}
	if kafka != nil {
		if err := rep.ReconcileKafka(context.WithoutCancel(ctx), kafka.brokers()); err != nil {
			return nil, err
		}
	}
	rep.Elapsed = elapsed
	rep.Write(out)
	if !rep.OK() {
		return rep, fmt.Errorf("demo: reconciliation failed with %d mismatches (listed above)", len(rep.Failures))
	}
	return rep, nil
}

func (o *Options) defaults() {
	if o.Plan.N == 0 {
		o.Plan.N = 10000
	}
	o.Plan.N = max(o.Plan.N, 20)
	if o.Plan.Keys == 0 {
		o.Plan.Keys = 50
	}
	if o.Plan.Holes == 0 {
		o.Plan.Holes = 2
	}
	if o.MaxCommitDelay == 0 {
		o.MaxCommitDelay = 500 * time.Millisecond
	}
	if o.LateAfter == 0 {
		// Well inside the delay whatever it is set to: a late row that
		// commits after its hole was released is lost, and the run would
		// not reconcile (the point of the demo is that holes fill in time).
		o.LateAfter = o.MaxCommitDelay / 5
	}
	if o.Chunk == 0 {
		o.Chunk = 500
	}
	if o.ChunkEvery == 0 {
		o.ChunkEvery = 10 * time.Millisecond
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Progress == 0 {
		o.Progress = 500 * time.Millisecond
	}
	if o.Clock == nil {
		o.Clock = relayclock.System{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

func countLate(p *Plan) int {
	n := 0
	for _, r := range p.Rows {
		if r.Late {
			n++
		}
	}
	return n
}

// OpenSource opens the foreign table's SQLite file (WAL, so the intake reads
// while the writer writes) and creates the table if absent.
func OpenSource(ctx context.Context, path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, fmt.Errorf("demo: open source: %w", err)
	}
	if _, err := db.ExecContext(ctx, sourceQueries["SourceCreate"]); err != nil {
		db.Close()
		return nil, fmt.Errorf("demo: create source table: %w", err)
	}
	return db, nil
}

// writeSource writes the plan's rows in chunks, in id order, holding each late
// row back until LateAfter has passed since the chunk that contained it was
// written — as a transaction that took its id early and committed late would.
// Permanent holes are never written.
func writeSource(ctx context.Context, db *sql.DB, plan *Plan, o Options) error {
	type pending struct {
		row PlanRow
		due time.Time
	}
	var late []pending
	insert := func(rows []PlanRow) error { return WriteRows(ctx, db, rows) }
	flushLate := func(force bool) error {
		now := o.Clock.Now()
		var due []PlanRow
		kept := late[:0]
		for _, p := range late {
			if force || !now.Before(p.due) {
				due = append(due, p.row)
			} else {
				kept = append(kept, p)
			}
		}
		late = kept
		return insert(due)
	}
	for i := 0; i < len(plan.Rows); i += o.Chunk {
		chunk := plan.Rows[i:min(i+o.Chunk, len(plan.Rows))]
		var now []PlanRow
		for _, r := range chunk {
			if r.Late {
				late = append(late, pending{row: r, due: o.Clock.Now().Add(o.LateAfter)})
				continue
			}
			now = append(now, r)
		}
		if err := insert(now); err != nil {
			return err
		}
		if err := flushLate(false); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-o.Clock.After(o.ChunkEvery):
		}
	}
	for len(late) > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-o.Clock.After(o.LateAfter / 4):
		}
		if err := flushLate(false); err != nil {
			return err
		}
	}
	return nil
}

// WriteRows writes rows to the source table in one transaction.
func WriteRows(ctx context.Context, db *sql.DB, rows []PlanRow) error {
	if len(rows) == 0 {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if _, err := tx.ExecContext(ctx, sourceQueries["SourceInsert"], r.ID, r.Payload, nil); err != nil {
			return errors.Join(err, tx.Rollback())
		}
	}
	return tx.Commit()
}

// AddMarkColumns adds the processing-mark columns (procflag, proctime) the
// acknowledgement write-back fills, as in a CMINMSGS mailbox.
func AddMarkColumns(ctx context.Context, db *sql.DB) error {
	for _, q := range []string{"SourceAddMark", "SourceAddMarkTime"} {
		if _, err := db.ExecContext(ctx, sourceQueries[q]); err != nil {
			return fmt.Errorf("demo: add mark columns: %w", err)
		}
	}
	return nil
}

// CountUnmarked counts source rows whose processing mark is still empty.
func CountUnmarked(ctx context.Context, db *sql.DB) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, sourceQueries["SourceUnmarked"]).Scan(&n)
	return n, err
}

// CheckMarks checks that every source row carries the processing mark of its
// message's terminal state (the default AckConfig.MarkFor) and returns how many
// rows were checked.
func CheckMarks(ctx context.Context, db *sql.DB, d relaydriver.Driver, queue string) (int, error) {
	msgs, err := listMessages(ctx, d.GetExecutor(), queue)
	if err != nil {
		return 0, err
	}
	rows, err := db.QueryContext(ctx, sourceQueries["SourceMarks"])
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var id int64
		var mark string
		if err := rows.Scan(&id, &mark); err != nil {
			return n, err
		}
		m, ok := msgs[id]
		if !ok {
			return n, fmt.Errorf("demo: source row %d has no message", id)
		}
		if mark != string(m.State) || m.AckAt.IsZero() {
			return n, fmt.Errorf("demo: source row %d marked %q (ack at %v), message is %s", id, mark, m.AckAt, m.State)
		}
		n++
	}
	return n, rows.Err()
}

type progressLine struct {
	watermark, enqueued, done, backlog, holes int64
	sent, pending                             int64 // outbox events of the Kafka stage
}

func progress(ctx context.Context, svc *relayservice.Service) (progressLine, error) {
	var p progressLine
	st, err := svc.Stats(ctx)
	if err != nil {
		return p, fmt.Errorf("demo: read stats: %w", err)
	}
	if st.Cursor != nil {
		p.watermark = st.Cursor.Watermark
	}
	for _, n := range st.Messages.Counts {
		p.enqueued += n
	}
	p.backlog = st.Messages.Backlog()
	p.done = p.enqueued - p.backlog
	if st.Intake != nil {
		p.holes = int64(st.Intake.PermanentHoles)
	}
	for _, ob := range st.Outbox {
		p.sent += ob.Sent
		p.pending += ob.Pending
	}
	return p, nil
}

// sortedIDs returns the ids of rows, ascending.
func sortedIDs(rows []PlanRow) []int64 {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	slices.Sort(ids)
	return ids
}
