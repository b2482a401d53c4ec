package cli

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
)

// runShipsyncBacklog runs `relay shipsync backlog expire|expiries`.
func runShipsyncBacklog(ctx context.Context, env *Env, args []string) error {
	const synopsis = "shipsync backlog expire|expiries --postgres URL [--migrate] --node ID --rule ID " +
		"--captured-before TIME --owner WHO --reason WHY"
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(env.Stdout, "usage: relay %s\n\n"+
			"  expire    approve that a node's events of a one-way rule captured before --captured-before (RFC 3339)\n"+
			"            and not yet delivered are not delivered: they end EXPIRED_APPROVED on the node, which\n"+
			"            reports how many; the approval is immutable and audited (a two-way rule refuses it)\n"+
			"  expiries  the approvals and what each node reported (--node to filter)\n", synopsis)
		return nil
	}
	sub := args[0]
	fs := newFlags(env, "shipsync backlog "+sub, synopsis)
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL of the shore")
	migrate := fs.Bool("migrate", false, "apply the shipsync migration line first (otherwise an old schema is refused)")
	actor := fs.String("actor", envOr("USER", ""), "expire: who approves, for the audit log (default $USER)")
	reason := fs.String("reason", "", "expire: why (required)")
	node := fs.String("node", "", "the node id")
	rule := fs.String("rule", "", "expire: the rule id")
	before := fs.String("captured-before", "", "expire: the fixed boundary, RFC 3339 (e.g. 2026-11-01T00:00:00Z)")
	owner := fs.String("owner", "", "expire: the business owner of the data (required)")
	events := fs.Uint64("events", 0, "expire: the backlog's event count you saw (0: unknown)")
	bytes := fs.Uint64("bytes", 0, "expire: the backlog's raw bytes you saw (0: unknown)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync backlog: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if sub != "expire" && sub != "expiries" {
		return fmt.Errorf("shipsync backlog: unknown action %q (expire or expiries)", sub)
	}
	var at time.Time
	if sub == "expire" {
		if *actor == "" || *node == "" || *rule == "" || *before == "" {
			return errors.New("shipsync backlog expire: --actor, --node, --rule and --captured-before are required")
		}
		var err error
		if at, err = time.Parse(time.RFC3339, *before); err != nil {
			return fmt.Errorf("--captured-before %s: not an RFC 3339 time (e.g. 2026-11-01T00:00:00Z)", relaytype.QuoteValue(*before))
		}
	}
	d, err := relaypgx.Open(ctx, *pgURL)
	if err != nil {
		return fmt.Errorf("--postgres %s: %w", dsn.Redact(*pgURL), dsn.Scrub(err, *pgURL))
	}
	defer d.Close()
	clock := relayclock.System{}
	if err := migrateOrCheck(ctx, d, clock, *migrate, "shipsync backlog", shore.MigrationLines(d)...); err != nil {
		return err
	}
	reg := shore.NewRegistry(d.Pool(), clock)
	if sub == "expire" {
		a, err := reg.ApproveExpiry(ctx, shore.ExpiryParams{NodeID: *node, RuleID: *rule, CapturedBefore: at,
			EventsEstimate: *events, BytesEstimate: *bytes, BusinessOwner: *owner,
			Audit: shore.Audit{Actor: *actor, Reason: *reason}})
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "shipsync backlog expire: approval %s: node %s rule %s@%d captured before %s; offered to "+
			"the node with its next config\n", a.ID, a.NodeID, a.RuleID, a.RuleVersion, a.CapturedBefore.UTC().Format(time.RFC3339))
		return nil
	}
	list, err := reg.ExpiryApprovals(ctx, *node)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "APPROVAL\tNODE\tRULE\tCAPTURED BEFORE\tESTIMATE\tBY\tOWNER\tEXPIRED\tREASON")
	for _, a := range list {
		expired := "not reported"
		if a.Reported != nil {
			expired = fmt.Sprintf("%d events / %d B", a.ExpiredEvents, a.ExpiredBytes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s@%d\t%s\t%d events / %d B\t%s\t%s\t%s\t%s\n", a.ID, a.NodeID, a.RuleID, a.RuleVersion,
			a.CapturedBefore.UTC().Format(time.RFC3339), a.EventsEstimate, a.BytesEstimate, a.Actor, a.BusinessOwner,
			expired, a.Reason)
	}
	return tw.Flush()
}
