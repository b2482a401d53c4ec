package shore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

// TestInsertNewEventsPlainlyResendsSkipped: a batch of events none of which
// is stored is inserted by the plain insert; a batch that also brings an
// event stored before, or another event under a sequence number already
// used, makes that insert fail on a unique index and is inserted again with
// ON CONFLICT DO NOTHING in the same transaction — the resend answered
// RECEIVED, the taken number refused, the new events stored and released in
// their stream's order.
func TestInsertNewEventsPlainlyResendsSkipped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := inboxOf(t, b, "ship-1")
	ok := "RECEIVE_STATUS_RECEIVED/REJECT_REASON_UNSPECIFIED/"
	require.Equal(t, []string{ok, ok}, receiveAt(t, in, "ship-1", 1, event("ship-1", 1), event("ship-1", 2)))
	require.Zero(t, shore.InsertRetries(in), "new events only: the plain insert")

	require.Equal(t, []string{ok, ok}, receiveAt(t, in, "ship-1", 2, event("ship-1", 2), event("ship-1", 3)))
	require.EqualValues(t, 1, shore.InsertRetries(in), "a resend among new events")

	taken := event("ship-1", 9)
	taken.SourceSequence = 1
	require.Equal(t, []string{ok, "RECEIVE_STATUS_PERMANENT_REJECTED/REJECT_REASON_INCONSISTENT_FIELDS/source_sequence", ok},
		receiveAt(t, in, "ship-1", 3, event("ship-1", 4), taken, event("ship-1", 5)))
	require.EqualValues(t, 2, shore.InsertRetries(in), "a sequence number used by another event")

	require.Equal(t, []int{1, 2, 3, 4, 5}, released(t, b))
	require.Equal(t, streamRow{Next: 6}, stream(t, b, "ship-1"))
	var n int
	require.NoError(t, b.d.Pool().QueryRow(t.Context(), "SELECT count(*) FROM sync_inbox_event").Scan(&n))
	require.Equal(t, 5, n)

	require.Equal(t, []string{ok, ok}, receiveAt(t, in, "ship-1", 4, event("ship-1", 6), event("ship-1", 7)))
	require.EqualValues(t, 2, shore.InsertRetries(in), "new events only again")
}
