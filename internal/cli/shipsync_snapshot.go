package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
	}, args)
}

func runShipsyncSnapshotStart(ctx context.Context, env *Env, args []string) error {
	fs := newFlags(env, "shipsync snapshot start", "shipsync snapshot start --rule ID --rules FILE [--state FILE] [--lag-threshold N] [--id ID]")
	rule := fs.String("rule", "", "the rule whose table is snapshotted. Required")
	rulesFile := fs.String("rules", "", "the node's rules file (the client's --rules). Required")
	state := fs.String("state", "shipsync-client.db", "the client's SQLite state file")
	lag := fs.Int64("lag-threshold", snapshot.LagThresholdDefault, "CATCHING_UP completes when at most this many events "+
		"of the rule's partitions (from the pinned position on) wait for their final result")
	id := fs.String("id", "", "the task id: 1–64 of A–Z a–z 0–9 . _ - (default a new UUID)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("shipsync snapshot start: unexpected argument %s", relaytype.QuoteValue(fs.Arg(0)))
	}
	if *rule == "" || *rulesFile == "" {
		return errors.New("shipsync snapshot start: --rule and --rules are required")
	}
	if *lag < 0 {
		return errors.New("shipsync snapshot start: --lag-threshold must be ≥ 0")
	}
	rules, err := loadRulesFlag("rules", *rulesFile)
	if err != nil {
		return err
	}
	var r *normalize.Rule
	for _, x := range rules.Rules() {
		if x.ID == *rule {
			r = x
		}
	}
	switch {
	case r == nil:
		return fmt.Errorf("shipsync snapshot start: --rule: no rule %s in %s", relaytype.QuoteValue(*rule), *rulesFile)
	case !r.Uplink():
		return fmt.Errorf("shipsync snapshot start: --rule: rule %s does not sync this ship's changes (direction %s)",
			relaytype.QuoteValue(*rule), r.Direction)
	}
	clock := relayclock.System{}
	st, err := client.OpenStore(ctx, *state, "", clock)
	if err != nil {
		return fmt.Errorf("--state: %w", err)
	}
	defer st.Close()
	t := snapshot.Task{ID: *id, RuleID: r.ID, RuleVersion: r.Version, Database: r.Database, Table: r.Table, LagThreshold: *lag}
	if t.ID == "" {
		t.ID = uuid.NewString()
	}
	if err := snapshot.NewStore(st.DB(), clock).Create(ctx, t); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "snapshot %s of rule %s version %d (%s.%s) created: PENDING until the client picks it up\n",
		t.ID, r.ID, r.Version, r.Database, r.Table)
	return nil
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
