package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay/internal/app/msgx/msgxbench"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// runMsgxDemo runs the whole exchange on this machine for a newcomer: a
// simulated AODB operating day written into a scratch MariaDB mailbox,
// intake → strict FIFO flight processing on a scratch PostgreSQL schema →
// outbox → Kafka (an in-process kfake cluster) and the marks written back,
// with a progress line, then the verification of every message, flight,
// event and mark against the simulator's model. Both scratch databases are
// dropped at the end.
func runMsgxDemo(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "msgx demo", "msgx demo [--messages 3000] [--flights 200] [--postgres URL] [--mariadb DSN]")
	messages := fs.Int("messages", 3000, "approximate number of AODB messages (FLOP updates on top of the daily plan)")
	flights := fs.Int("flights", 200, "flights in the simulated daily plan")
	seed := fs.Int64("seed", 1, "seed of the simulated day")
	pgURL := fs.String("postgres", envOr("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL server (a scratch schema, dropped at the end)")
	mariaDSN := fs.String("mariadb", envOr("TEST_MARIADB_DSN", "root@tcp(127.0.0.1:3306)/"),
		"MariaDB server (a scratch database holding the mailbox, dropped at the end)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("msgx demo: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if *messages < 1 || *flights < 1 {
		return errors.New("msgx demo: --messages and --flights must be positive")
	}
	setServerGOGC()
	fmt.Fprintf(env.Stdout, "msgx demo: a simulated operating day (%d flights, ~%d messages) in a scratch CMINMSGS mailbox → "+
		"intake → strict FIFO flight state in PostgreSQL → outbox → Kafka (in-process) → marks written back\n", *flights, *messages)
	res, err := benchMsgxRound(ctx, env, *pgURL, *mariaDSN, msgxbench.Options{Messages: *messages, Flights: *flights,
		FIFOBatch: 128, Seed: *seed, Clock: relayclock.System{}, Progress: env.Stderr})
	if err != nil {
		return fmt.Errorf("msgx demo: %w", err)
	}
	fmt.Fprintf(env.Stdout, "mailbox:   %d rows written in %s\n", res.Rows, res.FillElapsed.Round(time.Millisecond))
	fmt.Fprintf(env.Stdout, "processed: every message in %s (%.0f msgs/s); marks and events done in %s\n",
		res.PumpElapsed.Round(time.Millisecond), res.PumpRate(), res.TotalElapsed.Round(time.Millisecond))
	fmt.Fprintf(env.Stdout, "outcomes:  %v\n", res.States)
	fmt.Fprintln(env.Stdout, "ok: verified against the simulator's model — every message's outcome, every flight's state, "+
		"every Kafka event and every mailbox mark (the checks of `relay msgx verify`)")
	return nil
}
