package shorecdc_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"google.golang.org/protobuf/proto"

	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/shorecdc"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
)

// shoreNode is the shore's node id: the origin of its local writes.
const shoreNode = "shore"

// rig is a shore database with the capture installed, its topics, the
// shore's PostgreSQL with the demo node registered, and the downlink store.
type rig struct {
	db      *sql.DB
	dbName  string
	pg      *relaypgx.Driver
	brokers []string
	dl      *shore.Downlink
	rules   *normalize.RuleSet
	dir     string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := t.Context()
	db := testdb.MariaDB(t)
	var name string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&name))
	require.NoError(t, shipdemo.CreateTables(ctx, db))
	_, err := capture.Install(ctx, db, capture.InstallConfig{NodeID: shoreNode, Tables: shipdemo.TableNames()})
	require.NoError(t, err)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, shipdemo.TopicsOf("shore", name)...))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	dir := t.TempDir()
	pg, err := shipdemo.SetupShore(ctx, shipdemo.ShoreOptions{PostgresURL: testdb.PGSchema(t),
		PKIDir: filepath.Join(dir, "pki"), Node: shipdemo.Node, Rules: shipdemo.ShoreRules()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pg.Close() })
	rs, err := normalize.NewRuleSet(shipdemo.ShoreSideRules(name, normalize.DirectionBoth)...)
	require.NoError(t, err)
	return &rig{db: db, dbName: name, pg: pg, brokers: cluster.ListenAddrs(),
		dl: shore.NewDownlink(pg.Pool(), relayclock.System{}), rules: rs, dir: dir}
}

// capture runs the shore database's capture until the test ends.
func (r *rig) capture(t *testing.T) {
	t.Helper()
	c, err := shipdemo.StartCapture(t.Context(), shipdemo.CaptureOptions{DB: r.db, StateFile: filepath.Join(r.dir, "capture.db"),
		Brokers: r.brokers, Logical: "shore"})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// consumer runs a shore CDC consumer until stop is called.
func (r *rig) consumer(t *testing.T) (*shorecdc.Consumer, func()) {
	t.Helper()
	return r.consumerOn(t, relayclock.System{})
}

// consumerOn is consumer on clock.
func (r *rig) consumerOn(t *testing.T, clock relaytype.Clock) (*shorecdc.Consumer, func()) {
	t.Helper()
	n, err := shorecdc.NewNormalizer(shoreNode, "capture-shore", 0, r.rules, r.dl)
	require.NoError(t, err)
	dec, err := cdc.New(cdc.Config{})
	require.NoError(t, err)
	c, err := shorecdc.New(shorecdc.Config{Brokers: r.brokers, TopicPrefix: capture.TopicPrefixDefault + ".shore.",
		Downlink: r.dl, Decoder: dec, Normalizer: n, Clock: clock})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			require.NoError(t, <-done)
		}
	}
	t.Cleanup(stop)
	return c, stop
}

// waitFor polls cond until it holds (the capture and the consumer run
// asynchronously) or fails the test after a generous bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// allCommands reads every command of the demo node.
func (r *rig) allCommands(t *testing.T) []*pb.Command {
	t.Helper()
	var out []*pb.Command
	cursor := ""
	for {
		page, err := r.dl.Commands(t.Context(), shipdemo.Node, cursor, 2)
		require.NoError(t, err)
		out = append(out, page.Commands...)
		cursor = page.NextCursor
		if !page.More {
			return out
		}
	}
}

func count(t *testing.T, pg *relaypgx.Driver, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pg.Pool().QueryRow(t.Context(), q, args...).Scan(&n))
	return n
}

