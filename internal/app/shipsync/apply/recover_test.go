package apply_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

var voyageRule = &shore.Rule{ID: "voyage-log", Version: 1, SourceTable: "voyage", TargetTable: "voyage",
	KeyColumns: []string{"id"}, Columns: []string{"id", "note"}, InsertOverTombstone: true}

// TestRecoverAfterTargetCommit: a process died after the target committed
// an event's write (and its ledger row) but before PostgreSQL heard of it.
// The next attempt's conditional write changes nothing, the ledger says the
// write happened, and the event is APPLIED — written once. With the
// TARGET_COMMITTED job recorded too, the target is not even asked.
func TestRecoverAfterTargetCommit(t *testing.T) {
	t.Parallel()
	for _, withJob := range []bool{false, true} {
		b := setup(t)
		var s stream
		ev := s.ev(1, ins, 1, "", rev(1), str("one"))
		upd := s.ev(2, upd, 1, rev(1), rev(2), str("one-b"))
		b.receive(t, ev, upd)
		var id1, id2 int64
		require.NoError(t, b.d.Pool().QueryRow(t.Context(), "SELECT id FROM sync_inbox_event WHERE event_id = $1", uuidN(1)).Scan(&id1))
		require.NoError(t, b.d.Pool().QueryRow(t.Context(), "SELECT id FROM sync_inbox_event WHERE event_id = $1", uuidN(2)).Scan(&id2))
		// Both writes reached the target; the process died.
		for _, w := range []struct {
			id int64
			op apply.Op
		}{{id1, apply.OpInsert}} {
			changed, err := b.target.WriteOnly(t.Context(), w.id, ev, voyageRule, w.op, t0)
			require.NoError(t, err)
			require.True(t, changed)
		}
		changed, err := b.target.WriteOnly(t.Context(), id2, upd, voyageRule, apply.OpUpdate, t0)
		require.NoError(t, err)
		require.True(t, changed)
		if withJob {
			_, err := b.d.Pool().Exec(t.Context(), `INSERT INTO sync_apply_job (inbox_id, state, learnt_by, updated_at)
				VALUES ($1, 'TARGET_COMMITTED', 'write', $3), ($2, 'TARGET_COMMITTED', 'write', $3)`, id1, id2, t0)
			require.NoError(t, err)
		}
		b.work(t)
		require.Equal(t, applied, b.receipt(t, 1))
		require.Equal(t, applied, b.receipt(t, 2))
		want := "ledger"
		if withJob {
			want = "job"
		}
		require.Equal(t, 2, b.count(t, "SELECT count(*) FROM sync_apply_job WHERE state = 'FINALIZED' AND learnt_by = $1", want))
		r, _ := b.row(t, 1)
		require.Equal(t, row{Note: "one-b", Revision: rev(2), EventID: uuidN(2)}, r)
		require.Equal(t, 2, b.mcount(t, "SELECT count(*) FROM sync_applied_event"))
		require.Equal(t, 0, b.count(t, "SELECT count(*) FROM sync_conflict_case"))
	}
}

// TestRecoverBatchAfterTargetCommit: the same for a whole batch of records,
// which the target wrote set-based before the process died. The next
// attempt's set-based writes change nothing (an insert meets its row, an
// update its new revision), so it rolls back; the statement per write and
// the ledger then find every event written: each APPLIED once, learnt from
// the ledger, no ledger row added.
func TestRecoverBatchAfterTargetCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var s stream
	b.receive(t, s.ev(1, ins, 4, "", rev(1), str("four")))
	b.work(t)
	evs := []*pb.ChangeEvent{
		s.ev(2, ins, 1, "", rev(2), str("one")),
		s.ev(3, ins, 2, "", rev(3), str("two")),
		s.ev(4, upd, 4, rev(1), rev(4), str("four-b")),
		s.ev(5, ins, 3, "", rev(5), str("three")),
	}
	b.receive(t, evs...)
	ws := make([]apply.Conditional, len(evs))
	for i, ev := range evs {
		var id int64
		require.NoError(t, b.d.Pool().QueryRow(t.Context(), "SELECT id FROM sync_inbox_event WHERE event_id = $1",
			ev.EventId).Scan(&id))
		ws[i] = apply.ChangeWrite(&apply.Table{Name: "voyage", Columns: []string{"id", "note"}}, ev, apply.OpFor(ev), ev.EventId, id)
	}
	require.NoError(t, b.target.RunGrouped(t.Context(), ws, t0), "the batch's writes, set-based, then the crash")
	b.work(t)
	for n := 2; n <= 5; n++ {
		require.Equal(t, applied, b.receipt(t, n), "event %d", n)
	}
	require.Equal(t, 5, b.count(t, "SELECT count(*) FROM sync_event_receipt"))
	require.Equal(t, 4, b.count(t, "SELECT count(*) FROM sync_apply_job WHERE state = 'FINALIZED' AND learnt_by = 'ledger'"))
	require.Equal(t, 5, b.mcount(t, "SELECT count(*) FROM sync_applied_event"))
	r, _ := b.row(t, 4)
	require.Equal(t, row{Note: "four-b", Revision: rev(4), EventID: uuidN(4)}, r)
	require.Equal(t, 4, b.mcount(t, "SELECT count(*) FROM voyage"))
}
