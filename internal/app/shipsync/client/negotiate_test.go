package client

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/relayclock"
)

// TestUploadFallsBackToTheShoresVersion: a client told that the shore takes
// protocol 1.1 sends the columnar form; a shore that refuses it as a whole
// batch (a shore rolled back to a 1.0 build) makes the client send 1.0 from
// the next upload on, and the batch goes through; a later heartbeat that
// offers 1.1 again brings the columnar form back.
func TestUploadFallsBackToTheShoresVersion(t *testing.T) {
	t.Parallel()
	ctx, st, kc := clientParts(t)

	// A shore that knows only 1.0: it refuses a 1.1 batch as a malformed
	// error (400) and receives a 1.0 one, answering for the events the test
	// sends (their ids are known here; it does not decode the events).
	var mu sync.Mutex
	var seen []string // protocol_version of every upload
	var ids []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		var ub pb.UploadBatch
		if err := proto.Unmarshal(body, &ub); err != nil {
			http.Error(w, "not an UploadBatch", http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen = append(seen, ub.ProtocolVersion)
		want := append([]string(nil), ids...)
		mu.Unlock()
		if ub.ProtocolVersion != wire.CurrentVersion.String() {
			w.WriteHeader(http.StatusBadRequest)
			b, _ := proto.Marshal(&pb.ErrorBody{Code: pb.ErrorCode_ERROR_CODE_MALFORMED_BODY, Message: "no events_body"})
			_, _ = w.Write(b)
			return
		}
		resp := &pb.UploadResponse{}
		for _, id := range want {
			resp.Statuses = append(resp.Statuses, &pb.EventStatus{EventId: id, Status: pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED})
		}
		b, _ := proto.Marshal(resp)
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	tr, err := NewTransport(srv.URL, nil, 0)
	require.NoError(t, err)
	t.Cleanup(tr.Close)
	codec, err := wire.NewCodec(wire.Config{})
	require.NoError(t, err)

	tp := TP{Topic: "t.a", Partition: 0}
	c := &Client{cfg: Config{NodeID: "ship", Store: st, Codec: codec, Transport: tr, Clock: relayclock.System{}, Window: 100,
		MaxHeldBytes: 1 << 20, MaxTracked: 100},
		log: slog.New(slog.DiscardHandler), kc: kc, tr: newTracker(), committed: map[TP]int64{}, lanes: map[string]*partition{}}
	p := c.tr.part(tp, nil, 0)
	batch := func(from int) []*slot {
		var ss []*slot
		var evs []newEvent
		mu.Lock()
		ids = ids[:0]
		for off := from; off < from+3; off++ {
			s := readySlot(tp, int64(off), eventID(off), 2)
			s.seq = uint64(off + 1)
			ss, ids = append(ss, s), append(ids, s.id)
			evs = append(evs, newEvent{ID: s.id, TP: tp, Offset: s.off, Seq: s.seq, RuleID: "r", State: StateReady, RawBytes: s.raw})
		}
		mu.Unlock()
		require.NoError(t, st.recordRead(ctx, evs, []Watermark{{TP: tp, ReadNext: int64(from + 3), NextSeq: uint64(from + 4)}}))
		for _, s := range ss {
			c.tr.add(p, s)
		}
		return ss
	}

	c.uploadMinor.Store(wire.ColumnarVersion.Minor) // a heartbeat answer offered 1.1
	first := batch(0)
	_, err = c.send(ctx, first)
	var re *RequestError
	require.ErrorAs(t, err, &re)
	require.Equal(t, http.StatusBadRequest, re.Status)
	require.False(t, re.Retryable)
	require.Zero(t, c.uploadMinor.Load(), "the refusal of a 1.1 batch turns the client back to 1.0")

	again, err := c.send(ctx, first)
	require.NoError(t, err, "the same events, sent again as 1.0")
	require.Empty(t, again)
	require.Equal(t, int64(3), c.recvd.Load())

	c.uploadMinor.Store(wire.ColumnarVersion.Minor) // offered again
	_, err = c.send(ctx, batch(3))
	require.ErrorAs(t, err, &re)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{wire.ColumnarVersion.String(), wire.CurrentVersion.String(), wire.ColumnarVersion.String()}, seen)
}

// TestReceiptPageFollowsTheShore: the client asks for the receipt page a
// heartbeat answer allowed, up to its own bound, and for the size every
// shore serves until one answered.
func TestReceiptPageFollowsTheShore(t *testing.T) {
	t.Parallel()
	c := &Client{}
	require.Equal(t, ReceiptPageOld, c.receiptLimit(), "no answer yet (or a shore that does not say)")
	for said, want := range map[uint32]int{200: 200, 10000: 10000, 50000: ReceiptPageMax} {
		c.receiptPage.Store(said)
		require.Equal(t, want, c.receiptLimit(), "the shore said %d", said)
	}
}