// TestShoreWritesBecomeCommands: the shore's local inserts, updates and
// deletes become one command each for the node syncing the rule, in order,
// numbered 1, 2, …, each event FORWARDED; a second consumer reading the
// same records again creates nothing.
func TestShoreWritesBecomeCommands(t *testing.T) {
	r := newRig(t)
	r.capture(t)
	c, stop := r.consumer(t)
	ctx := t.Context()
	at := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	for id := 1; id <= 3; id++ {
		_, err := r.db.ExecContext(ctx, "INSERT INTO crew (id, name, rank_code, wage, updated_at) VALUES (?, ?, 'AB', 1800.00, ?)",
			id, "sailor", at)
		require.NoError(t, err)
	}
	_, err := r.db.ExecContext(ctx, "UPDATE crew SET rank_code = 'bosun' WHERE id = 2")
	require.NoError(t, err)
	_, err = r.db.ExecContext(ctx, "DELETE FROM crew WHERE id = 3")
	require.NoError(t, err)

	waitFor(t, "five commands", func() bool { return len(r.allCommands(t)) == 5 })
	cmds := r.allCommands(t)
	want := []pb.Operation{pb.Operation_OPERATION_INSERT, pb.Operation_OPERATION_INSERT, pb.Operation_OPERATION_INSERT,
		pb.Operation_OPERATION_UPDATE, pb.Operation_OPERATION_DELETE}
	// Commands of one record keep its order; records may interleave
	// across partitions, so compare per key.
	perKey := map[string][]*pb.Command{}
	for i, cmd := range cmds {
		require.Equal(t, uint64(i+1), cmd.Sequence)
		ev := cmd.GetChange()
		require.NotNil(t, ev)
		require.Equal(t, shoreNode, ev.OriginNodeId)
		require.Equal(t, "crew", ev.RuleId)
		require.Equal(t, cmd.Sequence, ev.SourceSequence)
		require.Equal(t, shore.CommandID(shipdemo.Node, ev.EventId), cmd.CommandId)
		k := ev.PrimaryKey[0].String()
		perKey[k] = append(perKey[k], cmd)
	}
	require.Len(t, perKey, 3)
	var ops []pb.Operation
	for _, cmd := range cmds {
		ops = append(ops, cmd.GetChange().Operation)
	}
	require.ElementsMatch(t, want, ops)
	upd := perKey[cmds[0].GetChange().PrimaryKey[0].String()]
	require.NotEmpty(t, upd)
	for _, list := range perKey {
		for i := 1; i < len(list); i++ {
			prev, cur := list[i-1].GetChange(), list[i].GetChange()
			require.Equal(t, prev.ResultRevision, cur.BaseRevision, "the record's changes chain in order")
		}
	}
	require.Equal(t, 5, count(t, r.pg, "SELECT count(*) FROM sync_shore_event WHERE result = 'FORWARDED' AND commands = 1"))
	s := c.Stats()
	require.Equal(t, int64(5), s.Forwarded)
	require.Equal(t, int64(5), s.Commands)
	stop()

	// A consumer of another group reads every record again: nothing new.
	n, err := shorecdc.NewNormalizer(shoreNode, "capture-shore", 0, r.rules, r.dl)
	require.NoError(t, err)
	dec, err := cdc.New(cdc.Config{})
	require.NoError(t, err)
	again, err := shorecdc.New(shorecdc.Config{Brokers: r.brokers, TopicPrefix: capture.TopicPrefixDefault + ".shore.",
		Group: "replay", Downlink: r.dl, Decoder: dec, Normalizer: n, Clock: relayclock.System{}})
	require.NoError(t, err)
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- again.Run(actx) }()
	waitFor(t, "the replay to read every record", func() bool { return again.Stats().Read >= 5 })
	cancel()
	require.NoError(t, <-done)
	require.Zero(t, again.Stats().Forwarded)
	require.Len(t, r.allCommands(t), 5)
	st, err := r.dl.State(ctx, shipdemo.Node)
	require.NoError(t, err)
	require.Equal(t, shore.DownlinkState{Last: 5, AckedThrough: 0}, st)
}

// TestApplierWritesAreSuppressed: a row written the way the shore applier
// writes an uplink event (its id stamped, the event in the inbox at that
// revision) produces no command — nor does the delete it stamps first — while a
// stamp naming no inbox event is BLOCKED and holds the partition's
// committed position.
func TestApplierWritesAreSuppressed(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	r.capture(t)
	c, _ := r.consumer(t)
	at := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	evID, rev := uuid.NewString(), uuid.NewString()
	r.inboxEvent(t, evID, pb.Operation_OPERATION_INSERT, rev)
	_, err := r.db.ExecContext(ctx, "INSERT INTO crew (id, name, rank_code, wage, updated_at, _sync_revision, _sync_origin, "+
		"_sync_event_id, _sync_updated_at) VALUES (7, 'remote', 'AB', 1.00, ?, ?, ?, ?, ?)", at, rev, shipdemo.Node, evID, at)
	require.NoError(t, err)
	delID, tomb := uuid.NewString(), uuid.NewString()
	r.inboxEvent(t, delID, pb.Operation_OPERATION_DELETE, tomb)
	tx, err := r.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "UPDATE crew SET _sync_event_id = ?, _sync_origin = ? WHERE id = 7 AND _sync_revision = ?",
		delID, shipdemo.Node, rev)
	require.NoError(t, err)
	_, err = tx.ExecContext(ctx, "DELETE FROM crew WHERE id = 7 AND _sync_revision = ?", rev)
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	// A stamp of no known event: unknown origin.
	_, err = r.db.ExecContext(ctx, "INSERT INTO crew (id, name, rank_code, wage, updated_at, _sync_revision, _sync_origin, "+
		"_sync_event_id, _sync_updated_at) VALUES (8, 'who', 'AB', 1.00, ?, ?, ?, ?, ?)", at, uuid.NewString(), shipdemo.Node,
		uuid.NewString(), at)
	require.NoError(t, err)
	// And a local write after it, which is forwarded.
	_, err = r.db.ExecContext(ctx, "INSERT INTO crew (id, name, rank_code, wage, updated_at) VALUES (9, 'local', 'AB', 1.00, ?)", at)
	require.NoError(t, err)

	// Six records (the keys spread over two partitions, read in any
	// order): the applier's insert, stamp, delete and tombstone, the
	// unexplained insert, the local insert.
	waitFor(t, "every record read", func() bool {
		s := c.Stats()
		return s.Skipped+s.Blocked+s.Forwarded >= 6
	})
	s := c.Stats()
	require.Equal(t, int64(4), s.Skipped, "the applier's insert, its stamp, its delete and the delete's tombstone")
	cmds := r.allCommands(t)
	require.Len(t, cmds, 1)
	require.Equal(t, "local", cmds[0].GetChange().After.Columns[1].GetStringValue())
	var reason string
	require.NoError(t, r.pg.Pool().QueryRow(ctx, "SELECT reason FROM sync_shore_event WHERE result = 'BLOCKED'").Scan(&reason))
	require.Equal(t, normalize.ReasonUnknownOrigin, reason)
	blocked, err := r.dl.BlockedFirst(ctx)
	require.NoError(t, err)
	require.Len(t, blocked, 1)
}

