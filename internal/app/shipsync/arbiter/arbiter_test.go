package arbiter_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/arbiter"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
)

const node = "ship-1"

var t0 = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

// rig is a migrated shore (PostgreSQL), its database (MariaDB) with table
// crew, node ship-1 syncing rule crew, and a fake clock.
type rig struct {
	pg     *relaypgx.Driver
	db     *sql.DB
	target *apply.Target
	clock  *relayclock.Fake
	dl     *shore.Downlink
	reg    *shore.Registry
}

func newRig(t *testing.T, policy shore.ConflictPolicy) *rig {
	t.Helper()
	ctx := t.Context()
	pg := testdb.PGDriver(t)
	clock := relayclock.NewFake(t0)
	_, err := relaymigrate.Up(ctx, pg, clock, shore.MigrationLines(pg)...)
	require.NoError(t, err)
	db, dsn := testdb.MariaDBWithDSN(t)
	_, err = db.ExecContext(ctx, "CREATE TABLE crew (id BIGINT PRIMARY KEY, name VARCHAR(80) NOT NULL, "+
		"updated_at DATETIME(6) NULL, "+apply.SyncColumns+")")
	require.NoError(t, err)
	target, err := apply.OpenTarget(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = target.Close() })
	require.NoError(t, target.EnsureLedger(ctx))
	p := pki.Dir{Path: filepath.Join(t.TempDir(), "pki"), Clock: clock}
	_, err = p.InitCA()
	require.NoError(t, err)
	cert, err := p.IssueNode(node, "")
	require.NoError(t, err)
	reg := shore.NewRegistry(pg.Pool(), clock)
	who := shore.Audit{Actor: "tester"}
	_, err = reg.Add(ctx, cert, who)
	require.NoError(t, err)
	require.NoError(t, reg.AllowRule(ctx, node, "crew", 1, who))
	require.NoError(t, reg.RegisterRule(ctx, shore.Rule{ID: "crew", Version: 1, SourceTable: "crew", TargetTable: "crew",
		KeyColumns: []string{"id"}, Columns: []string{"id", "name", "updated_at"}, InsertOverTombstone: true,
		Conflict: policy}, who))
	return &rig{pg: pg, db: db, target: target, clock: clock, dl: shore.NewDownlink(pg.Pool(), clock), reg: reg}
}

func (r *rig) arbiter(t *testing.T, instance string, mutate func(*arbiter.Config)) *arbiter.Arbiter {
	t.Helper()
	cfg := arbiter.Config{Pool: r.pg.Pool(), Target: r.target, Instance: instance, Clock: r.clock}
	if mutate != nil {
		mutate(&cfg)
	}
	a, err := arbiter.New(cfg)
	require.NoError(t, err)
	return a
}

func str(name, v string) *pb.ColumnValue {
	return &pb.ColumnValue{Name: name, Value: &pb.ColumnValue_StringValue{StringValue: v}}
}

func key(id int64) []*pb.ColumnValue {
	return []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: id}}}
}

// shoreRow writes the shore's row id as a local write at revision rev.
func (r *rig) shoreRow(t *testing.T, id int64, name string, at time.Time, rev string) {
	t.Helper()
	_, err := r.db.ExecContext(t.Context(), "REPLACE INTO crew (id, name, updated_at, _sync_revision, _sync_origin, "+
		"_sync_event_id, _sync_updated_at) VALUES (?, ?, ?, ?, 'shore', NULL, ?)", id, name, at, rev, at)
	require.NoError(t, err)
}

// shoreGet reads the shore's row id: name, revision, origin, event id
// (ok false: no row).
func (r *rig) shoreGet(t *testing.T, id int64) (name, rev, origin, eventID string, ok bool) {
	t.Helper()
	var ev sql.NullString
	err := r.db.QueryRowContext(t.Context(), "SELECT name, _sync_revision, _sync_origin, _sync_event_id FROM crew WHERE id = ?",
		id).Scan(&name, &rev, &origin, &ev)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", "", "", false
	}
	require.NoError(t, err)
	return name, rev, origin, ev.String, true
}

// uplinkConflict stores the node's event (as ingress does) and records it
// as a conflict against the shore's revision cur (as the applier does when
// the target's row is at cur), returning the case id.
func (r *rig) uplinkConflict(t *testing.T, id int64, op pb.Operation, base, result string, after *pb.RowImage, cur string,
	curTomb bool) string {
	t.Helper()
	ctx := t.Context()
	ev := &pb.ChangeEvent{EventId: uuid.NewString(), OriginNodeId: node, RuleId: "crew", RuleVersion: 1, PrimaryKey: key(id),
		Operation: op, BaseRevision: base, ResultRevision: result, After: after}
	body, err := proto.Marshal(ev)
	require.NoError(t, err)
	hash, text, err := shore.RecordKey(ev.PrimaryKey)
	require.NoError(t, err)
	_, err = r.pg.Pool().Exec(ctx, `INSERT INTO sync_inbox_event (origin_node_id, event_id, sender_node_id, batch_id,
		rule_id, rule_version, pk_hash, pk_text, source_connector_id, source_partition, source_position, source_sequence,
		schema_version, content_hash, event, received_at)
		VALUES ($1, $2, $1, 'b', 'crew', 1, $3, $4, 'c', 'p', 0, (SELECT count(*) + 1 FROM sync_inbox_event), '1.0', '\x00', $5, $6)`,
		node, ev.EventId, hash, text, body, t0)
	require.NoError(t, err)
	var cid string
	require.NoError(t, pgx.BeginFunc(ctx, r.pg.Pool(), func(tx pgx.Tx) error {
		cid, _, err = shore.OpenConflict(ctx, tx, "crew", 1, hash, text, shore.Evidence{Origin: node, EventID: ev.EventId,
			Operation: op, Base: base, Result: result, CurrentRevision: cur, CurrentOrigin: "shore", CurrentTombstone: curTomb,
			FoundIn: "target"}, r.clock.Now())
		return err
	}))
	return cid
}

