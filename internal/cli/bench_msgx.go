package cli

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/relayhq/relay/internal/app/msgx/msgxbench"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
)

// runBenchMsgx drains a simulated msgx backlog from a real MariaDB mailbox
// into PostgreSQL with the full flight-domain writes, and reports msgs/s.
// Each round runs on a fresh PostgreSQL schema and a fresh mailbox database,
// dropped afterwards.
func runBenchMsgx(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "bench msgx", "bench msgx [--messages N] [--flights F] [--batch B,…] [--rounds R] [--postgres URL] [--mariadb DSN]")
	messages := fs.Int("messages", 100000, "approximate backlog size (FLOP updates on top of the daily plan)")
	flights := fs.Int("flights", 2000, "flights in the daily plan")
	batches := fs.String("batch", "128", "comma-separated msgx.pipeline.fifo-batch settings to compare")
	rounds := fs.Int("rounds", 1, "rounds per setting (the median is reported)")
	pgURL := fs.String("postgres", envOr("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL server URL")
	mariaDSN := fs.String("mariadb", envOr("TEST_MARIADB_DSN", "root@tcp(127.0.0.1:3306)/"), "MariaDB server DSN (a fresh database is created per round)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	maintainEvery := fs.Duration("maintain", 0, "run VACUUM (ANALYZE) on the store's tables at this interval while draining, as autovacuum would (0: off; use it on a server with autovacuum=off)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	setServerGOGC()
	stopProfile, err := startCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	batchList, err := parseInts("--batch", *batches)
	if err != nil {
		return err
	}
	clock := relayclock.System{}
	fmt.Fprintf(env.Stdout, "relay bench msgx: ~%d-message backlog (%d flights) in a MariaDB CMINMSGS → intake → strict FIFO with full flight writes on PostgreSQL → outbox → Kafka (kfake), verified; median of %d rounds\n",
		*messages, *flights, *rounds)
	fmt.Fprintf(env.Stdout, "%-6s %8s %12s %12s %12s\n", "batch", "rows", "fill/s", "pump/s", "all-done/s")
	for _, b := range batchList {
		var pump, total, fill []float64
		rows := 0
		for r := 0; r < *rounds; r++ {
			res, err := benchMsgxRound(ctx, env, *pgURL, *mariaDSN, msgxbench.Options{Messages: *messages, Flights: *flights,
				FIFOBatch: b, Seed: int64(r + 1), Clock: clock, Progress: env.Stderr, Maintain: *maintainEvery})
			if err != nil {
				return err
			}
			rows = res.Rows
			pump = append(pump, res.PumpRate())
			total = append(total, res.TotalRate())
			fill = append(fill, float64(res.Rows)/res.FillElapsed.Seconds())
			fmt.Fprintf(env.Stderr, "  round %d: %d rows, pump %.0f msgs/s (%s), all done %.0f msgs/s, states %v\n",
				r+1, res.Rows, res.PumpRate(), res.PumpElapsed.Round(time.Millisecond), res.TotalRate(), res.States)
		}
		fmt.Fprintf(env.Stdout, "%-6d %8d %12.0f %12.0f %12.0f\n", b, rows, median(fill), median(pump), median(total))
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func benchMsgxRound(ctx context.Context, env *Env, pgURL, mariaDSN string, o msgxbench.Options) (msgxbench.Result, error) {
	name := fmt.Sprintf("relay_bench_msgx_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
	// PostgreSQL: a fresh schema selected by search_path.
	schemaURL, drop, err := scratchSchema(ctx, pgURL, name)
	if err != nil {
		return msgxbench.Result{}, err
	}
	defer drop()
	store, err := relaypgx.Open(ctx, schemaURL)
	if err != nil {
		return msgxbench.Result{}, err
	}
	defer store.Close()
	// MariaDB: a fresh database.
	cfg, err := mysqldsn.Parse(mariaDSN)
	if err != nil {
		return msgxbench.Result{}, fmt.Errorf("--mariadb: %w", err)
	}
	cfg.DBName, cfg.ParseTime, cfg.Loc = "", true, time.UTC
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return msgxbench.Result{}, err
	}
	boundPool(admin)
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return msgxbench.Result{}, err
	}
	defer admin.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE "+name)
	cfg.DBName = name
	mb, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return msgxbench.Result{}, err
	}
	boundPool(mb)
	defer mb.Close()
	o.Store, o.Mailbox = store, mb
	return msgxbench.Run(ctx, o)
}
