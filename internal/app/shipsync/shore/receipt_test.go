package shore_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

// get fetches url with c and returns the status and body.
func get(t *testing.T, c *http.Client, u string) (int, []byte) {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// TestReceiptsFeed: a node pages through its own receipts by cursor; a
// receipt whose transaction is still open holds back every later one until
// it commits, so a cursor never passes it.
func TestReceiptsFeed(t *testing.T) {
	t.Parallel()
	// The test polls while a neighbour's transaction holds receipts back;
	// on a loaded machine that outlasts the node's default request budget
	// (20/s, burst 40) and the polls would be answered 429.
	s := serve(t, setup(t), func(c *shore.Config) { c.Limits.NodeRate, c.Limits.NodeBurst = 1000, 1000 })
	s.addNode(t, "ship-1")
	s.addNode(t, "ship-2")
	c := s.client(t, "node-ship-1")
	ctx := t.Context()
	add := func(node string, n int, result string) {
		_, err := s.d.Pool().Exec(ctx, `INSERT INTO sync_event_receipt (origin_node_id, event_id, result, reason, decided_at)
			VALUES ($1, $2, $3, $4, $5)`, node, uuidN(n), result, map[string]string{"REJECTED": "REJECT_REASON_TARGET_REFUSED"}[result], t0)
		require.NoError(t, err)
	}
	for n := 1; n <= 5; n++ {
		add("ship-1", n, "APPLIED")
	}
	add("ship-2", 6, "APPLIED")
	add("ship-1", 7, "REJECTED")

	page := func(cursor string, limit int) *pb.ReceiptPage {
		t.Helper()
		st, b := get(t, c, fmt.Sprintf("%s%s?cursor=%s&limit=%d", s.url, shore.PathReceipts, url.QueryEscape(cursor), limit))
		require.Equal(t, http.StatusOK, st, string(b))
		var p pb.ReceiptPage
		require.NoError(t, proto.Unmarshal(b, &p))
		return &p
	}
	// The horizon is the whole cluster's: a transaction of a test running
	// beside this one may hold receipts back for a moment. Wait for want.
	pageOf := func(cursor string, limit, want int) *pb.ReceiptPage {
		t.Helper()
		var p *pb.ReceiptPage
		require.Eventually(t, func() bool {
			p = page(cursor, limit)
			return len(p.Receipts) >= want
		}, 10*time.Second, 5*time.Millisecond)
		return p
	}
	ids := func(p *pb.ReceiptPage) []string {
		var out []string
		for _, r := range p.Receipts {
			require.Equal(t, "ship-1", r.OriginNodeId, "only the caller's own receipts")
			out = append(out, r.EventId)
		}
		return out
	}
	// Once all six are served they stay served (the horizon only moves
	// on), so the pages below do not depend on other tests' transactions.
	pageOf("", 10, 6)
	p1 := pageOf("", 4, 4)
	require.Equal(t, []string{uuidN(1), uuidN(2), uuidN(3), uuidN(4)}, ids(p1))
	require.True(t, p1.More)
	require.Equal(t, pb.EventResult_EVENT_RESULT_APPLIED, p1.Receipts[0].Result)
	p2 := pageOf(p1.NextCursor, 4, 2)
	require.Equal(t, []string{uuidN(5), uuidN(7)}, ids(p2))
	require.False(t, p2.More)
	require.Equal(t, pb.EventResult_EVENT_RESULT_REJECTED, p2.Receipts[1].Result)
	require.Equal(t, pb.RejectReason_REJECT_REASON_TARGET_REFUSED, p2.Receipts[1].Reason)

	// An open transaction's receipt (8), then a committed one (9): neither
	// is served until 8 commits — then both, in order.
	tx, err := s.d.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `INSERT INTO sync_event_receipt (origin_node_id, event_id, result, decided_at) VALUES ('ship-1', $1, 'APPLIED', $2)`, uuidN(8), t0)
	require.NoError(t, err)
	add("ship-1", 9, "APPLIED")
	p3 := page(p2.NextCursor, 10)
	require.Empty(t, p3.Receipts)
	require.Equal(t, p2.NextCursor, p3.NextCursor, "an empty page keeps the cursor")
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, []string{uuidN(8), uuidN(9)}, ids(pageOf(p3.NextCursor, 10, 2)))

	// Bad cursors and limits are refused with BAD_CURSOR.
	for _, q := range []string{"cursor=x", "cursor=1", "cursor=1.x", "limit=0x", "limit=10001", "cursor=-1.2"} {
		st, b := get(t, c, s.url+shore.PathReceipts+"?"+q)
		require.Equal(t, http.StatusBadRequest, st, q)
		require.Equal(t, pb.ErrorCode_ERROR_CODE_BAD_CURSOR, errorBody(t, b).Code, q)
	}
}