func (r *rig) state(t *testing.T, id string) (state, reason string) {
	t.Helper()
	require.NoError(t, r.pg.Pool().QueryRow(t.Context(), "SELECT state, state_reason FROM sync_conflict_case WHERE conflict_id = $1",
		id).Scan(&state, &reason))
	return state, reason
}

// decisionCommand returns the node's only pending command, a decision.
func (r *rig) commands(t *testing.T) []*pb.Command {
	t.Helper()
	page, err := r.dl.Commands(t.Context(), node, "", 100)
	require.NoError(t, err)
	return page.Commands
}

func (r *rig) ack(t *testing.T, a *pb.CommandAck) {
	t.Helper()
	sts, err := r.dl.Ack(t.Context(), node, []*pb.CommandAck{a})
	require.NoError(t, err)
	require.Equal(t, pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED, sts[0].Status, sts[0].Field)
}

// forward stores the shore's update of record 1 from base to result (its
// row named name) as the shore CDC consumer does: a change command for the
// node.
func (r *rig) forward(t *testing.T, base, result, name string) {
	t.Helper()
	_, err := r.dl.Forward(t.Context(), []shore.ShoreChange{{Topic: "t", Partition: 0, Offset: 0, Event: &pb.ChangeEvent{
		EventId: uuid.NewString(), OriginNodeId: "shore", RuleId: "crew", RuleVersion: 1, PrimaryKey: key(1),
		Operation: pb.Operation_OPERATION_UPDATE, BaseRevision: base, ResultRevision: result, After: row(1, name, t0)}}})
	require.NoError(t, err)
}

func row(id int64, name string, at time.Time) *pb.RowImage {
	return &pb.RowImage{Columns: []*pb.ColumnValue{key(id)[0], str("name", name),
		{Name: "updated_at", Value: &pb.ColumnValue_TimestampValue{TimestampValue: timestamppb.New(at)}}}}
}

// requireReissued checks that SHORE decision d, decided on a version the
// node reported, re-issued the shore's row of record 1 (revision was, its
// name column name): a new revision, written to the shore stamped with the
// decision and the shore's origin, the same values, sent with that
// revision and origin.
func (r *rig) requireReissued(t *testing.T, d *pb.ConflictDecision, was, name string) {
	t.Helper()
	require.NotEqual(t, was, d.DecidedRevision, "a new revision")
	got, rev, origin, eventID, ok := r.shoreGet(t, 1)
	require.True(t, ok)
	require.Equal(t, []string{name, d.DecidedRevision, "shore", d.DecisionId}, []string{got, rev, origin, eventID})
	require.Equal(t, "shore", d.DecidedOriginNodeId)
	require.Equal(t, name, d.GetDecidedValue().Columns[1].GetStringValue())
}

// requireNotReissued checks a SHORE decision sent with the shore's row as
// it is, revision rev (the node's reported version was received by the
// shore already: nothing of it is on its way up), the row untouched.
func (r *rig) requireNotReissued(t *testing.T, d *pb.ConflictDecision, rev, name string) {
	t.Helper()
	require.Equal(t, rev, d.DecidedRevision, "the shore's revision, no new one")
	got, cur, origin, _, ok := r.shoreGet(t, 1)
	require.True(t, ok)
	require.Equal(t, []string{name, rev, "shore"}, []string{got, cur, origin}, "the shore's row untouched")
	require.Equal(t, name, d.GetDecidedValue().Columns[1].GetStringValue())
}

func step(t *testing.T, a *arbiter.Arbiter) arbiter.StepResult {
	t.Helper()
	res, err := a.Step(t.Context())
	require.NoError(t, err)
	return res
}

// TestShoreWinsSameBase: both sides updated the record from the same base;
// SHORE_WINS keeps the shore's row and sends it to the node, conditional on
// the node's revision; the node's answer acknowledges the case.
func TestShoreWinsSameBase(t *testing.T) {
	t.Parallel()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyShoreWins})
	ctx := t.Context()
	r.shoreRow(t, 1, "shore's", t0, "rev-s1")
	cid := r.uplinkConflict(t, 1, pb.Operation_OPERATION_UPDATE, "rev-0", "rev-n1", row(1, "node's", t0), "rev-s1", false)
	a := r.arbiter(t, "arb-1", nil)
	res := step(t, a)
	require.Equal(t, arbiter.StepResult{Decided: 1, Dispatched: 1}, res)
	st, _ := r.state(t, cid)
	require.Equal(t, arbiter.StateDispatched, st)
	name, rev, _, _, _ := r.shoreGet(t, 1)
	require.Equal(t, "shore's", name, "the shore keeps its row")
	require.Equal(t, "rev-s1", rev)
	cmds := r.commands(t)
	require.Len(t, cmds, 1)
	d := cmds[0].GetDecision()
	require.NotNil(t, d)
	require.Equal(t, cid, d.ConflictId)
	require.Equal(t, "rev-n1", d.ExpectedLocalRevision)
	require.Equal(t, "rev-s1", d.DecidedRevision)
	require.Equal(t, "shore's", d.GetDecidedValue().Columns[1].GetStringValue())
	require.Equal(t, "shore", d.DecidedOriginNodeId, "the shore row's own origin")

	r.ack(t, &pb.CommandAck{CommandId: cmds[0].CommandId, Result: pb.CommandResult_COMMAND_APPLIED})
	require.Equal(t, arbiter.StepResult{Answers: 1}, step(t, a))
	st, _ = r.state(t, cid)
	require.Equal(t, arbiter.StateAcknowledged, st)
	require.Equal(t, arbiter.StepResult{}, step(t, a), "nothing left")

	// The decision is append-only.
	_, err := r.pg.Pool().Exec(ctx, "UPDATE sync_conflict_decision SET reason = 'x'")
	require.ErrorContains(t, err, "append-only")
	_, err = r.pg.Pool().Exec(ctx, "DELETE FROM sync_conflict_decision")
	require.ErrorContains(t, err, "append-only")
}

