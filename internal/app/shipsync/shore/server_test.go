package shore_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/pki"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/relayhttp"
)

func uuidN(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", n) }

// event returns a valid INSERT of node with event id n.
func event(node string, n int) *pb.ChangeEvent {
	return &pb.ChangeEvent{
		SchemaVersion:     "1.0",
		EventId:           uuidN(n),
		OriginNodeId:      node,
		SourceConnectorId: "dbz-1",
		SourcePartition:   "ship.cdc.ops.voyage/0",
		SourcePosition:    proto.Uint64(uint64(n)),
		SourceSequence:    uint64(n),
		RuleId:            "voyage-log",
		RuleVersion:       1,
		Database:          "ops",
		Table:             "voyage",
		PrimaryKey:        []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: int64(n)}}},
		Operation:         pb.Operation_OPERATION_INSERT,
		After: &pb.RowImage{Columns: []*pb.ColumnValue{
			{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: int64(n)}},
			{Name: "note", Value: &pb.ColumnValue_StringValue{StringValue: "hello"}},
		}},
		ResultRevision: "66666666-7777-4888-9999-aaaaaaaaaaaa",
		CapturedAt:     timestamppb.New(t0),
		TraceId:        "trace-1",
	}
}

// shoreServer is a running shore over real mutual TLS on loopback.
type shoreServer struct {
	*bundle
	url   string
	codec *wire.Codec
	h     *shore.Handler
}

