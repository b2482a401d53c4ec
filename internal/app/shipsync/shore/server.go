package shore

import (
	"cmp"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/relaytype"
)

// ContentType is the media type of every data API body.
const ContentType = "application/x-protobuf"

// Paths of the data API.
const (
	PathBatches   = "/sync/v1/batches"
	PathHeartbeat = "/sync/v1/heartbeat"
	PathConfig    = "/sync/v1/config"
	PathReceipts  = "/sync/v1/receipts"
	PathCommands  = "/sync/v1/commands"
	PathAcks      = "/sync/v1/command-acks"
)

// Defaults of Limits and Config.
const (
	GlobalConcurrencyDefault = 64
	GlobalRateDefault        = 500.0
	// NodeConcurrencyDefault: a client's default uploads in flight
	// (client.UploadsDefault, 8) plus receipts, heartbeats and commands.
	NodeConcurrencyDefault = 12
	NodeRateDefault        = 20.0
	// HeartbeatIntervalDefault is the heartbeat interval the shore asks for.
	HeartbeatIntervalDefault = 60 * time.Second
	// ConfigVersionDefault is a node's config version until a release or an
	// expiry approval changes what it should run (sync_node_config).
	ConfigVersionDefault = 1
)

// Limits bounds the requests the shore serves (seed 004 §9.1): over a limit
// it answers 429 with Retry-After and ERROR_CODE_RATE_LIMITED. Zero fields
// take the defaults; bursts default to twice the rate (at least 1).
type Limits struct {
	// GlobalConcurrency: requests in flight across all nodes.
	GlobalConcurrency int
	// GlobalRate and GlobalBurst: requests per second across all nodes.
	GlobalRate  float64
	GlobalBurst int
	// NodeConcurrency: requests in flight per node.
	NodeConcurrency int
	// NodeRate and NodeBurst: requests per second per node.
	NodeRate  float64
	NodeBurst int
}

// WithDefaults returns l with the defaults in its zero fields: the limits
// a handler configured with l enforces.
func (l Limits) WithDefaults() Limits {
	l.GlobalConcurrency = cmp.Or(l.GlobalConcurrency, GlobalConcurrencyDefault)
	l.GlobalRate = cmp.Or(l.GlobalRate, GlobalRateDefault)
	l.GlobalBurst = cmp.Or(l.GlobalBurst, max(1, int(2*l.GlobalRate)))
	l.NodeConcurrency = cmp.Or(l.NodeConcurrency, NodeConcurrencyDefault)
	l.NodeRate = cmp.Or(l.NodeRate, NodeRateDefault)
	l.NodeBurst = cmp.Or(l.NodeBurst, max(1, int(2*l.NodeRate)))
	return l
}

// Config configures the shore's HTTP handler.
type Config struct {
	// Registry authenticates nodes. Required.
	Registry *Registry
	// Inbox stores the batches. Required.
	Inbox *Inbox
	// Downlink serves the nodes' commands and stores their results
	// (default: NewDownlink over the inbox's pool).
	Downlink *Downlink
	// Codec decodes batches; its limits are the batch limits. Required.
	Codec *wire.Codec
	// Clock stamps answers and drives the rate limits. Required.
	Clock relaytype.Clock
	// Limits of requests; zero fields take their defaults.
	Limits Limits
	// MaxBody bounds a request body (413 ERROR_CODE_BODY_TOO_LARGE above).
	// Default: the codec's MaxBytes plus 64 KiB for the batch header.
	MaxBody int64
	// HeartbeatInterval is the interval the shore asks nodes to keep.
	// Default HeartbeatIntervalDefault.
	HeartbeatInterval time.Duration
	// UploadMinor is the highest minor of protocol major 1 the shore says,
	// in heartbeat answers and node configs, that it accepts in uploads
	// (default wire.UploadMinor: 1.1, the columnar event list). Negative
	// says 0, as a 1.0 shore does, so that nodes keep sending 1.0 bodies
	// (to hold a fleet back while a change is rolled out or back); the shore
	// decodes both forms whatever it says.
	UploadMinor int
	// Logger; default slog.Default().
	Logger *slog.Logger

	// hold, when set (tests), runs once a batch request is admitted by
	// every limit, before it is decoded.
	hold func()
}

