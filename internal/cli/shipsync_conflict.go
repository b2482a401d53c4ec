package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/arbiter"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
)

// runShipsyncConflict runs `relay shipsync conflict list|show|decide|cancel`.
func runShipsyncConflict(ctx context.Context, env *Env, args []string) error {
	const synopsis = "shipsync conflict list|show|decide|cancel --postgres URL [--conflict ID] [--target DSN] " +
		"[--choice SHORE|NODE|VALUE|DELETE] [--value FILE] [--seen-revision REV] --operator NAME --reason TEXT"
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(env.Stdout, "usage: relay %s\n\n"+
			"  list    conflict cases (--state to filter), oldest first\n"+
			"  show    one case: its evidence (every change that met another version) and its decision\n"+
			"  decide  decide a PENDING_MANUAL case by hand: SHORE keeps the shore's row, NODE takes the node's\n"+
			"          version, VALUE a complete row (--value, a JSON object of column → value), DELETE deletes the\n"+
			"          record; refused if the shore's row changed since the evidence (or since --seen-revision).\n"+
			"          Needs --target (the shore database, to re-check) and --operator and --reason (audited);\n"+
			"          the arbiter then writes and sends it\n"+
			"  cancel  close an undecided case (DETECTED or PENDING_MANUAL) with --operator and --reason\n", synopsis)
		return nil
	}
	sub := args[0]
	fs := newFlags(env, "shipsync conflict "+sub, synopsis)
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL of the shore")
	id := fs.String("conflict", "", "show, decide, cancel: the case id")
	state := fs.String("state", "", "list: only cases in this state (e.g. PENDING_MANUAL)")
	limit := fs.Int("limit", 100, "list: at most this many cases")
	target := fs.String("target", envOr("SHIPSYNC_TARGET_DSN", ""), "decide: the shore database (MariaDB DSN; default $SHIPSYNC_TARGET_DSN)")
	choice := fs.String("choice", "", "decide: SHORE, NODE, VALUE or DELETE")
	valueFile := fs.String("value", "", "decide VALUE: JSON file holding the complete row, {\"column\": value, …}")
	seen := fs.String("seen-revision", "", "decide: the shore revision you looked at (\"none\": no row); refused if it changed")
	operator := fs.String("operator", envOr("USER", ""), "decide, cancel: who decides (default $USER)")
	reason := fs.String("reason", "", "decide, cancel: why (required)")
	shoreNode := fs.String("node-id", arbiter.ShoreNodeDefault, "the shore's node id")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync conflict: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	d, err := relaypgx.Open(ctx, *pgURL)
	if err != nil {
		return fmt.Errorf("--postgres %s: %w", dsn.Redact(*pgURL), dsn.Scrub(err, *pgURL))
	}
	defer d.Close()
	clock := relayclock.System{}
	if err := migrateOrCheck(ctx, d, clock, false, "shipsync conflict", shore.MigrationLines(d)...); err != nil {
		return err
	}
	switch sub {
	case "list":
		cases, err := arbiter.List(ctx, d.Pool(), *state, *limit)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CONFLICT\tSTATE\tRULE\tKEY\tEVIDENCE\tUPDATED\tWHY")
		for _, c := range cases {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", c.ID, c.State, c.Rule, maskKey(c.Key), c.Evidence,
				c.Updated.UTC().Format(time.RFC3339), c.Reason)
		}
		return tw.Flush()
	case "show":
		c, err := arbiter.Show(ctx, d.Pool(), *id)
		if err != nil {
			return err
		}
		writeConflict(env, c)
		return nil
	case "decide", "cancel":
	default:
		return fmt.Errorf("shipsync conflict: unknown action %q (list, show, decide or cancel)", sub)
	}
	if *id == "" || *reason == "" || *operator == "" {
		return fmt.Errorf("shipsync conflict %s: --conflict, --operator and --reason are required", sub)
	}
	if sub == "cancel" {
		if err := arbiter.Cancel(ctx, d.Pool(), clock, *id, *operator, *reason); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "shipsync conflict cancel: %s cancelled\n", *id)
		return nil
	}
	if *target == "" {
		return errors.New("shipsync conflict decide: --target is required (the shore's row is re-checked before deciding)")
	}
	t, err := apply.OpenTarget(*target)
	if err != nil {
		return fmt.Errorf("--target %s: %w", dsn.Redact(*target), dsn.Scrub(err, *target))
	}
	defer t.Close()
	a, err := arbiter.New(arbiter.Config{Pool: d.Pool(), Target: t, ShoreNode: *shoreNode, Instance: "cli " + *operator,
		Clock: clock})
	if err != nil {
		return err
	}
	m := arbiter.ManualDecision{Choice: strings.ToUpper(*choice), Operator: *operator, Reason: *reason}
	if *seen != "" {
		s := *seen
		if s == "none" {
			s = ""
		}
		m.SeenShoreRevision = &s
	}
	if *valueFile != "" {
		if m.Value, err = readRowFile(*valueFile); err != nil {
			return fmt.Errorf("--value %s: %w", *valueFile, err)
		}
	}
	dec, err := a.Decide(ctx, *id, m)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "shipsync conflict decide: %s decided %s (revision %s); the arbiter writes and sends it\n",
		*id, dec.Choice, dec.Revision)
	return nil
}

