package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/relayhq/relay/internal/app/shipsync/converge"
	"github.com/relayhq/relay/internal/app/shipsync/shipcrash"
	"github.com/relayhq/relay/internal/app/shipsync/shorecrash"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaytype"
)

// runShipsyncChaos runs a crash harness with this binary as the killed
// processes: --side shore (the default) the shore's
// (internal/app/shipsync/shorecrash), --side ship the ship client's
// (internal/app/shipsync/shipcrash), --side both the two-way convergence
// run with the shore and the client killed (internal/app/shipsync/converge).
// Each runs in a fresh PostgreSQL schema
// and fresh MariaDB databases (dropped afterwards) and prints its progress
// and the reconciliation. Any problem found is an error (exit 1).
func runShipsyncChaos(ctx context.Context, env *Env, args []string) error {
	side, rest, err := chaosSide(args)
	if err != nil {
		return err
	}
	switch side {
	case "shore":
		return runShoreChaos(ctx, env, rest)
	case "ship":
		return runShipChaos(ctx, env, rest)
	case "both":
		return runBothChaos(ctx, env, rest)
	}
	return fmt.Errorf("shipsync chaos: --side %s: want shore, ship or both", relaytype.QuoteValue(side))
}

// chaosSide takes --side out of args (default "shore"): the two sides have
// flag sets of their own.
func chaosSide(args []string) (side string, rest []string, err error) {
	side = "shore"
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return side, append(rest, args[i:]...), nil
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "side" {
			rest = append(rest, a)
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return "", nil, errors.New("shipsync chaos: --side needs a value (shore, ship or both)")
			}
			i++
			val = args[i]
		}
		side = val
	}
	return side, rest, nil
}

// chaosRun is what both sides share: the servers, the binary, the scratch
// schema and directory.
type chaosRun struct {
	name           string
	pgURL, mariadb *string
	binary         *string
	keep           *bool
	schemaURL, dir string
	cleanup        []func()
}

func newChaosRun(fs *flag.FlagSet, name string) *chaosRun {
	r := &chaosRun{name: name}
	fs.String("side", "shore", "which crash harness: shore (the shore process killed), ship (the ship client "+
		"killed, the shore restarted, the link cut) or both (both databases edited at once, the shore and the client "+
		"killed at the downlink's and the arbiter's fault points)")
	r.keep = fs.Bool("keep", false, "keep the PostgreSQL schema and the MariaDB databases (their names are printed), "+
		"to look at after a failed run")
	r.pgURL = fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL server; the run creates a schema of its own there and drops it at the end")
	r.mariadb = fs.String("mariadb", envOr("TEST_MARIADB_DSN", testdb.MariaDBDSNDefault),
		"MariaDB server (user:pw@tcp(host:port)/); the run creates databases of its own there and drops them at the end")
	r.binary = fs.String("binary", "", "relay executable the killed processes run as (default: this one)")
	return r
}

// prepare resolves the binary and makes the scratch schema and directory;
// close removes them.
func (r *chaosRun) prepare(ctx context.Context, env *Env) error {
	if *r.binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("shipsync chaos: find the relay binary: %w", err)
		}
		*r.binary = exe
	}
	schema := "relay_shipsync_" + r.name + "_" + randomHex(6)
	schemaURL, drop, err := scratchSchema(ctx, *r.pgURL, schema)
	if err != nil {
		return err
	}
	if *r.keep {
		fmt.Fprintf(env.Stdout, "shipsync chaos: PostgreSQL schema %s kept\n", schema)
	} else {
		r.cleanup = append(r.cleanup, drop)
	}
	dir, err := os.MkdirTemp("", "relay-shipsync-"+r.name+"-")
	if err != nil {
		r.close()
		return err
	}
	r.cleanup = append(r.cleanup, func() { _ = os.RemoveAll(dir) })
	r.schemaURL, r.dir = schemaURL, dir
	return nil
}

func (r *chaosRun) close() {
	for i := len(r.cleanup) - 1; i >= 0; i-- {
		r.cleanup[i]()
	}
}

// runShoreChaos runs the shore's crash harness.
func runShoreChaos(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync chaos", "shipsync chaos [--side shore] [--records N] [--kills K] "+
		"[--fault-probability P] [--seed S] [--postgres URL] [--mariadb DSN]")
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
	r := newChaosRun(fs, "chaos")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync chaos: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if o.Records < 1 || o.Steps < 1 || o.Streams < 1 || o.Batch < 1 || o.Kills < 0 || o.FaultProbability < 0 || o.FaultProbability > 1 {
		return errors.New("shipsync chaos: --records, --steps, --streams, --batch ≥ 1, --kills ≥ 0, --fault-probability in [0, 1]")
	}
	if err := r.prepare(ctx, env); err != nil {
		return err
	}
	defer r.close()
	o.Binary, o.Keep, o.PostgresURL, o.MariaDB, o.Dir, o.Out = *r.binary, *r.keep, r.schemaURL, *r.mariadb, r.dir, env.Stdout
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