func serve(t testing.TB, b *bundle, mutate func(*shore.Config)) *shoreServer {
	t.Helper()
	codec, err := wire.NewCodec(wire.Config{})
	require.NoError(t, err)
	inbox, err := shore.NewInbox(b.d, codec, b.clock)
	require.NoError(t, err)
	cfg := shore.Config{Registry: b.reg, Inbox: inbox, Codec: codec, Clock: b.clock}
	if mutate != nil {
		mutate(&cfg)
	}
	h, err := shore.NewHandler(cfg)
	require.NoError(t, err)
	cert, err := tls.LoadX509KeyPair(filepath.Join(b.pki.Path, pki.ServerCertFile), filepath.Join(b.pki.Path, pki.ServerKeyFile))
	require.NoError(t, err)
	srv, err := relayhttp.Listen(relayhttp.Config{Name: "shore", Addr: "127.0.0.1:0", Handler: h,
		TLS: shore.ServerTLS(cert, b.caPool(t), b.clock), MaxBodyBytes: 8 << 20})
	require.NoError(t, err)
	go func() { _ = srv.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return &shoreServer{bundle: b, url: srv.URL(), codec: codec, h: h}
}

func (b *bundle) caPool(t testing.TB) *x509.CertPool {
	t.Helper()
	ca, err := pki.ReadCert(filepath.Join(b.pki.Path, pki.CACertFile))
	require.NoError(t, err)
	p := x509.NewCertPool()
	p.AddCert(ca)
	return p
}

// client returns an HTTPS client presenting the node certificate name (no
// certificate for "").
func (s *shoreServer) client(t testing.TB, name string) *http.Client {
	t.Helper()
	tc := &tls.Config{RootCAs: s.caPool(t), MinVersion: tls.VersionTLS12}
	if name != "" {
		cf, kf := pki.NodeFiles(name)
		c, err := tls.LoadX509KeyPair(filepath.Join(s.pki.Path, cf), filepath.Join(s.pki.Path, kf))
		require.NoError(t, err)
		tc.Certificates = []tls.Certificate{c}
	}
	tr := &http.Transport{TLSClientConfig: tc}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func (s *shoreServer) encode(t testing.TB, node, batchID string, evs ...*pb.ChangeEvent) []byte {
	t.Helper()
	body, err := s.codec.Encode(&wire.Batch{NodeID: node, BatchID: batchID, Sequence: 1, CreatedAt: t0, Events: evs})
	require.NoError(t, err)
	return body
}

// post sends body and returns the status, the headers and the body.
func post(t *testing.T, c *http.Client, url string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", shore.ContentType)
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b
}

func errorBody(t *testing.T, b []byte) *pb.ErrorBody {
	t.Helper()
	var eb pb.ErrorBody
	require.NoError(t, proto.Unmarshal(b, &eb))
	require.NotEmpty(t, eb.Message)
	require.NotEmpty(t, eb.RequestId)
	return &eb
}

func uploadResponse(t *testing.T, b []byte) *pb.UploadResponse {
	t.Helper()
	var r pb.UploadResponse
	require.NoError(t, proto.Unmarshal(b, &r))
	return &r
}

func (s *shoreServer) inboxCount(t *testing.T, node string) int {
	t.Helper()
	var n int
	require.NoError(t, s.d.Pool().QueryRow(t.Context(),
		"SELECT count(*) FROM sync_inbox_event WHERE origin_node_id = $1", node).Scan(&n))
	return n
}

func TestBatchAcceptedAndResentSameAnswer(t *testing.T) {
	t.Parallel()
	s := serve(t, setup(t), nil)
	s.addNode(t, "ship-1")
	c := s.client(t, "node-ship-1")
	bad := event("ship-1", 3)
	bad.PrimaryKey = nil
	other := event("ship-9", 4)
	body := s.encode(t, "ship-1", uuidN(100), event("ship-1", 1), event("ship-1", 2), bad, other, event("ship-1", 1))

	status, _, rb := post(t, c, s.url+shore.PathBatches, body)
	require.Equal(t, http.StatusOK, status, string(rb))
	first := uploadResponse(t, rb)
	require.Equal(t, uuidN(100), first.BatchId)
	got := make([]string, len(first.Statuses))
	for i, st := range first.Statuses {
		got[i] = st.Status.String() + "/" + st.Reason.String()
	}
	require.Equal(t, []string{
		"RECEIVE_STATUS_RECEIVED/REJECT_REASON_UNSPECIFIED",
		"RECEIVE_STATUS_RECEIVED/REJECT_REASON_UNSPECIFIED",
		"RECEIVE_STATUS_PERMANENT_REJECTED/REJECT_REASON_MISSING_FIELD",
		"RECEIVE_STATUS_PERMANENT_REJECTED/REJECT_REASON_ORIGIN_NOT_AUTHORIZED",
		"RECEIVE_STATUS_RECEIVED/REJECT_REASON_UNSPECIFIED",
	}, got)
	require.Equal(t, "primary_key", first.Statuses[2].Field)
	require.Equal(t, 2, s.inboxCount(t, "ship-1"), "the two distinct valid events, once each")
	require.InDelta(t, 3, counter(t, s.h, "relay_shipsync_shore_events_total", "RECEIVE_STATUS_RECEIVED"), 0)
	require.InDelta(t, 2, counter(t, s.h, "relay_shipsync_shore_events_total", "RECEIVE_STATUS_PERMANENT_REJECTED"), 0)
	require.Equal(t, 0, s.inboxCount(t, "ship-9"))

	// The same batch id again, even at a later time: the stored answer.
	s.clock.Advance(time.Hour)
	status, _, rb = post(t, c, s.url+shore.PathBatches, body)
	require.Equal(t, http.StatusOK, status)
	require.True(t, proto.Equal(first, uploadResponse(t, rb)), "a resent batch gets the same answer")

	// The same events under a new batch id: RECEIVED again, stored once.
	status, _, rb = post(t, c, s.url+shore.PathBatches, s.encode(t, "ship-1", uuidN(101), event("ship-1", 1), event("ship-1", 2)))
	require.Equal(t, http.StatusOK, status)
	for _, st := range uploadResponse(t, rb).Statuses {
		require.Equal(t, pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED, st.Status)
	}
	require.Equal(t, 2, s.inboxCount(t, "ship-1"))

	// The same event id with different content in one batch.
	changed := event("ship-1", 5)
	changed.TraceId = "other"
	status, _, rb = post(t, c, s.url+shore.PathBatches, s.encode(t, "ship-1", uuidN(102), event("ship-1", 5), changed))
	require.Equal(t, http.StatusOK, status)
	sts := uploadResponse(t, rb).Statuses
	require.Equal(t, pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED, sts[0].Status)
	require.Equal(t, pb.RejectReason_REJECT_REASON_DUPLICATE_IN_BATCH, sts[1].Reason)
}

func TestBatchRefusals(t *testing.T) {
	t.Parallel()
	s := serve(t, setup(t), func(c *shore.Config) { c.MaxBody = 64 << 10 })
	s.addNode(t, "ship-1")
	s.addNode(t, "ship-2")
	c := s.client(t, "node-ship-1")

	// The batch names another node than the certificate.
	status, _, rb := post(t, c, s.url+shore.PathBatches, s.encode(t, "ship-2", uuidN(1), event("ship-2", 1)))
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, pb.ErrorCode_ERROR_CODE_NODE_MISMATCH, errorBody(t, rb).Code)

	// A checksum that does not match: refused, nothing stored.
	body := s.encode(t, "ship-1", uuidN(2), event("ship-1", 1))
	var ub pb.UploadBatch
	require.NoError(t, proto.Unmarshal(body, &ub))
	ub.Checksum[0] ^= 0xff
	tampered, err := proto.Marshal(&ub)
	require.NoError(t, err)
	status, _, rb = post(t, c, s.url+shore.PathBatches, tampered)
	require.Equal(t, http.StatusBadRequest, status)
	eb := errorBody(t, rb)
	require.Equal(t, pb.ErrorCode_ERROR_CODE_CHECKSUM_MISMATCH, eb.Code)
	require.False(t, eb.Retryable)

	// Not a batch at all; the client's request id comes back.
	req, err := http.NewRequest(http.MethodPost, s.url+shore.PathBatches, strings.NewReader("\xff\xff\xff garbage"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", shore.ContentType)
	req.Header.Set("X-Request-Id", "req-42")
	resp, err := c.Do(req)
	require.NoError(t, err)
	rb, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	eb = errorBody(t, rb)
	require.Equal(t, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY, eb.Code)
	require.Equal(t, "req-42", eb.RequestId)

	// A truncated body (the connection cut mid-upload, say).
	status, _, rb = post(t, c, s.url+shore.PathBatches, body[:len(body)/2])
	require.Equal(t, http.StatusBadRequest, status)
	require.False(t, errorBody(t, rb).Retryable)

	// A body past MaxBody.
	status, _, rb = post(t, c, s.url+shore.PathBatches, bytes.Repeat([]byte{0}, 65<<10))
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Equal(t, pb.ErrorCode_ERROR_CODE_BODY_TOO_LARGE, errorBody(t, rb).Code)

	// Not Protobuf.
	req, err = http.NewRequest(http.MethodPost, s.url+shore.PathBatches, strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err = c.Do(req)
	require.NoError(t, err)
	rb, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
	require.Equal(t, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY, errorBody(t, rb).Code)

	require.Equal(t, 0, s.inboxCount(t, "ship-1"), "no refused request stored anything")
	require.InDelta(t, 1, counter(t, s.h, "relay_shipsync_shore_requests_total", "ERROR_CODE_CHECKSUM_MISMATCH"), 0)
	require.InDelta(t, 1, counter(t, s.h, "relay_shipsync_shore_requests_total", "ERROR_CODE_NODE_MISMATCH"), 0)
	require.Equal(t, 0, s.inboxCount(t, "ship-2"))
	var batches int
	require.NoError(t, s.d.Pool().QueryRow(t.Context(), "SELECT count(*) FROM sync_upload_batch").Scan(&batches))
	require.Zero(t, batches)
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	s := serve(t, setup(t), nil)
	s.addNode(t, "ship-1")
	s.node(t, "ship-2", "") // issued by the CA, never registered
	ctx := t.Context()

	// Unknown certificate.
	status, _, rb := post(t, s.client(t, "node-ship-2"), s.url+shore.PathBatches, s.encode(t, "ship-2", uuidN(1), event("ship-2", 1)))
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED, errorBody(t, rb).Code)

	// No client certificate: the TLS handshake fails.
	_, err := s.client(t, "").Post(s.url+shore.PathConfig, shore.ContentType, nil)
	require.Error(t, err)

	// A certificate of another CA: the handshake fails.
	foreign := pki.Dir{Path: filepath.Join(t.TempDir(), "other"), Clock: s.clock}
	_, err = foreign.InitCA()
	require.NoError(t, err)
	_, err = foreign.IssueNode("ship-1", "")
	require.NoError(t, err)
	fc, err := tls.LoadX509KeyPair(filepath.Join(foreign.Path, "node-ship-1.crt"), filepath.Join(foreign.Path, "node-ship-1.key"))
	require.NoError(t, err)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.caPool(t), Certificates: []tls.Certificate{fc}}}
	defer tr.CloseIdleConnections()
	_, err = (&http.Client{Transport: tr}).Get(s.url + shore.PathConfig)
	require.Error(t, err)

	// Accepted, then revoked: refused with 403, the backlog stays.
	c := s.client(t, "node-ship-1")
	status, _, _ = post(t, c, s.url+shore.PathBatches, s.encode(t, "ship-1", uuidN(2), event("ship-1", 1)))
	require.Equal(t, http.StatusOK, status)
	require.NoError(t, s.reg.Revoke(ctx, "ship-1", op))
	status, _, rb = post(t, c, s.url+shore.PathBatches, s.encode(t, "ship-1", uuidN(3), event("ship-1", 2)))
	require.Equal(t, http.StatusForbidden, status)
	eb := errorBody(t, rb)
	require.Equal(t, pb.ErrorCode_ERROR_CODE_FORBIDDEN, eb.Code)
	require.Contains(t, eb.Message, "revoked")
	require.Equal(t, 1, s.inboxCount(t, "ship-1"), "the revoked node's accepted event is kept")

	// An expired certificate (by the shore's clock) fails the handshake.
	s.clock.Advance(2 * pki.CertValidityDefault)
	_, err = s.client(t, "node-ship-1").Get(s.url + shore.PathConfig) // a new connection, a new handshake
	require.Error(t, err)
}

func TestRotationOverlap(t *testing.T) {
	t.Parallel()
	s := serve(t, setup(t), nil)
	old := s.addNode(t, "ship-1")
	fresh := s.node(t, "ship-1", "ship-1-new")
	_, err := s.reg.Rotate(t.Context(), fresh, op)
	require.NoError(t, err)
	for _, name := range []string{"node-ship-1", "ship-1-new"} {
		resp, err := s.client(t, name).Get(s.url + shore.PathConfig)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, name)
	}
	require.NoError(t, s.reg.Retire(t.Context(), "ship-1", pki.Fingerprint(old), op))
	resp, err := s.client(t, "node-ship-1").Get(s.url + shore.PathConfig)
	require.NoError(t, err)
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Equal(t, pb.ErrorCode_ERROR_CODE_FORBIDDEN, errorBody(t, rb).Code)
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	s := serve(t, setup(t), func(c *shore.Config) { c.Limits = shore.Limits{NodeRate: 1, NodeBurst: 1} })
	s.addNode(t, "ship-1")
	c := s.client(t, "node-ship-1")
	status, _, _ := post(t, c, s.url+shore.PathBatches, s.encode(t, "ship-1", uuidN(1), event("ship-1", 1)))
	require.Equal(t, http.StatusOK, status)
	status, hdr, rb := post(t, c, s.url+shore.PathBatches, s.encode(t, "ship-1", uuidN(2), event("ship-1", 2)))
	require.Equal(t, http.StatusTooManyRequests, status)
	require.Equal(t, "1", hdr.Get("Retry-After"))
	eb := errorBody(t, rb)
	require.Equal(t, pb.ErrorCode_ERROR_CODE_RATE_LIMITED, eb.Code)
	require.True(t, eb.Retryable)
	require.EqualValues(t, 1, eb.RetryAfterSeconds)
	s.clock.Advance(time.Second)
	status, _, _ = post(t, c, s.url+shore.PathBatches, s.encode(t, "ship-1", uuidN(2), event("ship-1", 2)))
	require.Equal(t, http.StatusOK, status, "a token again after a second")
}