// TestLastWriterWinsNodeLater: the node's change is later, so its version
// is written to the shore (conditionally, stamped with the decision, so
// the shore's capture recognises it) and the node is told to keep it.
func TestLastWriterWinsNodeLater(t *testing.T) {
	t.Parallel()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyLastWriterWins, TimeColumn: "updated_at"})
	r.shoreRow(t, 1, "shore's", t0.Add(-2*time.Hour), "rev-s1")
	cid := r.uplinkConflict(t, 1, pb.Operation_OPERATION_UPDATE, "rev-0", "rev-n1", row(1, "node's", t0.Add(-time.Hour)),
		"rev-s1", false)
	a := r.arbiter(t, "arb-1", nil)
	require.Equal(t, arbiter.StepResult{Decided: 1, Dispatched: 1}, step(t, a))
	name, rev, origin, stamp, ok := r.shoreGet(t, 1)
	require.True(t, ok)
	require.Equal(t, "node's", name)
	require.Equal(t, "rev-n1", rev)
	require.Equal(t, node, origin)
	d := r.commands(t)[0].GetDecision()
	require.Equal(t, d.DecisionId, stamp)
	require.Equal(t, node, d.DecidedOriginNodeId)
	require.Equal(t, "rev-n1", d.ExpectedLocalRevision)
	require.Equal(t, "rev-n1", d.DecidedRevision)
	// What the shore's CDC consumer will look up for that write.
	op, res, found, err := r.dl.AppliedChange(t.Context(), node, stamp)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, pb.Operation_OPERATION_UPDATE, op)
	require.Equal(t, "rev-n1", res)
	var head string
	require.NoError(t, r.pg.Pool().QueryRow(t.Context(), "SELECT current_revision FROM sync_record_head WHERE rule_id = 'crew'").Scan(&head))
	require.Equal(t, "rev-n1", head)
	st, _ := r.state(t, cid)
	require.Equal(t, arbiter.StateDispatched, st)
}

// TestDeleteVersusUpdateGoesManual: the node deleted a record the shore
// updated; a delete has no business time, so LAST_WRITER_WINS hands it to
// an operator, whose decision (the delete) is re-checked, written to the
// shore and sent down as a tombstone the node already has.
func TestDeleteVersusUpdateGoesManual(t *testing.T) {
	t.Parallel()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyLastWriterWins, TimeColumn: "updated_at"})
	ctx := t.Context()
	r.shoreRow(t, 1, "shore's", t0, "rev-s1")
	cid := r.uplinkConflict(t, 1, pb.Operation_OPERATION_DELETE, "rev-0", "tomb-n1", nil, "rev-s1", false)
	a := r.arbiter(t, "arb-1", nil)
	require.Equal(t, arbiter.StepResult{Manual: 1}, step(t, a))
	st, reason := r.state(t, cid)
	require.Equal(t, arbiter.StatePending, st)
	require.Contains(t, reason, "node's record is deleted")

	_, err := a.Decide(ctx, cid, arbiter.ManualDecision{Choice: "NODE", Reason: "the voyage was cancelled"})
	require.ErrorContains(t, err, "operator and a reason")
	seen := "rev-s0"
	_, err = a.Decide(ctx, cid, arbiter.ManualDecision{Choice: "NODE", Operator: "duty officer", Reason: "cancelled",
		SeenShoreRevision: &seen})
	require.ErrorIs(t, err, arbiter.ErrStale, "the operator saw another shore revision")
	seen = "rev-s1"
	d, err := a.Decide(ctx, cid, arbiter.ManualDecision{Choice: "NODE", Operator: "duty officer", Reason: "cancelled",
		SeenShoreRevision: &seen})
	require.NoError(t, err)
	require.True(t, d.Tombstone)
	require.Equal(t, arbiter.StepResult{Dispatched: 1}, step(t, a))
	_, _, _, _, ok := r.shoreGet(t, 1)
	require.False(t, ok, "the shore's row is deleted")
	cmd := r.commands(t)[0].GetDecision()
	require.True(t, cmd.GetTombstone())
	require.Empty(t, cmd.ExpectedLocalRevision, "the node's record must be absent")
	var actor, action string
	require.NoError(t, r.pg.Pool().QueryRow(ctx, `SELECT actor, action FROM sync_audit_event WHERE object_id = $1
		AND action = 'conflict.decided'`, cid).Scan(&actor, &action))
	require.Equal(t, "duty officer", actor)
	_, err = a.Decide(ctx, cid, arbiter.ManualDecision{Choice: "SHORE", Operator: "x", Reason: "y"})
	require.ErrorIs(t, err, arbiter.ErrState)
}

// TestInsertVersusInsert: both sides created the record; SHORE_WINS sends
// the shore's row to the node over the node's own insert.
func TestInsertVersusInsert(t *testing.T) {
	t.Parallel()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyShoreWins})
	r.shoreRow(t, 5, "shore's", t0, "rev-s1")
	cid := r.uplinkConflict(t, 5, pb.Operation_OPERATION_INSERT, "", "rev-n1", row(5, "node's", t0), "rev-s1", false)
	a := r.arbiter(t, "arb-1", nil)
	require.Equal(t, arbiter.StepResult{Decided: 1, Dispatched: 1}, step(t, a))
	d := r.commands(t)[0].GetDecision()
	require.Equal(t, cid, d.ConflictId)
	require.Equal(t, "rev-n1", d.ExpectedLocalRevision)
	require.Equal(t, "rev-s1", d.DecidedRevision)
}

