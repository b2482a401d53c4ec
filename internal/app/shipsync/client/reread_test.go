package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// TestReceiptDuringReReadMovesCheckpoint: after a restart the client reads
// again the events an earlier life had uploaded (RECEIVED in the store),
// while the receipts loop pulls their results. A receipt that lands
// between the ingest reading an event's stored state and tracking the
// event must still end it: the event must not be tracked as waiting for a
// receipt that was already pulled. Found by the two-way crash harness
// (TestShipsyncBothCrash): after the client's last life every event was
// TERMINAL in the store while a partition's terminal checkpoint stayed at
// the one re-read event for ever, so the consumer group was never
// committed past it.
func TestReceiptDuringReReadMovesCheckpoint(t *testing.T) {
	t.Parallel()
	ctx, st, kc := clientParts(t)

	// Life 1 read three events, uploaded them and had them received, then
	// died before any receipt.
	life1 := rereadClient(t, st)
	recs := []*kgo.Record{record(0, 1, rulesT0), record(1, 2, rulesT0), record(2, 3, rulesT0)}
	require.NoError(t, life1.ingest(ctx, life1.decode(recs)))
	ids := storedIDs(ctx, t, st)
	require.Len(t, ids, 3)
	require.NoError(t, st.recordSent(ctx, sendResult{Received: ids}, 1, nil))

	// Life 2 reads them again from the group's offset 0. The receipt of
	// the middle one is pulled and stored while the ingest has read the
	// stored states and not yet tracked the events.
	life2 := rereadClient(t, st)
	life2.kc = kc
	var err error
	life2.saved, err = st.Watermarks(ctx)
	require.NoError(t, err)
	applied := func(id string) *pb.Receipt {
		return &pb.Receipt{OriginNodeId: "ship-1", EventId: id, Result: pb.EventResult_EVENT_RESULT_APPLIED}
	}
	pulled := make(chan error, 1)
	life2.afterStates = func() {
		life2.afterStates = nil
		go func() { pulled <- life2.applyReceipts(ctx, []*pb.Receipt{applied(ids[1])}, "1") }()
		require.Eventually(t, func() bool { return storedState(ctx, t, st, ids[1]) == StateTerminal },
			10*time.Second, 5*time.Millisecond, "the receipt is stored while the ingest is between its steps")
	}
	require.NoError(t, life2.ingest(ctx, life2.decode(recs)))
	require.NoError(t, <-pulled)
	require.Nil(t, life2.afterStates, "the ingest passed the seam")

	// The other two receipts come in the ordinary way.
	require.NoError(t, life2.applyReceipts(ctx, []*pb.Receipt{applied(ids[0]), applied(ids[2])}, "2"))
	require.Zero(t, life2.Waiting(), "no event waits for a receipt already pulled")
	marks, err := st.Watermarks(ctx)
	require.NoError(t, err)
	tp := TP{Topic: "sync.cdc.ops.fuel", Partition: 0}
	require.Equal(t, int64(3), marks[tp].TerminalNext, "every event is terminal: the checkpoint is past them all")
	counts, err := st.Counts(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{StateTerminal: 3}, counts.ByState)
}

// rereadClient builds a client over st: one life of the process, its
// memory new, the state file the one the earlier lives used.
func rereadClient(t *testing.T, st *Store) *Client {
	t.Helper()
	tr, err := NewTransport("http://127.0.0.1:1", nil, 0)
	require.NoError(t, err)
	t.Cleanup(tr.Close)
	return fuelClient(t, st, tr)
}

// storedIDs returns the ids of the stored uplink events in position order.
func storedIDs(ctx context.Context, t *testing.T, st *Store) []string {
	t.Helper()
	evs, err := st.Events(ctx)
	require.NoError(t, err)
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	return ids
}

// storedState returns event id's stored state.
func storedState(ctx context.Context, t *testing.T, st *Store, id string) string {
	t.Helper()
	var s string
	require.NoError(t, st.db.QueryRowContext(ctx, "SELECT state FROM event_state WHERE event_id = ?", id).Scan(&s))
	return s
}

// TestAnswerAfterReceiptChangesNothing: an event's receipt can come while
// a resend of it is in flight (the first upload's answer was lost). The
// resend's answer must then leave the final event alone: neither sent
// again nor blocked, the checkpoint past it.
func TestAnswerAfterReceiptChangesNothing(t *testing.T) {
	t.Parallel()
	for _, status := range []pb.ReceiveStatus{pb.ReceiveStatus_RECEIVE_STATUS_RETRYABLE_FAILURE,
		pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED} {
		t.Run(status.String(), func(t *testing.T) {
			t.Parallel()
			ctx, st, kc := clientParts(t)
			c := rereadClient(t, st)
			c.kc = kc
			require.NoError(t, c.ingest(ctx, c.decode([]*kgo.Record{record(0, 1, rulesT0)})))
			ids := storedIDs(ctx, t, st)
			require.Len(t, ids, 1)
			c.mu.Lock()
			s := c.tr.byID[ids[0]]
			c.mu.Unlock()
			require.NotNil(t, s)

			require.NoError(t, c.applyReceipts(ctx, []*pb.Receipt{{OriginNodeId: "ship-1", EventId: ids[0],
				Result: pb.EventResult_EVENT_RESULT_APPLIED}}, "1"))
			c.mu.Lock()
			res, again, first := c.answer([]*slot{s}, []*pb.EventStatus{{EventId: ids[0], Status: status,
				Reason: pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS}}, rulesT0)
			tp := TP{Topic: "sync.cdc.ops.fuel", Partition: 0}
			terminalNext := c.tr.parts[tp].wm.TerminalNext
			c.mu.Unlock()
			require.Empty(t, again, "not sent again")
			require.Empty(t, res.Retry)
			require.Empty(t, res.Blocked)
			require.Zero(t, first)
			require.Equal(t, StateTerminal, s.state)
			require.Zero(t, c.Stats().Blocked)
			require.Zero(t, c.Waiting())
			require.Equal(t, int64(1), terminalNext, "the checkpoint is past the event")
			require.Equal(t, StateTerminal, storedState(ctx, t, st, ids[0]))
		})
	}
}
