package apply_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// TestDecide is seed 004 §11.1's table: which change may be written over
// which known state of the record.
func TestDecide(t *testing.T) {
	t.Parallel()
	var s stream
	live := apply.Head{Found: true, Revision: rev(1), Origin: "shore"}
	gone := apply.Head{Found: true, Revision: rev(2), Tombstone: true}
	noTomb := *voyageRule
	noTomb.InsertOverTombstone = false
	snapNew := s.ev(1, pb.Operation_OPERATION_SNAPSHOT, 1, "", rev(9), str("s"))
	snapOver := s.ev(1, pb.Operation_OPERATION_SNAPSHOT, 1, rev(1), rev(9), str("s"))
	for _, c := range []struct {
		name string
		ev   *pb.ChangeEvent
		head apply.Head
		want apply.Plan
	}{
		{"insert, unknown record", s.ev(1, ins, 1, "", rev(9), nil), apply.Head{}, apply.Plan{Action: apply.Write, Op: apply.OpInsert}},
		{"insert over a live record: the target decides", s.ev(1, ins, 1, "", rev(9), nil), live, apply.Plan{Action: apply.Write, Op: apply.OpInsert}},
		{"insert over a tombstone", s.ev(1, ins, 1, "", rev(9), nil), gone, apply.Plan{Action: apply.Write, Op: apply.OpInsert}},
		{"update on the current revision", s.ev(1, upd, 1, rev(1), rev(9), nil), live, apply.Plan{Action: apply.Write, Op: apply.OpUpdate}},
		{"update on another revision: the target decides", s.ev(1, upd, 1, rev(3), rev(9), nil), live, apply.Plan{Action: apply.Write, Op: apply.OpUpdate}},
		{"update of a deleted record: the target decides", s.ev(1, upd, 1, rev(2), rev(9), nil), gone, apply.Plan{Action: apply.Write, Op: apply.OpUpdate}},
		{"update, unknown record: the target decides", s.ev(1, upd, 1, rev(3), rev(9), nil), apply.Head{}, apply.Plan{Action: apply.Write, Op: apply.OpUpdate}},
		{"delete on the current revision", s.ev(1, del, 1, rev(1), rev(9), nil), live, apply.Plan{Action: apply.Write, Op: apply.OpDelete}},
		{"delete on another revision: the target decides", s.ev(1, del, 1, rev(4), rev(9), nil), live, apply.Plan{Action: apply.Write, Op: apply.OpDelete}},
		{"delete of a deleted record: the target decides", s.ev(1, del, 1, rev(2), rev(9), nil), gone, apply.Plan{Action: apply.Write, Op: apply.OpDelete}},
		{"snapshot without base", snapNew, apply.Head{}, apply.Plan{Action: apply.Write, Op: apply.OpInsert}},
		{"snapshot over the current revision", snapOver, live, apply.Plan{Action: apply.Write, Op: apply.OpUpdate}},
		{"a repeat of the change that made the current revision", s.ev(1, upd, 1, rev(7), rev(1), nil), live,
			apply.Plan{Action: apply.Repeat, Op: apply.OpUpdate}},
		{"a repeat of an earlier change", s.ev(1, upd, 1, rev(6), rev(7), nil),
			apply.Head{Found: true, Revision: rev(1), Recent: []string{rev(8), rev(7)}}, apply.Plan{Action: apply.Repeat, Op: apply.OpUpdate}},
		{"a repeat of an insert", s.ev(1, ins, 1, "", rev(1), nil), live, apply.Plan{Action: apply.Repeat, Op: apply.OpInsert}},
		{"a repeat of a delete", s.ev(1, del, 1, rev(1), rev(2), nil), gone, apply.Plan{Action: apply.Repeat, Op: apply.OpDelete}},
		// A SNAPSHOT row without a base: an upsert under a version condition.
		{"snapshot at the record's revision: idempotent", s.ev(1, pb.Operation_OPERATION_SNAPSHOT, 1, "", rev(1), str("s")), live,
			apply.Plan{Action: apply.Repeat, Op: apply.OpInsert}},
		{"snapshot of a revision the record moved past: never written", s.ev(1, pb.Operation_OPERATION_SNAPSHOT, 1, "", rev(7), str("s")),
			apply.Head{Found: true, Revision: rev(1), Recent: []string{rev(8), rev(7)}}, apply.Plan{Action: apply.Repeat, Op: apply.OpInsert}},
		{"snapshot over a live record at another revision: updated on its current one", snapNew, live,
			apply.Plan{Action: apply.Write, Op: apply.OpUpdate, Base: rev(1)}},
		{"snapshot of a record deleted since", snapNew,
			apply.Head{Found: true, Revision: normalize.TombstoneRevision(snapNew.OriginNodeId, rev(9), snapNew.PrimaryKey), Tombstone: true},
			apply.Plan{Action: apply.Repeat, Op: apply.OpInsert}},
		{"snapshot over another tombstone: re-created", snapNew, gone, apply.Plan{Action: apply.Write, Op: apply.OpInsert}},
	} {
		require.Equal(t, c.want, apply.Decide(voyageRule, c.ev, c.head), c.name)
	}
	require.Equal(t, apply.Conflict, apply.Decide(&noTomb, s.ev(1, ins, 1, "", rev(9), nil), gone).Action,
		"a rule that forbids re-creating a deleted record")

	reject := func(ev *pb.ChangeEvent) pb.RejectReason {
		p := apply.Decide(voyageRule, ev, apply.Head{})
		require.Equal(t, apply.Reject, p.Action)
		require.NotEmpty(t, p.Detail)
		return p.Reason
	}
	require.Equal(t, pb.RejectReason_REJECT_REASON_RULE_UNKNOWN, apply.Decide(nil, s.ev(1, ins, 1, "", rev(9), nil), apply.Head{}).Reason)
	other := s.ev(1, ins, 1, "", rev(9), nil)
	other.Table = "crew"
	require.Equal(t, pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS, reject(other))
	wrongKey := s.ev(1, ins, 1, "", rev(9), nil)
	wrongKey.PrimaryKey[0].Name = "voyage_id"
	require.Equal(t, pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS, reject(wrongKey))
	keyChange := s.ev(1, upd, 1, rev(1), rev(9), nil)
	keyChange.After.Columns[0].Value = &pb.ColumnValue_IntValue{IntValue: 2}
	require.Equal(t, pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS, reject(keyChange))
	platform := s.ev(1, ins, 1, "", rev(9), nil)
	platform.After.Columns = append(platform.After.Columns, &pb.ColumnValue{Name: "_sync_revision",
		Value: &pb.ColumnValue_StringValue{StringValue: "x"}})
	require.Equal(t, pb.RejectReason_REJECT_REASON_COLUMN_NOT_ALLOWED, reject(platform))
}
