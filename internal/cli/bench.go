package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/relayhq/relay/bench"
	"github.com/relayhq/relay/internal/demo"
	"github.com/relayhq/relay/relayclock"
)

func runBench(ctx context.Context, env *Env, args []string) error {
	if len(args) > 0 && args[0] == "outbox" {
		return runBenchOutbox(ctx, env, args[1:])
	}
	if len(args) > 0 && args[0] == "msgx" {
		return runBenchMsgx(ctx, env, args[1:])
	}
	if len(args) > 0 && args[0] == "cmpp" {
		return runBenchCmpp(ctx, env, args[1:])
	}
	if len(args) > 0 && args[0] == "shipsync-ingress" {
		return runBenchShipsyncIngress(ctx, env, args[1:])
	}
	if len(args) > 0 && args[0] == "shipsync-downlink" {
		return runBenchShipsyncDownlink(ctx, env, args[1:])
	}
	if len(args) > 0 && args[0] == "shipsync-eta" {
		return runBenchShipsyncETA(ctx, env, args[1:])
	}
	if len(args) > 0 && args[0] == "shipsync-fleet" {
		return runBenchShipsyncFleet(ctx, env, args[1:])
	}
	if len(args) > 0 && args[0] == "shipsync-weaklink" {
		return runBenchShipsyncWeaklink(ctx, env, args[1:])
	}
	if len(args) == 0 || args[0] != "fifo" {
		return fmt.Errorf("usage: relay bench fifo|outbox|msgx|cmpp|shipsync-ingress|shipsync-downlink|shipsync-weaklink|shipsync-fleet|shipsync-eta [flags]")
	}
	fs := newFlags(env, "bench fifo", "bench fifo [--n N] [--rounds R] [--batch B] [--postgres URL] [--stores postgres,sqlite]")
	n := fs.Int("n", 5000, "messages per round")
	rounds := fs.Int("rounds", 3, "rounds per store and setting (the median is reported)")
	batches := fs.String("batch", "1,50", "comma-separated FIFOBatch settings (messages per transaction) to compare")
	pgURL := fs.String("postgres", envOr("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL store URL")
	stores := fs.String("stores", "postgres,sqlite", "stores to measure")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	batchList, err := parseInts("--batch", *batches)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "relay-bench-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	clock := relayclock.System{}

	fmt.Fprintf(env.Stdout, "relay bench fifo: global FIFO mode, handler = one INSERT, %d messages per round, median of %d rounds\n", *n, *rounds)
	fmt.Fprintf(env.Stdout, "%-9s %-6s %10s %10s %10s\n", "store", "batch", "min/s", "median/s", "max/s")
	for _, store := range strings.Split(*stores, ",") {
		url := *pgURL
		if store == "sqlite" {
			url = filepath.Join(dir, "bench.db")
		}
		d, err := openStore(ctx, url)
		if err != nil {
			return err
		}
		if err := bench.Migrate(ctx, d, clock); err != nil {
			d.Close()
			return err
		}
		for _, b := range batchList {
			var rates []float64
			for r := 0; r < *rounds; r++ {
				res, err := bench.RunFIFO(ctx, d, bench.FIFOOptions{
					Queue: demo.UniqueName(fmt.Sprintf("bench-fifo-%d", r)), N: *n, FIFOBatch: b, Clock: clock})
				if err != nil {
					d.Close()
					return fmt.Errorf("%s batch %d: %w", store, b, err)
				}
				rates = append(rates, res.Rate())
			}
			lo, mid, hi := spread(rates)
			fmt.Fprintf(env.Stdout, "%-9s %-6d %10.0f %10.0f %10.0f\n", store, b, lo, mid, hi)
		}
		d.Close()
	}
	fmt.Fprintf(env.Stdout, "(%s, %d cores; figures vary with machine load)\n", time.Now().UTC().Format(time.RFC3339), runtime.NumCPU())
	return nil
}

// parseInts parses a comma-separated list of positive integers.
func parseInts(flag, list string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		var b int
		if _, err := fmt.Sscanf(strings.TrimSpace(s), "%d", &b); err != nil || b < 1 {
			return nil, fmt.Errorf("%s %q: want positive integers", flag, list)
		}
		out = append(out, b)
	}
	return out, nil
}

// median returns the middle of rates (sorted in place) with min and max.
func spread(rates []float64) (lo, mid, hi float64) {
	slices.Sort(rates)
	return rates[0], rates[len(rates)/2], rates[len(rates)-1]
}