// TestStaleManualDecision: the shore's row changed after the case went to
// an operator: the decision is refused until the evidence is refreshed.
func TestStaleManualDecision(t *testing.T) {
	t.Parallel()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyManual})
	r.shoreRow(t, 1, "shore's", t0, "rev-s1")
	cid := r.uplinkConflict(t, 1, pb.Operation_OPERATION_UPDATE, "rev-0", "rev-n1", row(1, "node's", t0), "rev-s1", false)
	a := r.arbiter(t, "arb-1", nil)
	require.Equal(t, arbiter.StepResult{Manual: 1}, step(t, a))
	r.shoreRow(t, 1, "shore's again", t0, "rev-s2")
	_, err := a.Decide(t.Context(), cid, arbiter.ManualDecision{Choice: "SHORE", Operator: "op", Reason: "keep"})
	require.ErrorIs(t, err, arbiter.ErrStale)
	st, _ := r.state(t, cid)
	require.Equal(t, arbiter.StatePending, st)
	require.NoError(t, arbiter.Cancel(t.Context(), r.pg.Pool(), r.clock, cid, "op", "superseded by the shore's edit"))
	require.ErrorIs(t, arbiter.Cancel(t.Context(), r.pg.Pool(), r.clock, cid, "op", "again"), arbiter.ErrState)
	st, _ = r.state(t, cid)
	require.Equal(t, arbiter.StateCancelled, st)
}

// shoreWinsDispatched is a SHORE_WINS case of record 1 (the node's rev-n1
// met the shore's rev-s1), decided and dispatched: the rig, the case, the
// arbiter and the decision command.
func shoreWinsDispatched(t *testing.T) (*rig, string, *arbiter.Arbiter, *pb.Command) {
	t.Helper()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyShoreWins})
	r.shoreRow(t, 1, "shore's", t0, "rev-s1")
	cid := r.uplinkConflict(t, 1, pb.Operation_OPERATION_UPDATE, "rev-0", "rev-n1", row(1, "node's", t0), "rev-s1", false)
	a := r.arbiter(t, "arb-1", nil)
	require.Equal(t, arbiter.StepResult{Decided: 1, Dispatched: 1}, step(t, a))
	return r, cid, a, r.commands(t)[0]
}

// TestDecisionStale: the node no longer holds the revision the decision
// expected (it changed the record again); its DECISION_STALE answer
// expires the case and the node's newer version opens a new one, which is
// decided afresh.
func TestDecisionStale(t *testing.T) {
	t.Parallel()
	r, cid, a, cmd := shoreWinsDispatched(t)
	ctx := t.Context()
	r.ack(t, &pb.CommandAck{CommandId: cmd.CommandId, Result: pb.CommandResult_COMMAND_CONFLICT_REPORTED,
		Reason: pb.RejectReason_REJECT_REASON_DECISION_STALE, CurrentRevision: "rev-n2", CurrentValue: row(1, "node's again", t0)})
	require.Equal(t, arbiter.StepResult{Answers: 1, Decided: 1, Dispatched: 1}, step(t, a))
	st, reason := r.state(t, cid)
	require.Equal(t, arbiter.StateExpired, st)
	require.Contains(t, reason, "DECISION_STALE")
	var next string
	require.NoError(t, r.pg.Pool().QueryRow(ctx, "SELECT superseded_by::text FROM sync_conflict_case WHERE conflict_id = $1",
		cid).Scan(&next))
	st, _ = r.state(t, next)
	require.Equal(t, arbiter.StateDispatched, st)
	cmds := r.commands(t)
	require.Len(t, cmds, 2)
	d := cmds[1].GetDecision()
	require.Equal(t, next, d.ConflictId)
	require.Equal(t, "rev-n2", d.ExpectedLocalRevision, "the new decision expects the node's newer revision")
	r.requireReissued(t, d, "rev-s1", "shore's")
}

// TestNodeReportedConflict: the node met the shore's change at another
// revision; its report opens a case (the node's row as evidence), decided
// by the rule's policy.
func TestNodeReportedConflict(t *testing.T) {
	t.Parallel()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyShoreWins})
	ctx := t.Context()
	r.shoreRow(t, 1, "shore's", t0, "rev-s2")
	ev := &pb.ChangeEvent{EventId: uuid.NewString(), OriginNodeId: "shore", RuleId: "crew", RuleVersion: 1, PrimaryKey: key(1),
		Operation: pb.Operation_OPERATION_UPDATE, BaseRevision: "rev-s1", ResultRevision: "rev-s2", After: row(1, "shore's", t0)}
	_, err := r.dl.Forward(ctx, []shore.ShoreChange{{Topic: "t", Partition: 0, Offset: 0, Event: ev}})
	require.NoError(t, err)
	cmd := r.commands(t)[0]
	r.ack(t, &pb.CommandAck{CommandId: cmd.CommandId, Result: pb.CommandResult_COMMAND_CONFLICT_REPORTED,
		CurrentRevision: "rev-n1", CurrentValue: row(1, "node's", t0)})
	a := r.arbiter(t, "arb-1", nil)
	require.Equal(t, arbiter.StepResult{Answers: 1, Decided: 1, Dispatched: 1}, step(t, a))
	cmds := r.commands(t)
	require.Len(t, cmds, 2)
	d := cmds[1].GetDecision()
	require.Equal(t, "rev-n1", d.ExpectedLocalRevision)
	r.requireReissued(t, d, "rev-s2", "shore's")
	var foundIn string
	require.NoError(t, r.pg.Pool().QueryRow(ctx, "SELECT found_in FROM sync_conflict_evidence WHERE conflict_id = $1",
		d.ConflictId).Scan(&foundIn))
	require.Equal(t, "node", foundIn)
}

