// Package msgxbench measures msgx draining a simulated backlog with the full flight
// writes (relay bench msgx): intake, the strict FIFO pump, the outbox to Kafka
// (kfake) and the mailbox marks, verified against the simulator's model.
package msgxbench

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/internal/app/msgx"
	"github.com/relayhq/relay/internal/app/msgx/simulate"
	"github.com/relayhq/relay/internal/pgmaint"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaysink/relaykafka"
	"github.com/relayhq/relay/relaytype"
)

// Options shape one msgx backlog drain.
type Options struct {
	// Store is a fresh msgx store (migrated here); Mailbox a fresh, empty
	// mailbox database.
	Store   *relaypgx.Driver
	Mailbox *sql.DB
	// Messages is the approximate backlog size: the simulated day gets that
	// many FLOP updates on top of its plan, deletions, duplicates and so on.
	Messages int
	// Flights in the daily plan.
	Flights int
	// FIFOBatch is the pump's msgx.pipeline.fifo-batch.
	FIFOBatch int
	// Seed of the simulated day.
	Seed  int64
	Clock relaytype.Clock
	// Progress, when set, receives a line every second while draining.
	Progress io.Writer
	// Maintain, when positive, runs VACUUM (ANALYZE) on the store schema's
	// tables at this interval during the drain — what autovacuum does on a
	// production server. msgx rewrites a flight's detail rows on every change,
	// so without it the tables bloat and keep no statistics.
	Maintain time.Duration
}

// Result is one measured drain.
type Result struct {
	Rows         int           // committed mailbox rows (the backlog)
	FillElapsed  time.Duration // writing the backlog into CMINMSGS
	PumpElapsed  time.Duration // intake + FIFO processing until no message is unfinished
	TotalElapsed time.Duration // … until every mark is written back and every event delivered
	States       map[relaytype.State]int64
}

// PumpRate is messages per second through intake and the FIFO pump with the
// full domain writes.
func (r Result) PumpRate() float64 { return float64(r.Rows) / r.PumpElapsed.Seconds() }

// TotalRate is messages per second until everything owed is done.
func (r Result) TotalRate() float64 { return float64(r.Rows) / r.TotalElapsed.Seconds() }

// msgxPollInterval is how often RunMsgx checks whether the backlog is done.
// The end of a drain is known to within this interval, which the printed
// elapsed times include. The check is drainedQuery, which reads only the
// unfinished rows' partial index and the last id; the whole-pipeline
// aggregate (MessageStats) runs once, to confirm the end: polled every 250 ms
// it had taken about a tenth of the server's time during a drain, competing
// with the pump it measured (at every 20 ms, a third).
const msgxPollInterval = 250 * time.Millisecond

// drainedQuery returns whether the queue $1 still has an unfinished message
// (a probe of relay_message_head_idx) and its highest message id (the primary
// key's last entry): the pump is done when nothing is unfinished and the
// mailbox's last id has been taken in. It is the bench harness's own
// observation query, like maintain's VACUUM, not part of the service.
const drainedQuery = `SELECT EXISTS (SELECT 1 FROM relay_message WHERE queue = $1 AND state IN ('PENDING', 'FAILED')),
       coalesce((SELECT max(id) FROM relay_message WHERE queue = $1), 0)`

// progressQuery counts the queue's unfinished messages and returns its
// highest id, for the progress line.
const progressQuery = `SELECT (SELECT count(*) FROM relay_message WHERE queue = $1 AND state IN ('PENDING', 'FAILED')),
       coalesce((SELECT max(id) FROM relay_message WHERE queue = $1), 0)`