// Handler serves the data API. It expects a listener of mutual TLS
// (ServerTLS): the node is the one its verified certificate names.
type Handler struct {
	cfg     Config
	m       *metrics
	lim     *limiter
	retries retryQueue
	mux     *http.ServeMux
}

// NewHandler returns the data API handler for cfg or an error naming the
// missing field.
func NewHandler(cfg Config) (*Handler, error) {
	switch {
	case cfg.Registry == nil:
		return nil, errors.New("shore: Config.Registry is nil")
	case cfg.Inbox == nil:
		return nil, errors.New("shore: Config.Inbox is nil")
	case cfg.Codec == nil:
		return nil, errors.New("shore: Config.Codec is nil")
	case cfg.Clock == nil:
		return nil, errors.New("shore: Config.Clock is nil")
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	cfg.MaxBody = cmp.Or(cfg.MaxBody, int64(cfg.Codec.Config().MaxBytes)+64<<10)
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, HeartbeatIntervalDefault)
	cfg.UploadMinor = max(cmp.Or(cfg.UploadMinor, wire.UploadMinor), 0)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Downlink == nil {
		cfg.Downlink = NewDownlink(cfg.Inbox.pool, cfg.Clock)
	}
	h := &Handler{cfg: cfg, m: newMetrics(), lim: newLimiter(cfg.Limits), mux: http.NewServeMux()}
	h.mux.Handle("POST "+PathBatches, h.guard("batches", h.batches))
	h.mux.Handle("POST "+PathHeartbeat, h.guard("heartbeat", h.heartbeat))
	h.mux.Handle("GET "+PathConfig, h.guard("config", h.config))
	h.mux.Handle("GET "+PathReceipts, h.guard("receipts", h.receipts))
	h.mux.Handle("GET "+PathCommands, h.guard("commands", h.commands))
	h.mux.Handle("POST "+PathAcks, h.guard("command-acks", h.commandAcks))
	return h, nil
}

// Limits returns the effective limits (defaults applied).
func (h *Handler) Limits() Limits { return h.cfg.Limits }

// ServeHTTP serves the data API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// ServerTLS returns the TLS configuration of the shore's listener: TLS 1.2
// or later, and mutual TLS — every client presents a certificate signed by
// one of clientCAs, verified at clock's now.
func ServerTLS(cert tls.Certificate, clientCAs *x509.CertPool, clock relaytype.Clock) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    clientCAs,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
		Time:         clock.Now,
	}
}

// request is one admitted request: its endpoint (a metrics label), node
// and id.
type request struct {
	endpoint, node, id string
	// zstd: the client accepts a zstd-compressed answer.
	zstd bool
	// compact: the client asked for compact answers (wire.HeaderAnswers).
	compact bool
}