// inboxEvent stores an uplink event of the demo node in the inbox, as
// ingress does, with the given operation and result revision.
func (r *rig) inboxEvent(t *testing.T, id string, op pb.Operation, result string) {
	t.Helper()
	body, err := proto.Marshal(&pb.ChangeEvent{EventId: id, OriginNodeId: shipdemo.Node, Operation: op, ResultRevision: result})
	require.NoError(t, err)
	_, err = r.pg.Pool().Exec(t.Context(), `INSERT INTO sync_inbox_event (origin_node_id, event_id, sender_node_id, batch_id,
		rule_id, rule_version, pk_hash, pk_text, source_connector_id, source_partition, source_position, source_sequence,
		schema_version, content_hash, event, received_at)
		VALUES ($1, $2, $1, 'b', 'crew', 1, '\x00', '7', 'c', 'p', 0, (SELECT count(*) + 1 FROM sync_inbox_event), '1.0', '\x00', $3, now())`,
		shipdemo.Node, id, body)
	require.NoError(t, err)
}

// TestStoreFailureIsRetried: storing the changes fails (here the table of
// handled positions is gone, as a deadlock or a restarting PostgreSQL would
// fail it): the consumer keeps running, waits on its clock and handles the
// same records again; once the store is back they become their commands,
// once each. (Found by the two-way crash harness: a deadlock with the
// arbiter ended the consumer, and the shore process with it.)
func TestStoreFailureIsRetried(t *testing.T) {
	r := newRig(t)
	r.capture(t)
	clock := relayclock.NewFake(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC))
	c, stop := r.consumerOn(t, clock)
	ctx := t.Context()
	insert := func(id int) {
		_, err := r.db.ExecContext(ctx, "INSERT INTO crew (id, name, rank_code, wage, updated_at) VALUES (?, 'sailor', 'AB', 1800.00, ?)",
			id, time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC))
		require.NoError(t, err)
	}
	insert(1)
	waitFor(t, "the first command", func() bool { return len(r.allCommands(t)) == 1 })
	_, err := r.pg.Pool().Exec(ctx, "ALTER TABLE sync_shore_event RENAME TO sync_shore_event_away")
	require.NoError(t, err)
	insert(2)
	waitFor(t, "a failed attempt", func() bool { return c.Stats().Failures >= 1 && clock.Waiters() > 0 })
	require.Len(t, r.allCommands(t), 1)
	require.Equal(t, int64(1), c.Stats().Read, "nothing is counted until it is stored")
	_, err = r.pg.Pool().Exec(ctx, "ALTER TABLE sync_shore_event_away RENAME TO sync_shore_event")
	require.NoError(t, err)
	clock.Advance(shorecdc.RetryMaxDefault)
	waitFor(t, "the second command", func() bool { return len(r.allCommands(t)) == 2 })
	s := c.Stats()
	require.Equal(t, int64(2), s.Forwarded)
	require.Equal(t, int64(2), s.Commands)
	require.Contains(t, c.Progress(), "store failures retried")
	stop() // the consumer ran on: it stops cleanly
}