func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	held, release := make(chan struct{}), make(chan struct{})
	var once bool
	s := serve(t, setup(t), func(c *shore.Config) {
		c.Limits = shore.Limits{GlobalConcurrency: 1}
		shore.SetHold(c, func() {
			if !once { // only the first request is held; the handler runs one at a time here
				once = true
				close(held)
				<-release
			}
		})
	})
	s.addNode(t, "ship-1")
	s.addNode(t, "ship-2")
	done := make(chan int, 1)
	c1 := s.client(t, "node-ship-1")
	body := s.encode(t, "ship-1", uuidN(1), event("ship-1", 1))
	go func() {
		status, _, _ := post(t, c1, s.url+shore.PathBatches, body)
		done <- status
	}()
	<-held
	status, hdr, rb := post(t, s.client(t, "node-ship-2"), s.url+shore.PathBatches, s.encode(t, "ship-2", uuidN(2), event("ship-2", 2)))
	require.Equal(t, http.StatusTooManyRequests, status)
	require.NotEmpty(t, hdr.Get("Retry-After"))
	require.Equal(t, pb.ErrorCode_ERROR_CODE_RATE_LIMITED, errorBody(t, rb).Code)
	close(release)
	require.Equal(t, http.StatusOK, <-done)
}

func TestHeartbeatAndConfig(t *testing.T) {
	t.Parallel()
	s := serve(t, setup(t), nil)
	s.addNode(t, "ship-1")
	c := s.client(t, "node-ship-1")
	hb, err := proto.Marshal(&pb.Heartbeat{ProtocolVersion: "1.0", NodeId: "ship-1", SentAt: timestamppb.New(t0),
		Overall: pb.HealthState_HEALTH_STATE_HEALTHY, ConfigVersion: 1})
	require.NoError(t, err)
	status, _, rb := post(t, c, s.url+shore.PathHeartbeat, hb)
	require.Equal(t, http.StatusOK, status, string(rb))
	var hr pb.HeartbeatResponse
	require.NoError(t, proto.Unmarshal(rb, &hr))
	require.True(t, hr.ServerTime.AsTime().Equal(t0))
	require.EqualValues(t, 60, hr.HeartbeatIntervalSeconds)
	require.EqualValues(t, wire.UploadMinor, hr.UploadMinor, "the shore takes 1.1 uploads")
	require.EqualValues(t, shore.ReceiptPageMax, hr.ReceiptPageMax, "the largest receipt page it serves")
	other, err := proto.Marshal(&pb.Heartbeat{ProtocolVersion: "1.0", NodeId: "ship-2"})
	require.NoError(t, err)
	status, _, rb2 := post(t, c, s.url+shore.PathHeartbeat, other)
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, pb.ErrorCode_ERROR_CODE_NODE_MISMATCH, errorBody(t, rb2).Code)
	future, err := proto.Marshal(&pb.Heartbeat{ProtocolVersion: "9.0", NodeId: "ship-1"})
	require.NoError(t, err)
	status, _, rb2 = post(t, c, s.url+shore.PathHeartbeat, future)
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, pb.ErrorCode_ERROR_CODE_UNSUPPORTED_MAJOR, errorBody(t, rb2).Code)
	impossible, err := proto.Marshal(&pb.Heartbeat{ProtocolVersion: "1.0", NodeId: "ship-1",
		Interval: &pb.TransferInterval{ElapsedSeconds: 1, ActiveSeconds: 3600}})
	require.NoError(t, err)
	status, _, rb2 = post(t, c, s.url+shore.PathHeartbeat, impossible)
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, "interval.active_seconds", errorBody(t, rb2).Field)

	var health string
	require.NoError(t, s.d.Pool().QueryRow(t.Context(), "SELECT last_health FROM sync_node WHERE node_id = 'ship-1'").Scan(&health))
	require.Equal(t, "HEALTH_STATE_HEALTHY", health)

	resp, err := c.Get(s.url + shore.PathConfig)
	require.NoError(t, err)
	rb, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var nc pb.NodeConfig
	require.NoError(t, proto.Unmarshal(rb, &nc))
	require.Equal(t, "ship-1", nc.NodeId)
	require.Len(t, nc.Rules, 1)
	require.Equal(t, "voyage-log", nc.Rules[0].RuleId)
	require.EqualValues(t, 1, nc.Rules[0].RuleVersion)
	require.EqualValues(t, 500, nc.MaxBatchEvents)
	require.Equal(t, []uint32{1}, nc.SupportedMajors)
	require.EqualValues(t, wire.UploadMinor, nc.UploadMinor)
}

