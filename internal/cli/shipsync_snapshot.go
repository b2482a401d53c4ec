package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/snapshot"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/internal/kafkaread"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// runShipsyncSnapshot dispatches `relay shipsync snapshot start|list`.
func runShipsyncSnapshot(ctx context.Context, env *Env, args []string) error {
	return dispatchRoles(ctx, env, "shipsync snapshot", "docs/shipsync/snapshot.md", map[string]command{
		"start": {"start a snapshot of a rule's table on this ship: the running client (with --ship-db) pins the " +
			"rule version and the CDC position, sends the table's rows as SNAPSHOT events and replays the changes " +
			"captured since on top", runShipsyncSnapshotStart},
		"list": {"list the snapshot tasks of the client's state file with their state and progress", runShipsyncSnapshotList},
		"reconcile": {"finish a window reconcile once its snapshot (start --window-at) is COMPLETED: keep or delete " +
			"(--delete-outside) the shore's rows outside the window, check counts, digests and exceptions, and store " +
			"the result with the task", runShipsyncSnapshotReconcile},
	}, args)
}

func runShipsyncSnapshotStart(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync snapshot start", "shipsync snapshot start --rule ID --rules FILE [--state FILE] [--lag-threshold N] "+
		"[--id ID] [--window-at TIME]")
	rule := fs.String("rule", "", "the rule whose table is snapshotted. Required")
	rulesFile := fs.String("rules", "", "the node's rules file (the client's --rules). Required")
	state := fs.String("state", "shipsync-client.db", "the client's SQLite state file")
	lag := fs.Int64("lag-threshold", snapshot.LagThresholdDefault, "CATCHING_UP completes when at most this many events "+
		"of the rule's partitions (from the pinned position on) wait for their final result")
	id := fs.String("id", "", "the task id: 1–64 of A–Z a–z 0–9 . _ - (default a new UUID)")
	windowAt := fs.String("window-at", "", "a window reconcile's snapshot: the trusted instant (RFC 3339) that fixes the "+
		"rule's dataset window boundary for the whole task; only the rows inside it are sent, rows with a NULL, "+
		"unreadable or future business time are listed, not sent (the rule needs a dataset window)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync snapshot start: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	var window time.Time
	if *windowAt != "" {
		var err error
		if window, err = time.Parse(time.RFC3339, *windowAt); err != nil {
			return fmt.Errorf("shipsync snapshot start: --window-at %s: not an RFC 3339 time", relaytype.QuoteValue(*windowAt))
		}
	}
	if *rule == "" || *rulesFile == "" {
		return errors.New("shipsync snapshot start: --rule and --rules are required")
	}
	if *lag < 0 {
		return errors.New("shipsync snapshot start: --lag-threshold must be ≥ 0")
	}
	r, err := ruleOfFile("shipsync snapshot start", *rulesFile, *rule)
	if err != nil {
		return err
	}
	switch {
	case !r.Uplink():
		return fmt.Errorf("shipsync snapshot start: --rule: rule %s does not sync this ship's changes (direction %s)",
			relaytype.QuoteValue(*rule), r.Direction)
	case !window.IsZero() && !r.HasWindow():
		return fmt.Errorf("shipsync snapshot start: --window-at: rule %s has no dataset window", relaytype.QuoteValue(*rule))
	}
	clock := relayclock.System{}
	st, err := client.OpenStore(ctx, *state, "", clock)
	if err != nil {
		return fmt.Errorf("--state: %w", err)
	}
	defer st.Close()
	t := snapshot.Task{ID: *id, RuleID: r.ID, RuleVersion: r.Version, Database: r.Database, Table: r.Table, LagThreshold: *lag,
		WindowNow: window}
	if t.ID == "" {
		t.ID = uuid.NewString()
	}
	if err := snapshot.NewStore(st.DB(), clock).Create(ctx, t); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "snapshot %s of rule %s version %d (%s.%s) created: PENDING until the client picks it up\n",
		t.ID, r.ID, r.Version, r.Database, r.Table)
	if !window.IsZero() {
		fmt.Fprintf(env.Stdout, "window boundary %s (left-closed): only rows inside are sent\n",
			r.WindowStart(window).UTC().Format(time.RFC3339))
	}
	return nil
}

// ruleOfFile is rule id of the rules file path, for command cmd.
func ruleOfFile(cmd, path, id string) (*normalize.Rule, error) {
	rules, err := loadRulesFlag("rules", path)
	if err != nil {
		return nil, err
	}
	for _, x := range rules.Rules() {
		if x.ID == id {
			return x, nil
		}
	}
	return nil, fmt.Errorf("%s: --rule: no rule %s in %s", cmd, relaytype.QuoteValue(id), path)
}

