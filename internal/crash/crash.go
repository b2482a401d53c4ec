// Package crash is relay's crash harness: it runs the whole pipeline —
// foreign source table → watermark intake → global FIFO processing (projection
// + outbox event + acknowledgement intent in one transaction) → dispatcher →
// Kafka, and acknowledgement write-back to the source — as a real `relay serve`
// child process, kills it with SIGKILL at random moments and at named fault
// points inside the engine (internal/faultpoint), restarts it, and in the end
// reconciles every row: every source row enqueued, every effect applied exactly
// once, every event delivered at least once and in order per key, every
// acknowledgement written (DESIGN.md §3: recovery from persisted state alone).
package crash

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/internal/demo"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaysource"
	"github.com/relayhq/relay/relaytype"
)

// Options shape one harness run.
type Options struct {
	// Binary is the relay executable to run as the child.
	Binary string
	// StoreURL is the child's store (PostgreSQL); Store is the harness's own
	// connection to it for progress and reconciliation.
	StoreURL string
	Store    relaydriver.Driver
	// Queue names the run's queue, and with it its outbox target
	// (kafka-<Queue>), pipeline lock and source file. Empty: crash-<8 random
	// hex digits>, so that every run starts on a queue of its own and a second
	// run on the same store is not refused as a second cutover seeding.
	Queue string
	// Dir holds the source database file (<Queue>.source.db).
	Dir string
	// Kills is how many times the child is killed (≥ 20 for a real run).
	Kills int
	// Rows is how many source rows are written, spread over the kills.
	Rows int
	// Seed makes the run repeatable (kill moments, fault draws, payloads).
	Seed uint64
	// FaultProbability is the chance that passing each named fault point
	// kills the child (0: only random SIGKILLs).
	FaultProbability float64
	// Out receives progress lines.
	Out io.Writer
}

// Result is what a run did and found.
type Result struct {
	// Queue is the queue the run used (Options.Queue or the generated name).
	Queue             string
	Kills, FaultKills int
	Report            *demo.Report
	AcksWritten       int
}

// Run executes the harness. It returns an error when the run could not be
// carried out or the reconciliation found any mismatch.
func Run(ctx context.Context, o Options) (*Result, error) {
	began := time.Now()
	queue := cmp.Or(o.Queue, demo.UniqueName("crash"))
	r := rand.New(rand.NewPCG(o.Seed, 0xc0ffee))
	plan := demo.NewPlan(demo.PlanOptions{N: o.Rows, Keys: 20, Seed: o.Seed, Holes: 0})
	srcPath := filepath.Join(o.Dir, queue+".source.db")
	src, err := demo.OpenSource(ctx, srcPath)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	if err := demo.AddMarkColumns(ctx, src); err != nil {
		return nil, err
	}
	// The cutover decision (seed 000 §4.3) is the operator's: seed once, here,
	// so that every child — whenever it is killed — starts from the store.
	line, err := demo.MigrationLine(o.Store.Name())
	if err != nil {
		return nil, err
	}
	if _, err := relaymigrate.Up(ctx, o.Store, relayclock.System{}, relaymigrate.EngineLineOf(o.Store), line); err != nil {
		return nil, err
	}
	table, err := relaysource.NewSQLTable(src, relaysource.SQLTableConfig{Dialect: relaysource.DialectSQLite,
		Table: "source_messages", IDColumn: "id"})
	if err != nil {
		return nil, err
	}
	intake, err := relayintake.New(o.Store, table, relayintake.Config{Queue: queue})
	if err != nil {
		return nil, err
	}
	if _, err := intake.Seed(ctx, relayintake.SeedZero); err != nil {
		return nil, err
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, demo.EventTopic))
	if err != nil {
		return nil, fmt.Errorf("crash: start Kafka (kfake): %w", err)
	}
	defer cluster.Close()
	brokers := strings.Join(cluster.ListenAddrs(), ",")

	args := func() []string {
		return []string{"serve", "--store", o.StoreURL, "--queue", queue, "--source-driver", "sqlite",
			"--source-dsn", srcPath, "--poll", "20ms", "--max-commit-delay", "500ms", "--lock-ttl", "2s",
			"--kafka-brokers", brokers, "--ack", "--log-level", "warn"}
	}

	res := &Result{Queue: queue}
	written := 0
	writeNext := func(n int) error {
		end := min(written+n, len(plan.Rows))
		if err := demo.WriteRows(ctx, src, plan.Rows[written:end]); err != nil {
			return err
		}
		written = end
		return nil
	}
	chunk := max(len(plan.Rows)/o.Kills, 1)
	res.Kills, res.FaultKills, err = Kills{Binary: o.Binary, Args: args(), Kills: o.Kills,
		FaultProbability: o.FaultProbability, MinWait: 250 * time.Millisecond, Spread: 750 * time.Millisecond, Rand: r,
		Before: func(int) error { return writeNext(chunk) },
		After: func(i int, wait time.Duration, fault bool) {
			if o.Out != nil {
				p, _ := progress(ctx, o.Store, src, queue)
				fmt.Fprintf(o.Out, "  kill %2d/%d after %-5s %s  written=%d %s\n", i+1, o.Kills, wait.Round(time.Millisecond),
					KillKind(fault), written, p)
			}
		}}.Run(ctx)
	if err != nil {
		return nil, err
	}
	if err := writeNext(len(plan.Rows)); err != nil {
		return nil, err
	}

	// Last run without faults: drain everything, then stop cleanly.
	lastID := plan.Rows[len(plan.Rows)-1].ID
	if err := Drain(ctx, o.Binary, args(), func() (bool, error) { return isDrained(ctx, o.Store, src, queue, lastID) },
		func() string { p, _ := progress(ctx, o.Store, src, queue); return p }); err != nil {
		return nil, err
	}

	rep, err := demo.Reconcile(ctx, o.Store, src, queue, plan)
	if err != nil {
		return nil, err
	}
	if err := rep.ReconcileKafka(ctx, cluster.ListenAddrs()); err != nil {
		return nil, err
	}
	rep.Elapsed = time.Since(began)
	res.Report = rep
	acks, err := demo.CheckMarks(ctx, src, o.Store, queue)
	if err != nil {
		return nil, err
	}
	res.AcksWritten = acks
	if !rep.OK() {
		return res, fmt.Errorf("crash: reconciliation failed: %s", strings.Join(rep.Failures, "; "))
	}
	return res, nil
}

