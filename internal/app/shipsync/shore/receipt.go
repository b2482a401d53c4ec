package shore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// Receipt page sizes. The heartbeat answer tells nodes ReceiptPageMax
// (shores before it served at most ReceiptPageMaxOld): on a link with a
// long round trip a node pulls one page per round trip, so the page size
// bounds how fast receipts come down. A compact page of 10,000 plain
// results is ≈ 160 KB.
const (
	ReceiptPageDefault = 500
	ReceiptPageMax     = 10000
	ReceiptPageMaxOld  = 1000
)

// ErrBadCursor: a receipts cursor this shore did not make.
var ErrBadCursor = errors.New("shore: malformed receipts cursor")

// Receipts returns up to limit (1–ReceiptPageMax; 0: ReceiptPageDefault)
// terminal results of node's events after cursor ("" for the first page),
// oldest first, and the cursor of the next page. A receipt is served once
// its transaction and every older one are committed, so a node that stores
// next_cursor after processing a page never misses one. An error wraps
// ErrBadCursor or ErrStore.
func (in *Inbox) Receipts(ctx context.Context, node, cursor string, limit int) (*pb.ReceiptPage, error) {
	if limit == 0 {
		limit = ReceiptPageDefault
	}
	if limit < 1 || limit > ReceiptPageMax {
		return nil, fmt.Errorf("%w: limit must be 1–%d", ErrBadCursor, ReceiptPageMax)
	}
	txid, id, err := parseCursor(cursor)
	if err != nil {
		return nil, err
	}
	rows, err := in.pool.Query(ctx, stmts["ReceiptPage"], node, txid, id, limit+1)
	if err != nil {
		return nil, fmt.Errorf("%w: receipts: %w", ErrStore, err)
	}
	page := &pb.ReceiptPage{NextCursor: cursor}
	var rid int64
	var tx, eventID, result, reason, conflict, applied string
	var at time.Time
	n := 0
	_, err = pgx.ForEachRow(rows, []any{&rid, &tx, &eventID, &result, &reason, &conflict, &applied, &at}, func() error {
		n++
		if n > limit {
			page.More = true
			return nil
		}
		page.Receipts = append(page.Receipts, &pb.Receipt{OriginNodeId: node, EventId: eventID,
			Result: pb.EventResult(pb.EventResult_value["EVENT_RESULT_"+result]),
			Reason: pb.RejectReason(pb.RejectReason_value[reason]), ConflictId: conflict, AppliedRevision: applied,
			DecidedAt: timestamppb.New(at)})
		page.NextCursor = tx + "." + strconv.FormatInt(rid, 10)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: receipts: %w", ErrStore, err)
	}
	return page, nil
}

// parseCursor reads "txid.receipt_id" ("" is the start).
func parseCursor(c string) (txid string, id int64, err error) {
	if c == "" {
		return "0", 0, nil
	}
	t, i, ok := strings.Cut(c, ".")
	if !ok || len(c) > 41 {
		return "", 0, ErrBadCursor
	}
	if _, err := strconv.ParseUint(t, 10, 64); err != nil {
		return "", 0, ErrBadCursor
	}
	id, err = strconv.ParseInt(i, 10, 64)
	if err != nil || id < 0 {
		return "", 0, ErrBadCursor
	}
	return t, id, nil
}
