package client

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/relayclock"
)

// TestReceiptsOfCompactEventsRecordEveryResult: events the shore received
// are tracked by id and offset alone; their receipts — APPLIED or not —
// are stored with their results and move the terminal checkpoint, which
// is saved. A REJECTED or CONFLICT_RECORDED event is final on the shore:
// nothing of it is sent again, as for an event still held in full.
func TestReceiptsOfCompactEventsRecordEveryResult(t *testing.T) {
	t.Parallel()
	ctx, st, kc := clientParts(t)

	tp := TP{Topic: "t.a", Partition: 0}
	c := &Client{cfg: Config{NodeID: "ship", Store: st, Window: 100, MaxHeldBytes: 1 << 20, MaxTracked: 100},
		log: slog.New(slog.DiscardHandler), kc: kc, tr: newTracker(), committed: map[TP]int64{}}
	p := c.tr.part(tp, nil, 0)
	var evs []newEvent
	var ss []*slot
	var ids []string
	for off := range 4 {
		s := readySlot(tp, int64(off), eventID(off), 2)
		s.seq = uint64(off + 1)
		ss, ids = append(ss, s), append(ids, s.id)
		evs = append(evs, newEvent{ID: s.id, TP: tp, Offset: s.off, Seq: s.seq, RuleID: "r", State: StateReady,
			RawBytes: s.raw})
	}
	require.NoError(t, st.recordRead(ctx, evs, []Watermark{{TP: tp, ReadNext: 4, NextSeq: 5}}))
	for _, s := range ss {
		c.tr.add(p, s)
	}
	c.tr.receivedAll(ss)
	require.NoError(t, st.recordSent(ctx, sendResult{Received: ids}, 1, c.tr.dirtyMarks()))
	require.Len(t, c.tr.acked, 4)
	require.Empty(t, c.tr.byID)

	receipt := func(id string, r pb.EventResult) *pb.Receipt {
		return &pb.Receipt{OriginNodeId: "ship", EventId: id, Result: r}
	}
	rejected := receipt(ids[1], pb.EventResult_EVENT_RESULT_REJECTED)
	rejected.Reason = pb.RejectReason_REJECT_REASON_INVALID_FIELD
	conflict := receipt(ids[0], pb.EventResult_EVENT_RESULT_CONFLICT_RECORDED)
	conflict.ConflictId = "c-1"
	require.NoError(t, c.applyReceipts(ctx, []*pb.Receipt{
		rejected, conflict, receipt(ids[3], pb.EventResult_EVENT_RESULT_APPLIED),
		receipt("ffffffff-0000-5000-8000-ffffffffffff", pb.EventResult_EVENT_RESULT_APPLIED), // not ours
	}, "1"))
	marks, err := st.Watermarks(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(2), marks[tp].TerminalNext, "0 and 1 final, 2 waits: the checkpoint stops at 2")
	require.Equal(t, 1, c.Waiting())

	// The last one comes as a compact page would carry it: a bare id.
	compact := wire.CompactReceipts(&pb.ReceiptPage{NextCursor: "2", Receipts: []*pb.Receipt{
		receipt(ids[2], pb.EventResult_EVENT_RESULT_APPLIED)}}, "ship")
	require.Empty(t, compact.Receipts)
	rs, err := wire.ExpandReceipts(compact, "ship")
	require.NoError(t, err)
	require.NoError(t, c.applyReceipts(ctx, rs, compact.NextCursor))
	marks, err = st.Watermarks(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(4), marks[tp].TerminalNext)
	require.Zero(t, c.Waiting())
	counts, err := st.Counts(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"APPLIED": 2, "REJECTED": 1, "CONFLICT_RECORDED": 1}, counts.ByResult)
	require.Equal(t, int64(4), counts.ByState[StateTerminal])
	require.Equal(t, int64(4), c.Stats().Terminal)
}

// clientParts gives a test's context, a state store in a temporary file and
// a group client on a one-partition in-process cluster, all closed at the
// test's end.
func clientParts(t *testing.T) (context.Context, *Store, *kgo.Client) {
	t.Helper()
	_, kc := groupClient(t, 1)
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	st, err := OpenStore(ctx, filepath.Join(t.TempDir(), "client.db"), "g", relayclock.System{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return ctx, st, kc
}