// child is one running relay process.
type child struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

func start(bin string, args []string, faults string, seed uint64) (*child, error) {
	c := &child{cmd: exec.Command(bin, args...), out: &syncBuffer{}, done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.cmd.Env = append(os.Environ(), "RELAY_FAULTPOINTS="+faults, fmt.Sprintf("RELAY_FAULTSEED=%d", seed))
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("crash: start %s: %w", bin, err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	return c, nil
}

// killed reports whether the child died of SIGKILL.
func (c *child) killed() bool { return faultpoint.KilledBySIGKILL(c.cmd.ProcessState) }

// faultKilled reports whether a fault point killed the child.
func (c *child) faultKilled() bool {
	return faultpoint.KilledAt(c.cmd.ProcessState, c.out.String()) != ""
}

func progress(ctx context.Context, d relaydriver.Driver, src *sql.DB, queue string) (string, error) {
	st, err := d.GetExecutor().MessageStats(ctx, queue)
	if err != nil {
		return "", err
	}
	var total int64
	for _, n := range st.Counts {
		total += n
	}
	ob, err := d.GetExecutor().OutboxStats(ctx, "kafka-"+queue)
	if err != nil {
		return "", err
	}
	unmarked, err := demo.CountUnmarked(ctx, src)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("enqueued=%d backlog=%d events sent=%d pending=%d unacknowledged=%d",
		total, st.Backlog(), ob.Sent, ob.Pending, unmarked), nil
}

func isDrained(ctx context.Context, d relaydriver.Driver, src *sql.DB, queue string, lastID int64) (bool, error) {
	cur, err := d.GetExecutor().CursorGet(ctx, queue)
	if errors.Is(err, relaytype.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	st, err := d.GetExecutor().MessageStats(ctx, queue)
	if err != nil {
		return false, err
	}
	ob, err := d.GetExecutor().OutboxStats(ctx, "kafka-"+queue)
	if err != nil {
		return false, err
	}
	unmarked, err := demo.CountUnmarked(ctx, src)
	if err != nil {
		return false, err
	}
	return cur.Watermark >= lastID && st.Backlog() == 0 && ob.Pending == 0 && unmarked == 0, nil
}

// syncBuffer is a bytes buffer safe for a child's writer and the harness.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
