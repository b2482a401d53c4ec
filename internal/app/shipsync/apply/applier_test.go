package apply_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

const (
	ins = pb.Operation_OPERATION_INSERT
	upd = pb.Operation_OPERATION_UPDATE
	del = pb.Operation_OPERATION_DELETE
)

var applied = receipt{Result: "APPLIED"}

// TestApplyInOrder: inserts, updates and deletes are written to the target
// in source order per record, with the _sync columns of the event; each
// event gets one APPLIED receipt, the record head follows, the ledger holds
// each write, and the event's apply-queue message is deleted.
func TestApplyInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var s stream
	b.receive(t,
		s.ev(1, ins, 1, "", rev(1), str("one")),
		s.ev(2, upd, 1, rev(1), rev(2), str("one-b")),
		s.ev(3, ins, 2, "", rev(3), str("two")),
		s.ev(4, del, 1, rev(2), rev(4), nil),
		s.ev(5, ins, 1, "", rev(5), str("one again")), // over the tombstone, which the rule allows
		s.ev(6, upd, 2, rev(3), rev(6), nil),          // only the key: the note stays
	)
	b.work(t)
	for n := 1; n <= 6; n++ {
		require.Equal(t, applied, b.receipt(t, n), "event %d", n)
	}
	r, ok := b.row(t, 1)
	require.True(t, ok)
	require.Equal(t, row{Note: "one again", Revision: rev(5), EventID: uuidN(5)}, r)
	r, ok = b.row(t, 2)
	require.True(t, ok)
	require.Equal(t, row{Note: "two", Revision: rev(6), EventID: uuidN(6)}, r)
	require.Equal(t, 6, b.mcount(t, "SELECT count(*) FROM sync_applied_event"))
	require.Equal(t, 6, b.count(t, "SELECT count(*) FROM sync_apply_job WHERE state = 'FINALIZED' AND learnt_by = 'write'"))
	var head struct {
		Rev       string
		Tombstone bool
	}
	require.NoError(t, b.d.Pool().QueryRow(t.Context(), `SELECT current_revision, tombstone FROM sync_record_head
		WHERE rule_id = 'voyage-log' ORDER BY updated_at, current_revision LIMIT 1`).Scan(&head.Rev, &head.Tombstone))
	require.Equal(t, 2, b.count(t, "SELECT count(*) FROM sync_record_head WHERE NOT tombstone"))

	// An applied event's queue message went with its receipt.
	require.Equal(t, 0, b.count(t, "SELECT count(*) FROM relay_message"))

	// Processing again changes nothing: every event has its receipt.
	b.work(t)
	require.Equal(t, 6, b.count(t, "SELECT count(*) FROM sync_event_receipt"))
}

// TestDeleteIsStampedBeforeItDeletes: the applier deletes a row in two
// statements of one transaction — it first stamps the row with the event's
// id and origin (the revision kept), then deletes it where it is still at
// the base revision — so the captured delete's before image names the
// event that deleted it (the shore's capture tells the platform's delete
// from a local one by it). Triggers on the shore table record what a
// capture sees: every update's new metadata and every deleted row's.
func TestDeleteIsStampedBeforeItDeletes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	for _, q := range []string{
		"CREATE TABLE seen (seq INT AUTO_INCREMENT PRIMARY KEY, op CHAR(1), meta VARCHAR(200))",
		"CREATE TRIGGER voyage_au AFTER UPDATE ON voyage FOR EACH ROW INSERT INTO seen (op, meta) " +
			"VALUES ('u', concat_ws('/', NEW._sync_event_id, NEW._sync_origin, NEW._sync_revision))",
		"CREATE TRIGGER voyage_ad AFTER DELETE ON voyage FOR EACH ROW INSERT INTO seen (op, meta) " +
			"VALUES ('d', concat_ws('/', OLD._sync_event_id, OLD._sync_origin, OLD._sync_revision))",
	} {
		_, err := b.mdb.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	seen := func() []string {
		var all string
		require.NoError(t, b.mdb.QueryRowContext(ctx, "SELECT coalesce(group_concat(concat(op, ' ', meta) "+
			"ORDER BY seq SEPARATOR '|'), '') FROM seen").Scan(&all))
		return strings.Split(all, "|")
	}
	var s stream
	b.receive(t, s.ev(1, ins, 1, "", rev(1), str("one")), s.ev(2, del, 1, rev(1), rev(2), nil))
	b.work(t)
	require.Equal(t, applied, b.receipt(t, 1))
	require.Equal(t, applied, b.receipt(t, 2))
	_, ok := b.row(t, 1)
	require.False(t, ok)
	require.Equal(t, 2, b.mcount(t, "SELECT count(*) FROM sync_applied_event"), "one ledger row per event, the delete's once")
	require.Equal(t, []string{"u " + uuidN(2) + "/ship-1/" + rev(1), "d " + uuidN(2) + "/ship-1/" + rev(1)}, seen(),
		"the delete's stamp (revision kept), then the delete carrying it")

	// A delete over a revision the row no longer has neither stamps nor
	// deletes: a conflict, the row as the local write left it.
	b.receive(t, s.ev(3, ins, 2, "", rev(3), str("two")))
	b.work(t)
	_, err := b.mdb.ExecContext(ctx, "UPDATE voyage SET note = 'local', _sync_revision = ?, _sync_origin = 'shore', "+
		"_sync_event_id = NULL WHERE id = 2", rev(50))
	require.NoError(t, err)
	b.receive(t, s.ev(4, del, 2, rev(3), rev(4), nil))
	b.work(t)
	require.Equal(t, "CONFLICT_RECORDED", b.receipt(t, 4).Result)
	r, ok := b.row(t, 2)
	require.True(t, ok)
	require.Equal(t, row{Note: "local", Revision: rev(50)}, r)
	require.Len(t, seen(), 3, "only the local write's update since")
	require.Equal(t, 3, b.mcount(t, "SELECT count(*) FROM sync_applied_event"))
}