// TestLeaseTakeover: an arbiter that claimed a case and stopped before
// deciding (a crash) holds it only until its lease runs out; a second
// arbiter then takes it over and decides it, and the first one's late
// write is refused.
func TestLeaseTakeover(t *testing.T) {
	t.Parallel()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyShoreWins})
	r.shoreRow(t, 1, "shore's", t0, "rev-s1")
	cid := r.uplinkConflict(t, 1, pb.Operation_OPERATION_UPDATE, "rev-0", "rev-n1", row(1, "node's", t0), "rev-s1", false)
	crash := errors.New("killed mid-lease")
	first := r.arbiter(t, "arb-1", func(c *arbiter.Config) {
		arbiter.SetBeforeDecide(c, func(string) error { return crash })
	})
	_, err := first.Step(t.Context())
	require.ErrorIs(t, err, crash)
	st, _ := r.state(t, cid)
	require.Equal(t, arbiter.StateAutoDeciding, st)

	second := r.arbiter(t, "arb-2", nil)
	require.Equal(t, arbiter.StepResult{}, step(t, second), "the lease is still the first arbiter's")
	r.clock.Advance(arbiter.LeaseDefault + time.Second)
	require.Equal(t, arbiter.StepResult{Decided: 1, Dispatched: 1}, step(t, second))
	st, _ = r.state(t, cid)
	require.Equal(t, arbiter.StateDispatched, st)
	require.ErrorIs(t, first.SetStateForTest(t.Context(), cid, "arb-1", arbiter.StateExpired), arbiter.ErrLeaseLost)
	var owner sql.NullString
	require.NoError(t, r.pg.Pool().QueryRow(t.Context(), "SELECT lease_owner FROM sync_conflict_case WHERE conflict_id = $1",
		cid).Scan(&owner))
	require.False(t, owner.Valid, "a dispatched case is leased to no one")
}

// TestShoreChangedBeforeTheWrite: the node's version won, but the shore's
// row changed between the verdict and the write: nothing is overwritten,
// the case expires.
func TestShoreChangedBeforeTheWrite(t *testing.T) {
	t.Parallel()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyLastWriterWins, TimeColumn: "updated_at"})
	r.shoreRow(t, 1, "shore's", t0.Add(-2*time.Hour), "rev-s1")
	cid := r.uplinkConflict(t, 1, pb.Operation_OPERATION_UPDATE, "rev-0", "rev-n1", row(1, "node's", t0.Add(-time.Hour)),
		"rev-s1", false)
	a := r.arbiter(t, "arb-1", func(c *arbiter.Config) {
		arbiter.SetBeforeDispatch(c, func(string) error {
			r.shoreRow(t, 1, "edited meanwhile", t0, "rev-s2")
			return nil
		})
	})
	require.Equal(t, arbiter.StepResult{Decided: 1, Expired: 1}, step(t, a))
	st, reason := r.state(t, cid)
	require.Equal(t, arbiter.StateExpired, st)
	require.Contains(t, reason, "changed before the decision was written")
	name, rev, _, _, _ := r.shoreGet(t, 1)
	require.Equal(t, "edited meanwhile", name)
	require.Equal(t, "rev-s2", rev)
	require.Empty(t, r.commands(t), "nothing is sent")
}

// TestAnswersInCommandOrder: the node met two of the shore's changes of a
// record (it had deleted the record) and answered both — stored, here, the
// later one first. The arbiter records them in the order of the commands,
// so the case's latest evidence is the shore's later change: the one its
// row holds, which the decision sends. (Found by the two-way crash
// harness: answers were taken by the time they were stored, and one ack
// batch stores many at one time, so in any order; the earlier change was
// the latest evidence, the shore's row no longer matched it, and the case
// expired with the record different on the two sides.)
func TestAnswersInCommandOrder(t *testing.T) {
	t.Parallel()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyShoreWins})
	ctx := t.Context()
	r.shoreRow(t, 1, "shore's second", t0, "rev-s2")
	var changes []shore.ShoreChange
	for i, rev := range []string{"rev-s1", "rev-s2"} {
		base := "rev-0"
		if i > 0 {
			base = "rev-s1"
		}
		changes = append(changes, shore.ShoreChange{Topic: "t", Partition: 0, Offset: int64(i), Event: &pb.ChangeEvent{
			EventId: uuid.NewString(), OriginNodeId: "shore", RuleId: "crew", RuleVersion: 1, PrimaryKey: key(1),
			Operation: pb.Operation_OPERATION_UPDATE, BaseRevision: base, ResultRevision: rev, After: row(1, rev, t0)}})
	}
	_, err := r.dl.Forward(ctx, changes)
	require.NoError(t, err)
	cmds := r.commands(t)
	require.Len(t, cmds, 2)
	var acks []*pb.CommandAck
	for _, c := range []*pb.Command{cmds[1], cmds[0]} {
		acks = append(acks, &pb.CommandAck{CommandId: c.CommandId, Result: pb.CommandResult_COMMAND_CONFLICT_REPORTED})
	}
	sts, err := r.dl.Ack(ctx, node, acks)
	require.NoError(t, err)
	require.Len(t, sts, 2)
	_, err = r.pg.Pool().Exec(ctx, "UPDATE sync_downlink_command SET acked_at = acked_at - interval '1 second' "+
		"WHERE command_id = $1", cmds[1].CommandId)
	require.NoError(t, err)
	a := r.arbiter(t, "arb-1", nil)
	require.Equal(t, arbiter.StepResult{Answers: 2, Decided: 1, Dispatched: 1}, step(t, a))
	cmds = r.commands(t)
	require.Len(t, cmds, 3)
	d := cmds[2].GetDecision()
	r.requireReissued(t, d, "rev-s2", "shore's second") // decided against the shore's later change
	require.Empty(t, d.ExpectedLocalRevision, "the node has no row")
}