// guard admits a request: the global limits, the node's identity from its
// verified certificate and the registry, then the node's limits.
func (h *Handler) guard(endpoint string, next func(http.ResponseWriter, *http.Request, request)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rq := request{endpoint: endpoint, id: requestID(r.Header.Get("X-Request-Id")),
			zstd:    acceptsZstd(r.Header.Values("Accept-Encoding")),
			compact: strings.EqualFold(strings.TrimSpace(r.Header.Get(wire.HeaderAnswers)), wire.AnswersCompact)}
		if ok, wait := h.lim.acquireGlobal(h.cfg.Clock.Now()); !ok {
			h.limited(w, rq, wait, "the shore is at its request limit")
			return
		}
		defer h.lim.releaseGlobal()
		h.m.inflight.Inc()
		defer h.m.inflight.Dec()
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
			h.refuse(w, rq, http.StatusUnauthorized, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED,
				"no verified client certificate (mutual TLS is required)", "")
			return
		}
		node, err := h.cfg.Registry.Authenticate(r.Context(), r.TLS.VerifiedChains[0][0])
		switch {
		case errors.Is(err, ErrNodeRevoked):
			h.refuse(w, rq, http.StatusForbidden, pb.ErrorCode_ERROR_CODE_FORBIDDEN,
				"node "+node+" is revoked: new requests are refused (what it uploaded before is kept)", "")
			return
		case errors.Is(err, ErrCertRetired):
			h.refuse(w, rq, http.StatusForbidden, pb.ErrorCode_ERROR_CODE_FORBIDDEN,
				"this certificate of node "+node+" is retired or outside its validity: use the current one", "")
			return
		case errors.Is(err, ErrUnknownCert), errors.Is(err, ErrCertNodeMismatch):
			h.refuse(w, rq, http.StatusUnauthorized, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED,
				"the client certificate is not registered for a node", "")
			return
		case err != nil:
			h.cfg.Logger.ErrorContext(r.Context(), "shipsync shore: authenticate", "request_id", rq.id, "error", err)
			h.unavailable(w, rq)
			return
		}
		rq.node = node
		if ok, wait := h.lim.acquireNode(node, h.cfg.Clock.Now()); !ok {
			h.limited(w, rq, wait, "node "+node+" is at its request limit")
			return
		}
		defer h.lim.releaseNode(node)
		next(w, r, rq)
	})
}

// readBody reads a Protobuf request body within MaxBody, answering the
// refusal itself (ok false).
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, rq request) ([]byte, bool) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != ContentType {
		h.refuse(w, rq, http.StatusUnsupportedMediaType, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY,
			"Content-Type must be "+ContentType, "")
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		h.refuse(w, rq, http.StatusRequestEntityTooLarge, pb.ErrorCode_ERROR_CODE_BODY_TOO_LARGE,
			"request body larger than "+strconv.FormatInt(mbe.Limit, 10)+" bytes", "")
		return nil, false
	}
	if err != nil {
		h.refuse(w, rq, http.StatusBadRequest, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY, "request body unreadable", "")
		return nil, false
	}
	return body, true
}

// batches serves POST /sync/v1/batches.
func (h *Handler) batches(w http.ResponseWriter, r *http.Request, rq request) {
	if h.cfg.hold != nil {
		h.cfg.hold()
	}
	body, ok := h.readBody(w, r, rq)
	if !ok {
		return
	}
	b, err := h.cfg.Codec.Decode(body)
	if err != nil {
		eb := wire.ErrorBody(err)
		status := http.StatusBadRequest
		if eb.Code == pb.ErrorCode_ERROR_CODE_BATCH_TOO_LARGE {
			status = http.StatusRequestEntityTooLarge
		}
		eb.RequestId = rq.id
		h.count(rq, eb.Code)
		h.write(w, rq, status, eb)
		return
	}
	h.countBatch(b)
	if b.NodeID != rq.node {
		h.refuse(w, rq, http.StatusForbidden, pb.ErrorCode_ERROR_CODE_NODE_MISMATCH,
			"node_id of the batch differs from the node of the client certificate", "node_id")
		return
	}
	resp, replayed, err := h.cfg.Inbox.Receive(r.Context(), rq.node, b)
	if err != nil {
		h.cfg.Logger.ErrorContext(r.Context(), "shipsync shore: receive batch", "request_id", rq.id, "node_id", rq.node,
			"batch_id", b.BatchID, "error", err)
		h.unavailable(w, rq)
		return
	}
	if !replayed {
		faultpoint.Hit(faultpoint.ShipsyncIngressAfterCommit)
		if f := h.cfg.Inbox.onRelease; f != nil {
			f()
		}
	}
	h.cfg.Logger.DebugContext(r.Context(), "shipsync shore: batch answered", "request_id", rq.id, "node_id", rq.node,
		"batch_id", b.BatchID, "events", len(b.Events), "replayed", replayed)
	h.count(rq, 0)
	h.countEvents(resp)
	if rq.compact {
		resp = wire.CompactStatuses(resp)
	}
	h.write(w, rq, http.StatusOK, resp)
}