// TestConflicts: a change over a revision the shore no longer has is a
// conflict, never a write — found by the conditional write, with the target
// row as evidence, also when the shore database changed underneath — and
// one record has one active case that collects the evidence.
func TestConflicts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var s stream
	b.receive(t, s.ev(1, ins, 1, "", rev(1), str("one")), s.ev(2, ins, 2, "", rev(2), str("two")))
	b.work(t)

	// The head says rev(1); the ship changed rev(9).
	b.receive(t, s.ev(3, upd, 1, rev(9), rev(10), str("stale")))
	b.work(t)
	r3 := b.receipt(t, 3)
	require.Equal(t, receipt{Result: "CONFLICT_RECORDED", Conflict: true}, r3)
	r, _ := b.row(t, 1)
	require.Equal(t, "one", r.Note, "a conflict never writes")

	// A local shore write the head does not know of: the conditional write
	// matches no row, the row as found is the evidence.
	_, err := b.mdb.ExecContext(t.Context(), "UPDATE voyage SET note = 'local', _sync_revision = ?, _sync_origin = 'shore', "+
		"_sync_event_id = NULL WHERE id = 2", rev(50))
	require.NoError(t, err)
	b.receive(t, s.ev(4, upd, 2, rev(2), rev(11), str("ship")))
	b.work(t)
	require.Equal(t, receipt{Result: "CONFLICT_RECORDED", Conflict: true}, b.receipt(t, 4))
	r, _ = b.row(t, 2)
	require.Equal(t, row{Note: "local", Revision: rev(50)}, r)
	var foundIn, curRev string
	var rowImage []byte
	require.NoError(t, b.d.Pool().QueryRow(t.Context(), `SELECT found_in, current_revision, current_row FROM sync_conflict_evidence
		WHERE event_id = $1`, uuidN(4)).Scan(&foundIn, &curRev, &rowImage))
	require.Equal(t, "target", foundIn)
	require.Equal(t, rev(50), curRev)
	require.NotEmpty(t, rowImage)

	// An insert of a record the shore database has but the shore never
	// heard of: a conflict too.
	_, err = b.mdb.ExecContext(t.Context(), "INSERT INTO voyage VALUES (3, 'shore-made', ?, 'shore', NULL, NOW(6))", rev(60))
	require.NoError(t, err)
	// And a second stale change of record 1: the same case gets the evidence.
	b.receive(t, s.ev(5, ins, 3, "", rev(12), str("ship-made")), s.ev(6, upd, 1, rev(13), rev(14), str("stale again")))
	b.work(t)
	require.Equal(t, receipt{Result: "CONFLICT_RECORDED", Conflict: true}, b.receipt(t, 5))
	require.Equal(t, receipt{Result: "CONFLICT_RECORDED", Conflict: true}, b.receipt(t, 6))
	require.Equal(t, 3, b.count(t, "SELECT count(*) FROM sync_conflict_case WHERE state = 'DETECTED'"), "records 1, 2 and 3")
	require.Equal(t, 2, b.count(t, `SELECT count(*) FROM sync_conflict_evidence v JOIN sync_conflict_case c USING (conflict_id)
		WHERE c.conflict_id = (SELECT conflict_id FROM sync_event_receipt WHERE event_id = $1)`, uuidN(3)))
	require.Equal(t, 3, b.count(t, "SELECT count(*) FROM sync_audit_event WHERE action = 'conflict.detected'"))
	require.Equal(t, 4, b.count(t, "SELECT count(*) FROM sync_apply_job WHERE state = 'CONFLICT_CAPTURED'"))
	require.Equal(t, 2, b.mcount(t, "SELECT count(*) FROM sync_applied_event"), "only the two first inserts wrote")
}