// TestLateEvidenceOpensANewCase: evidence that reaches a case after its
// decision — here the node met the shore's next change while the decision
// was on its way — is not answered by that decision: when the node
// acknowledges it, the case closes and the late evidence opens the
// record's next case, which is decided in its turn. (Found by the two-way
// crash harness: the evidence closed with the case, and the record stayed
// different on the two sides with every case closed.)
func TestLateEvidenceOpensANewCase(t *testing.T) {
	t.Parallel()
	r, cid, a, decision := shoreWinsDispatched(t)
	ctx := t.Context()

	// The shore changes the record again; the node meets that change
	// before the decision and reports it: evidence for the dispatched case.
	r.clock.Advance(time.Second)
	r.shoreRow(t, 1, "shore's again", t0, "rev-s2")
	r.forward(t, "rev-s1", "rev-s2", "shore's again")
	change := r.commands(t)[1]
	r.ack(t, &pb.CommandAck{CommandId: change.CommandId, Result: pb.CommandResult_COMMAND_CONFLICT_REPORTED,
		CurrentRevision: "rev-n1", CurrentValue: row(1, "node's", t0)})
	require.Equal(t, arbiter.StepResult{Answers: 1}, step(t, a))
	st, _ := r.state(t, cid)
	require.Equal(t, arbiter.StateDispatched, st, "the evidence went to the open case")

	// The node applies the decision: the case is acknowledged, and the late
	// evidence opens the next case, decided against the shore's row now.
	r.ack(t, &pb.CommandAck{CommandId: decision.CommandId, Result: pb.CommandResult_COMMAND_APPLIED})
	require.Equal(t, arbiter.StepResult{Answers: 1, Decided: 1, Dispatched: 1}, step(t, a))
	st, _ = r.state(t, cid)
	require.Equal(t, arbiter.StateAcknowledged, st)
	var next string
	require.NoError(t, r.pg.Pool().QueryRow(ctx, "SELECT coalesce(superseded_by::text, '') FROM sync_conflict_case "+
		"WHERE conflict_id = $1", cid).Scan(&next))
	require.NotEmpty(t, next, "the late evidence opened the next case")
	cmds := r.commands(t)
	require.Len(t, cmds, 3)
	d := cmds[2].GetDecision()
	require.Equal(t, next, d.ConflictId)
	// The node's version (rev-n1) reached the shore as the first case's
	// conflicting change: nothing of it is on its way, no re-issue.
	r.requireNotReissued(t, d, "rev-s2", "shore's again")
}

// TestStaleAnswerAfterLateEvidence: the node met an older change of the
// shore's (sent before the decision) after the case was decided, so that
// evidence reached the dispatched case late; then the node answered the
// decision DECISION_STALE. The late evidence goes to the next case first
// and the node's answer last: the next case is decided on the answer — the
// shore's row now against the node's — not on the older evidence, whose
// shore revision is no longer the shore's (found by the two-way crash
// harness: that case expired and nothing reopened it).
func TestStaleAnswerAfterLateEvidence(t *testing.T) {
	t.Parallel()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyShoreWins})
	r.forward(t, "rev-0", "rev-s0", "shore's older")
	r.shoreRow(t, 1, "shore's", t0, "rev-s1")
	cid := r.uplinkConflict(t, 1, pb.Operation_OPERATION_UPDATE, "rev-0", "rev-n1", row(1, "node's", t0), "rev-s1", false)
	a := r.arbiter(t, "arb-1", nil)
	require.Equal(t, arbiter.StepResult{Decided: 1, Dispatched: 1}, step(t, a))
	cmds := r.commands(t)
	change, decision := cmds[0], cmds[1]
	r.clock.Advance(time.Second)
	r.ack(t, &pb.CommandAck{CommandId: change.CommandId, Result: pb.CommandResult_COMMAND_CONFLICT_REPORTED,
		CurrentRevision: "rev-n1", CurrentValue: row(1, "node's", t0)})
	require.Equal(t, arbiter.StepResult{Answers: 1}, step(t, a), "late evidence for the dispatched case")
	r.ack(t, &pb.CommandAck{CommandId: decision.CommandId, Result: pb.CommandResult_COMMAND_CONFLICT_REPORTED,
		Reason: pb.RejectReason_REJECT_REASON_DECISION_STALE, CurrentRevision: "rev-n2", CurrentValue: row(1, "node's again", t0)})
	require.Equal(t, arbiter.StepResult{Answers: 1, Decided: 1, Dispatched: 1}, step(t, a))
	st, _ := r.state(t, cid)
	require.Equal(t, arbiter.StateExpired, st)
	cmds = r.commands(t)
	require.Len(t, cmds, 3)
	d := cmds[2].GetDecision()
	r.requireReissued(t, d, "rev-s1", "shore's") // the shore's row
	require.Equal(t, "rev-n2", d.ExpectedLocalRevision, "the node's revision in its answer")
}

