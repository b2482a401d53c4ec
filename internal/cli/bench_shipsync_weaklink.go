package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/app/shipsync/shipbench"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaytype"
)

// runBenchShipsyncWeaklink drains a backlog built while the ship was
// offline through a throttled, cut and interrupted link, and prints how
// well the client used it.
func runBenchShipsyncWeaklink(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "bench shipsync-weaklink", "bench shipsync-weaklink [--events 1000000] [--rate 131072] "+
		"[--latency 300ms] [--cut 0.02] [--outage 15s] [--postgres URL] [--mariadb DSN]")
	var o shipbench.Options
	fs.IntVar(&o.Events, "events", 1_000_000, "BULK backlog: changes of narrow rows in the topic before the client starts")
	fs.IntVar(&o.Rows, "rows", 50_000, "distinct rows the backlog changes (one insert each, then updates)")
	fs.IntVar(&o.Critical, "critical", 20, "CRITICAL events written once a fifth of the backlog has its receipts")
	fs.IntVar(&o.Rate, "rate", 128<<10, "link rate in bytes per second, each way")
	fs.DurationVar(&o.Latency, "latency", 300*time.Millisecond, "one-way latency of the link (the round trip is twice it)")
	fs.Float64Var(&o.CutProbability, "cut", 0.02, "probability that a connection is cut in the middle of its traffic")
	fs.DurationVar(&o.Outage, "outage", 15*time.Second, "one outage of the link once 40 % of the backlog has its receipts (negative: none)")
	fs.IntVar(&o.Partitions, "partitions", 4, "partitions of the BULK topic")
	fs.IntVar(&o.Uploads, "uploads", client.UploadsDefault, "the client's batches in flight")
	fs.BoolVar(&o.FullAnswers, "full-answers", false, "run the client with --full-answers (the shore's answers in full form)")
	fs.BoolVar(&o.ApplyAfterUpload, "apply-after-upload", false, "start the shore's applier only once every event is received "+
		"(as if the shore ran on other machines): the upload phase measures the client and the link alone")
	fs.DurationVar(&o.Timeout, "timeout", time.Hour, "give up when the drain takes longer")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the backlog and the cuts")
	clientBin := fs.String("client-binary", "", "relay binary that runs the client (default: this one), to compare two builds' "+
		"clients under the same bench")
	pgURL := fs.String("postgres", envOr("TEST_DATABASE_URL", testdb.PGURLDefault), "PostgreSQL server of the shore (a scratch schema)")
	mariadb := fs.String("mariadb", envOr("TEST_MARIADB_DSN", testdb.MariaDBDSNDefault), "MariaDB server of the shore (a scratch database)")
	fs.StringVar(&o.CPUProfile, "client-cpuprofile", "", "have the client write a CPU profile of its run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench shipsync-weaklink: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if o.Events < 1 || o.Rows < 1 || o.Rate < 1 || o.Partitions < 1 || o.Uploads < 1 {
		return errors.New("bench shipsync-weaklink: --events, --rows, --rate, --partitions and --uploads must be positive")
	}
	bin, schemaURL, dir, done, err := benchChild(ctx, env, "bench shipsync-weaklink", *pgURL, "shipbench")
	if err != nil {
		return err
	}
	defer done()
	if *clientBin != "" {
		bin = *clientBin
	}
	o.PostgresURL, o.MariaDB, o.Dir, o.Relay, o.Progress = schemaURL, *mariadb, dir, bin, env.Stderr
	res, err := shipbench.Run(ctx, o)
	if err != nil {
		return fmt.Errorf("bench shipsync-weaklink: %w", err)
	}
	res.Write(env.Stdout)
	return nil
}