// TestStaleHeadIsNoConflict: the record head lags behind the shore
// database — a local change of the shore's (or an arbiter's decision
// written just before it) that the head has not followed yet — and a ship
// change made over the row the shore database holds is written, not
// recorded as a conflict against the head's older revision. (Found by the
// two-way crash harness: the head-only conflict named a revision the shore
// no longer held, its case expired, and the record stayed different.)
func TestStaleHeadIsNoConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var s stream
	b.receive(t, s.ev(1, ins, 1, "", rev(1), str("one")))
	b.work(t)
	_, err := b.mdb.ExecContext(t.Context(), "UPDATE voyage SET note = 'local', _sync_revision = ?, _sync_origin = 'shore', "+
		"_sync_event_id = NULL WHERE id = 1", rev(50))
	require.NoError(t, err)
	b.receive(t, s.ev(2, upd, 1, rev(50), rev(51), str("ship over local")))
	b.work(t)
	require.Equal(t, applied, b.receipt(t, 2))
	r, _ := b.row(t, 1)
	require.Equal(t, row{Note: "ship over local", Revision: rev(51), EventID: uuidN(2)}, r)
	require.Zero(t, b.count(t, "SELECT count(*) FROM sync_conflict_case"))
}

// TestRejects: an event the shore cannot apply gets a REJECTED receipt with
// a stable reason, alone — the rest of its batch applies.
func TestRejects(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var s stream
	ghost := s.ev(1, ins, 1, "", rev(1), str("x"))
	ghost.RuleId = "ghost" // allowed to the node, not registered on the shore
	extra := s.ev(2, ins, 2, "", rev(2), str("x"))
	extra.After.Columns = append(extra.After.Columns, &pb.ColumnValue{Name: "secret", Value: &pb.ColumnValue_StringValue{StringValue: "s"}})
	long := s.ev(3, ins, 3, "", rev(3), str("this note is far longer than twenty characters"))
	fine := s.ev(4, ins, 4, "", rev(4), str("fine"))
	b.receive(t, ghost, extra, long, fine)
	b.work(t)
	require.Equal(t, receipt{Result: "REJECTED", Reason: "REJECT_REASON_RULE_UNKNOWN"}, b.receipt(t, 1))
	require.Equal(t, receipt{Result: "REJECTED", Reason: "REJECT_REASON_COLUMN_NOT_ALLOWED"}, b.receipt(t, 2))
	require.Equal(t, receipt{Result: "REJECTED", Reason: "REJECT_REASON_TARGET_REFUSED"}, b.receipt(t, 3))
	require.Equal(t, applied, b.receipt(t, 4))
	_, ok := b.row(t, 3)
	require.False(t, ok)
	_, ok = b.row(t, 4)
	require.True(t, ok)
	require.Equal(t, 1, b.mcount(t, "SELECT count(*) FROM sync_applied_event"))
}

// TestTargetDownRetries: with the target unreachable nothing is finalized;
// the events wait (FAILED, retried) and no receipt is written.
func TestTargetDownRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var s stream
	b.receive(t, s.ev(1, ins, 1, "", rev(1), str("one")))
	require.NoError(t, b.target.Close())
	_, err := b.applier.Work(t.Context())
	require.NoError(t, err)
	require.Equal(t, 0, b.count(t, "SELECT count(*) FROM sync_event_receipt"))
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM relay_message WHERE state = 'FAILED' AND error_class = 'INFRA'"))
}

// TestSchemaMismatchWaits: a shore table that lacks a column the rule
// writes is an operator's fix, not the event's fault: the event is retried
// (UNSUPPORTED), gets no receipt, and applies once the column exists.
func TestSchemaMismatchWaits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.mdb.ExecContext(t.Context(), "ALTER TABLE voyage DROP COLUMN note")
	require.NoError(t, err)
	var s stream
	b.receive(t, s.ev(1, ins, 1, "", rev(1), str("one")))
	_, err = b.applier.Work(t.Context())
	require.NoError(t, err)
	require.Equal(t, 0, b.count(t, "SELECT count(*) FROM sync_event_receipt"))
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM relay_message WHERE state = 'FAILED' AND error_class = 'UNSUPPORTED'"))

	_, err = b.mdb.ExecContext(t.Context(), "ALTER TABLE voyage ADD COLUMN note VARCHAR(20)")
	require.NoError(t, err)
	b.clock.Advance(time.Hour) // past the retry's backoff
	b.work(t)
	require.Equal(t, applied, b.receipt(t, 1))
	r, ok := b.row(t, 1)
	require.True(t, ok)
	require.Equal(t, "one", r.Note)
}