// receipts serves GET /sync/v1/receipts?cursor=C&limit=N: the calling
// node's terminal event results after cursor C (empty: from the start).
func (h *Handler) receipts(w http.ResponseWriter, r *http.Request, rq request) {
	q := r.URL.Query()
	limit, ok := h.limitParam(w, q.Get("limit"), rq)
	if !ok {
		return
	}
	page, err := h.cfg.Inbox.Receipts(r.Context(), rq.node, q.Get("cursor"), limit)
	switch {
	case errors.Is(err, ErrBadCursor):
		h.refuse(w, rq, http.StatusBadRequest, pb.ErrorCode_ERROR_CODE_BAD_CURSOR,
			fmt.Sprintf("cursor or limit not valid (limit 1–%d)", ReceiptPageMax), "cursor")
		return
	case err != nil:
		h.cfg.Logger.ErrorContext(r.Context(), "shipsync shore: receipts", "request_id", rq.id, "node_id", rq.node, "error", err)
		h.unavailable(w, rq)
		return
	}
	h.count(rq, 0)
	if rq.compact {
		page = wire.CompactReceipts(page, rq.node)
	}
	h.write(w, rq, http.StatusOK, page)
}

// limitParam reads a page request's limit ("" is 0: the default),
// answering the refusal itself (ok false).
func (h *Handler) limitParam(w http.ResponseWriter, s string, rq request) (int, bool) {
	if s == "" {
		return 0, true
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		h.refuse(w, rq, http.StatusBadRequest, pb.ErrorCode_ERROR_CODE_BAD_CURSOR, "limit is not a number", "limit")
		return 0, false
	}
	return n, true
}

// commands serves GET /sync/v1/commands?cursor=C&limit=N: the calling
// node's downlink commands after cursor C (empty: from the start), in
// sequence order.
func (h *Handler) commands(w http.ResponseWriter, r *http.Request, rq request) {
	q := r.URL.Query()
	limit, ok := h.limitParam(w, q.Get("limit"), rq)
	if !ok {
		return
	}
	page, err := h.cfg.Downlink.Commands(r.Context(), rq.node, q.Get("cursor"), limit)
	switch {
	case errors.Is(err, ErrBadCommandCursor):
		h.refuse(w, rq, http.StatusBadRequest, pb.ErrorCode_ERROR_CODE_BAD_CURSOR,
			fmt.Sprintf("cursor or limit not valid (limit 1–%d)", CommandPageMax), "cursor")
		return
	case err != nil:
		h.cfg.Logger.ErrorContext(r.Context(), "shipsync shore: commands", "request_id", rq.id, "node_id", rq.node, "error", err)
		h.unavailable(w, rq)
		return
	}
	h.count(rq, 0)
	h.write(w, rq, http.StatusOK, page)
}

// commandAcks serves POST /sync/v1/command-acks: the calling node's
// terminal results for its commands, answered per ack after they are
// stored.
func (h *Handler) commandAcks(w http.ResponseWriter, r *http.Request, rq request) {
	body, ok := h.readBody(w, r, rq)
	if !ok {
		return
	}
	var b pb.CommandAckBatch
	if err := proto.Unmarshal(body, &b); err != nil {
		h.refuse(w, rq, http.StatusBadRequest, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY, "not a CommandAckBatch", "")
		return
	}
	if _, err := wire.CheckVersion(b.ProtocolVersion, h.cfg.Codec.Config().SupportedMajors); err != nil {
		eb := wire.ErrorBody(err)
		eb.RequestId, eb.Field = rq.id, "protocol_version"
		h.count(rq, eb.Code)
		h.write(w, rq, http.StatusBadRequest, eb)
		return
	}
	switch {
	case b.NodeId != rq.node:
		h.refuse(w, rq, http.StatusForbidden, pb.ErrorCode_ERROR_CODE_NODE_MISMATCH,
			"node_id of the acks differs from the node of the client certificate", "node_id")
		return
	case len(b.Acks) > AckBatchMax:
		h.refuse(w, rq, http.StatusRequestEntityTooLarge, pb.ErrorCode_ERROR_CODE_BATCH_TOO_LARGE,
			fmt.Sprintf("at most %d acks per request", AckBatchMax), "acks")
		return
	}
	statuses, err := h.cfg.Downlink.Ack(r.Context(), rq.node, b.Acks)
	if err != nil {
		h.cfg.Logger.ErrorContext(r.Context(), "shipsync shore: command acks", "request_id", rq.id, "node_id", rq.node,
			"error", err)
		h.unavailable(w, rq)
		return
	}
	h.count(rq, 0)
	h.write(w, rq, http.StatusOK, &pb.CommandAckResponse{Statuses: statuses})
}

