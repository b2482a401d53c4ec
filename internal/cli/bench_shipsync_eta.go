package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/etasim"
	"github.com/relayhq/relay/relaydriver/relaypgx"
)

// runBenchShipsyncETA checks the backlog ETA against the truth: an offline
// backlog drained over a simulated throttled link in a transfer window, in
// simulated time, through the real measuring and the shore's real
// estimate; it prints the P50/P90 given at 10, 50 and 90 % of the drain
// against the time the drain took.
func runBenchShipsyncETA(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "bench shipsync-eta", "bench shipsync-eta [--events 200000] [--link-rate 256] "+
		"[--window '00:00-06:00,12:00-18:00'] [--incoming 600] [--outages 2] [--seeds 1,2,3] [--postgres URL]")
	events := fs.Int("events", 200_000, "events waiting when the link returns")
	rate := fs.Float64("link-rate", 256, "the link's capacity, wire bytes per second (each batch gets 50–100 % of it)")
	window := fs.String("window", "00:00-06:00,12:00-18:00", "when transfer is allowed (UTC, the node's window syntax)")
	incoming := fs.Float64("incoming", 600, "new events captured per hour, all day")
	outages := fs.Float64("outages", 2, "20-minute link outages per day, on average")
	seeds := fs.String("seeds", "1,2,3", "comma-separated seeds: one run each")
	pgURL := fs.String("postgres", envOr("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL server (a scratch schema is made and dropped per run)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var list []uint64
	for _, s := range splitList(*seeds) {
		var v uint64
		if _, err := fmt.Sscan(s, &v); err != nil {
			return fmt.Errorf("bench shipsync-eta: --seeds: %q is not a number", s)
		}
		list = append(list, v)
	}
	if len(list) == 0 || *events < 1 || *rate <= 0 || *incoming <= 0 || *outages < 0 {
		return errors.New("bench shipsync-eta: --seeds needs a seed; --events, --link-rate and --incoming must be positive")
	}
	worst := 0.0
	for _, seed := range list {
		url, drop, err := scratchSchema(ctx, *pgURL, fmt.Sprintf("relay_bench_eta_%d_%d", os.Getpid(), seed))
		if err != nil {
			return fmt.Errorf("bench shipsync-eta: %w", err)
		}
		res, err := benchETAOnce(ctx, url, etasim.Options{Seed: seed, Backlog: *events, LinkRate: *rate, Window: *window,
			IncomingPerHour: *incoming, OutagesPerDay: *outages, Progress: env.Stderr})
		drop()
		if err != nil {
			return fmt.Errorf("bench shipsync-eta: seed %d: %w", seed, err)
		}
		fmt.Fprintf(env.Stdout, "seed %d: ", seed)
		etasim.WriteTable(env.Stdout, res)
		for _, p := range res.Points {
			worst = math.Max(worst, math.Abs(p.Error()))
		}
	}
	fmt.Fprintf(env.Stdout, "largest P50 error over %d runs: %.1f %% (goal: within 20 %%)\n", len(list), worst*100)
	return nil
}

func benchETAOnce(ctx context.Context, url string, o etasim.Options) (*etasim.Result, error) {
	d, err := relaypgx.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	dir, err := os.MkdirTemp("", "relay-bench-eta-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	o.Node = "ship-eta"
	if o.Registry, o.Clock, err = etasim.Setup(ctx, d, time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC), dir, o.Node); err != nil {
		return nil, err
	}
	return etasim.Run(ctx, o)
}
