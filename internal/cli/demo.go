package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/relayhq/relay/internal/crash"
	"github.com/relayhq/relay/internal/demo"
	"github.com/relayhq/relay/relaydriver"
)

func runDemo(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "demo", "demo [--n N] [--store URL] [--keys K] [--holes PERMILLE] [--seed S]")
	n := fs.Int("n", 10000, "ids to generate in the source table (rows plus holes)")
	store := fs.String("store", "", "store: empty for a fresh SQLite file in a temp dir, or postgres://…, a keyword/value DSN, sqlite:PATH or a path like ./relay.db")
	keys := fs.Int("keys", 50, "distinct projection keys")
	holes := fs.Int("holes", 2, "permille of ids left as holes (half fill late, half never)")
	seed := fs.Uint64("seed", 1, "generator seed (same seed, same source)")
	delay := fs.Duration("max-commit-delay", 500*time.Millisecond, "how long a hole may wait for a late commit before it is released as permanent")
	timeout := fs.Duration("timeout", 5*time.Minute, "give up (and fail) after this long")
	chaos := fs.Bool("chaos", false, "run the crash harness instead: the pipeline as a child `relay serve`, killed with SIGKILL 20 times (randomly and at engine fault points), then every row reconciled")
	kafka := fs.Bool("kafka", true, "add the outbox stage: change events through the outbox to an in-process Kafka (kfake), read back and reconciled")
	logLevel := fs.String("log-level", "off", "engine log level on stderr (off, debug, info, warn, error)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := env.Logger(*logLevel)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "relay-demo-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	url := *store
	if url == "" {
		url = filepath.Join(dir, "relay.db")
	}
	d, err := openStore(ctx, url)
	if err != nil {
		return err
	}
	defer d.Close()
	if *chaos {
		return runChaos(ctx, env, d, url, dir, *seed)
	}

	_, err = demo.Run(ctx, demo.Options{
		Store:          d,
		Queue:          demo.UniqueName("demo"),
		Dir:            dir,
		Plan:           demo.PlanOptions{N: *n, Keys: *keys, Seed: *seed, Holes: *holes},
		MaxCommitDelay: *delay,
		Timeout:        *timeout,
		Logger:         log,
		Kafka:          *kafka,
	}, env.Stdout)
	return err
}

// runChaos runs the crash harness (internal/crash) on store d with this very
// binary as the child, and prints its progress and the reconciliation.
func runChaos(ctx context.Context, env *Env, d relaydriver.Driver, url, dir string, seed uint64) error {
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("--chaos: find the relay binary: %w", err)
	}
	fmt.Fprintf(env.Stdout, "relay demo --chaos: source → intake → FIFO (projection + outbox event + ack intent) → Kafka (kfake) and marks written back;\n"+
		"the pipeline runs as a child process that is killed 20 times, then restarted to drain and reconciled (%s store)\n", d.Name())
	res, err := crash.Run(ctx, crash.Options{Binary: bin, StoreURL: url, Store: d, Dir: dir, Kills: 20, Rows: 3000,
		Seed: seed, FaultProbability: 0.03, Out: env.Stdout})
	if res != nil && res.Report != nil {
		res.Report.Write(env.Stdout)
		fmt.Fprintf(env.Stdout, "  kills              %7d   %d at engine fault points; %d processing marks written back\n",
			res.Kills, res.FaultKills, res.AcksWritten)
		fmt.Fprintf(env.Stdout, "  queue              %s   (its own on every run: a rerun on the same store starts afresh)\n", res.Queue)
	}
	return err
}