// writeConflict prints a case for an operator. Row values are shown (the
// operator decides on them); keys are masked in logs, not here.
func writeConflict(env *Env, c *arbiter.Detail) {
	fmt.Fprintf(env.Stdout, "conflict %s\n  state     %s", c.ID, c.State)
	if c.Reason != "" {
		fmt.Fprintf(env.Stdout, " (%s)", c.Reason)
	}
	fmt.Fprintf(env.Stdout, "\n  rule      %s\n  record    %s\n", c.Rule, c.Key)
	if c.State == arbiter.StatePending {
		fmt.Fprintf(env.Stdout, "  due       %s\n", c.ManualDue.UTC().Format(time.RFC3339))
	}
	if c.Superseded != "" {
		fmt.Fprintf(env.Stdout, "  superseded by %s\n", c.Superseded)
	}
	for i, e := range c.Evidence {
		fmt.Fprintf(env.Stdout, "  evidence %d (%s, %s)\n    incoming  %s %s from %s: %s → %s\n    met       %s",
			i+1, e.FoundIn, e.At.UTC().Format(time.RFC3339), e.Operation, e.EventID, e.Origin, orNone(e.Base), e.Result,
			orNone(e.CurrentRevision))
		if e.CurrentTombstone {
			fmt.Fprint(env.Stdout, " (deleted)")
		}
		fmt.Fprintf(env.Stdout, " of %s\n", e.CurrentOrigin)
		if e.CurrentRow != nil {
			fmt.Fprintf(env.Stdout, "    its row   %s\n", rowText(e.CurrentRow))
		}
	}
	if d := c.Decision; d != nil {
		fmt.Fprintf(env.Stdout, "  decision  %s %s by %s (%s) at %s: %s\n    revision %s, node %s expected at %s\n",
			d.ID, d.Choice, d.DecidedBy, d.Policy, d.At.UTC().Format(time.RFC3339), d.Reason, d.Revision, d.Node,
			orNone(d.ExpectedNode))
		if d.Tombstone {
			fmt.Fprintln(env.Stdout, "    outcome  delete")
		} else {
			fmt.Fprintf(env.Stdout, "    outcome  %s\n", rowText(d.Row))
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// maskKey shortens a record key for a listing.
func maskKey(k string) string {
	if len(k) > 40 {
		return k[:37] + "…"
	}
	return k
}

// rowText is a row as "col=value, …".
func rowText(r *pb.RowImage) string {
	var b strings.Builder
	for i, c := range r.GetColumns() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.Name + "=")
		switch v := c.Value.(type) {
		case *pb.ColumnValue_Null:
			b.WriteString("NULL")
		case *pb.ColumnValue_StringValue:
			b.WriteString(relaytype.QuoteValue(v.StringValue))
		case *pb.ColumnValue_TimestampValue:
			b.WriteString(v.TimestampValue.AsTime().UTC().Format(time.RFC3339Nano))
		default:
			fmt.Fprintf(&b, "%v", c.Value)
		}
	}
	return b.String()
}

// readRowFile reads a JSON object of column → value as a row: strings and
// numbers as text (the database converts them to the column's type), null
// as NULL, booleans as booleans; columns in the file's order.
func readRowFile(path string) (*pb.RowImage, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseRow(data)
}

// parseRow is readRowFile's parser (arbiter.ParseRow).
func parseRow(data []byte) (*pb.RowImage, error) { return arbiter.ParseRow(data) }
