package remote_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// TestChangesApplyOnceWithTheCommandsStamp: a shore insert, update and
// delete are written conditionally with the command's _sync values — the
// change's result revision, the shore as origin, the COMMAND's id as event
// id, no new revision (the capture triggers keep a remote write's
// metadata) — each with one ledger row; the same commands again are
// ALREADY_APPLIED and write nothing.
func TestChangesApplyOnceWithTheCommandsStamp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cmds := []*pb.Command{
		change(1, ins, 1, "", rev(1), "one"),
		change(2, upd, 1, rev(1), rev(2), "one-b"),
		change(3, ins, 2, "", rev(3), "two"),
		change(4, del, 2, rev(3), rev(4), ""),
		change(5, snap, 3, "", rev(5), "three"),
	}
	for _, c := range cmds {
		require.Equal(t, applied, resultOf(b.apply(t, c)), "command %s", c.CommandId)
	}
	r, ok := b.row(t, 1)
	require.True(t, ok)
	require.Equal(t, row{Note: "one-b", Revision: rev(2), Origin: "shore", EventID: cmdID(2)}, r)
	_, ok = b.row(t, 2)
	require.False(t, ok)
	r, _ = b.row(t, 3)
	require.Equal(t, row{Note: "three", Revision: rev(5), Origin: "shore", EventID: cmdID(5)}, r)
	require.Equal(t, 5, b.count(t, "SELECT count(*) FROM sync_applied_event WHERE origin_node_id = 'shore'"))
	require.Equal(t, 3, b.count(t, "SELECT count(*) FROM sync_applied_event WHERE inbox_id IN (1, 2, 4)"),
		"the ledger row keeps the command's sequence")

	changes := b.count(t, "SELECT count(*) FROM _sync_changelog")
	for _, c := range cmds {
		require.Equal(t, alreadyApplied, resultOf(b.apply(t, c)), "command %s again", c.CommandId)
	}
	require.Equal(t, changes, b.count(t, "SELECT count(*) FROM _sync_changelog"), "the repeats wrote nothing")
}

// TestLostRecordIsAnsweredByTheLedger: a process that committed a command's
// write and died before it recorded the result applies the command again
// after its restart — even when the row has been changed locally since —
// and learns from the ledger, written in the write's transaction, that it
// was applied: ALREADY_APPLIED, never a conflict, nothing written again.
func TestLostRecordIsAnsweredByTheLedger(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ins1, del2 := change(1, ins, 1, "", rev(1), "one"), change(3, del, 2, rev(2), rev(3), "")
	require.Equal(t, applied, resultOf(b.apply(t, ins1)))
	require.Equal(t, applied, resultOf(b.apply(t, change(2, ins, 2, "", rev(2), "two"))))
	require.Equal(t, applied, resultOf(b.apply(t, del2)))
	// A local business write after the apply: the trigger gives it a new
	// revision, this node's origin and clears the event id.
	_, err := b.mdb.ExecContext(t.Context(), "UPDATE voyage SET note = 'local' WHERE id = 1")
	require.NoError(t, err)

	restarted := b.newApplier(t)
	for _, c := range []*pb.Command{ins1, del2} {
		ack, err := restarted.Apply(t.Context(), c)
		require.NoError(t, err)
		require.Equal(t, alreadyApplied, resultOf(ack), "command %s", c.CommandId)
	}
	r, _ := b.row(t, 1)
	require.Equal(t, "local", r.Note)
	require.Equal(t, "ship-1", r.Origin)
}

