package apply_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

var op = shore.Audit{Actor: "tester", Reason: "test"}

// voyageDDL is the shore's business table the test rule writes.
const voyageDDL = "CREATE TABLE voyage (id BIGINT PRIMARY KEY, note VARCHAR(20), " + apply.SyncColumns + ")"

// bundle is a migrated shore with node ship-1 allowed rules voyage-log@1
// (registered: ops.voyage → voyage) and ghost@1 (not registered), an inbox,
// a target database with the voyage table and the ledger, and an applier.
type bundle struct {
	d       *relaypgx.Driver
	clock   *relayclock.Fake
	inbox   *shore.Inbox
	target  *apply.Target
	mdb     *sql.DB
	applier *apply.Applier
	batch   int
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := t.Context()
	d := testdb.PGDriver(t)
	clock := relayclock.NewFake(t0)
	_, err := relaymigrate.Up(ctx, d, clock, shore.MigrationLines(d)...)
	require.NoError(t, err)
	p := pki.Dir{Path: filepath.Join(t.TempDir(), "pki"), Clock: clock}
	_, err = p.InitCA()
	require.NoError(t, err)
	cert, err := p.IssueNode("ship-1", "")
	require.NoError(t, err)
	reg := shore.NewRegistry(d.Pool(), clock)
	_, err = reg.Add(ctx, cert, op)
	require.NoError(t, err)
	require.NoError(t, reg.AllowRule(ctx, "ship-1", "voyage-log", 1, op))
	require.NoError(t, reg.AllowRule(ctx, "ship-1", "ghost", 1, op))
	require.NoError(t, reg.RegisterRule(ctx, shore.Rule{ID: "voyage-log", Version: 1, SourceTable: "voyage",
		TargetTable: "voyage", KeyColumns: []string{"id"}, Columns: []string{"id", "note"}, InsertOverTombstone: true}, op))
	codec, err := wire.NewCodec(wire.Config{})
	require.NoError(t, err)
	inbox, err := shore.NewInbox(d, codec, clock)
	require.NoError(t, err)

	mdb, dsn := testdb.MariaDBWithDSN(t)
	_, err = mdb.ExecContext(ctx, voyageDDL)
	require.NoError(t, err)
	target, err := apply.OpenTarget(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = target.Close() })
	require.NoError(t, target.EnsureLedger(ctx))
	a, err := apply.New(apply.Config{Driver: d, Target: target, Clock: clock, InstanceID: "test-applier"})
	require.NoError(t, err)
	return &bundle{d: d, clock: clock, inbox: inbox, target: target, mdb: mdb, applier: a, batch: 1000}
}

func uuidN(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", n) }

// rev is revision token n.
func rev(n int) string { return fmt.Sprintf("11111111-0000-4000-8000-%012x", n) }

// stream numbers the test's events: each gets the next source sequence.
type stream struct {
	seq int
}

// ev is event n (id uuidN(n)) of op on record id, over base, producing
// result, with note (if not nil).
func (s *stream) ev(n int, op pb.Operation, id int64, base, result string, note *string) *pb.ChangeEvent {
	s.seq++
	e := &pb.ChangeEvent{
		SchemaVersion: "1.0", EventId: uuidN(n), OriginNodeId: "ship-1", SourceConnectorId: "dbz-1",
		SourcePartition: "ship.cdc.ops.voyage/0", SourcePosition: proto.Uint64(uint64(s.seq * 10)),
		SourceSequence: uint64(s.seq), RuleId: "voyage-log", RuleVersion: 1, Database: "ops", Table: "voyage",
		PrimaryKey:   []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: id}}},
		Operation:    op,
		BaseRevision: base, ResultRevision: result, CapturedAt: timestamppb.New(t0), TraceId: "trace",
	}
	if op != pb.Operation_OPERATION_DELETE {
		e.After = &pb.RowImage{Columns: []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: id}}}}
		if note != nil {
			e.After.Columns = append(e.After.Columns, &pb.ColumnValue{Name: "note", Value: &pb.ColumnValue_StringValue{StringValue: *note}})
		}
	}
	return e
}

func str(s string) *string { return &s }

// receive uploads evs as one batch and requires every one RECEIVED.
func (b *bundle) receive(t *testing.T, evs ...*pb.ChangeEvent) {
	t.Helper()
	b.batch++
	resp, _, err := b.inbox.Receive(t.Context(), "ship-1", &wire.Batch{NodeID: "ship-1", BatchID: uuidN(b.batch),
		Sequence: uint64(b.batch), CreatedAt: t0, Events: evs})
	require.NoError(t, err)
	for i, st := range resp.Statuses {
		require.Equal(t, pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED, st.Status, "event %d: %v %s", i, st.Reason, st.Field)
	}
}

// work runs the applier until nothing is left to do.
func (b *bundle) work(t *testing.T) {
	t.Helper()
	for range 20 {
		n, err := b.applier.Work(context.Background())
		require.NoError(t, err)
		if n == 0 {
			return
		}
	}
	t.Fatal("applier still busy after 20 rounds")
}

// receipt is one event's receipt: result, reason, whether a conflict id is set.
type receipt struct {
	Result, Reason string
	Conflict       bool
}

func (b *bundle) receipt(t *testing.T, n int) receipt {
	t.Helper()
	var r receipt
	require.NoError(t, b.d.Pool().QueryRow(t.Context(), `SELECT result, reason, conflict_id IS NOT NULL
		FROM sync_event_receipt WHERE origin_node_id = 'ship-1' AND event_id = $1`, uuidN(n)).Scan(&r.Result, &r.Reason, &r.Conflict))
	return r
}

// row is a target row: note, revision, event id; "" note for NULL; ok false when absent.
type row struct {
	Note, Revision, EventID string
}

func (b *bundle) row(t *testing.T, id int64) (row, bool) {
	t.Helper()
	var r row
	var note sql.NullString
	var eid sql.NullString
	err := b.mdb.QueryRowContext(t.Context(), "SELECT note, _sync_revision, _sync_event_id FROM voyage WHERE id = ?", id).
		Scan(&note, &r.Revision, &eid)
	if err == sql.ErrNoRows {
		return row{}, false
	}
	require.NoError(t, err)
	r.Note, r.EventID = note.String, eid.String
	return r, true
}

func (b *bundle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.d.Pool().QueryRow(t.Context(), q, args...).Scan(&n))
	return n
}

func (b *bundle) mcount(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.mdb.QueryRowContext(t.Context(), q, args...).Scan(&n))
	return n
}