func runShipsyncSnapshotReconcile(ctx context.Context, env *Env, args []string) error {
	const cmd = "shipsync snapshot reconcile"
	fs := newFlags(env, cmd, cmd+" --task ID --rule ID --rules FILE --ship-db DSN --target-db DSN [--state FILE] "+
		"[--target-table T] [--delete-outside [--two-way-delete-approved]]")
	task := fs.String("task", "", "the window reconcile's snapshot task (started with --window-at). Required")
	rule := fs.String("rule", "", "the task's rule. Required")
	rulesFile := fs.String("rules", "", "the node's rules file holding the task's rule version. Required")
	state := fs.String("state", "shipsync-client.db", "the client's SQLite state file")
	shipDB := fs.String("ship-db", "", "the ship's database (MariaDB DSN naming the rule's database). Required")
	targetDB := fs.String("target-db", "", "the shore database (MariaDB DSN) whose table the rule writes. Required")
	targetTable := fs.String("target-table", "", "the shore table (default the rule's table)")
	var p snapshot.WindowPolicy
	fs.BoolVar(&p.DeleteOutside, "delete-outside", false, "delete the shore's rows outside the window (default: keep them); "+
		"each only if unchanged since it was read")
	fs.BoolVar(&p.TwoWayDeleteApproved, "two-way-delete-approved", false, "a two-way rule may delete rows outside its window "+
		"(refused without it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %s", cmd, relaytype.QuoteValue(fs.Arg(0)))
	}
	if *task == "" || *rule == "" || *rulesFile == "" || *shipDB == "" || *targetDB == "" {
		return errors.New(cmd + ": --task, --rule, --rules, --ship-db and --target-db are required")
	}
	r, err := ruleOfFile(cmd, *rulesFile, *rule)
	if err != nil {
		return err
	}
	clock := relayclock.System{}
	st, err := client.OpenStore(ctx, *state, "", clock)
	if err != nil {
		return fmt.Errorf("--state: %w", err)
	}
	defer st.Close()
	ship, err := openWindowDB("--ship-db", *shipDB)
	if err != nil {
		return err
	}
	defer ship.Close()
	target, err := openWindowDB("--target-db", *targetDB)
	if err != nil {
		return err
	}
	defer target.Close()
	shipTable, targetTable2 := windowTables(r, *targetTable)
	res, err := snapshot.NewStore(st.DB(), clock).ReconcileWindow(ctx, *task, r, snapshot.WindowSides{Ship: ship.DB(),
		Shore: target.DB(), ShipTable: shipTable, ShoreTable: targetTable2}, p)
	if err != nil {
		return fmt.Errorf("%s: %w", cmd, dsn.Scrub(dsn.Scrub(err, *shipDB), *targetDB))
	}
	printWindowResult(env.Stdout, *task, res)
	if !res.Reconciled {
		return fmt.Errorf("%s: %w: %d row(s) inside the window still to send, %d outside still to delete", cmd,
			snapshot.ErrNotReconciled, res.Unsent, res.Outside)
	}
	return nil
}

// printWindowResult prints a window reconcile's result: counts, digests and
// the exceptions by key hash (never key values).
func printWindowResult(w io.Writer, task string, r *snapshot.WindowResult) {
	policy := "keep"
	if r.DeleteOutside {
		policy = "delete"
	}
	fmt.Fprintf(w, "window reconcile of task %s, rule %s@%d: boundary %s (left-closed), outside rows: %s\n", task,
		r.RuleID, r.RuleVersion, r.Boundary.Format(time.RFC3339), policy)
	fmt.Fprintf(w, "  ship rows %d, inside the window %d; shore rows %d\n", r.ShipRows, r.InWindow, r.ShoreRows)
	fmt.Fprintf(w, "  deleted %d, left as changed since read %d, kept %d; still to send %d, still to delete %d, orphans %d\n",
		r.Deleted, r.Changed, r.Kept, r.Unsent, r.Outside, r.Orphans)
	fmt.Fprintf(w, "  digest ship %s\n  digest shore %s\n  exceptions %d\n", r.Digest, r.ShoreDigest, len(r.Exceptions))
	for _, e := range r.Exceptions {
		fmt.Fprintf(w, "    %s key %s: %s\n", e.Side, e.KeyHash, e.Problem)
	}
	fmt.Fprintf(w, "  reconciled: %t\n", r.Reconciled)
}

