package apply_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// TestSnapshotUpsert writes SNAPSHOT rows without a base revision through
// the applier: an unknown record is inserted; a live record at another
// revision is updated over the revision the shore knows; a row at the
// snapshot's revision, and one the record moved past, write nothing and are
// APPLIED; a row whose target changed behind the shore's back (a local
// write the head has not followed) is a conflict and writes nothing.
func TestSnapshotUpsert(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var s stream
	snap := pb.Operation_OPERATION_SNAPSHOT
	b.receive(t,
		s.ev(1, snap, 1, "", rev(1), str("snapshot one")), // unknown: inserted
		s.ev(2, ins, 2, "", rev(2), str("two")),
		s.ev(3, snap, 2, "", rev(3), str("snapshot two")), // live at rev(2): updated over it
		s.ev(4, snap, 2, "", rev(3), str("snapshot two")), // the same row again under another id: nothing written
		s.ev(5, upd, 2, rev(3), rev(5), str("two, later")),
		s.ev(6, snap, 2, "", rev(3), str("snapshot two")), // older than the record now: nothing written
	)
	b.work(t)
	for n := 1; n <= 6; n++ {
		require.Equal(t, applied, b.receipt(t, n), "event %d", n)
	}
	r, ok := b.row(t, 1)
	require.True(t, ok)
	require.Equal(t, row{Note: "snapshot one", Revision: rev(1), EventID: uuidN(1)}, r)
	r, ok = b.row(t, 2)
	require.True(t, ok)
	require.Equal(t, row{Note: "two, later", Revision: rev(5), EventID: uuidN(5)}, r, "a snapshot never overwrites a newer revision")
	require.Equal(t, 4, b.mcount(t, "SELECT count(*) FROM sync_applied_event"), "writes: 1, 2, 3, 5")

	// A local write on the shore the head has not followed: the snapshot's
	// update over the head's revision changes nothing and is a conflict.
	_, err := b.mdb.ExecContext(t.Context(), "UPDATE voyage SET note = 'local', _sync_revision = ? WHERE id = 1", rev(50))
	require.NoError(t, err)
	b.receive(t, s.ev(7, snap, 1, "", rev(7), str("snapshot one, again")))
	b.work(t)
	require.Equal(t, receipt{Result: "CONFLICT_RECORDED", Conflict: true}, b.receipt(t, 7))
	r, ok = b.row(t, 1)
	require.True(t, ok)
	require.Equal(t, "local", r.Note, "a conflict never writes")
}
