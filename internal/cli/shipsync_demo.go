package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/arbiter"
	"github.com/relayhq/relay/internal/app/shipsync/console"
	"github.com/relayhq/relay/internal/app/shipsync/converge"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	"github.com/relayhq/relay/relaytype"
)

// runShipsyncDemo runs the whole uplink on this machine: ship database →
// trigger capture → CDC topics (in-process Kafka) → ship client (SQLite) →
// shore over mutual TLS → shore database, then compares the two databases
// row by row and reconciles every event.
func runShipsyncDemo(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync demo", "shipsync demo [--both-ways] [--rows 500] [--updates N] [--deletes N] [--edits N] "+
		"[--postgres URL] [--mariadb DSN]")
	bothWays := fs.Bool("both-ways", false, "sync both ways: the ship's and the shore's databases edited at once (the "+
		"same rows on both sides) while the link flaps; conflicts arbitrated (crew: later business time wins, "+
		"fuel_log: the shore wins), an operator deciding what no policy can; then both databases compared")
	edits := fs.Int("edits", 120, "--both-ways: changes each side makes at once after its inserts")
	rows := fs.Int("rows", 500, "rows the workload inserts into each of the ship's two tables")
	updates := fs.Int("updates", 0, "row updates after the inserts (default: --rows)")
	deletes := fs.Int("deletes", 0, "row deletes after the inserts (default: --rows / 10)")
	writers := fs.Int("writers", 2, "connections writing the ship's database at once")
	seed := fs.Uint64("seed", 1, "seed of the workload")
	timeout := fs.Duration("timeout", 2*time.Minute, "how long to wait for the chain to go quiet after the workload")
	keep := fs.Bool("keep", false, "keep the scratch MariaDB databases (their names are printed)")
	pgURL := fs.String("postgres", envOr("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL server of the shore (a scratch schema, dropped at the end)")
	mariaDSN := fs.String("mariadb", envOr("TEST_MARIADB_DSN", "root@tcp(127.0.0.1:3306)/"),
		"MariaDB server (two scratch databases, the ship's and the shore's, dropped at the end)")
	consoleAddr := fs.String("console-addr", "", "--both-ways: serve the management API and web console on this address "+
		"(e.g. :8480) once the edits are quiet, with the cases the policies left to an operator waiting; a one-time admin "+
		"token is printed, and the demo goes on when no case waits any more or after --console-hold")
	consoleHold := fs.Duration("console-hold", 10*time.Minute, "--console-addr: how long the demo waits for you in the console at most")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync demo: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if *rows < 1 || *updates < 0 || *deletes < 0 || *writers < 1 {
		return errors.New("shipsync demo: --rows and --writers must be positive, --updates and --deletes not negative")
	}
	rowsSet := false
	fs.Visit(func(f *flag.Flag) { rowsSet = rowsSet || f.Name == "rows" })
	schemaURL, drop, err := scratchSchema(ctx, *pgURL, fmt.Sprintf("relay_shipdemo_%d", os.Getpid()))
	if err != nil {
		return fmt.Errorf("shipsync demo: %w", err)
	}
	defer drop()
	dir, err := os.MkdirTemp("", "relay-shipdemo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if *bothWays {
		n := 40
		if rowsSet {
			n = *rows
		}
		o := converge.Options{PostgresURL: schemaURL, MariaDB: *mariaDSN, Dir: dir, Rows: n,
			Edits: *edits, Flaps: true, Seed: *seed, Progress: env.Stdout, Timeout: *timeout}
		if *consoleAddr != "" {
			o.Pause = demoConsole(env, *consoleAddr, *consoleHold)
		}
		return runBothWays(ctx, env, o)
	}
	if *consoleAddr != "" {
		return errors.New("shipsync demo: --console-addr needs --both-ways (the console shows the two-way world)")
	}
	fmt.Fprintln(env.Stdout, "shipsync demo: ship database → trigger capture → CDC topics (Kafka API, in process) → "+
		"ship client (SQLite state) → shore (mutual TLS, PostgreSQL inbox, applier) → shore database")
	res, err := shipdemo.Run(ctx, shipdemo.Options{PostgresURL: schemaURL, MariaDB: *mariaDSN, Dir: dir, Rows: *rows,
		Updates: *updates, Deletes: *deletes, Writers: *writers, Seed: *seed, Progress: env.Stdout, Timeout: *timeout,
		Keep: *keep})
	if err != nil {
		return fmt.Errorf("shipsync demo: %w", err)
	}
	s := res.Stats
	fmt.Fprintf(env.Stdout, "done in %s: %d changes → %d events in %d batches, %d B on the wire for %d B of events "+
		"(%.1f B per event)\n", res.Elapsed.Round(time.Millisecond), res.Writes, res.Events, s.Batches, s.WireBytes,
		s.RawBytes, float64(s.WireBytes)/float64(max(s.Uploaded, 1)))
	fmt.Fprintln(env.Stdout, "reconciliation:")
	res.Write(env.Stdout)
	if *keep {
		fmt.Fprintf(env.Stdout, "kept: ship database %s, shore database %s\n", res.ShipDB, res.ShoreDB)
	}
	if !res.OK() {
		return errors.New("shipsync demo: reconciliation failed")
	}
	return nil
}

