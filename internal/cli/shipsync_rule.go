package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
)

// runShipsyncRule runs `relay shipsync rule add|list|draft|validate|approve|distribute|rollback|status`.
func runShipsyncRule(ctx context.Context, env *Env, args []string) error {
	const synopsis = "shipsync rule add|list|draft|edit|validate|approve|distribute|rollback|status --postgres URL [--migrate] " +
		"--rule ID --rule-version N [flags]"
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(env.Stdout, "usage: relay %s\n\n"+
			"  add         register the shore side of a rule version: the table its events name, the shore table they\n"+
			"              write, its key columns (in key order) and every column an event may carry; a version is\n"+
			"              immutable (the same content again does nothing, other content is refused)\n"+
			"  list        the registered rule versions\n"+
			"  draft       open the release of a registered version: the node-side rule (--ship-rule FILE, one rule\n"+
			"              in the rules file's JSON form) and the nodes that run it (--targets)\n"+
			"  edit        replace a DRAFT's node-side rule and targets (past DRAFT a change is a new version)\n"+
			"  validate    DRAFT → VALIDATED: the node-side rule compiles and agrees with the shore rule, and the\n"+
			"              shore table (--target-db) has its columns and key\n"+
			"  approve     VALIDATED → APPROVED: by someone other than the author, --reason required\n"+
			"  distribute  APPROVED → DISTRIBUTING: offered to the target nodes; ACTIVE once every one runs it,\n"+
			"              FAILED if one's validation refuses it (the nodes keep the ACTIVE version)\n"+
			"  rollback    back to the ACTIVE version (a newer one in flight) or to an earlier one that ran\n"+
			"              (--to-version), --reason required\n"+
			"  status      the releases and each target node's progress\n"+
			"  window-plan the dataset window reconcile of a rule between the ship's table and the shore's: rows to\n"+
			"              send, to delete or keep, orphans, exceptions, and the digests that check the result\n"+
			"              (--rules, --ship-db, --target-db; counts only, never key values)\n"+
			"Every release step takes --expect-revision (the REV status shows; 0: do not check) and is audited.\n",
			synopsis)
		return nil
	}
	sub := args[0]
	fs := newFlags(env, "shipsync rule "+sub, synopsis)
	pgURL := fs.String("postgres", envOr("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"),
		"PostgreSQL of the shore")
	migrate := fs.Bool("migrate", false, "apply the shipsync migration line first (otherwise an old schema is refused)")
	actor := fs.String("actor", envOr("USER", ""), "who does it, for the audit log (default $USER)")
	reason := fs.String("reason", "", "why, for the audit log (required to approve and to roll back)")
	var r shore.Rule
	fs.StringVar(&r.ID, "rule", "", "add: the rule id")
	fs.Uint64Var(&r.Version, "rule-version", 1, "add: the rule version (≥ 1)")
	fs.StringVar(&r.SourceTable, "source-table", "", "add: the table name the rule's events carry")
	fs.StringVar(&r.TargetTable, "target-table", "", "add|window-plan: the table of the shore database they write "+
		"(window-plan default: the rule's table)")
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
	shipRule := fs.String("ship-rule", "", "draft|edit: file holding the node-side rule (one rule, the rules file's JSON form)")
	targets := fs.String("targets", "", "draft|edit: comma-separated node ids that run the rule")
	targetDB := fs.String("target-db", "", "validate|window-plan: the shore database (MariaDB DSN) whose table the rule writes")
	expect := fs.Int64("expect-revision", 0, "edit|validate|approve|distribute|rollback: the release revision you read (0: do not check)")
	toVersion := fs.Uint64("to-version", 0, "rollback: the version to return to (0: the last good one)")
	var wp windowPlanFlags
	fs.StringVar(&wp.rules, "rules", "", "window-plan: the node's rules file holding --rule")
	fs.StringVar(&wp.shipDB, "ship-db", "", "window-plan: the ship's database (MariaDB DSN naming the rule's database)")
	fs.StringVar(&wp.now, "now", "", "window-plan: the trusted now fixing the boundary, RFC 3339 (default this machine's clock)")
	fs.BoolVar(&wp.deleteOutside, "delete-outside", false, "window-plan: plan to delete shore rows outside the window")
	fs.BoolVar(&wp.twoWayApproved, "two-way-delete-approved", false, "window-plan: a two-way rule may delete rows outside its window")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync rule: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if sub == "window-plan" {
		wp.targetDB, wp.targetTable = *targetDB, r.TargetTable
		return runWindowPlan(ctx, env, r.ID, wp)
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
	case "draft", "edit", "validate", "approve", "distribute":
		if *actor == "" {
			return fmt.Errorf("shipsync rule %s: --actor is required ($USER is not set): the audit log records who changed what", sub)
		}
		if r.ID == "" {
			return fmt.Errorf("shipsync rule %s: --rule is required", sub)
		}
		ref, a := shore.RuleRef{ID: r.ID, Version: r.Version}, shore.Audit{Actor: *actor, Reason: *reason}
		var rel *shore.Release
		switch sub {
		case "draft", "edit":
			if *shipRule == "" || *targets == "" {
				return fmt.Errorf("shipsync rule %s: --ship-rule and --targets are required", sub)
			}
			content, err := os.ReadFile(*shipRule)
			if err != nil {
				return fmt.Errorf("--ship-rule: %w", err)
			}
			if sub == "draft" {
				rel, err = reg.DraftRelease(ctx, ref, content, splitList(*targets), a)
			} else {
				rel, err = reg.EditDraft(ctx, ref, content, splitList(*targets), *expect, a)
			}
			if err != nil {
				return err
			}
		default:
			p := shore.TransitionParams{Ref: ref, To: map[string]shore.ReleaseState{"validate": shore.ReleaseValidated,
				"approve": shore.ReleaseApproved, "distribute": shore.ReleaseDistributing}[sub], ExpectRevision: *expect, Audit: a}
			if sub == "validate" {
				if *targetDB == "" {
					return errors.New("shipsync rule validate: --target-db is required (the shore database the rule writes)")
				}
				target, err := apply.OpenTarget(*targetDB)
				if err != nil {
					return fmt.Errorf("--target-db %s: %w", dsn.Redact(*targetDB), dsn.Scrub(err, *targetDB))
				}
				defer target.Close()
				p.Schema = shore.MariaDBSchema{DB: target.DB()}
			}
			if rel, err = reg.Transition(ctx, p); err != nil {
				return err
			}
		}
		fmt.Fprintf(env.Stdout, "shipsync rule %s: %s is %s (revision %d)\n", sub, ref, rel.State, rel.Revision)
	case "rollback":
		if *actor == "" || r.ID == "" {
			return errors.New("shipsync rule rollback: --actor and --rule are required")
		}
		rel, err := reg.Rollback(ctx, shore.RollbackParams{RuleID: r.ID, ToVersion: *toVersion, ExpectRevision: *expect,
			Audit: shore.Audit{Actor: *actor, Reason: *reason}})
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "shipsync rule rollback: %s is %s (revision %d)\n", rel.RuleRef, rel.State, rel.Revision)
	case "status":
		rels, err := reg.ListRuleVersions(ctx, r.ID)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "RULE\tVERSION\tSTATE\tREV\tAUTHOR\tAPPROVER\tNODES\tFAILURE")
		for _, rel := range rels {
			var nodes []string
			for _, n := range rel.Nodes {
				nodes = append(nodes, n.NodeID+":"+n.State)
			}
			if len(nodes) == 0 {
				nodes = rel.Targets
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\t%s\t%s\n", rel.ID, rel.Version, rel.State, rel.Revision, rel.Author,
				cmp.Or(rel.Approver, "-"), strings.Join(nodes, ","), cmp.Or(rel.Failure, "-"))
		}
		return tw.Flush()
	default:
		return fmt.Errorf("shipsync rule: unknown action %q (add, list, draft, edit, validate, approve, distribute, rollback, status or window-plan)", sub)
	}
	return nil
}