// TestNodeHoldsTheShoresRevision: a node reported a conflict while holding
// the very revision the shore's change made (another node, or an older
// client, may); the times are equal, the node wins by its id, and its
// version is the shore's already: nothing is written to the shore — a
// write conditional on the revision it writes would match again on every
// retry after a crash, its ledger row already there (found by the two-way
// crash harness: the arbiter failed on that case for good) — and the
// decision is sent.
func TestNodeHoldsTheShoresRevision(t *testing.T) {
	t.Parallel()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyLastWriterWins, TimeColumn: "updated_at"})
	r.shoreRow(t, 1, "shore's", t0, "rev-s1")
	r.forward(t, "rev-0", "rev-s1", "shore's")
	r.ack(t, &pb.CommandAck{CommandId: r.commands(t)[0].CommandId, Result: pb.CommandResult_COMMAND_CONFLICT_REPORTED,
		CurrentRevision: "rev-s1", CurrentValue: row(1, "shore's", t0)})
	a := r.arbiter(t, "arb-1", nil)
	require.Equal(t, arbiter.StepResult{Answers: 1, Decided: 1, Dispatched: 1}, step(t, a))
	_, rev, origin, eventID, ok := r.shoreGet(t, 1)
	require.True(t, ok)
	require.Equal(t, []string{"rev-s1", "shore", ""}, []string{rev, origin, eventID}, "the shore's row untouched")
	d := r.commands(t)[1].GetDecision()
	require.Equal(t, "rev-s1", d.DecidedRevision)
}

// TestExpiredCaseReopens: the shore's row moved on after the conflict was
// recorded (its change met the node before and is evidence of the expired
// case, nothing else is on its way); the case expires and the record's
// next case — the shore's row now against the node's version — is decided,
// so the two sides do not stay different with every case closed.
func TestExpiredCaseReopens(t *testing.T) {
	t.Parallel()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyShoreWins})
	r.shoreRow(t, 1, "shore's", t0, "rev-s1")
	cid := r.uplinkConflict(t, 1, pb.Operation_OPERATION_UPDATE, "rev-0", "rev-n1", row(1, "node's", t0), "rev-s1", false)
	r.shoreRow(t, 1, "shore's again", t0, "rev-s2")
	a := r.arbiter(t, "arb-1", nil)
	require.Equal(t, arbiter.StepResult{Expired: 1}, step(t, a))
	st, _ := r.state(t, cid)
	require.Equal(t, arbiter.StateExpired, st)
	var next string
	require.NoError(t, r.pg.Pool().QueryRow(t.Context(), "SELECT superseded_by::text FROM sync_conflict_case WHERE conflict_id = $1",
		cid).Scan(&next))
	require.Equal(t, arbiter.StepResult{Decided: 1, Dispatched: 1}, step(t, a))
	d := r.commands(t)[0].GetDecision()
	require.Equal(t, next, d.ConflictId)
	require.Equal(t, "rev-n1", d.ExpectedLocalRevision)
	// rev-n1 is the change the expired case recorded: received, no re-issue.
	r.requireNotReissued(t, d, "rev-s2", "shore's again")
}

// TestShoreMovedBeforeTheSend: a SHORE decision whose row the shore
// changed (here: deleted) before it was sent is not sent — it would bring
// back a row the shore no longer has, after the shore's own change — the
// case expires and the record's next case takes the shore's row as it is.
func TestShoreMovedBeforeTheSend(t *testing.T) {
	t.Parallel()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyShoreWins})
	r.shoreRow(t, 1, "shore's", t0, "rev-s1")
	cid := r.uplinkConflict(t, 1, pb.Operation_OPERATION_UPDATE, "rev-0", "rev-n1", row(1, "node's", t0), "rev-s1", false)
	a := r.arbiter(t, "arb-1", func(c *arbiter.Config) {
		arbiter.SetBeforeDispatch(c, func(string) error {
			_, err := r.db.ExecContext(t.Context(), "DELETE FROM crew WHERE id = 1")
			return err
		})
	})
	require.Equal(t, arbiter.StepResult{Decided: 1, Expired: 1}, step(t, a))
	st, reason := r.state(t, cid)
	require.Equal(t, arbiter.StateExpired, st)
	require.Contains(t, reason, "before the decision was sent")
	require.Empty(t, r.commands(t), "nothing is sent")
	var next string
	require.NoError(t, r.pg.Pool().QueryRow(t.Context(), "SELECT superseded_by::text FROM sync_conflict_case WHERE conflict_id = $1",
		cid).Scan(&next))
	require.NotEmpty(t, next)
}

// TestStopReleasesLease: an arbiter stopped (its Run's ctx ended) while it
// held a case gives the lease up as it returns, and a second arbiter takes
// the case over at once — the clock is not advanced, so the lease did not
// run out.
func TestStopReleasesLease(t *testing.T) {
	t.Parallel()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyShoreWins})
	r.shoreRow(t, 1, "shore's", t0, "rev-s1")
	cid := r.uplinkConflict(t, 1, pb.Operation_OPERATION_UPDATE, "rev-0", "rev-n1", row(1, "node's", t0), "rev-s1", false)
	ctx, stop := context.WithCancel(t.Context())
	first := r.arbiter(t, "arb-1", func(c *arbiter.Config) {
		// SIGTERM arrives while the case is claimed, before its verdict.
		arbiter.SetBeforeDecide(c, func(string) error { stop(); return ctx.Err() })
	})
	require.NoError(t, first.Run(ctx, time.Second))
	st, _ := r.state(t, cid)
	require.Equal(t, arbiter.StateAutoDeciding, st, "the first arbiter claimed the case and stopped before deciding")

	second := r.arbiter(t, "arb-2", nil)
	require.Equal(t, arbiter.StepResult{Decided: 1, Dispatched: 1}, step(t, second))
	st, _ = r.state(t, cid)
	require.Equal(t, arbiter.StateDispatched, st)
	require.Equal(t, t0, r.clock.Now(), "the clock never moved: no lease ran out")
	n, err := first.Release(t.Context())
	require.NoError(t, err)
	require.Zero(t, n, "a released arbiter holds nothing; the dispatched case is not touched")
}

