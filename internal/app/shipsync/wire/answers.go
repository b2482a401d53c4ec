package wire

import (
	"errors"
	"fmt"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// Compact answers. A client that sends HeaderAnswers: AnswersCompact gets
// upload answers that name only the events not RECEIVED and receipt pages
// that carry each plain APPLIED result as the 16 bytes of its event id.
// Without the header every answer is the full form, so a client and a
// shore of different releases still understand each other. On a weak link
// the full answers coming down were as large as the uploads going up (each
// names every event id as 36 characters of text).
const (
	HeaderAnswers  = "X-Sync-Answers"
	AnswersCompact = "compact"
)

// ErrBadAnswer is a compact answer that does not fit the request it
// answers (a status for an event not in the batch, an id list that is not
// a whole number of ids).
var ErrBadAnswer = errors.New("wire: answer does not fit the request")

// CompactStatuses returns resp in its compact form: the statuses that are
// not RECEIVED, in their order, and OthersReceived set. resp is not changed.
func CompactStatuses(resp *pb.UploadResponse) *pb.UploadResponse {
	out := &pb.UploadResponse{BatchId: resp.BatchId, ReceivedAt: resp.ReceivedAt, OthersReceived: true}
	for _, st := range resp.Statuses {
		if st.Status != pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED {
			out.Statuses = append(out.Statuses, st)
		}
	}
	return out
}

// ExpandStatuses returns one status per id of the batch, in the batch's
// order (ids: the event ids as sent). A full answer is returned as it is; a
// compact one is filled in with RECEIVED for every event it does not name.
// A compact answer naming an event that is not in the batch, or naming
// them out of the batch's order, is ErrBadAnswer.
func ExpandStatuses(resp *pb.UploadResponse, ids []string) ([]*pb.EventStatus, error) {
	if !resp.OthersReceived {
		return resp.Statuses, nil
	}
	out := make([]*pb.EventStatus, len(ids))
	next := 0
	for i, id := range ids {
		if next < len(resp.Statuses) && resp.Statuses[next].EventId == id {
			out[i] = resp.Statuses[next]
			next++
			continue
		}
		out[i] = &pb.EventStatus{EventId: id, Status: pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED}
	}
	if next < len(resp.Statuses) {
		return nil, fmt.Errorf("%w: %d of %d statuses name no event of the batch in its order", ErrBadAnswer,
			len(resp.Statuses)-next, len(resp.Statuses))
	}
	return out, nil
}

// CompactReceipts returns page in its compact form: the receipts of node
// that are a plain APPLIED (no reason, no conflict, an event id in
// canonical UUID form) become 16 bytes each of AppliedEventIds; every other
// receipt stays whole. page is not changed.
func CompactReceipts(page *pb.ReceiptPage, node string) *pb.ReceiptPage {
	out := &pb.ReceiptPage{NextCursor: page.NextCursor, More: page.More}
	for _, r := range page.Receipts {
		if r.OriginNodeId == node && r.Result == pb.EventResult_EVENT_RESULT_APPLIED &&
			r.Reason == pb.RejectReason_REJECT_REASON_UNSPECIFIED && r.ConflictId == "" {
			if u, ok := ParseUUID(r.EventId); ok {
				out.AppliedEventIds = append(out.AppliedEventIds, u[:]...)
				continue
			}
		}
		out.Receipts = append(out.Receipts, r)
	}
	return out
}

// ExpandReceipts returns every receipt of page: the whole ones, then one
// APPLIED receipt of node per id in AppliedEventIds (without applied
// revision or decision time, which the compact form leaves out). An id list
// that is not a multiple of 16 bytes is ErrBadAnswer.
func ExpandReceipts(page *pb.ReceiptPage, node string) ([]*pb.Receipt, error) {
	ids := page.AppliedEventIds
	if len(ids)%16 != 0 {
		return nil, fmt.Errorf("%w: applied_event_ids of %d bytes, not a multiple of 16", ErrBadAnswer, len(ids))
	}
	if len(ids) == 0 {
		return page.Receipts, nil
	}
	out := make([]*pb.Receipt, 0, len(page.Receipts)+len(ids)/16)
	out = append(out, page.Receipts...)
	for len(ids) > 0 {
		out = append(out, &pb.Receipt{OriginNodeId: node, EventId: FormatUUID([16]byte(ids[:16])),
			Result: pb.EventResult_EVENT_RESULT_APPLIED})
		ids = ids[16:]
	}
	return out, nil
}
