package shipdemo

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
	"github.com/relayhq/relay/relaysink/relaykafka"
)

// The demo's parts, shared with the ship-side crash harness (shipcrash):
// the tables on both sides, the node's rules, the trigger capture and the
// shore's set-up.

// TableNames are the synced tables, in creation order.
func TableNames() []string {
	names := make([]string, len(tables))
	for i, t := range tables {
		names[i] = t.name
	}
	return names
}

// CreateTables creates the synced tables (with the platform's _sync
// columns) in each of dbs.
func CreateTables(ctx context.Context, dbs ...*sql.DB) error {
	for _, t := range tables {
		q := "CREATE TABLE " + t.name + " (" + t.ddl + ", " + apply.SyncColumns + ")"
		for _, db := range dbs {
			if _, err := db.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("shipdemo: create %s: %w", t.name, err)
			}
		}
	}
	return nil
}

// Topics are the CDC topics of the ship database shipDB, one per table.
func Topics(shipDB string) []string { return TopicsOf(Logical, shipDB) }

// TopicPrefix is what the client consumes: every topic of the capture.
const TopicPrefix = capture.TopicPrefixDefault + "." + Logical + "."

// TopicsOf are the CDC topics of database db captured under logical name
// logical, one per table.
func TopicsOf(logical, db string) []string {
	topics := make([]string, len(tables))
	for i, t := range tables {
		topics[i] = capture.TopicPrefixDefault + "." + logical + "." + db + "." + t.name
	}
	return topics
}

// ShipRules are the node's uplink rules for the ship database shipDB.
func ShipRules(shipDB string) []normalize.Rule {
	rules := make([]normalize.Rule, len(tables))
	for i, t := range tables {
		rules[i] = normalize.Rule{ID: t.name, Version: 1, Direction: normalize.DirectionUplink, Database: shipDB,
			Table: t.name, KeyColumns: []string{"id"}, Revisioned: true, BusinessTimeColumn: t.timeCol,
			Priority: t.priority}
	}
	return rules
}

// ShoreSideRules are the shore's downlink rules for its database shoreDB:
// the same tables and ids as ShipRules, direction dir (DOWNLINK or BOTH),
// as the shore's CDC consumer runs them.
func ShoreSideRules(shoreDB string, dir normalize.Direction) []normalize.Rule {
	rules := ShipRules(shoreDB)
	for i := range rules {
		rules[i].Direction = dir
	}
	return rules
}

// RulesFile is ShipRules as a rules file (`relay shipsync client --rules`).
func RulesFile(shipDB string) ([]byte, error) {
	return json.Marshal(struct {
		Rules []normalize.Rule `json:"rules"`
	}{ShipRules(shipDB)})
}

// ShoreRules are the rules the shore registers for the node.
func ShoreRules() []ShoreRule {
	rules := make([]ShoreRule, len(tables))
	for i, t := range tables {
		rules[i] = ShoreRule{ID: t.name, Table: t.name, Columns: t.columns}
	}
	return rules
}

// maxCommitDelay is how long the demo's capture waits for a missing
// changelog id. A transaction that rolls back (the workload's deadlock
// losers) burns the ids its triggers took, and the capture cannot tell
// such a hole from a transaction still open until this delay has passed.
// The demo's transactions last milliseconds; a production capture keeps
// the default of several minutes, longer than its longest transaction.
const maxCommitDelay = 2 * time.Second

// CaptureMaxCommitDelay and CapturePollInterval are the demo capture's
// settings, for a harness that runs it as `relay shipsync capture run`.
const (
	CaptureMaxCommitDelay = maxCommitDelay
	CapturePollInterval   = 100 * time.Millisecond
)

// CaptureOptions configure StartCapture.
type CaptureOptions struct {
	// DB is the ship database, its capture installed.
	DB *sql.DB
	// StateFile is the capture's SQLite state.
	StateFile string
	// Brokers are the Kafka-API brokers of the topics.
	Brokers []string
	// Logical is the capture's logical name, the third part of its topics'
	// names (default Logical).
	Logical string
	Logger  *slog.Logger
}

// Capture is a running trigger capture: the ship database's changelog into
// the topics.
type Capture struct {
	c     *capture.Capture
	close func()
}

// StartCapture opens the capture's state and its producer and seeds its
// watermark (start it before the workload); Run runs it.
func StartCapture(ctx context.Context, o CaptureOptions) (*Capture, error) {
	clock := relayclock.System{}
	store, err := relaysqlite.Open(ctx, o.StateFile)
	if err != nil {
		return nil, err
	}
	if err := capture.Migrate(ctx, store, clock); err != nil {
		_ = store.Close()
		return nil, err
	}
	sink, err := relaykafka.New(relaykafka.Config{Brokers: o.Brokers})
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	closeAll := func() {
		_ = sink.Close(context.Background())
		_ = store.Close()
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c, err := capture.New(capture.Config{DB: o.DB, Store: store, Sink: sink, Logical: cmp.Or(o.Logical, Logical),
		PollInterval: CapturePollInterval, MaxCommitDelay: maxCommitDelay, Clock: clock, Logger: log})
	if err != nil {
		closeAll()
		return nil, err
	}
	// Seed the watermark now, before the workload writes: a capture
	// seeded on an empty changelog takes the id before its AUTO_INCREMENT,
	// which a transaction still open has already advanced — its rows would
	// land below the watermark and never be read.
	if _, err := c.Step(ctx); err != nil {
		closeAll()
		return nil, err
	}
	return &Capture{c: c, close: closeAll}, nil
}

// Close closes the capture's state and producer without running it (a
// harness that only wanted the watermark seeded, to run the capture as a
// process of its own).
func (c *Capture) Close() { c.close() }

// Run runs the capture until ctx is done (nil then) or it fails, and
// closes its state and producer.
func (c *Capture) Run(ctx context.Context) error {
	defer c.close()
	if err := c.c.Run(ctx); err != nil && ctx.Err() == nil {
		return fmt.Errorf("shipdemo: capture: %w", err)
	}
	return nil
}