// runBothWays runs the two-way demo and prints its counts and checks.
func runBothWays(ctx context.Context, env *Env, o converge.Options) error {
	fmt.Fprintln(env.Stdout, "shipsync demo --both-ways: ship and shore databases, each captured; ship client (uplink "+
		"and downlink commands) ↔ flapping link ↔ shore (applier, shore CDC consumer, conflict arbiter)")
	res, err := converge.Run(ctx, o)
	if err != nil {
		return fmt.Errorf("shipsync demo: %w", err)
	}
	fmt.Fprintf(env.Stdout, "done in %s: the ship changed %d rows and uploaded %d events (%s); the shore changed %d and "+
		"forwarded %d as commands; commands: %s; conflict cases: %s (%d decided by the operator); link cut %d times\n",
		res.Elapsed.Round(time.Millisecond), res.ShipWrites, res.Uplink, countsText(res.Receipts), res.ShoreWrites,
		res.Forwarded, countsText(res.Commands), countsText(res.Cases), res.Manual, res.Outages)
	fmt.Fprintln(env.Stdout, "reconciliation:")
	shipdemo.WriteChecks(env.Stdout, res.Checks)
	if !res.OK() {
		return errors.New("shipsync demo: reconciliation failed")
	}
	return nil
}

// countsText is "k n, …" in key order.
func countsText(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// demoConsole returns the two-way demo's pause that serves the console on
// addr with a one-time admin token, until no case waits for an operator or
// hold has passed.
func demoConsole(env *Env, addr string, hold time.Duration) func(context.Context, converge.Shore) error {
	return func(ctx context.Context, s converge.Shore) error {
		raw := make([]byte, 16)
		_, _ = rand.Read(raw) // crypto/rand.Read never fails (Go 1.24+)
		tok := hex.EncodeToString(raw)
		users, err := console.ParseUsers([]byte(tok + " demo-admin admin\n"))
		if err != nil {
			return err
		}
		cf := &consoleFlags{addr: addr}
		cs, err := cf.start(s.Pool, s.TargetDSN, s.Node, users, slog.New(slog.DiscardHandler))
		if err != nil {
			return err
		}
		defer cs.stop()
		fmt.Fprintf(env.Stdout, "console: open %s/console/ and sign in with the token %s (role admin, this run only); "+
			"the demo goes on once no conflict case waits for an operator, or after %s\n", cs.url, tok, hold)
		deadline := time.Now().Add(hold)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for time.Now().Before(deadline) {
			pending, err := arbiter.List(ctx, s.Pool, arbiter.StatePending, 1)
			if err != nil {
				return err
			}
			if len(pending) == 0 {
				fmt.Fprintln(env.Stdout, "console: no case waits for an operator; the demo goes on")
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
		fmt.Fprintln(env.Stdout, "console: --console-hold passed; the demo's operator decides the rest")
		return nil
	}
}
