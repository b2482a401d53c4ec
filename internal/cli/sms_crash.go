package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/relayhq/relay/internal/app/sms/smscrash"
	"github.com/relayhq/relay/relaytype"
)

// runSmsCrash runs the sms gateway's crash harness (internal/app/sms/smscrash)
// with this binary as the supplier and gateway children, in a fresh
// PostgreSQL schema (dropped afterwards) and fresh streams, and prints its
// progress and the reconciliation. Any problem found is an error (exit 1).
func runSmsCrash(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "sms crash", "sms crash [--commands N] [--kills K] [--fault-lives F] [--seed S] [--postgres URL] [--redis ADDR]")
	commands := fs.Int("commands", smscrash.CommandsDefault, "distinct submitIds pushed (1 to N)")
	duplicates := fs.Int("duplicates", smscrash.DuplicatesDefault, "extra entries repeating a submitId, half right behind its first copy, half far behind it")
	kills := fs.Int("kills", smscrash.KillsDefault, "gateway lives ended by SIGKILL at a random moment")
	faultLives := fs.Int("fault-lives", smscrash.FaultLivesDefault, "gateway lives armed at each of the four fault points (sms.gateway.after-claim, -submit, -settle, -result)")
	faultProb := fs.Float64("fault-probability", 0, "chance that passing the armed point kills an armed life; the gateway passes each point once per batch (0: 0.5)")
	seed := fs.Uint64("seed", 1, "seed of the plan: entry order, duplicates, lives, consumer names, the children's draws")
	redisAddr := fs.String("redis", envOr("RELAY_REDIS_ADDR", smscrash.RedisAddrDefault), "Redis server for the run's streams (named per run, deleted at the end)")
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "PostgreSQL server; the run creates a schema of its own there and drops it at the end")
	binary := fs.String("binary", "", "relay executable the children run (default: this one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sms crash: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if *commands < 1 || *duplicates < 0 || *kills < 0 || *faultLives < 0 {
		return errors.New("sms crash: --commands must be positive, --duplicates, --kills and --fault-lives not negative")
	}
	bin := *binary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("sms crash: find the relay binary: %w", err)
		}
		bin = exe
	}
	schema := "relay_sms_crash_" + randomHex(6)
	schemaURL, drop, err := scratchSchema(ctx, *pgURL, schema)
	if err != nil {
		return err
	}
	defer drop()
	dir, err := os.MkdirTemp("", "relay-sms-crash-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	fmt.Fprintf(env.Stdout, "relay sms crash: the supplier simulator and `relay sms gateway` as child processes on Redis %s and "+
		"PostgreSQL schema %s; the gateway is killed with SIGKILL at random moments and at its fault points, restarted, "+
		"drained, and every submitId reconciled\n", *redisAddr, schema)
	res, err := smscrash.Run(ctx, smscrash.Options{Binary: bin, PostgresURL: schemaURL, RedisAddr: *redisAddr, Dir: dir,
		Commands: *commands, Duplicates: *duplicates, Kills: *kills, FaultLives: *faultLives,
		FaultProbability: *faultProb, Seed: *seed, Out: env.Stdout})
	if res != nil {
		res.Write(env.Stdout)
	}
	return err
}