type windowPlanFlags struct {
	rules, shipDB, targetDB, targetTable, now string
	deleteOutside, twoWayApproved             bool
}

// runWindowPlan prints the window reconcile plan of rule ruleID between the
// ship's table and the shore's: counts and digests only (no key values).
func runWindowPlan(ctx context.Context, env *Env, ruleID string, f windowPlanFlags) error {
	if ruleID == "" || f.rules == "" || f.shipDB == "" || f.targetDB == "" {
		return errors.New("shipsync rule window-plan: --rule, --rules, --ship-db and --target-db are required")
	}
	rule, err := ruleOfFile("shipsync rule window-plan", f.rules, ruleID)
	if err != nil {
		return err
	}
	now := time.Now()
	if f.now != "" {
		if now, err = time.Parse(time.RFC3339, f.now); err != nil {
			return fmt.Errorf("--now %s: not an RFC 3339 time", relaytype.QuoteValue(f.now))
		}
	}
	ship, target := windowTables(rule, f.targetTable)
	sides := []struct {
		flag, dsn string
		table     shore.WindowTable
	}{{"--ship-db", f.shipDB, ship}, {"--target-db", f.targetDB, target}}
	rows := make([][]normalize.WindowRow, 2)
	for i, side := range sides {
		db, err := openWindowDB(side.flag, side.dsn)
		if err != nil {
			return err
		}
		rows[i], err = shore.WindowRows(ctx, db.DB(), side.table)
		_ = db.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", side.flag, dsn.Scrub(err, side.dsn))
		}
	}
	p, err := normalize.WindowReconcile{Rule: rule, TrustedNow: now, Source: rows[0], Target: rows[1],
		DeleteOutside: f.deleteOutside, TwoWayDeleteApproved: f.twoWayApproved}.Plan()
	if err != nil {
		return err
	}
	problems := map[string]int{}
	for _, e := range p.Exceptions {
		problems[e.Side+": "+e.Problem]++
	}
	fmt.Fprintf(env.Stdout, "window reconcile of %s@%d: boundary %s (left-closed)\n", p.RuleID, p.RuleVersion,
		p.Boundary.UTC().Format(time.RFC3339))
	fmt.Fprintf(env.Stdout, "  ship rows %d, inside the window %d; shore rows %d\n", len(rows[0]), p.InWindow, len(rows[1]))
	fmt.Fprintf(env.Stdout, "  send %d, delete %d, keep %d outside, orphans %d (reported only), exceptions %d\n",
		len(p.Upsert), len(p.Delete), len(p.Keep), len(p.Orphans), len(p.Exceptions))
	for _, k := range slices.Sorted(maps.Keys(problems)) {
		fmt.Fprintf(env.Stdout, "    %s: %d\n", k, problems[k])
	}
	fmt.Fprintf(env.Stdout, "  digest ship %x\n  digest shore %x\n  reconciled: %t\n", p.Digest, p.TargetDigest, p.Reconciled())
	return nil
}

// windowTables are the two tables of rule's window reconcile: the ship's
// (the rule's own names) and the shore's (targetTable, default the rule's
// table, with the rule's field mappings applied to the key and time columns).
func windowTables(rule *normalize.Rule, targetTable string) (ship, target shore.WindowTable) {
	event := func(c string) string { return cmp.Or(rule.FieldMappings[c], c) }
	var targetKey []string
	for _, k := range rule.KeyColumns {
		targetKey = append(targetKey, event(k))
	}
	return shore.WindowTable{Table: rule.Table, Key: rule.KeyColumns, TimeColumn: rule.BusinessTimeColumn, Revisioned: rule.Revisioned},
		shore.WindowTable{Table: cmp.Or(targetTable, rule.Table), Key: targetKey, TimeColumn: event(rule.BusinessTimeColumn),
			Revisioned: rule.Revisioned}
}

// openWindowDB opens the MariaDB of a window reconcile's side given by flag.
func openWindowDB(flag, d string) (*apply.Target, error) {
	db, err := apply.OpenTarget(d)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, dsn.Redact(d), dsn.Scrub(err, d))
	}
	return db, nil
}
