package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/converge"
	"github.com/relayhq/relay/internal/testdb"
)

// runBenchShipsyncDownlink measures both directions of shipsync in one
// process on the same parts — the ship's changes until the shore has a
// receipt for each, the shore's changes until the ship has acknowledged
// each command — alternating, and a round of conflicts made while the
// link was down, settled after it returns.
func runBenchShipsyncDownlink(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "bench shipsync-downlink", "bench shipsync-downlink [--rows 2000] [--rounds 3] [--conflicts 200] "+
		"[--postgres URL] [--mariadb DSN]")
	rows := fs.Int("rows", 2000, "rows one round inserts on one side")
	rounds := fs.Int("rounds", 3, "rounds per direction (alternating ship → shore and shore → ship)")
	conflicts := fs.Int("conflicts", 200, "records both sides change while the link is down, in the conflict round")
	pgURL := fs.String("postgres", envOr("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL server (a scratch schema is made and dropped)")
	mariadb := fs.String("mariadb", envOr("TEST_MARIADB_DSN", testdb.MariaDBDSNDefault),
		"MariaDB server (two scratch databases are made and dropped)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *rows < 1 || *rounds < 1 || *conflicts < 1 {
		return errors.New("bench shipsync-downlink: --rows, --rounds and --conflicts must be ≥ 1")
	}
	url, drop, err := scratchSchema(ctx, *pgURL, fmt.Sprintf("relay_bench_downlink_%d", os.Getpid()))
	if err != nil {
		return fmt.Errorf("bench shipsync-downlink: %w", err)
	}
	defer drop()
	dir, err := os.MkdirTemp("", "relay-bench-downlink-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	res, err := converge.Bench(ctx, converge.BenchOptions{PostgresURL: url, MariaDB: *mariadb, Dir: dir, Rows: *rows,
		Rounds: *rounds, Conflicts: *conflicts, Progress: env.Stdout})
	if err != nil {
		return fmt.Errorf("bench shipsync-downlink: %w", err)
	}
	up, down := converge.Median(res.Uplink), converge.Median(res.Downlink)
	rate := func(d time.Duration) float64 { return float64(res.Rows) / d.Seconds() }
	fmt.Fprintf(env.Stdout, "median of %d rounds, %d changes each: uplink %s (%.0f changes/s), downlink %s (%.0f changes/s); "+
		"downlink/uplink %.2f\n", *rounds, res.Rows, up.Round(time.Millisecond), rate(up), down.Round(time.Millisecond),
		rate(down), rate(down)/rate(up))
	if !res.Converged {
		return errors.New("bench shipsync-downlink: the conflicted table differs between the two sides")
	}
	return nil
}