// TestColumnarUploads: the shore stores a 1.1 batch (events column by
// column) like a 1.0 one and answers it the same way; told to hold nodes at
// 1.0 (UploadMinor < 0) it says upload_minor 0 and still takes both forms.
func TestColumnarUploads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, minor := range []int{0, -1} {
		s := serve(t, b, func(c *shore.Config) { c.UploadMinor = minor })
		node := fmt.Sprintf("ship-c%d", -minor)
		s.addNode(t, node)
		c := s.client(t, "node-"+node)
		for i, v := range []string{"1.0", wire.ColumnarVersion.String()} {
			evs := []*pb.ChangeEvent{event(node, 10*i+1), event(node, 10*i+2), event(node, 10*i+1)}
			body, err := s.codec.Encode(&wire.Batch{ProtocolVersion: v, NodeID: node, BatchID: uuidN(200 + i),
				Sequence: uint64(i + 1), CreatedAt: t0, Events: evs})
			require.NoError(t, err)
			status, _, rb := post(t, c, s.url+shore.PathBatches, body)
			require.Equal(t, http.StatusOK, status, string(rb))
			sts := uploadResponse(t, rb).Statuses
			require.Len(t, sts, 3)
			for j, st := range sts {
				require.Equal(t, pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED, st.Status, "%s event %d", v, j)
				require.Equal(t, evs[j].EventId, st.EventId)
			}
		}
		require.Equal(t, 4, s.inboxCount(t, node))
		require.InDelta(t, 1, counter(t, s.h, "relay_shipsync_shore_batches_total", shore.FormRows), 0)
		require.InDelta(t, 1, counter(t, s.h, "relay_shipsync_shore_batches_total", shore.FormColumns), 0)

		hb, err := proto.Marshal(&pb.Heartbeat{ProtocolVersion: "1.0", NodeId: node, SentAt: timestamppb.New(t0)})
		require.NoError(t, err)
		status, _, rb := post(t, c, s.url+shore.PathHeartbeat, hb)
		require.Equal(t, http.StatusOK, status, string(rb))
		var hr pb.HeartbeatResponse
		require.NoError(t, proto.Unmarshal(rb, &hr))
		want := uint32(wire.UploadMinor)
		if minor < 0 {
			want = 0
		}
		require.Equal(t, want, hr.UploadMinor)
	}
}