// TestBaseMismatchIsReportedWithEvidence: a change over a revision the ship
// no longer has is not written: CONFLICT_REPORTED with the ship's current
// revision and row (only the columns the rule carries: secret is
// excluded); an insert of a record the ship has, and a delete of one it
// does not have (empty evidence), likewise.
func TestBaseMismatchIsReportedWithEvidence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, applied, resultOf(b.apply(t, change(1, ins, 1, "", rev(1), "one"))))
	_, err := b.mdb.ExecContext(t.Context(), "UPDATE voyage SET note = 'local', secret = 'hidden' WHERE id = 1")
	require.NoError(t, err)
	local, _ := b.row(t, 1)
	require.NotEqual(t, rev(1), local.Revision)

	conflict := func(rev string, value map[string]string) result {
		return result{Result: pb.CommandResult_COMMAND_CONFLICT_REPORTED, Revision: rev, Value: value}
	}
	want := conflict(local.Revision, map[string]string{"id": "1", "note": "local"})
	require.Equal(t, want, resultOf(b.apply(t, change(2, upd, 1, rev(1), rev(2), "shore"))))
	require.Equal(t, want, resultOf(b.apply(t, change(3, ins, 1, "", rev(3), "again"))))
	require.Equal(t, want, resultOf(b.apply(t, change(4, del, 1, rev(1), rev(4), ""))))
	require.Equal(t, conflict("", nil), resultOf(b.apply(t, change(5, del, 9, rev(1), rev(5), ""))))
	r, _ := b.row(t, 1)
	require.Equal(t, local, r, "no conflicting command wrote")
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM sync_applied_event"))
}

// TestDecisions: a decision is written only where the row is still at the
// revision it was decided against, with the decided revision and the
// shore as origin; a repeat is ALREADY_APPLIED; a stale one is
// CONFLICT_REPORTED DECISION_STALE with the ship's current revision and
// row. A tombstone deletes; a tombstone for a record the ship did not have
// and still does not have is already the decided state; a decided value
// against no local row inserts.
func TestDecisions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, applied, resultOf(b.apply(t, change(1, ins, 1, "", rev(1), "one"))))

	keep := decision(2, 1, rev(1), rev(10), "decided")
	require.Equal(t, applied, resultOf(b.apply(t, keep)))
	r, _ := b.row(t, 1)
	require.Equal(t, row{Note: "decided", Revision: rev(10), Origin: "shore", EventID: cmdID(2)}, r)
	require.Equal(t, alreadyApplied, resultOf(b.apply(t, keep)))

	stale := decision(3, 1, rev(1), rev(11), "too late")
	require.Equal(t, result{Result: pb.CommandResult_COMMAND_CONFLICT_REPORTED, Reason: pb.RejectReason_REJECT_REASON_DECISION_STALE,
		Revision: rev(10), Value: map[string]string{"id": "1", "note": "decided"}}, resultOf(b.apply(t, stale)))

	require.Equal(t, applied, resultOf(b.apply(t, decision(4, 1, rev(10), rev(12), ""))))
	_, ok := b.row(t, 1)
	require.False(t, ok)
	require.Equal(t, alreadyApplied, resultOf(b.apply(t, decision(5, 7, "", rev(13), ""))), "no row, none decided")

	require.Equal(t, applied, resultOf(b.apply(t, decision(6, 8, "", rev(14), "made"))))
	r, _ = b.row(t, 8)
	require.Equal(t, row{Note: "made", Revision: rev(14), Origin: "shore", EventID: cmdID(6)}, r)
	// A decision naming the winner's origin writes it (the node's version
	// won: both sides carry the node as origin).
	won := decision(8, 9, "", rev(16), "theirs")
	won.GetDecision().DecidedOriginNodeId = "ship-1"
	require.Equal(t, applied, resultOf(b.apply(t, won)))
	r, _ = b.row(t, 9)
	require.Equal(t, row{Note: "theirs", Revision: rev(16), Origin: "ship-1", EventID: cmdID(8)}, r)
	require.Equal(t, result{Result: pb.CommandResult_COMMAND_CONFLICT_REPORTED, Reason: pb.RejectReason_REJECT_REASON_DECISION_STALE,
		Revision: rev(14), Value: map[string]string{"id": "8", "note": "made"}},
		resultOf(b.apply(t, decision(7, 8, "", rev(15), "other"))), "a row exists now")
}

