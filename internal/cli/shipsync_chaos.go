package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/relayhq/relay/internal/app/shipsync/shorecrash"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaytype"
)

// runShipsyncChaos runs the shore's crash harness
// (internal/app/shipsync/shorecrash) with this binary as the shore process,
// in a fresh PostgreSQL schema and a fresh MariaDB database (both dropped
// afterwards), and prints its progress and the reconciliation. Any problem
// found is an error (exit 1).
func runShipsyncChaos(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync chaos", "shipsync chaos [--records N] [--kills K] [--fault-probability P] [--seed S] "+
		"[--postgres URL] [--mariadb DSN]")
	var o shorecrash.Options
	fs.IntVar(&o.Records, "records", 300, "records of the workload (each an insert and then updates, deletes, re-inserts, "+
		"stale updates that conflict and updates the target refuses)")
	fs.IntVar(&o.Steps, "steps", 6, "events per record")
	fs.IntVar(&o.Streams, "streams", 2, "source streams (partitions) the events are spread over, uploaded concurrently")
	fs.IntVar(&o.Batch, "batch", 40, "events per upload batch")
	fs.IntVar(&o.Kills, "kills", 12, "SIGKILLs of the shore, 300–900 ms apart; every other life is armed at the fault points")
	fs.Float64Var(&o.FaultProbability, "fault-probability", 0.2, "chance that passing a fault point kills an armed life")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the workload and the kill plan")
	fs.DurationVar(&o.Timeout, "timeout", 0, "give up settling after this long (default 2m)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the PostgreSQL schema and the shore database (their names are printed), to look at after a failed run")
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL server; the run creates a schema of its own there and drops it at the end")
	mariadb := fs.String("mariadb", envOr("TEST_MARIADB_DSN", testdb.MariaDBDSNDefault),
		"MariaDB server (user:pw@tcp(host:port)/); the run creates a database of its own there and drops it at the end")
	binary := fs.String("binary", "", "relay executable the shore runs as (default: this one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync chaos: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if o.Records < 1 || o.Steps < 1 || o.Streams < 1 || o.Batch < 1 || o.Kills < 0 || o.FaultProbability < 0 || o.FaultProbability > 1 {
		return errors.New("shipsync chaos: --records, --steps, --streams, --batch ≥ 1, --kills ≥ 0, --fault-probability in [0, 1]")
	}
	o.Binary = *binary
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("shipsync chaos: find the relay binary: %w", err)
		}
		o.Binary = exe
	}
	schema := "relay_shipsync_chaos_" + randomHex(6)
	schemaURL, drop, err := scratchSchema(ctx, *pgURL, schema)
	if err != nil {
		return err
	}
	if o.Keep {
		fmt.Fprintf(env.Stdout, "shipsync chaos: PostgreSQL schema %s kept\n", schema)
	} else {
		defer drop()
	}
	o.PostgresURL, o.MariaDB = schemaURL, *mariadb
	dir, err := os.MkdirTemp("", "relay-shipsync-chaos-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	o.Dir, o.Out = dir, env.Stdout
	fmt.Fprintln(env.Stdout, "relay shipsync chaos: a shore process (data API + applier) killed with SIGKILL at random "+
		"moments and at its fault points while a test ship uploads over mutual TLS and pulls receipts; then every event "+
		"is reconciled from PostgreSQL, the shore database and the receipts")
	res, err := shorecrash.Run(ctx, o)
	if err != nil {
		return err
	}
	res.Write(env.Stdout)
	if !res.OK() {
		return fmt.Errorf("shipsync chaos: %d problems", len(res.Problems))
	}
	return nil
}