func TestEventIDReusedWithOtherContent(t *testing.T) {
	t.Parallel()
	s := serve(t, setup(t), nil)
	s.addNode(t, "ship-1")
	c := s.client(t, "node-ship-1")
	status, _, _ := post(t, c, s.url+shore.PathBatches, s.encode(t, "ship-1", uuidN(1), event("ship-1", 1)))
	require.Equal(t, http.StatusOK, status)
	changed := event("ship-1", 1)
	changed.TraceId = "another"
	status, _, rb := post(t, c, s.url+shore.PathBatches, s.encode(t, "ship-1", uuidN(2), changed, event("ship-1", 1), event("ship-1", 2)))
	require.Equal(t, http.StatusOK, status)
	sts := uploadResponse(t, rb).Statuses
	require.Equal(t, pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED, sts[0].Status, "events are immutable: the id was reused")
	require.Equal(t, pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS, sts[0].Reason)
	require.Equal(t, "event_id", sts[0].Field)
	require.Equal(t, pb.RejectReason_REJECT_REASON_DUPLICATE_IN_BATCH, sts[1].Reason)
	require.Equal(t, pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED, sts[2].Status)
	var trace []byte
	require.NoError(t, s.d.Pool().QueryRow(t.Context(), "SELECT event FROM sync_inbox_event WHERE event_id = $1", uuidN(1)).Scan(&trace))
	var stored pb.ChangeEvent
	require.NoError(t, proto.Unmarshal(trace, &stored))
	require.Equal(t, "trace-1", stored.TraceId, "the first content is kept")

	// The same id in upper case is the same event (uuid ignores case).
	upper := event("ship-1", 0xabc)
	upper.EventId = strings.ToUpper(upper.EventId)
	status, _, rb = post(t, c, s.url+shore.PathBatches, s.encode(t, "ship-1", uuidN(3), event("ship-1", 0xabc), upper))
	require.Equal(t, http.StatusOK, status)
	sts = uploadResponse(t, rb).Statuses
	require.Equal(t, pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED, sts[0].Status)
	require.Equal(t, pb.RejectReason_REJECT_REASON_DUPLICATE_IN_BATCH, sts[1].Reason, "same id, content differs by the id's case")
	require.Equal(t, 3, s.inboxCount(t, "ship-1"))
}