// TestSameRevisionIsNoConflict: the ship's row already holds the revision
// a command writes, brought by another command — a decision sent the
// shore's row before the change that made it arrived. The change is
// ALREADY_APPLIED, not a conflict, and writes nothing; so is a decision
// whose decided revision the row holds while it expected an older one.
// (Found by the two-way crash harness: reported as a conflict between a
// revision and itself, the case was decided for the node and its write to
// the shore, conditional on the revision it wrote, matched again on every
// retry.)
func TestSameRevisionIsNoConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, applied, resultOf(b.apply(t, change(1, ins, 1, "", rev(1), "one"))))
	require.Equal(t, applied, resultOf(b.apply(t, decision(2, 1, rev(1), rev(3), "shore's"))))
	changes := b.count(t, "SELECT count(*) FROM _sync_changelog")
	require.Equal(t, alreadyApplied, resultOf(b.apply(t, change(3, upd, 1, rev(2), rev(3), "shore's"))))
	require.Equal(t, alreadyApplied, resultOf(b.apply(t, decision(4, 1, rev(2), rev(3), "shore's"))))
	require.Equal(t, changes, b.count(t, "SELECT count(*) FROM _sync_changelog"), "nothing written")
	r, _ := b.row(t, 1)
	require.Equal(t, row{Note: "shore's", Revision: rev(3), Origin: "shore", EventID: cmdID(2)}, r)
}

// TestRejections: a command the ship cannot apply is COMMAND_REJECTED with
// a stable reason, alone; bad input never panics and never errors.
func TestRejections(t *testing.T) {
	t.Parallel()
	b := setup(t)
	unknown := change(1, ins, 1, "", rev(1), "x")
	unknown.GetChange().RuleId = "nope"
	uplinkOnly := change(2, ins, 1, "", rev(1), "x")
	uplinkOnly.GetChange().RuleId = "log-up"
	secret := change(3, ins, 1, "", rev(1), "x")
	secret.GetChange().After.Columns = append(secret.GetChange().After.Columns, text("secret", "s"))
	platform := change(4, ins, 1, "", rev(1), "x")
	platform.GetChange().After.Columns = append(platform.GetChange().After.Columns, text("_sync_origin", "forged"))
	long := change(5, ins, 1, "", rev(1), "this note is far longer than twenty characters")
	keyName := change(6, ins, 1, "", rev(1), "x")
	keyName.GetChange().PrimaryKey[0].Name = "voyage_id"
	noBase := change(7, upd, 1, "", rev(1), "x")
	noValue := change(8, ins, 1, "", rev(1), "x")
	noValue.GetChange().After.Columns[1].Value = nil
	resend := &pb.Command{CommandId: cmdID(9), Sequence: 9, Body: &pb.Command_Resend{Resend: &pb.ResendRequest{
		SourceConnectorId: "c", SourcePartition: "p", FromSequence: 1}}}
	noBody := &pb.Command{CommandId: cmdID(10), Sequence: 10}
	badID := change(11, ins, 1, "", rev(1), "x")
	badID.CommandId = "not-a-uuid"
	emptyChange := &pb.Command{CommandId: cmdID(12), Sequence: 12, Body: &pb.Command_Change{}}
	badDecision := decision(13, 1, rev(1), "", "x")
	ghostKey := decision(14, 1, rev(1), rev(2), "x")
	ghostKey.GetDecision().RecordKey = nil

	for _, c := range []struct {
		cmd  *pb.Command
		want pb.RejectReason
	}{
		{unknown, pb.RejectReason_REJECT_REASON_RULE_UNKNOWN},
		{uplinkOnly, pb.RejectReason_REJECT_REASON_RULE_NOT_AUTHORIZED},
		{secret, pb.RejectReason_REJECT_REASON_COLUMN_NOT_ALLOWED},
		{platform, pb.RejectReason_REJECT_REASON_COLUMN_NOT_ALLOWED},
		{long, pb.RejectReason_REJECT_REASON_TARGET_REFUSED},
		{keyName, pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS},
		{noBase, pb.RejectReason_REJECT_REASON_MISSING_FIELD},
		{noValue, pb.RejectReason_REJECT_REASON_MISSING_FIELD},
		{resend, pb.RejectReason_REJECT_REASON_INVALID_FIELD},
		{noBody, pb.RejectReason_REJECT_REASON_MISSING_FIELD},
		{badID, pb.RejectReason_REJECT_REASON_INVALID_FIELD},
		{emptyChange, pb.RejectReason_REJECT_REASON_MISSING_FIELD},
		{badDecision, pb.RejectReason_REJECT_REASON_MISSING_FIELD},
		{ghostKey, pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS},
	} {
		require.Equal(t, rejected(c.want), resultOf(b.apply(t, c.cmd)), "command %s", c.cmd.GetCommandId())
	}
	ack, err := b.applier.Apply(t.Context(), nil)
	require.NoError(t, err)
	require.Equal(t, rejected(pb.RejectReason_REJECT_REASON_INVALID_FIELD), resultOf(ack))
	_, ok := b.row(t, 1)
	require.False(t, ok, "nothing rejected was written")
	require.Zero(t, b.count(t, "SELECT count(*) FROM sync_applied_event"))

	// The next command applies as ever.
	require.Equal(t, applied, resultOf(b.apply(t, change(20, ins, 1, "", rev(1), "fine"))))
}

