// Package msgxcrash runs msgx under crashes: a simulated airport day is written into
// a real MariaDB mailbox while real `relay msgx run` children are killed (SIGKILL
// and the engine's fault points), then a last child drains and every flight,
// Kafka record and mailbox mark is checked against the simulator's model.
package msgxcrash

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/internal/app/msgx"
	"github.com/relayhq/relay/internal/app/msgx/simulate"
	"github.com/relayhq/relay/internal/crash"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
)

// Options shape one msgx harness run.
type Options struct {
	// Binary is the relay executable run as `relay msgx run`.
	Binary string
	// StoreURL is the child's PostgreSQL store; Store the harness's own
	// connection to it.
	StoreURL string
	Store    *relaypgx.Driver
	// MailboxDSN is the child's mailbox DSN; Mailbox the harness's pool on it
	// (CMINMSGS and COUTMSGS are created if absent).
	MailboxDSN string
	Mailbox    *sql.DB
	// Kills is how many times the child is killed (≥ 20 for a real run).
	Kills int
	// Sim shapes the simulated operating day; Rate is how fast it is written
	// (msgs/s), so that writing overlaps the kills.
	Sim  simulate.Options
	Rate float64
	// Seed makes kill moments and fault draws repeatable.
	Seed uint64
	// FaultProbability is the chance that passing each named fault point
	// kills the child (0: only random SIGKILLs).
	FaultProbability float64
	// Out receives progress lines.
	Out io.Writer
}

// Result is what a msgx harness run did and found.
type Result struct {
	Kills, FaultKills int
	Written           *simulate.Written
	Report            *msgx.VerifyReport
}

// msgxParams are the child's settings: short waits, so that a test run is
// quick; everything else is the production default.
var msgxParams = []string{
	"msgx.pipeline.poll-interval=20ms",
	"msgx.pipeline.max-commit-delay=1s",
	"msgx.pipeline.backoff=20ms,40ms,80ms,160ms",
	"msgx.pipeline.cutover-watermark=zero",
}

// Config is the configuration the harness's children run with.
func Config() (msgx.Config, error) {
	cfg := msgx.Defaults()
	for _, p := range msgxParams {
		k, v, _ := strings.Cut(p, "=")
		if err := cfg.Set(k, v); err != nil {
			return cfg, err
		}
	}
	return cfg, cfg.Validate()
}

// Run writes a simulated AODB day into the mailbox while a real `relay
// msgx run` child is killed Kills times (random SIGKILLs, and named fault
// points inside the engine on every other child), then lets a last child
// drain everything, stops it with SIGTERM, and verifies the flight state,
// both Kafka topics and every mailbox mark against the simulator's model.
func Run(ctx context.Context, o Options) (*Result, error) {
	cfg, err := Config()
	if err != nil {
		return nil, err
	}
	if err := checkUnused(ctx, o.Store, cfg); err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(o.Seed, 0xa0db))
	if err := simulate.CreateMailbox(ctx, o.Mailbox); err != nil {
		return nil, err
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, cfg.MsgTopic, cfg.SchdTopic))
	if err != nil {
		return nil, fmt.Errorf("crash: start Kafka (kfake): %w", err)
	}
	defer cluster.Close()
	args := []string{"msgx", "run", "--store", o.StoreURL, "--mailbox", o.MailboxDSN,
		"--kafka-brokers", strings.Join(cluster.ListenAddrs(), ","), "--log-level", "warn"}
	for _, p := range msgxParams {
		args = append(args, "--param", p)
	}

	plan := simulate.NewPlan(o.Sim)
	type writeResult struct {
		w   *simulate.Written
		err error
	}
	writeDone := make(chan writeResult, 1)
	go func() {
		w, err := plan.Write(ctx, o.Mailbox, o.Rate, nil)
		writeDone <- writeResult{w, err}
	}()

	res := &Result{}
	res.Kills, res.FaultKills, err = crash.Kills{Binary: o.Binary, Args: args, Kills: o.Kills,
		FaultProbability: o.FaultProbability, MinWait: 300 * time.Millisecond, Spread: 900 * time.Millisecond, Rand: r,
		After: func(i int, wait time.Duration, fault bool) {
			if o.Out != nil {
				fmt.Fprintf(o.Out, "  kill %2d/%d after %-6s %s %s\n", i+1, o.Kills, wait.Round(time.Millisecond),
					crash.KillKind(fault), msgxProgress(ctx, o, cfg))
			}
		}}.Run(ctx)
	if err != nil {
		return nil, err
	}
	wr := <-writeDone
	if wr.err != nil {
		return nil, fmt.Errorf("crash: simulator: %w", wr.err)
	}
	res.Written = wr.w

	if err := crash.Drain(ctx, o.Binary, args, func() (bool, error) { return msgx.Settled(ctx, o.Store, o.Mailbox, len(wr.w.Rows)) },
		func() string { return msgxProgress(ctx, o, cfg) }); err != nil {
		return nil, err
	}

	marks := make(map[int64]string, len(wr.w.Rows))
	for id, out := range wr.w.Rows {
		marks[id] = string(out)
	}
	rep, err := msgx.Verify(ctx, cfg, o.Store, o.Mailbox, cluster.ListenAddrs(),
		msgx.Expectation{Compare: plan.Model().Compare, Marks: marks})
	if err != nil {
		return nil, err
	}
	res.Report = rep
	if !rep.OK() {
		return res, fmt.Errorf("crash: msgx verification failed: %s", strings.Join(rep.Problems, "; "))
	}
	return res, nil
}

// checkUnused refuses a store an earlier run used. msgx keeps one flight state
// per schema (its tables are not scoped by queue) and reads one mailbox per
// database, so a second run there would be refused its cutover seeding, or
// verified against the first run's flights: it needs a fresh schema and a
// fresh mailbox database, and is told so.
func checkUnused(ctx context.Context, store *relaypgx.Driver, cfg msgx.Config) error {
	if _, err := msgx.Migrate(ctx, store, relayclock.System{}); err != nil {
		return err
	}
	_, err := store.GetExecutor().CursorGet(ctx, cfg.Pipeline)
	switch {
	case err == nil:
		return fmt.Errorf("crash: the store already holds the msgx queue %q (an earlier run?): msgx keeps one flight state "+
			"per schema, so every harness run needs a fresh schema and a fresh mailbox database "+
			"(testdb.PGSchema and testdb.MariaDBWithDSN give them)", cfg.Pipeline)
	case errors.Is(err, relaytype.ErrNotFound):
		return nil
	}
	return err
}

func msgxProgress(ctx context.Context, o Options, cfg msgx.Config) string {
	st, err := o.Store.GetExecutor().MessageStats(ctx, cfg.Pipeline)
	if err != nil {
		return err.Error()
	}
	var total, unmarked int
	_ = o.Mailbox.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(SUM(PROCFLAG IS NULL), 0) FROM CMINMSGS").Scan(&total, &unmarked)
	return fmt.Sprintf("mailbox=%d unmarked=%d backlog=%d states=%v", total, unmarked, st.Backlog(), st.Counts)
}
