package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// runShipsyncNode runs `relay shipsync node add|rotate|retire|revoke|list`.
func runShipsyncNode(ctx context.Context, env *Env, args []string) error {
	const synopsis = "shipsync node add|rotate|retire|revoke|allow-rule|list|audit --postgres URL [--migrate] [--cert FILE] [--node ID] [--fingerprint HEX]"
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(env.Stdout, "usage: relay %s\n\n"+
			"  add     register the node a certificate names, active, with that certificate (--cert)\n"+
			"  rotate  register another certificate of an active node; both are accepted until retire (--cert)\n"+
			"  retire  stop accepting one certificate of a node (--node, --fingerprint)\n"+
			"  revoke  refuse every new request of a node; what it uploaded stays (--node)\n"+
			"  allow-rule  let a node upload events of a rule version (--node, --rule, --rule-version)\n"+
			"  list    the nodes and their certificates\n"+
			"  audit   the audit log of these changes (who, when, what, why)\n", synopsis)
		return nil
	}
	sub := args[0]
	fs := newFlags(env, "shipsync node "+sub, synopsis)
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL of the shore")
	migrate := fs.Bool("migrate", false, "apply the shipsync migration line first (otherwise an old schema is refused)")
	certFile := fs.String("cert", "", "add, rotate: the node's PEM certificate (from relay shipsync pki node)")
	node := fs.String("node", "", "retire, revoke, allow-rule: the node id")
	actor := fs.String("actor", envOr("USER", ""), "add, rotate, retire, revoke: who makes the change, for the audit log (default $USER)")
	reason := fs.String("reason", "", "add, rotate, retire, revoke: why, for the audit log")
	rule := fs.String("rule", "", "allow-rule: the rule id")
	ruleVersion := fs.Uint64("rule-version", 1, "allow-rule: the rule version (≥ 1)")
	fp := fs.String("fingerprint", "", "retire: the certificate's SHA-256 fingerprint (hex, as pki node and list print it)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync node: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	d, err := relaypgx.Open(ctx, *pgURL)
	if err != nil {
		return fmt.Errorf("--postgres %s: %w", dsn.Redact(*pgURL), dsn.Scrub(err, *pgURL))
	}
	defer d.Close()
	clock := relayclock.System{}
	if err := migrateOrCheck(ctx, d, clock, *migrate, "shipsync node", shore.MigrationLines(d)...); err != nil {
		return err
	}
	reg := shore.NewRegistry(d.Pool(), clock)
	who := shore.Audit{Actor: *actor, Reason: *reason}
	if sub != "list" && sub != "audit" && who.Actor == "" {
		return fmt.Errorf("shipsync node %s: --actor is required ($USER is not set): the audit log records who changed what", sub)
	}
	switch sub {
	case "add", "rotate":
		if *certFile == "" {
			return fmt.Errorf("shipsync node %s: --cert is required", sub)
		}
		c, err := pki.ReadCert(*certFile)
		if err != nil {
			return err
		}
		op := reg.Add
		if sub == "rotate" {
			op = reg.Rotate
		}
		id, err := op(ctx, c, who)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "shipsync node %s: node %s certificate %s active until %s\n", sub, id,
			pki.Fingerprint(c), c.NotAfter.Format("2006-01-02"))
	case "retire":
		if *node == "" || *fp == "" {
			return fmt.Errorf("shipsync node retire: --node and --fingerprint are required")
		}
		if err := reg.Retire(ctx, *node, *fp, who); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "shipsync node retire: node %s certificate %s retired\n", *node, *fp)
	case "revoke":
		if *node == "" {
			return fmt.Errorf("shipsync node revoke: --node is required")
		}
		if err := reg.Revoke(ctx, *node, who); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "shipsync node revoke: node %s revoked (new requests refused, its uploads kept)\n", *node)
	case "list":
		list, err := reg.List(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tSTATE\tCERTIFICATE\tCERT STATE\tNOT AFTER")
		for _, c := range list {
			na := ""
			if !c.NotAfter.IsZero() {
				na = c.NotAfter.Format("2006-01-02")
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.NodeID, c.NodeState, c.Fingerprint, c.CertState, na)
		}
		return tw.Flush()
	case "allow-rule":
		if *node == "" || *rule == "" {
			return fmt.Errorf("shipsync node allow-rule: --node and --rule are required")
		}
		if err := reg.AllowRule(ctx, *node, *rule, *ruleVersion, who); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "shipsync node allow-rule: node %s may upload rule %s version %d\n", *node, *rule, *ruleVersion)
	case "audit":
		log, err := reg.AuditLog(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "AT\tACTOR\tACTION\tOBJECT\tBEFORE\tAFTER\tREASON")
		for _, e := range log {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s %s\t%s\t%s\t%s\n", e.At.UTC().Format(time.RFC3339), e.Actor, e.Action,
				e.ObjectType, e.ObjectID, e.Before, e.After, e.Reason)
		}
		return tw.Flush()
	default:
		return fmt.Errorf("shipsync node: unknown action %q (add, rotate, retire, revoke, list or audit)", sub)
	}
	return nil
}

// migrateOrCheck applies lines with migrate, or refuses a schema that lacks
// one of their versions.
func migrateOrCheck(ctx context.Context, d *relaypgx.Driver, clock relaytype.Clock, migrate bool, what string,
	lines ...relaymigrate.Line) error {
	if migrate {
		_, err := relaymigrate.Up(ctx, d, clock, lines...)
		return err
	}
	if err := relaymigrate.Check(ctx, d, lines...); err != nil {
		return fmt.Errorf("%s: %w (run with --migrate)", what, err)
	}
	return nil
}