// TestRepeatedChangeIsApplied: CDC delivers at least once — a connector
// restarted after a crash sends records again, under new positions and so
// new event ids. A change whose result revision the record has, or had
// within its last RecentRevisions changes, is a repeat: answered APPLIED
// with nothing written, never a conflict, and the record is left as the
// later changes made it. A change older than that window is a conflict.
func TestRepeatedChangeIsApplied(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var s stream
	b.receive(t,
		s.ev(1, ins, 1, "", rev(1), str("one")),
		s.ev(2, upd, 1, rev(1), rev(2), str("two")),
		s.ev(3, upd, 1, rev(2), rev(3), str("three")),
	)
	b.work(t)
	// The connector sends 2 and 3 again, then the insert.
	b.receive(t,
		s.ev(12, upd, 1, rev(1), rev(2), str("two")),
		s.ev(13, upd, 1, rev(2), rev(3), str("three")),
		s.ev(11, ins, 1, "", rev(1), str("one")),
	)
	b.work(t)
	for _, n := range []int{1, 2, 3, 11, 12, 13} {
		require.Equal(t, applied, b.receipt(t, n), "event %d", n)
	}
	r, ok := b.row(t, 1)
	require.True(t, ok)
	require.Equal(t, row{Note: "three", Revision: rev(3), EventID: uuidN(3)}, r, "the repeats wrote nothing")
	require.Equal(t, 3, b.mcount(t, "SELECT count(*) FROM sync_applied_event"))
	require.Equal(t, 3, b.count(t, "SELECT count(*) FROM sync_apply_job WHERE learnt_by = 'repeat'"))
	require.Zero(t, b.count(t, "SELECT count(*) FROM sync_conflict_case"))

	// A delete, repeated: its tombstone revision is the record's.
	b.receive(t, s.ev(4, del, 1, rev(3), rev(4), nil))
	b.work(t)
	b.receive(t, s.ev(14, del, 1, rev(3), rev(4), nil))
	b.work(t)
	require.Equal(t, applied, b.receipt(t, 14))
	_, ok = b.row(t, 1)
	require.False(t, ok)

	// Past the window: the insert's revision has been pushed out by
	// RecentRevisions later changes, so its repeat is a conflict.
	b.receive(t, s.ev(20, ins, 1, "", rev(20), str("again")))
	base := rev(20)
	for i := 21; i <= 21+apply.RecentRevisions; i++ {
		b.receive(t, s.ev(i, upd, 1, base, rev(i), nil))
		base = rev(i)
	}
	b.work(t)
	b.receive(t, s.ev(40, ins, 1, "", rev(20), str("again")))
	b.work(t)
	require.Equal(t, "CONFLICT_RECORDED", b.receipt(t, 40).Result)
}

// TestUrgentRuleOvertakes: events of an urgent rule (Inbox.SetUrgentRules)
// go to the urgent queue, which the applier runs on its own, so one is
// applied while a backlog of another rule, received before it, still
// waits; then the backlog is applied too.
func TestUrgentRuleOvertakes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	reg := shore.NewRegistry(b.d.Pool(), b.clock)
	require.NoError(t, reg.AllowRule(ctx, "ship-1", "alarm", 1, op))
	require.NoError(t, reg.RegisterRule(ctx, shore.Rule{ID: "alarm", Version: 1, SourceTable: "voyage",
		TargetTable: "voyage", KeyColumns: []string{"id"}, Columns: []string{"id", "note"}, InsertOverTombstone: true}, op))
	b.inbox.SetUrgentRules([]string{"alarm"})
	var s stream
	var backlog []*pb.ChangeEvent
	for n := 1; n <= 50; n++ {
		backlog = append(backlog, s.ev(n, ins, int64(n), "", rev(n), str("bulk")))
	}
	b.receive(t, backlog...)
	alarm := s.ev(100, ins, 1000, "", rev(100), str("alarm"))
	alarm.RuleId = "alarm"
	b.receive(t, alarm)

	n, err := b.applier.UrgentEngine().Work(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the urgent queue holds the alarm alone")
	require.Equal(t, applied, b.receipt(t, 100))
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM sync_event_receipt"), "the backlog still waits")
	r, ok := b.row(t, 1000)
	require.True(t, ok)
	require.Equal(t, "alarm", r.Note)

	_, err = b.applier.Work(ctx)
	require.NoError(t, err)
	for n := 1; n <= 50; n++ {
		require.Equal(t, applied, b.receipt(t, n), "event %d", n)
	}
}
