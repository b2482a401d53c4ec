package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
)

// runShipsyncRule runs `relay shipsync rule add|list`.
func runShipsyncRule(ctx context.Context, env *Env, args []string) error {
	const synopsis = "shipsync rule add|list --postgres URL [--migrate] --rule ID --rule-version N --source-table T " +
		"--target-table T --key COLS --columns COLS"
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(env.Stdout, "usage: relay %s\n\n"+
			"  add   register the shore side of a rule version: the table its events name, the shore table they\n"+
			"        write, its key columns (in key order) and every column an event may carry; a version is\n"+
			"        immutable (the same content again does nothing, other content is refused)\n"+
			"  list  the registered rule versions\n", synopsis)
		return nil
	}
	sub := args[0]
	fs := newFlags(env, "shipsync rule "+sub, synopsis)
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL of the shore")
	migrate := fs.Bool("migrate", false, "apply the shipsync migration line first (otherwise an old schema is refused)")
	actor := fs.String("actor", envOr("USER", ""), "add: who registers it, for the audit log (default $USER)")
	reason := fs.String("reason", "", "add: why, for the audit log")
	var r shore.Rule
	fs.StringVar(&r.ID, "rule", "", "add: the rule id")
	fs.Uint64Var(&r.Version, "rule-version", 1, "add: the rule version (≥ 1)")
	fs.StringVar(&r.SourceTable, "source-table", "", "add: the table name the rule's events carry")
	fs.StringVar(&r.TargetTable, "target-table", "", "add: the table of the shore database they write")
	key := fs.String("key", "", "add: comma-separated key columns, in key order")
	cols := fs.String("columns", "", "add: comma-separated columns an event may carry (the key included)")
	noTomb := fs.Bool("no-insert-over-tombstone", false, "add: an INSERT of a deleted record is a conflict, not a re-creation")
	fs.StringVar(&r.Conflict.Policy, "conflict-policy", shore.PolicyManual, "add: how the rule's conflicts are decided: "+
		"MANUAL (an operator), SHORE_WINS (the shore's row) or LAST_WRITER_WINS (the later --lww-column)")
	fs.StringVar(&r.Conflict.TimeColumn, "lww-column", "", "add: LAST_WRITER_WINS's business time column")
	fs.DurationVar(&r.Conflict.MaxSkew, "lww-max-skew", shore.MaxSkewDefault, "add: a LAST_WRITER_WINS time further "+
		"than this in the future goes to an operator")
	fs.BoolVar(&r.Conflict.TieDescending, "lww-tie-descending", false, "add: equal LAST_WRITER_WINS times go to the "+
		"higher node id (default the lower)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync rule: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	d, err := relaypgx.Open(ctx, *pgURL)
	if err != nil {
		return fmt.Errorf("--postgres %s: %w", dsn.Redact(*pgURL), dsn.Scrub(err, *pgURL))
	}
	defer d.Close()
	clock := relayclock.System{}
	if err := migrateOrCheck(ctx, d, clock, *migrate, "shipsync rule", shore.MigrationLines(d)...); err != nil {
		return err
	}
	reg := shore.NewRegistry(d.Pool(), clock)
	switch sub {
	case "add":
		if *actor == "" {
			return fmt.Errorf("shipsync rule add: --actor is required ($USER is not set): the audit log records who changed what")
		}
		r.KeyColumns, r.Columns, r.InsertOverTombstone = splitList(*key), splitList(*cols), !*noTomb
		if err := reg.RegisterRule(ctx, r, shore.Audit{Actor: *actor, Reason: *reason}); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "shipsync rule add: rule %s version %d: %s → %s key (%s)\n", r.ID, r.Version, r.SourceTable,
			r.TargetTable, strings.Join(r.KeyColumns, ", "))
	case "list":
		rules, err := reg.RegisteredRules(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RULE\tVERSION\tSOURCE\tTARGET\tKEY\tCOLUMNS\tINSERT OVER TOMBSTONE\tCONFLICTS")
		for _, r := range rules {
			policy := r.Conflict.Policy
			if policy == shore.PolicyLastWriterWins {
				policy += " (" + r.Conflict.TimeColumn + ")"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%t\t%s\n", r.ID, r.Version, r.SourceTable, r.TargetTable,
				strings.Join(r.KeyColumns, ","), strings.Join(r.Columns, ","), r.InsertOverTombstone, policy)
		}
		return tw.Flush()
	default:
		return fmt.Errorf("shipsync rule: unknown action %q (add or list)", sub)
	}
	return nil
}