// heartbeat serves POST /sync/v1/heartbeat: it records the node's health
// and answers shore time, the config version, the interval and the upload
// minor.
func (h *Handler) heartbeat(w http.ResponseWriter, r *http.Request, rq request) {
	body, ok := h.readBody(w, r, rq)
	if !ok {
		return
	}
	var hb pb.Heartbeat
	if err := proto.Unmarshal(body, &hb); err != nil {
		h.refuse(w, rq, http.StatusBadRequest, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY, "not a Heartbeat", "")
		return
	}
	if _, err := wire.CheckVersion(hb.ProtocolVersion, h.cfg.Codec.Config().SupportedMajors); err != nil {
		eb := wire.ErrorBody(err)
		eb.RequestId, eb.Field = rq.id, "protocol_version"
		h.count(rq, eb.Code)
		h.write(w, rq, http.StatusBadRequest, eb)
		return
	}
	if hb.NodeId != rq.node {
		h.refuse(w, rq, http.StatusForbidden, pb.ErrorCode_ERROR_CODE_NODE_MISMATCH,
			"node_id of the heartbeat differs from the node of the client certificate", "node_id")
		return
	}
	if err := h.cfg.Registry.Heartbeat(r.Context(), rq.node, &hb); err != nil {
		var bad *badHeartbeat
		if errors.As(err, &bad) {
			h.refuse(w, rq, http.StatusBadRequest, pb.ErrorCode_ERROR_CODE_MALFORMED_BODY, bad.Error(), bad.Field())
			return
		}
		h.cfg.Logger.ErrorContext(r.Context(), "shipsync shore: heartbeat", "request_id", rq.id, "error", err)
		h.unavailable(w, rq)
		return
	}
	if err := h.cfg.Registry.ObserveNode(r.Context(), rq.node, &hb); err != nil {
		h.cfg.Logger.ErrorContext(r.Context(), "shipsync shore: heartbeat rules", "request_id", rq.id, "error", err)
		h.unavailable(w, rq)
		return
	}
	cv, err := h.cfg.Registry.NodeConfigVersion(r.Context(), h.cfg.Registry.pool, rq.node)
	if err != nil {
		h.cfg.Logger.ErrorContext(r.Context(), "shipsync shore: heartbeat", "request_id", rq.id, "error", err)
		h.unavailable(w, rq)
		return
	}
	h.count(rq, 0)
	h.write(w, rq, http.StatusOK, &pb.HeartbeatResponse{
		ServerTime:               timestamppb.New(h.cfg.Clock.Now()),
		ConfigVersion:            cv,
		HeartbeatIntervalSeconds: uint32(h.cfg.HeartbeatInterval / time.Second),
		UploadMinor:              uint32(h.cfg.UploadMinor),
		ReceiptPageMax:           ReceiptPageMax,
	})
}

