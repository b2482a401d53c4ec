package remote_test

import (
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/remote"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
)

var t0 = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

const (
	ins  = pb.Operation_OPERATION_INSERT
	upd  = pb.Operation_OPERATION_UPDATE
	del  = pb.Operation_OPERATION_DELETE
	snap = pb.Operation_OPERATION_SNAPSHOT
)

// bundle is a ship database with the voyage table (captured by the trigger
// capture as node ship-1, so the tests see what the capture sees) and the
// ledger, the node's rules (voyage-log BOTH on voyage, secret excluded;
// log-up UPLINK only) and an applier.
type bundle struct {
	mdb     *sql.DB
	db      string
	target  *apply.Target
	rules   *normalize.RuleSet
	clock   *relayclock.Fake
	applier *remote.Applier
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ctx := t.Context()
	mdb, dsn := testdb.MariaDBWithDSN(t)
	var db string
	require.NoError(t, mdb.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&db))
	for _, q := range []string{
		"CREATE TABLE voyage (id BIGINT PRIMARY KEY, note VARCHAR(20), secret VARCHAR(20), " + apply.SyncColumns + ")",
		"CREATE TABLE logbook (id BIGINT PRIMARY KEY, line VARCHAR(20), " + apply.SyncColumns + ")",
	} {
		_, err := mdb.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	_, err := capture.Install(ctx, mdb, capture.InstallConfig{NodeID: "ship-1", Tables: []string{"voyage"}})
	require.NoError(t, err)
	target, err := apply.OpenTarget(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = target.Close() })
	require.NoError(t, target.EnsureLedger(ctx))
	rules, err := normalize.NewRuleSet(
		normalize.Rule{ID: "voyage-log", Version: 1, Direction: normalize.DirectionBoth, Database: db, Table: "voyage",
			KeyColumns: []string{"id"}, ExcludedColumns: []string{"secret"}, Revisioned: true},
		normalize.Rule{ID: "log-up", Version: 1, Direction: normalize.DirectionUplink, Database: db, Table: "logbook",
			KeyColumns: []string{"id"}, Revisioned: true},
		normalize.Rule{ID: "ghost-table", Version: 1, Direction: normalize.DirectionDownlink, Database: db, Table: "absent",
			KeyColumns: []string{"id"}, Revisioned: true},
	)
	require.NoError(t, err)
	clock := relayclock.NewFake(t0)
	b := &bundle{mdb: mdb, db: db, target: target, rules: rules, clock: clock}
	b.applier = b.newApplier(t)
	return b
}

// newApplier is a fresh applier on the bundle's database (a restarted
// process).
func (b *bundle) newApplier(t *testing.T) *remote.Applier {
	t.Helper()
	a, err := remote.New(remote.Config{Target: b.target, Rules: b.rules, Clock: b.clock, ShoreNodeID: "shore"})
	require.NoError(t, err)
	return a
}

func cmdID(n int) string { return fmt.Sprintf("c0000000-0000-4000-8000-%012x", n) }

func rev(n int) string { return fmt.Sprintf("22222222-0000-4000-8000-%012x", n) }

func intKey(id int64) []*pb.ColumnValue {
	return []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: id}}}
}

func text(name, v string) *pb.ColumnValue {
	return &pb.ColumnValue{Name: name, Value: &pb.ColumnValue_StringValue{StringValue: v}}
}

// change is command n: the shore's op on voyage record id over base,
// producing result, writing note (when not empty).
func change(n int, op pb.Operation, id int64, base, result, note string) *pb.Command {
	ev := &pb.ChangeEvent{SchemaVersion: "1.0", EventId: fmt.Sprintf("e0000000-0000-4000-8000-%012x", n),
		OriginNodeId: "shore", RuleId: "voyage-log", RuleVersion: 1, Database: "shoredb", Table: "shore_voyage",
		PrimaryKey: intKey(id), Operation: op, BaseRevision: base, ResultRevision: result,
		SourceSequence: uint64(n), CapturedAt: timestamppb.New(t0)}
	if op != del {
		ev.After = &pb.RowImage{Columns: intKey(id)}
		if note != "" {
			ev.After.Columns = append(ev.After.Columns, text("note", note))
		}
	}
	return &pb.Command{CommandId: cmdID(n), Sequence: uint64(n), CreatedAt: timestamppb.New(t0),
		Body: &pb.Command_Change{Change: ev}}
}

// decision is command n: the shore's decision for voyage record id,
// expected at expected: note (a decided value) or, with note "", a
// tombstone.
func decision(n int, id int64, expected, decided, note string) *pb.Command {
	d := &pb.ConflictDecision{DecisionId: cmdID(1000 + n), ConflictId: cmdID(2000 + n), RuleId: "voyage-log", RuleVersion: 1,
		RecordKey: intKey(id), ExpectedLocalRevision: expected, DecidedRevision: decided, Reason: "test"}
	if note == "" {
		d.Outcome = &pb.ConflictDecision_Tombstone{Tombstone: true}
	} else {
		d.Outcome = &pb.ConflictDecision_DecidedValue{DecidedValue: &pb.RowImage{Columns: append(intKey(id), text("note", note))}}
	}
	return &pb.Command{CommandId: cmdID(n), Sequence: uint64(n), Body: &pb.Command_Decision{Decision: d}}
}

// apply applies cmd and requires no infrastructure error.
func (b *bundle) apply(t *testing.T, cmd *pb.Command) *pb.CommandAck {
	t.Helper()
	ack, err := b.applier.Apply(t.Context(), cmd)
	require.NoError(t, err)
	require.Equal(t, cmd.GetCommandId(), ack.CommandId)
	require.True(t, ack.AckedAt.AsTime().Equal(b.clock.Now()))
	return ack
}

// row is a voyage row: note, secret and the _sync columns but the time.
type row struct {
	Note, Secret, Revision, Origin, EventID string
}

func (b *bundle) row(t *testing.T, id int64) (row, bool) {
	t.Helper()
	var r row
	var note, secret, eid sql.NullString
	err := b.mdb.QueryRowContext(t.Context(), "SELECT note, secret, _sync_revision, _sync_origin, _sync_event_id "+
		"FROM voyage WHERE id = ?", id).Scan(&note, &secret, &r.Revision, &r.Origin, &eid)
	if err == sql.ErrNoRows {
		return row{}, false
	}
	require.NoError(t, err)
	r.Note, r.Secret, r.EventID = note.String, secret.String, eid.String
	return r, true
}

func (b *bundle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.mdb.QueryRowContext(t.Context(), q, args...).Scan(&n))
	return n
}

// result is an ack without its time: result, reason, current revision and
// the current row's columns as text.
type result struct {
	Result   pb.CommandResult
	Reason   pb.RejectReason
	Revision string
	Value    map[string]string
}

func resultOf(ack *pb.CommandAck) result {
	r := result{Result: ack.Result, Reason: ack.Reason, Revision: ack.CurrentRevision}
	if ack.CurrentValue != nil {
		r.Value = map[string]string{}
		for _, c := range ack.CurrentValue.Columns {
			r.Value[c.Name] = c.GetStringValue()
		}
	}
	return r
}

var (
	applied        = result{Result: pb.CommandResult_COMMAND_APPLIED}
	alreadyApplied = result{Result: pb.CommandResult_COMMAND_ALREADY_APPLIED}
)

func rejected(r pb.RejectReason) result {
	return result{Result: pb.CommandResult_COMMAND_REJECTED, Reason: r}
}
