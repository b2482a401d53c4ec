package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/msgx"
	"github.com/relayhq/relay/internal/app/msgx/simulate"
)

// expectFile is what `relay msgx simulate` saves and `relay msgx verify`
// reads: the simulation's options (the plan, and so the model, is
// regenerated from them deterministically) and the committed mailbox rows
// with their expected marks.
type expectFile struct {
	Options simulate.Options           `json:"options"`
	Rows    map[int64]simulate.Outcome `json:"rows"`
	Holes   []int64                    `json:"holes"`
}

func runMsgxSimulate(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "msgx simulate", "msgx simulate --mailbox DSN [--flights N] [--rate R] [--seed S] [--expect FILE]")
	mailbox := mailboxFlag(fs)
	flights := fs.Int("flights", 1000, "flights in the daily plan")
	day := fs.String("day", "", "operating day YYYYMMDD (default "+simulate.DayDefault+")")
	rate := fs.Float64("rate", 0, "messages per second written (0: as fast as possible)")
	seed := fs.Int64("seed", 1, "generation seed (equal seeds give equal days)")
	lateBy := fs.Duration("late-by", 0, "how long late inserts stay uncommitted (default "+simulate.LateByDefault.String()+"); keep it under the queue's max-commit-delay")
	expect := fs.String("expect", "msgx-expect.json", "where to save what the run must produce (for relay msgx verify)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mb, err := openMailbox(ctx, *mailbox)
	if err != nil {
		return err
	}
	defer mb.Close()
	if err := simulate.CreateMailbox(ctx, mb); err != nil {
		return err
	}
	opts := simulate.Options{Flights: *flights, Day: *day, Seed: *seed, LateBy: *lateBy}.WithDefaults()
	if err := opts.Validate(); err != nil {
		return err
	}
	plan := simulate.NewPlan(opts)
	c := plan.Counts()
	fmt.Fprintf(env.Stdout, "msgx simulate: day %s, %d flights, %d inserts (%d commit, %d roll back, %d late); outcomes %v\n",
		opts.Day, opts.Flights, c.Messages, c.Committed, c.Categories[simulate.CategoryRollback], c.Late, c.Outcomes)
	began := time.Now()
	last := time.Now()
	w, err := plan.Write(ctx, mb, *rate, func(written, total int) {
		if time.Since(last) >= time.Second || written == total {
			last = time.Now()
			fmt.Fprintf(env.Stdout, "  written %d/%d\n", written, total)
		}
	})
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(expectFile{Options: opts, Rows: w.Rows, Holes: w.Holes}, "", " ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(*expect, data, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "msgx simulate: %d rows committed, holes at %v, in %s; expectation saved to %s\n",
		len(w.Rows), w.Holes, time.Since(began).Round(time.Millisecond), *expect)
	return nil
}

func runMsgxVerify(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "msgx verify", "msgx verify --store URL --mailbox DSN --kafka-brokers HOSTS [--expect FILE]")
	store := storeFlag(fs)
	mailbox := mailboxFlag(fs)
	brokers := fs.String("kafka-brokers", envOr("MSGX_KAFKA_BROKERS", ""), "comma-separated Kafka brokers")
	expect := fs.String("expect", "msgx-expect.json", "the file relay msgx simulate saved")
	wait := fs.Duration("wait", time.Minute, "how long to wait for the run to settle (every mark written, outbox drained)")
	build := msgxConfigFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := build()
	if err != nil {
		return err
	}
	if *brokers == "" {
		return errors.New("--kafka-brokers is required")
	}
	data, err := os.ReadFile(*expect)
	if err != nil {
		return err
	}
	var ef expectFile
	if err := json.Unmarshal(data, &ef); err != nil {
		return fmt.Errorf("%s: %w", *expect, err)
	}
	d, mb, closeStores, err := openMsgxStores(ctx, *store, *mailbox)
	if err != nil {
		return err
	}
	defer closeStores()
	deadline := time.Now().Add(*wait)
	for {
		ok, err := msgx.Settled(ctx, d, mb, len(ef.Rows))
		if err != nil {
			return err
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(env.Stdout, "msgx verify: the run has not settled (marks or events outstanding); verifying anyway")
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	plan := simulate.NewPlan(ef.Options)
	marks := make(map[int64]string, len(ef.Rows))
	for id, o := range ef.Rows {
		marks[id] = string(o)
	}
	rep, err := msgx.Verify(ctx, cfg, d, mb, strings.Split(*brokers, ","),
		msgx.Expectation{Compare: plan.Model().Compare, Marks: marks})
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "msgx verify: %d flights (%d deleted), %d mailbox rows, %d %s records, %d %s records\n",
		rep.Flights, rep.Deleted, rep.MailboxRows, rep.MsgRecords, cfg.MsgTopic, rep.SchdRecords, cfg.SchdTopic)
	if !rep.OK() {
		for _, p := range rep.Problems {
			fmt.Fprintln(env.Stdout, "  MISMATCH "+p)
		}
		return fmt.Errorf("msgx verify: %d mismatches", len(rep.Problems))
	}
	fmt.Fprintln(env.Stdout, "msgx verify: OK — flight state, both topics and every mailbox mark as expected")
	return nil
}