// config serves GET /sync/v1/config: the node's config version, allowed
// rule versions, the rule versions it should run (releases) and its expiry
// approvals, the
// batch limits, compression threshold, heartbeat interval, supported
// majors and upload minor. Transfer budgets per node are not configured
// yet (zero: the protocol defaults).
func (h *Handler) config(w http.ResponseWriter, r *http.Request, rq request) {
	nc, err := h.cfg.Registry.NodeConfig(r.Context(), rq.node)
	if err != nil {
		h.cfg.Logger.ErrorContext(r.Context(), "shipsync shore: config", "request_id", rq.id, "error", err)
		h.unavailable(w, rq)
		return
	}
	cc := h.cfg.Codec.Config()
	h.count(rq, 0)
	h.write(w, rq, http.StatusOK, &pb.NodeConfig{
		NodeId:                    rq.node,
		ConfigVersion:             nc.ConfigVersion,
		Rules:                     nc.Rules,
		Releases:                  nc.Releases,
		ExpiryApprovals:           nc.ExpiryApprovals,
		MaxBatchEvents:            uint32(cc.MaxEvents),
		MaxBatchBytes:             uint64(cc.MaxBytes),
		CompressionThresholdBytes: uint64(max(cc.CompressThreshold, 0)),
		HeartbeatIntervalSeconds:  uint32(h.cfg.HeartbeatInterval / time.Second),
		SupportedMajors:           cc.SupportedMajors,
		UploadMinor:               uint32(h.cfg.UploadMinor),
	})
}

func (h *Handler) limited(w http.ResponseWriter, rq request, wait time.Duration, msg string) {
	secs := uint32(max(1, math.Ceil(wait.Seconds())))
	now := h.cfg.Clock.Now()
	h.retries.push(now, now.Add(time.Duration(secs)*time.Second))
	h.count(rq, pb.ErrorCode_ERROR_CODE_RATE_LIMITED)
	w.Header().Set("Retry-After", strconv.FormatUint(uint64(secs), 10))
	h.write(w, rq, http.StatusTooManyRequests, &pb.ErrorBody{Code: pb.ErrorCode_ERROR_CODE_RATE_LIMITED, Message: msg,
		Retryable: true, RetryAfterSeconds: secs, RequestId: rq.id})
}

func (h *Handler) unavailable(w http.ResponseWriter, rq request) {
	h.count(rq, pb.ErrorCode_ERROR_CODE_UNAVAILABLE)
	w.Header().Set("Retry-After", "5")
	h.write(w, rq, http.StatusServiceUnavailable, &pb.ErrorBody{Code: pb.ErrorCode_ERROR_CODE_UNAVAILABLE,
		Message: "the shore cannot store this now; nothing was stored, retry with backoff", Retryable: true,
		RetryAfterSeconds: 5, RequestId: rq.id})
}

func (h *Handler) refuse(w http.ResponseWriter, rq request, status int, code pb.ErrorCode, msg, field string) {
	h.count(rq, code)
	h.write(w, rq, status, &pb.ErrorBody{Code: code, Message: msg, Field: field, RequestId: rq.id})
}

func (h *Handler) write(w http.ResponseWriter, rq request, status int, m proto.Message) {
	b, err := proto.Marshal(m)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = proto.Marshal(&pb.ErrorBody{Code: pb.ErrorCode_ERROR_CODE_INTERNAL, Message: "answer not serializable",
			Retryable: true})
	}
	w.Header().Set("Content-Type", ContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Add("Vary", "Accept-Encoding, "+wire.HeaderAnswers)
	if rq.zstd && len(b) >= wire.AnswerCompressMin {
		b = h.cfg.Codec.CompressAnswer(b)
		w.Header().Set("Content-Encoding", wire.EncodingZstd)
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// acceptsZstd reports whether Accept-Encoding lists zstd (without q=0).
func acceptsZstd(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(name), wire.EncodingZstd) {
				q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
				return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
			}
		}
	}
	return false
}

var requestIDRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// requestID is the client's X-Request-Id when it is 1–64 characters of
// [A-Za-z0-9._-] (seed 004 §9.1: every request carries a request id), else a
// new random one.
func requestID(client string) string {
	if requestIDRE.MatchString(client) {
		return client
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// String names the limits for logs.
func (l Limits) String() string {
	return fmt.Sprintf("global %d in flight, %.0f/s burst %d; per node %d in flight, %.0f/s burst %d",
		l.GlobalConcurrency, l.GlobalRate, l.GlobalBurst, l.NodeConcurrency, l.NodeRate, l.NodeBurst)
}