// TestAnswersCompactOnRequest: with X-Sync-Answers: compact the upload
// answer names only the events not RECEIVED and the receipt page carries
// plain APPLIED results as bare ids; without the header both are whole. The
// two forms expand to the same statuses and receipts.
func TestAnswersCompactOnRequest(t *testing.T) {
	t.Parallel()
	s := serve(t, setup(t), func(c *shore.Config) { c.Limits.NodeRate, c.Limits.NodeBurst = 1000, 1000 })
	s.addNode(t, "ship-1")
	c := s.client(t, "node-ship-1")
	ctx := t.Context()
	do := func(method, path string, body []byte, compact bool) []byte {
		t.Helper()
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, s.url+path, rd)
		require.NoError(t, err)
		req.Header.Set("Content-Type", shore.ContentType)
		if compact {
			req.Header.Set(wire.HeaderAnswers, wire.AnswersCompact)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
		require.Contains(t, resp.Header.Values("Vary"), "Accept-Encoding, "+wire.HeaderAnswers)
		return b
	}

	// 30 events, the 20th of a rule the node may not write: refused.
	evs := make([]*pb.ChangeEvent, 30)
	ids := make([]string, len(evs))
	for i := range evs {
		evs[i] = event("ship-1", i+1)
		ids[i] = evs[i].EventId
	}
	evs[19].RuleId = "crew-list"
	body := s.encode(t, "ship-1", uuidN(400), evs...)
	full := uploadResponse(t, do(http.MethodPost, shore.PathBatches, body, false))
	compact := uploadResponse(t, do(http.MethodPost, shore.PathBatches, body, true)) // the resend: the stored answer
	require.False(t, full.OthersReceived)
	require.Len(t, full.Statuses, 30)
	require.True(t, compact.OthersReceived)
	require.Len(t, compact.Statuses, 1)
	require.Equal(t, pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED, compact.Statuses[0].Status)
	got, err := wire.ExpandStatuses(compact, ids)
	require.NoError(t, err)
	for i := range got {
		require.True(t, proto.Equal(full.Statuses[i], got[i]), "status %d", i)
	}

	for n := 1; n <= 6; n++ {
		result, reason := "APPLIED", ""
		if n == 4 {
			result, reason = "REJECTED", "REJECT_REASON_TARGET_REFUSED"
		}
		_, err := s.d.Pool().Exec(ctx, `INSERT INTO sync_event_receipt (origin_node_id, event_id, result, reason, decided_at)
			VALUES ('ship-1', $1, $2, $3, $4)`, uuidN(1000+n), result, reason, t0)
		require.NoError(t, err)
	}
	var fullPage, compactPage pb.ReceiptPage
	require.Eventually(t, func() bool {
		require.NoError(t, proto.Unmarshal(do(http.MethodGet, shore.PathReceipts+"?limit=10", nil, false), &fullPage))
		return len(fullPage.Receipts) == 6
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, proto.Unmarshal(do(http.MethodGet, shore.PathReceipts+"?limit=10", nil, true), &compactPage))
	require.Len(t, compactPage.Receipts, 1, "only the REJECTED one stays whole")
	require.Len(t, compactPage.AppliedEventIds, 5*16)
	require.Equal(t, fullPage.NextCursor, compactPage.NextCursor)
	rs, err := wire.ExpandReceipts(&compactPage, "ship-1")
	require.NoError(t, err)
	want := map[string]pb.EventResult{}
	for _, r := range fullPage.Receipts {
		want[r.EventId] = r.Result
	}
	gotResults := map[string]pb.EventResult{}
	for _, r := range rs {
		gotResults[r.EventId] = r.Result
	}
	require.Equal(t, want, gotResults)
}
