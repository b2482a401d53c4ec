package cli

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/bench"
	"github.com/relayhq/relay/internal/demo"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysink/relaykafka"
	"github.com/relayhq/relay/relaysink/relayredis"
)

// runBenchOutbox measures the outbox: events appended in business
// transactions on PostgreSQL, then relayed by the dispatcher to Kafka on an
// in-process kfake cluster and to Redis Streams, with per-key order verified
// before a figure is printed.
func runBenchOutbox(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "bench outbox", "bench outbox [--events N] [--keys K] [--per-tx T] [--batch B,…] [--rounds R] [--postgres URL]")
	events := fs.Int("events", 20000, "events per round")
	keys := fs.Int("keys", 1000, "distinct partition keys")
	perTx := fs.Int("per-tx", 100, "events appended per business transaction")
	batches := fs.String("batch", "500,2000", "comma-separated dispatcher batch sizes to compare")
	rounds := fs.Int("rounds", 3, "rounds per setting (the median is reported)")
	pgURL := fs.String("postgres", envOr("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL store URL")
	sinkNames := fs.String("sinks", "kafka,redis", "sinks to measure: kafka (in-process kfake), redis (Redis Streams at --redis)")
	redisAddr := fs.String("redis", envOr("TEST_REDIS_ADDR", "127.0.0.1:6379"), "Redis server for the redis sink")
	if err := fs.Parse(args); err != nil {
		return err
	}
	batchList, err := parseInts("--batch", *batches)
	if err != nil {
		return err
	}
	d, err := openStore(ctx, *pgURL)
	if err != nil {
		return err
	}
	defer d.Close()
	clock := relayclock.System{}
	if err := bench.Migrate(ctx, d, clock); err != nil {
		return err
	}
	var sinks []relaysink.Sink
	var cleanup []string // Redis streams written by the run
	defer func() {
		if len(cleanup) > 0 {
			rc := redis.NewClient(&redis.Options{Addr: *redisAddr})
			_ = rc.Del(context.WithoutCancel(ctx), cleanup...).Err()
			_ = rc.Close()
		}
		for _, s := range sinks {
			_ = s.Close(context.WithoutCancel(ctx))
		}
	}()
	for _, name := range strings.Split(*sinkNames, ",") {
		switch strings.TrimSpace(name) {
		case "kafka":
			cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(8, "bench"))
			if err != nil {
				return fmt.Errorf("start in-process Kafka (kfake): %w", err)
			}
			defer cluster.Close()
			sink, err := relaykafka.New(relaykafka.Config{Brokers: cluster.ListenAddrs()})
			if err != nil {
				return err
			}
			sinks = append(sinks, sink)
		case "redis":
			sink, err := relayredis.New(relayredis.Config{Addr: *redisAddr})
			if err != nil {
				return err
			}
			sinks = append(sinks, sink)
		default:
			return fmt.Errorf("--sinks %q: want kafka and/or redis", *sinkNames)
		}
	}

	fmt.Fprintf(env.Stdout, "relay bench outbox: PostgreSQL store, %d events over %d keys, %d per business transaction, median of %d rounds\n",
		*events, *keys, *perTx, *rounds)
	fmt.Fprintf(env.Stdout, "%-7s %-6s %12s %12s %12s %14s\n", "sink", "batch", "relay min/s", "relay med/s", "relay max/s", "append med/s")
	for _, s := range sinks {
		for _, b := range batchList {
			var relayRates, writeRates []float64
			for r := 0; r < *rounds; r++ {
				topic := "bench"
				if s.Name() == "redis" {
					// A stream per run, deleted afterwards: the shared Redis keeps nothing.
					topic = demo.UniqueName("relay-bench")
					cleanup = append(cleanup, topic)
				}
				res, err := bench.RunOutbox(ctx, d, s, bench.OutboxOptions{
					Target: demo.UniqueName("bench-" + s.Name()), Topic: topic, Events: *events, Keys: *keys,
					PerTx: *perTx, BatchSize: b, Clock: clock})
				if err != nil {
					return fmt.Errorf("%s batch %d: %w", s.Name(), b, err)
				}
				relayRates = append(relayRates, res.RelayRate())
				writeRates = append(writeRates, res.WriteRate())
			}
			lo, mid, hi := spread(relayRates)
			_, wmid, _ := spread(writeRates)
			fmt.Fprintf(env.Stdout, "%-7s %-6d %12.0f %12.0f %12.0f %14.0f\n", s.Name(), b, lo, mid, hi, wmid)
		}
	}
	fmt.Fprintf(env.Stdout, "(%s, %d cores; per-key order verified on every confirmed event; figures vary with machine load)\n",
		time.Now().UTC().Format(time.RFC3339), runtime.NumCPU())
	return nil
}