// lateUpload is the node's own change of record 1 from base to result (its
// row named name), reaching the shore after the node reported result: the
// shore applier's conditional write of it. It reports whether the write
// changed the shore's row.
func (r *rig) lateUpload(t *testing.T, base, result, name string) bool {
	t.Helper()
	ev := &pb.ChangeEvent{EventId: uuid.NewString(), OriginNodeId: node, RuleId: "crew", RuleVersion: 1, PrimaryKey: key(1),
		Operation: pb.Operation_OPERATION_UPDATE, BaseRevision: base, ResultRevision: result, After: row(1, name, t0)}
	w := apply.ChangeWrite(&apply.Table{Name: "crew", Columns: []string{"id", "name", "updated_at"}}, ev, apply.OpUpdate,
		ev.EventId, 1)
	changed, refused, err := r.target.Apply(t.Context(), []apply.Conditional{w}, r.clock.Now())
	require.NoError(t, err)
	require.NoError(t, refused[0])
	return changed[0]
}

// reportedOverShore has the shore at rev-s1 and the node report, meeting
// the shore's change to it, that it holds rev-n1 — its own change made over
// rev-s1, whose upload has not reached the shore yet.
func reportedOverShore(t *testing.T, mutate func(*arbiter.Config)) (*rig, *arbiter.Arbiter) {
	t.Helper()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyShoreWins})
	r.shoreRow(t, 1, "shore's", t0, "rev-s1")
	r.forward(t, "rev-0", "rev-s1", "shore's")
	r.ack(t, &pb.CommandAck{CommandId: r.commands(t)[0].CommandId, Result: pb.CommandResult_COMMAND_CONFLICT_REPORTED,
		CurrentRevision: "rev-n1", CurrentValue: row(1, "node's", t0)})
	return r, r.arbiter(t, "arb-1", mutate)
}

// TestReportedVersionUploadedLate: the node reported a version (rev-n1) the
// shore has not received — its change made over the shore's rev-s1 is
// still on its way. The SHORE decision tells the node to drop rev-n1; were
// the shore's row left at rev-s1, that change would apply cleanly when it
// arrives, leaving the shore on the node's version and the node on the
// shore's, for good (found by the two-way crash harness). The decision
// re-issues the shore's row under a new revision, so the late change no
// longer applies: it is recorded as a conflict, and both sides hold the
// decided version.
func TestReportedVersionUploadedLate(t *testing.T) {
	t.Parallel()
	r, a := reportedOverShore(t, nil)
	require.Equal(t, arbiter.StepResult{Answers: 1, Decided: 1, Dispatched: 1}, step(t, a))
	d := r.commands(t)[1].GetDecision()
	require.Equal(t, "rev-n1", d.ExpectedLocalRevision)
	r.requireReissued(t, d, "rev-s1", "shore's")
	require.False(t, r.lateUpload(t, "rev-s1", "rev-n1", "node's"), "the late change meets the new revision")
	_, rev, _, _, _ := r.shoreGet(t, 1)
	require.Equal(t, d.DecidedRevision, rev)
}

// TestReportedVersionUploadedBeforeTheWrite: the node's late change reaches
// the shore after the verdict and before the decision is written: it
// applies (it was made over the shore's row), the re-issue then finds
// another revision and writes nothing, and the case expires unsent — both
// sides hold the node's version, so no case follows.
func TestReportedVersionUploadedBeforeTheWrite(t *testing.T) {
	t.Parallel()
	var r *rig
	r, a := reportedOverShore(t, func(c *arbiter.Config) {
		arbiter.SetBeforeDispatch(c, func(string) error {
			require.True(t, r.lateUpload(t, "rev-s1", "rev-n1", "node's"))
			return nil
		})
	})
	require.Equal(t, arbiter.StepResult{Answers: 1, Decided: 1, Expired: 1}, step(t, a))
	require.Len(t, r.commands(t), 1, "no decision is sent")
	name, rev, _, _, _ := r.shoreGet(t, 1)
	require.Equal(t, []string{"node's", "rev-n1"}, []string{name, rev})
	var open int
	require.NoError(t, r.pg.Pool().QueryRow(t.Context(),
		"SELECT count(*) FROM sync_conflict_case WHERE state NOT IN ('EXPIRED', 'ACKNOWLEDGED')").Scan(&open))
	require.Zero(t, open, "the two sides agree: nothing reopened")
	require.Equal(t, arbiter.StepResult{}, step(t, a))
}

// TestReportedVersionAppliedIsNotReissued: the node reported a version
// (rev-n1) the shore has applied already — the record's head holds it
// among its recent revisions (stored here in another letter case: revisions
// compare without case) — and the shore has moved on to rev-s2. Nothing of
// rev-n1 is on its way up, so the SHORE decision is sent with the shore's
// row as it is: no new revision, no write.
func TestReportedVersionAppliedIsNotReissued(t *testing.T) {
	t.Parallel()
	r := newRig(t, shore.ConflictPolicy{Policy: shore.PolicyShoreWins})
	r.shoreRow(t, 1, "shore's", t0, "rev-s2")
	r.forward(t, "rev-0", "rev-s2", "shore's")
	hash, _, err := shore.RecordKey(key(1))
	require.NoError(t, err)
	tag, err := r.pg.Pool().Exec(t.Context(), `UPDATE sync_record_head SET recent_revisions = array_prepend('REV-N1', recent_revisions)
		WHERE rule_id = 'crew' AND pk_hash = $1`, hash)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "the forward made the record's head")
	r.ack(t, &pb.CommandAck{CommandId: r.commands(t)[0].CommandId, Result: pb.CommandResult_COMMAND_CONFLICT_REPORTED,
		CurrentRevision: "rev-n1", CurrentValue: row(1, "node's", t0)})
	a := r.arbiter(t, "arb-1", nil)
	require.Equal(t, arbiter.StepResult{Answers: 1, Decided: 1, Dispatched: 1}, step(t, a))
	d := r.commands(t)[1].GetDecision()
	require.Equal(t, "rev-n1", d.ExpectedLocalRevision)
	r.requireNotReissued(t, d, "rev-s2", "shore's")
}
