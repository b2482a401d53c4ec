package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// runShipsyncBlocked lists the ship client's blocked events from its state
// file: each holds its partition's checkpoint until it is resolved.
func runShipsyncBlocked(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync blocked", "shipsync blocked [--state FILE] [--limit 100]")
	state := fs.String("state", "shipsync-client.db", "the client's SQLite state file")
	limit := fs.Int("limit", 100, "list at most this many")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync blocked: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if *limit < 1 {
		return errors.New("shipsync blocked: --limit must be ≥ 1")
	}
	st, err := client.OpenStore(ctx, *state, "", relayclock.System{})
	if err != nil {
		return fmt.Errorf("--state: %w", err)
	}
	defer st.Close()
	bs, err := st.Blocked(ctx, *limit)
	if err != nil {
		return err
	}
	if len(bs) == 0 {
		fmt.Fprintln(env.Stdout, "no blocked events")
		return nil
	}
	for _, b := range bs {
		fmt.Fprintf(env.Stdout, "%s  %s@%d  rule %s  %s  since %s\n", b.ID, b.TP, b.Offset, b.RuleID,
			relaytype.QuoteValue(b.Reason), b.UpdatedAt.Format(time.RFC3339))
	}
	fmt.Fprintf(env.Stdout, "%d blocked (each holds its partition's checkpoint until resolved)\n", len(bs))
	return nil
}