func runShipsyncSnapshotList(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync snapshot list", "shipsync snapshot list [--state FILE]")
	state := fs.String("state", "shipsync-client.db", "the client's SQLite state file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync snapshot list: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	st, err := client.OpenStore(ctx, *state, "", relayclock.System{})
	if err != nil {
		return fmt.Errorf("--state: %w", err)
	}
	defer st.Close()
	ps, err := snapshot.List(ctx, st.DB())
	if err != nil {
		return err
	}
	if len(ps) == 0 {
		fmt.Fprintln(env.Stdout, "no snapshot tasks")
		return nil
	}
	for _, p := range ps {
		fmt.Fprintf(env.Stdout, "%s  rule %s v%d  %s  rows read %d (%d chunks), events %d: received %d, applied %d, "+
			"conflicts %d, rejected %d; lag %d/%d  updated %s", p.ID, p.RuleID, p.RuleVersion, p.State, p.RowsRead,
			p.Chunks, p.Events, p.Received, p.Applied, p.Conflicts, p.Rejected, p.Lag, p.LagThreshold,
			p.UpdatedAt.Format(time.RFC3339))
		if !p.WindowNow.IsZero() {
			fmt.Fprintf(env.Stdout, "  window at %s, exceptions %d", p.WindowNow.Format(time.RFC3339), p.Exceptions)
		}
		if r := p.Result; r != nil {
			fmt.Fprintf(env.Stdout, "  reconciled %t (deleted %d, kept %d, exceptions %d)", r.Reconciled, r.Deleted, r.Kept,
				len(r.Exceptions))
		}
		if p.Error != "" {
			fmt.Fprintf(env.Stdout, "  error: %s", relaytype.QuoteValue(p.Error))
		}
		fmt.Fprintln(env.Stdout)
	}
	return nil
}

// shipsyncSnapshots is the client's snapshot runner over the ship database
// shipDB (go-sql-driver DSN): the barrier and filter it installs in the
// client, and the runner to run beside it.
type shipsyncSnapshots struct {
	Runner *snapshot.Runner
	db     *sql.DB
}

// Wrap installs the catch-up filter (client.Parts.Wrap).
func (s *shipsyncSnapshots) Wrap(n client.Normalizer) client.Normalizer {
	return &snapshot.Filter{Next: n, Runner: s.Runner}
}

// Close closes the ship database.
func (s *shipsyncSnapshots) Close() { _ = s.db.Close() }

// newShipsyncSnapshots builds the runner of the ship client's snapshot
// tasks: rows read from shipDB under the capture's logical name, sent with
// tr, checkpoints from st.
//
// Uploads are metered by *meter's upload limit and held to its BULK window
// once *meter is set (the client, built after the runner).
func newShipsyncSnapshots(ctx context.Context, shipDB, logical string, brokers []string, parts client.Parts,
	meter **client.Client, log *slog.Logger) (*shipsyncSnapshots, error) {
	db, err := sql.Open("mysql", shipDB)
	if err != nil {
		return nil, fmt.Errorf("--ship-db: %w", err)
	}
	dec, err := cdc.New(cdc.Config{Types: parts.Types})
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	n, err := normalize.New(normalize.Config{NodeID: parts.NodeID, ConnectorID: parts.ConnectorID,
		ReplayEpoch: parts.ReplayEpoch}, parts.Rules, parts.Store)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	codec, err := wire.NewCodec(wire.Config{})
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	r, err := snapshot.New(ctx, snapshot.Config{NodeID: parts.NodeID, Store: snapshot.NewStore(parts.Store.DB(), parts.Clock),
		Rules: parts.Rules, Normalizer: n, Decoder: dec, Codec: codec, TopicPrefix: "sync.cdc." + logical + ".",
		Reader: func(ctx context.Context, database, table string) (snapshot.ChunkReader, error) {
			return capture.NewSnapshotReader(ctx, db, logical, database, table)
		},
		Ends: func(ctx context.Context, topic string) (map[int32]int64, error) {
			return kafkaread.Ends(ctx, brokers, topic)
		},
		Terminal: parts.Store.Watermarks, Clock: parts.Clock, Logger: log,
		MayTransfer: func(p normalize.Priority) bool {
			c := *meter
			return c == nil || c.MayTransfer(p)
		},
		Upload: func(ctx context.Context, body []byte) (*pb.UploadResponse, error) {
			if c := *meter; c != nil {
				if err := c.Meter(ctx, int64(len(body))); err != nil {
					return nil, err
				}
			}
			return parts.Transport.Upload(ctx, body)
		}})
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return &shipsyncSnapshots{Runner: r, db: db}, nil
}