// TestStoreFailureStoresNothing makes the transaction fail at its last
// statement (the batch's answer): the request is refused 503 UNAVAILABLE,
// retryable, and none of its events is in the inbox — statuses come only
// from a committed transaction.
func TestStoreFailureStoresNothing(t *testing.T) {
	t.Parallel()
	s := serve(t, setup(t), nil)
	s.addNode(t, "ship-1")
	_, err := s.d.Pool().Exec(t.Context(), "ALTER TABLE sync_upload_batch ADD CONSTRAINT test_fail CHECK (event_count < 0) NOT VALID")
	require.NoError(t, err)
	status, hdr, rb := post(t, s.client(t, "node-ship-1"), s.url+shore.PathBatches,
		s.encode(t, "ship-1", uuidN(1), event("ship-1", 1), event("ship-1", 2)))
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.NotEmpty(t, hdr.Get("Retry-After"))
	eb := errorBody(t, rb)
	require.Equal(t, pb.ErrorCode_ERROR_CODE_UNAVAILABLE, eb.Code)
	require.True(t, eb.Retryable)
	require.Equal(t, 0, s.inboxCount(t, "ship-1"))
}

// TestSameBatchConcurrently sends one batch id from several connections at
// once: every answer is the same, and the events are stored once.
func TestSameBatchConcurrently(t *testing.T) {
	t.Parallel()
	s := serve(t, setup(t), func(c *shore.Config) { c.Limits = shore.Limits{NodeConcurrency: 8} })
	s.addNode(t, "ship-1")
	evs := make([]*pb.ChangeEvent, 50)
	for i := range evs {
		evs[i] = event("ship-1", i+1)
	}
	body := s.encode(t, "ship-1", uuidN(1000), evs...)
	const n = 4
	answers := make(chan []byte, n)
	for range n {
		c := s.client(t, "node-ship-1")
		go func() {
			req, _ := http.NewRequest(http.MethodPost, s.url+shore.PathBatches, bytes.NewReader(body))
			req.Header.Set("Content-Type", shore.ContentType)
			resp, err := c.Do(req)
			if err != nil {
				answers <- nil
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				b = nil
			}
			answers <- b
		}()
	}
	var first *pb.UploadResponse
	for range n {
		b := <-answers
		require.NotNil(t, b)
		r := uploadResponse(t, b)
		if first == nil {
			first = r
		}
		require.True(t, proto.Equal(first, r))
	}
	require.Equal(t, 50, s.inboxCount(t, "ship-1"))
}