// TestMissingTableIsRetried: a rule whose table the ship database does not
// have is the operator's to fix: an error (apply again later), not an ack.
func TestMissingTableIsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := change(1, ins, 1, "", rev(1), "x")
	c.GetChange().RuleId = "ghost-table"
	_, err := b.applier.Apply(t.Context(), c)
	require.ErrorContains(t, err, "has no table")
}

// TestIntent: what a command will write, known before it runs — the
// operation and result revision the client records for loop suppression.
func TestIntent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, c := range []struct {
		cmd  *pb.Command
		op   pb.Operation
		rev  string
		want bool
	}{
		{change(1, upd, 1, rev(1), rev(2), "x"), upd, rev(2), true},
		{change(2, del, 1, rev(2), rev(3), ""), del, rev(3), true},
		{decision(3, 1, rev(3), rev(4), "x"), upd, rev(4), true},
		{decision(4, 1, "", rev(5), "x"), ins, rev(5), true},
		{decision(5, 1, rev(5), rev(6), ""), del, rev(6), true},
		{&pb.Command{CommandId: cmdID(6), Body: &pb.Command_Resend{Resend: &pb.ResendRequest{}}}, 0, "", false},
		{nil, 0, "", false},
	} {
		got, ok := b.applier.Intent(c.cmd)
		require.Equal(t, c.want, ok)
		require.Equal(t, c.op, got.Operation)
		require.Equal(t, c.rev, got.ResultRevision)
	}
}

// TestCaptureSeesTheCommandsStamp: the ship's capture (the trigger capture
// installed on voyage) records each remote write with the command's
// metadata as written — no new revision, the shore as origin, the command
// id as event id — and a delete as the stamp (the row's revision kept, the
// delete command's id) followed by the delete whose before image carries
// that id: what the ship's normaliser looks up to suppress it.
func TestCaptureSeesTheCommandsStamp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.Equal(t, applied, resultOf(b.apply(t, change(1, ins, 1, "", rev(1), "one"))))
	require.Equal(t, applied, resultOf(b.apply(t, change(2, del, 1, rev(1), rev(2), ""))))
	type entry struct{ Op, Before, After string }
	rows, err := b.mdb.QueryContext(t.Context(), `SELECT op,
		coalesce(concat_ws('/', JSON_VALUE(before_json, '$._sync_event_id'), JSON_VALUE(before_json, '$._sync_origin'),
			JSON_VALUE(before_json, '$._sync_revision')), ''),
		coalesce(concat_ws('/', JSON_VALUE(after_json, '$._sync_event_id'), JSON_VALUE(after_json, '$._sync_origin'),
			JSON_VALUE(after_json, '$._sync_revision')), '')
		FROM _sync_changelog ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var got []entry
	for rows.Next() {
		var e entry
		require.NoError(t, rows.Scan(&e.Op, &e.Before, &e.After))
		got = append(got, e)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []entry{
		{Op: "c", After: cmdID(1) + "/shore/" + rev(1)},
		{Op: "u", Before: cmdID(1) + "/shore/" + rev(1), After: cmdID(2) + "/shore/" + rev(1)},
		{Op: "d", Before: cmdID(2) + "/shore/" + rev(1)},
	}, got)
}
