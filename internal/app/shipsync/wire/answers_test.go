package wire_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

var answeredAt = time.Date(2026, 12, 2, 23, 50, 0, 0, time.UTC)

func eventID(i int) string { return fmt.Sprintf("0000%04x-1111-5222-8333-%012x", i, i*7919) }

// TestStatusesCompactRoundTrip: a compact upload answer names only the
// events not RECEIVED, expands back to the full answer, and is smaller.
func TestStatusesCompactRoundTrip(t *testing.T) {
	t.Parallel()
	ids := make([]string, 500)
	full := &pb.UploadResponse{BatchId: "b", ReceivedAt: timestamppb.New(answeredAt)}
	for i := range ids {
		ids[i] = eventID(i)
		st := &pb.EventStatus{EventId: ids[i], Status: pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED}
		switch i {
		case 7:
			st.Status, st.Reason = pb.ReceiveStatus_RECEIVE_STATUS_RETRYABLE_FAILURE, pb.RejectReason_REJECT_REASON_OVERLOADED
		case 300:
			st.Status, st.Reason, st.Field = pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED,
				pb.RejectReason_REJECT_REASON_COLUMN_NOT_ALLOWED, "after.columns[1].name"
		}
		full.Statuses = append(full.Statuses, st)
	}
	compact := wire.CompactStatuses(full)
	require.True(t, compact.OthersReceived)
	require.Len(t, compact.Statuses, 2)
	require.Len(t, full.Statuses, 500, "the full answer is not changed")
	got, err := wire.ExpandStatuses(compact, ids)
	require.NoError(t, err)
	require.Len(t, got, len(full.Statuses))
	for i := range got {
		require.True(t, proto.Equal(full.Statuses[i], got[i]), "status %d: %v, want %v", i, got[i], full.Statuses[i])
	}
	fullSize, compactSize := proto.Size(full), proto.Size(compact)
	require.Less(t, compactSize*50, fullSize, "compact %d bytes against full %d", compactSize, fullSize)

	// A full answer is taken as it is.
	got, err = wire.ExpandStatuses(full, ids)
	require.NoError(t, err)
	require.Equal(t, full.Statuses, got)

	// A compact answer naming an event outside the batch, or out of the
	// batch's order, does not fit it.
	bad := &pb.UploadResponse{OthersReceived: true, Statuses: []*pb.EventStatus{{EventId: eventID(9999)}}}
	_, err = wire.ExpandStatuses(bad, ids)
	require.ErrorIs(t, err, wire.ErrBadAnswer)
	bad.Statuses = []*pb.EventStatus{{EventId: ids[300]}, {EventId: ids[7]}}
	_, err = wire.ExpandStatuses(bad, ids)
	require.ErrorIs(t, err, wire.ErrBadAnswer)
}

// TestReceiptsCompactRoundTrip: plain APPLIED receipts of the node travel
// as 16 bytes each; every other receipt (another result, a reason, a
// conflict, another node's, an id not in canonical form) stays whole.
func TestReceiptsCompactRoundTrip(t *testing.T) {
	t.Parallel()
	const node = "ship-7"
	page := &pb.ReceiptPage{NextCursor: "42.9", More: true}
	for i := range 1000 {
		page.Receipts = append(page.Receipts, &pb.Receipt{OriginNodeId: node, EventId: eventID(i),
			Result: pb.EventResult_EVENT_RESULT_APPLIED, AppliedRevision: eventID(i + 5000), DecidedAt: timestamppb.New(answeredAt)})
	}
	kept := []*pb.Receipt{
		{OriginNodeId: node, EventId: eventID(2000), Result: pb.EventResult_EVENT_RESULT_CONFLICT_RECORDED, ConflictId: "c-1"},
		{OriginNodeId: node, EventId: eventID(2001), Result: pb.EventResult_EVENT_RESULT_REJECTED,
			Reason: pb.RejectReason_REJECT_REASON_RULE_UNKNOWN},
		{OriginNodeId: "other", EventId: eventID(2002), Result: pb.EventResult_EVENT_RESULT_APPLIED},
		{OriginNodeId: node, EventId: "0000ABCD-1111-5222-8333-000000000001", Result: pb.EventResult_EVENT_RESULT_APPLIED},
	}
	page.Receipts = append(page.Receipts, kept...)
	compact := wire.CompactReceipts(page, node)
	require.Len(t, compact.AppliedEventIds, 16*1000)
	require.Equal(t, "42.9", compact.NextCursor)
	require.True(t, compact.More)
	require.Len(t, compact.Receipts, len(kept))
	for i := range kept {
		require.True(t, proto.Equal(kept[i], compact.Receipts[i]))
	}
	require.Less(t, proto.Size(compact)*3, proto.Size(page), "compact %d bytes against full %d", proto.Size(compact), proto.Size(page))

	got, err := wire.ExpandReceipts(compact, node)
	require.NoError(t, err)
	require.Len(t, got, len(page.Receipts))
	seen := map[string]*pb.Receipt{}
	for _, r := range got {
		seen[r.EventId] = r
	}
	for _, r := range page.Receipts {
		g := seen[r.EventId]
		require.NotNil(t, g, "receipt of %s lost", r.EventId)
		require.Equal(t, r.OriginNodeId, g.OriginNodeId)
		require.Equal(t, r.Result, g.Result)
		require.Equal(t, r.Reason, g.Reason)
		require.Equal(t, r.ConflictId, g.ConflictId)
	}

	// A full page is taken as it is; a list that is not whole ids is refused.
	got, err = wire.ExpandReceipts(page, node)
	require.NoError(t, err)
	require.Equal(t, page.Receipts, got)
	_, err = wire.ExpandReceipts(&pb.ReceiptPage{AppliedEventIds: make([]byte, 17)}, node)
	require.ErrorIs(t, err, wire.ErrBadAnswer)
}

// FuzzExpandAnswers: whatever bytes a shore sends as an answer, expanding
// it never panics, and what it returns fits the request (one status per
// event of the batch, in its order).
func FuzzExpandAnswers(f *testing.F) {
	ids := []string{eventID(1), eventID(2), eventID(3)}
	full := &pb.UploadResponse{BatchId: "b"}
	for _, id := range ids {
		full.Statuses = append(full.Statuses, &pb.EventStatus{EventId: id, Status: pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED})
	}
	full.Statuses[1].Status = pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED
	for _, m := range []proto.Message{full, wire.CompactStatuses(full),
		wire.CompactReceipts(&pb.ReceiptPage{Receipts: []*pb.Receipt{{OriginNodeId: "n", EventId: ids[0],
			Result: pb.EventResult_EVENT_RESULT_APPLIED}}}, "n")} {
		b, err := proto.Marshal(m)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var ur pb.UploadResponse
		if proto.Unmarshal(b, &ur) == nil {
			if got, err := wire.ExpandStatuses(&ur, ids); err == nil && ur.OthersReceived {
				require.Len(t, got, len(ids))
				for i := range ids {
					require.Equal(t, ids[i], got[i].EventId)
				}
			}
		}
		var page pb.ReceiptPage
		if proto.Unmarshal(b, &page) == nil {
			if got, err := wire.ExpandReceipts(&page, "n"); err == nil {
				require.Len(t, got, len(page.Receipts)+len(page.AppliedEventIds)/16)
			}
		}
	})
}
