package shore_test

import (
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
	for _, q := range []string{"cursor=x", "cursor=1", "cursor=1.x", "limit=0x", "limit=5000", "cursor=-1.2"} {
		st, b := get(t, c, s.url+shore.PathReceipts+"?"+q)
		require.Equal(t, http.StatusBadRequest, st, q)
		require.Equal(t, pb.ErrorCode_ERROR_CODE_BAD_CURSOR, errorBody(t, b).Code, q)
	}
}