// runShipChaos runs the ship side's crash harness.
func runShipChaos(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync chaos --side ship", "shipsync chaos --side ship [--changes N] [--kills K] "+
		"[--shore-kills K] [--capture-kills K] [--cuts N] [--fault-probability P] [--seed S] [--postgres URL] [--mariadb DSN]")
	var o shipcrash.Options
	fs.IntVar(&o.Changes, "changes", 3000, "row changes of the workload on the ship database (inserts, updates, deletes)")
	fs.IntVar(&o.Writers, "writers", 1, "connections writing the ship database at once")
	fs.IntVar(&o.Kills, "kills", shipcrash.KillsDefault, "SIGKILLs of the client; every other life is armed at one of its fault points in turn")
	fs.IntVar(&o.ShoreKills, "shore-kills", shipcrash.ShoreKillsDefault, "SIGKILLs (and restarts) of the shore")
	fs.IntVar(&o.Cuts, "cuts", shipcrash.CutsDefault, "outages of the link between client and shore, 0.5–2 s each")
	fs.IntVar(&o.CaptureKills, "capture-kills", shipcrash.CaptureKillsDefault,
		"SIGKILLs of the capture process; every other life is armed at one of its fault points in turn")
	fs.Float64Var(&o.FaultProbability, "fault-probability", shipcrash.FaultProbabilityDefault,
		"chance that passing the armed fault point kills an armed life")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the workload and the plan")
	fs.DurationVar(&o.Timeout, "timeout", 0, "give up waiting for quiet after this long (default 2m)")
	r := newChaosRun(fs, "shipcrash")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync chaos: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if o.Changes < 10 || o.Writers < 1 || o.Kills < 0 || o.ShoreKills < 0 || o.Cuts < 0 || o.CaptureKills < 0 ||
		o.FaultProbability < 0 || o.FaultProbability > 1 {
		return errors.New("shipsync chaos: --changes ≥ 10, --writers ≥ 1, --kills, --shore-kills, --capture-kills, " +
			"--cuts ≥ 0, --fault-probability in [0, 1]")
	}
	if err := r.prepare(ctx, env); err != nil {
		return err
	}
	defer r.close()
	o.Binary, o.Keep, o.PostgresURL, o.MariaDB, o.Dir, o.Out = *r.binary, *r.keep, r.schemaURL, *r.mariadb, r.dir, env.Stdout
	fmt.Fprintln(env.Stdout, "relay shipsync chaos --side ship: the ship client and the capture killed with SIGKILL at random "+
		"moments and at their fault points, the shore killed and restarted, the link cut, while a workload writes the ship "+
		"database; then both databases and every event are reconciled")
	res, err := shipcrash.Run(ctx, o)
	if err != nil {
		return err
	}
	res.Write(env.Stdout)
	if !res.OK() {
		return errors.New("shipsync chaos --side ship: reconciliation failed")
	}
	return nil
}

// runBothChaos runs the two-way convergence run as a crash harness.
func runBothChaos(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync chaos --side both", "shipsync chaos --side both [--rows N] [--edits N] [--kills K] "+
		"[--client-kills K] [--fault-probability P] [--flaps] [--seed S] [--postgres URL] [--mariadb DSN]")
	c := &converge.Chaos{}
	o := converge.Options{Chaos: c}
	fs.IntVar(&o.Rows, "rows", 20, "rows each side inserts per table before the edits")
	fs.IntVar(&o.Edits, "edits", 100, "changes each side makes at least while the other side edits too (they go on "+
		"until the kills are over), most on rows both sides edit")
	fs.IntVar(&c.ShoreKills, "kills", converge.ShoreKillsDefault, "SIGKILLs of the shore process (data API, applier, "+
		"shore CDC consumer, arbiter); every other life is armed at one of its fault points in turn")
	fs.IntVar(&c.ClientKills, "client-kills", converge.ClientKillsDefault, "SIGKILLs of the ship client (uplink and "+
		"remote applier); every other life is armed at one of its fault points in turn")
	fs.Float64Var(&c.FaultProbability, "fault-probability", converge.FaultProbabilityDefault,
		"chance that passing the armed fault point kills an armed life")
	fs.DurationVar(&c.Lease, "arbiter-lease", converge.LeaseDefault, "the shore's arbiter lease: how long a case "+
		"claimed by a life that died waits to be taken over")
	fs.BoolVar(&o.Flaps, "flaps", false, "also cut the link between client and shore on and off while both sides edit")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the edits and the kill plan")
	fs.DurationVar(&o.Timeout, "timeout", 0, "give up waiting for quiet after this long (default 2m)")
	r := newChaosRun(fs, "converge")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync chaos: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if o.Rows < 10 || o.Edits < 1 || c.ShoreKills < 0 || c.ClientKills < 0 || c.FaultProbability < 0 ||
		c.FaultProbability > 1 || c.Lease <= 0 {
		return errors.New("shipsync chaos: --rows ≥ 10, --edits ≥ 1, --kills, --client-kills ≥ 0, " +
			"--fault-probability in [0, 1], --arbiter-lease > 0")
	}
	if err := r.prepare(ctx, env); err != nil {
		return err
	}
	defer r.close()
	c.Binary = *r.binary
	o.Keep, o.PostgresURL, o.MariaDB, o.Dir, o.Progress = *r.keep, r.schemaURL, *r.mariadb, r.dir, env.Stdout
	fmt.Fprintln(env.Stdout, "relay shipsync chaos --side both: a ship and a shore database edited at once on shared "+
		"rows, the shore process (applier, shore CDC consumer, arbiter) and the ship client (uplink, remote applier) "+
		"killed with SIGKILL at random moments and at their fault points; then both databases, every event, command "+
		"and conflict are reconciled")
	res, err := converge.Run(ctx, o)
	if err != nil {
		return err
	}
	res.Write(env.Stdout)
	if !res.OK() {
		return errors.New("shipsync chaos --side both: reconciliation failed")
	}
	return nil
}
