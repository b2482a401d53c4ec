package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/fleet"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaytype"
)

// runBenchShipsyncFleet lets a fleet of lightweight nodes reconnect at once
// against one shore process and reports how long it took every node to
// catch up, how the shore pushed back and whether its limits held. It
// fails when an event was lost or duplicated or the shore used more
// PostgreSQL connections than its budget.
func runBenchShipsyncFleet(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "bench shipsync-fleet", "bench shipsync-fleet [--nodes 1000] [--events 30] [--batch 10] "+
		"[--jitter 30s] [--pool 16] [--global-concurrency 64] ... [--postgres URL] [--mariadb DSN]")
	var o fleet.Options
	fs.IntVar(&o.Nodes, "nodes", fleet.NodesDefault, "nodes reconnecting, each with its own certificate")
	fs.IntVar(&o.Events, "events", fleet.EventsDefault, "each node's backlog: INSERTs of its own rows")
	fs.IntVar(&o.Batch, "batch", fleet.BatchDefault, "events per upload batch")
	fs.DurationVar(&o.Jitter, "jitter", fleet.JitterDefault, "each node reconnects after a uniform random wait up to this "+
		"(negative: all at once)")
	fs.IntVar(&o.Pool, "pool", fleet.PoolDefault, "the shore's PostgreSQL connection budget (its pool's maximum)")
	fs.IntVar(&o.Limits.GlobalConcurrency, "global-concurrency", shore.GlobalConcurrencyDefault, "the shore's requests in flight across all nodes")
	fs.Float64Var(&o.Limits.GlobalRate, "global-rate", shore.GlobalRateDefault, "the shore's requests per second across all nodes")
	fs.IntVar(&o.Limits.GlobalBurst, "global-burst", 0, "burst of --global-rate (0: twice the rate)")
	fs.IntVar(&o.Limits.NodeConcurrency, "node-concurrency", shore.NodeConcurrencyDefault, "the shore's requests in flight per node")
	fs.Float64Var(&o.Limits.NodeRate, "node-rate", shore.NodeRateDefault, "the shore's requests per second per node")
	fs.IntVar(&o.Limits.NodeBurst, "node-burst", 0, "burst of --node-rate (0: twice the rate)")
	fs.DurationVar(&o.Heartbeat, "heartbeat", fleet.HeartbeatDefault, "each node's heartbeat interval")
	fs.DurationVar(&o.Poll, "poll", fleet.PollDefault, "wait between receipt pulls that found nothing new (plus up to as much jitter)")
	fs.DurationVar(&o.Timeout, "timeout", fleet.TimeoutDefault, "give up when the fleet has not caught up by then")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the jitters")
	pgURL := fs.String("postgres", envOr("TEST_DATABASE_URL", testdb.PGURLDefault), "PostgreSQL server of the shore (a scratch schema)")
	mariadb := fs.String("mariadb", envOr("TEST_MARIADB_DSN", testdb.MariaDBDSNDefault), "MariaDB server of the shore (a scratch database)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench shipsync-fleet: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if o.Nodes < 1 || o.Events < 1 || o.Batch < 1 || o.Pool < 1 || o.Heartbeat <= 0 || o.Poll <= 0 {
		return errors.New("bench shipsync-fleet: --nodes, --events, --batch, --pool, --heartbeat and --poll must be positive")
	}
	bin, schemaURL, dir, done, err := benchChild(ctx, env, "bench shipsync-fleet", *pgURL, "fleet")
	if err != nil {
		return err
	}
	defer done()
	o.PostgresURL, o.MariaDB, o.Dir, o.Relay, o.Progress = schemaURL, *mariadb, dir, bin, env.Stderr
	began := time.Now()
	res, err := fleet.Run(ctx, o)
	if err != nil {
		return fmt.Errorf("bench shipsync-fleet: %w", err)
	}
	res.Write(env.Stdout)
	fmt.Fprintf(env.Stdout, "run:          %s in all (set-up of the nodes and the shore included)\n",
		time.Since(began).Round(time.Second))
	if p := res.Problems(); len(p) > 0 {
		return fmt.Errorf("bench shipsync-fleet: %s", strings.Join(p, "; "))
	}
	return nil
}

// benchChild is what a benchmark that runs relay as a child process needs:
// the relay binary, a scratch schema on the PostgreSQL server pgURL and a
// temporary directory (kept when RELAY_KEEP_BENCH_DIR is set). done drops
// the schema and removes the directory.
func benchChild(ctx context.Context, env *Env, cmd, pgURL, name string) (bin, schemaURL, dir string, done func(), err error) {
	if bin, err = os.Executable(); err != nil {
		return "", "", "", nil, err
	}
	schemaURL, drop, err := scratchSchema(ctx, pgURL, fmt.Sprintf("relay_%s_%d", name, os.Getpid()))
	if err != nil {
		return "", "", "", nil, fmt.Errorf("%s: %w", cmd, err)
	}
	if dir, err = os.MkdirTemp("", "relay-"+name+"-"); err != nil {
		drop()
		return "", "", "", nil, err
	}
	if os.Getenv("RELAY_KEEP_BENCH_DIR") != "" {
		fmt.Fprintf(env.Stderr, "%s: keeping %s\n", cmd, dir)
		return bin, schemaURL, dir, drop, nil
	}
	return bin, schemaURL, dir, func() { _ = os.RemoveAll(dir); drop() }, nil
}