// Run writes a simulated operating day of about Messages messages into an
// empty mailbox (no holes: holes cost a fixed ageing wait each, which is not
// throughput), then starts a msgx Service on it and measures how long the
// strict FIFO pump takes to process the whole backlog, and how long until
// every processing mark and every event is out. It verifies the result with
// msgx.Verify before it reports a figure.
func Run(ctx context.Context, o Options) (Result, error) {
	var res Result
	if _, err := msgx.Migrate(ctx, o.Store, o.Clock); err != nil {
		return res, err
	}
	if err := simulate.CreateMailbox(ctx, o.Mailbox); err != nil {
		return res, err
	}
	opts := simulate.Options{Flights: o.Flights, Updates: o.Messages, Seed: o.Seed, Rollbacks: -1, Late: -1}.WithDefaults()
	plan := simulate.NewPlan(opts)
	start := o.Clock.Now()
	written, err := plan.Write(ctx, o.Mailbox, 0, nil)
	if err != nil {
		return res, err
	}
	res.Rows = len(written.Rows)
	var lastID int64
	for id := range written.Rows {
		lastID = max(lastID, id)
	}
	res.FillElapsed = o.Clock.Now().Sub(start)

	cfg := msgx.Defaults()
	cfg.PollInterval = 20 * time.Millisecond
	cfg.FIFOBatch = o.FIFOBatch
	cfg.CutoverWatermark = "zero"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, cfg.MsgTopic, cfg.SchdTopic))
	if err != nil {
		return res, err
	}
	defer cluster.Close()
	sink, err := relaykafka.New(relaykafka.Config{Brokers: cluster.ListenAddrs()})
	if err != nil {
		return res, err
	}
	defer sink.Close(context.WithoutCancel(ctx))
	svc, err := msgx.New(msgx.Options{Config: cfg, Store: o.Store, Mailbox: o.Mailbox, Sink: sink, Owner: "bench",
		Clock: o.Clock, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return res, err
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	start = o.Clock.Now()
	go func() { done <- svc.Run(runCtx) }()
	if o.Maintain > 0 {
		go pgmaint.LoopAll(runCtx, o.Store.Pool(), o.Maintain, o.Clock, nil)
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
			<-done
		}
	}()
	// The first round prints at once: a day small enough to drain within a
	// second still shows one progress line.
	var lastPrint time.Time
	for res.PumpElapsed == 0 || res.TotalElapsed == 0 {
		select {
		case err := <-done:
			return res, fmt.Errorf("bench msgx: service stopped: %v", err)
		case <-ctx.Done():
			return res, ctx.Err()
		case <-o.Clock.After(msgxPollInterval):
		}
		now := o.Clock.Now()
		if res.PumpElapsed == 0 {
			var unfinished bool
			var maxID int64
			if err := o.Store.Pool().QueryRow(ctx, drainedQuery, cfg.Pipeline).Scan(&unfinished, &maxID); err != nil {
				return res, err
			}
			if !unfinished && maxID >= lastID {
				st, err := o.Store.GetExecutor().MessageStats(ctx, cfg.Pipeline)
				if err != nil {
					return res, err
				}
				var total int64
				for _, n := range st.Counts {
					total += n
				}
				if total == int64(res.Rows) && st.Backlog() == 0 {
					res.PumpElapsed = now.Sub(start)
					res.States = st.Counts
				}
			}
		}
		if res.PumpElapsed > 0 {
			ok, err := msgx.Settled(ctx, o.Store, o.Mailbox, res.Rows)
			if err != nil {
				return res, err
			}
			if ok {
				res.TotalElapsed = now.Sub(start)
			}
		}
		// The first round prints even when the day drained before it.
		if o.Progress != nil && (lastPrint.IsZero() || res.PumpElapsed == 0 && now.Sub(lastPrint) >= time.Second) {
			lastPrint = now
			var unfinished, maxID int64
			if err := o.Store.Pool().QueryRow(ctx, progressQuery, cfg.Pipeline).Scan(&unfinished, &maxID); err != nil {
				return res, err
			}
			fmt.Fprintf(o.Progress, "  %5.1fs  taken in up to id %d of %d, %d unfinished\n", now.Sub(start).Seconds(), maxID, lastID, unfinished)
		}
	}
	stop()
	stopped = true
	if err := <-done; err != nil {
		return res, err
	}
	marks := make(map[int64]string, len(written.Rows))
	for id, out := range written.Rows {
		marks[id] = string(out)
	}
	rep, err := msgx.Verify(ctx, cfg, o.Store, o.Mailbox, cluster.ListenAddrs(),
		msgx.Expectation{Compare: plan.Model().Compare, Marks: marks})
	if err != nil {
		return res, err
	}
	if !rep.OK() {
		return res, fmt.Errorf("bench msgx: verification failed (%d problems), first: %s", len(rep.Problems), rep.Problems[0])
	}
	return res, nil
}