// counter sums the series of name whose labels include value.
func counter(t *testing.T, h *shore.Handler, name, value string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(h.Collectors()...)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

func TestRuleNotAuthorized(t *testing.T) {
	t.Parallel()
	s := serve(t, setup(t), nil)
	s.addNode(t, "ship-1")
	otherRule := event("ship-1", 1)
	otherRule.RuleId = "crew-list"
	newerVersion := event("ship-1", 2)
	newerVersion.RuleVersion = 2
	status, _, rb := post(t, s.client(t, "node-ship-1"), s.url+shore.PathBatches,
		s.encode(t, "ship-1", uuidN(1), otherRule, newerVersion, event("ship-1", 3)))
	require.Equal(t, http.StatusOK, status)
	sts := uploadResponse(t, rb).Statuses
	for _, st := range sts[:2] {
		require.Equal(t, pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED, st.Status)
		require.Equal(t, pb.RejectReason_REJECT_REASON_RULE_NOT_AUTHORIZED, st.Reason)
		require.Equal(t, "rule_id", st.Field)
	}
	require.Equal(t, pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED, sts[2].Status)
	require.Equal(t, 1, s.inboxCount(t, "ship-1"))
}

func TestAnswersCompressedOnRequest(t *testing.T) {
	t.Parallel()
	s := serve(t, setup(t), nil)
	s.addNode(t, "ship-1")
	c := s.client(t, "node-ship-1")
	evs := make([]*pb.ChangeEvent, 40)
	for i := range evs {
		evs[i] = event("ship-1", i+1)
	}
	body := s.encode(t, "ship-1", uuidN(300), evs...)
	codec, err := wire.NewCodec(wire.Config{})
	require.NoError(t, err)
	for _, accept := range []string{"", "zstd", "gzip, zstd", "zstd;q=0"} {
		req, err := http.NewRequest(http.MethodPost, s.url+shore.PathBatches, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", shore.ContentType)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		resp, err := c.Do(req)
		require.NoError(t, err)
		rb, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		want := accept == "zstd" || accept == "gzip, zstd"
		require.Equal(t, want, resp.Header.Get("Content-Encoding") == "zstd", "Accept-Encoding %q", accept)
		if want {
			plain, err := codec.DecompressAnswer(rb, 1<<20)
			require.NoError(t, err)
			require.Less(t, len(rb), len(plain), "compressed answer not smaller")
			rb = plain
		}
		ur := uploadResponse(t, rb)
		require.Len(t, ur.Statuses, 40, "Accept-Encoding %q", accept)
	}
}
