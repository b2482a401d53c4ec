package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

// Transport is the client's side of the data API: uploads, receipts,
// heartbeats, downlink commands and their acks, over HTTPS with the node's
// certificate.
type Transport struct {
	base  string
	c     *http.Client
	codec *wire.Codec // decompresses zstd answers
	// FullAnswers asks for the full form of upload answers and receipt
	// pages (every event by its id as text, receipts with their applied
	// revision and time) instead of the compact one; set it before use.
	FullAnswers bool

	// The link's state as the requests saw it: down after a request that
	// got no answer, up again at the next that got one (whatever its
	// status); back is closed then, and replaced.
	mu   sync.Mutex
	down bool
	back chan struct{}
}

// LinkBack returns a channel closed once a request gets an answer from the
// shore after one that got none: a loop backing off after a network failure
// waits for it too, so the uploads resume when any request (a receipt
// pull, a heartbeat, another upload) finds the link back instead of each
// waiting out its own backoff — up to minutes after a long outage.
func (t *Transport) LinkBack() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.back == nil {
		t.back = make(chan struct{})
	}
	return t.back
}

// linkSeen records whether a request got an answer from the shore.
func (t *Transport) linkSeen(answered bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case !answered:
		t.down = true
	case t.down:
		t.down = false
		if t.back != nil {
			close(t.back)
			t.back = nil
		}
	}
}

// TransportTimeoutDefault bounds one request. A batch of 4 MiB before
// compression is ≈ 1 MiB on the wire: at 128 KiB/s it takes 8 s.
const TransportTimeoutDefault = 120 * time.Second

// NewTransport returns a Transport for the shore at base
// ("https://host:port") using tc (the node's client certificate and the
// CA the shore's certificate is checked against). timeout 0 is
// TransportTimeoutDefault.
func NewTransport(base string, tc *tls.Config, timeout time.Duration) (*Transport, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("client: shore URL %q: want https://host:port", base)
	}
	if timeout <= 0 {
		timeout = TransportTimeoutDefault
	}
	// Every upload in flight keeps its connection between batches: a new
	// one costs a TLS handshake with both certificates on the weak link.
	tr := &http.Transport{TLSClientConfig: tc, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 30 * time.Second, ResponseHeaderTimeout: timeout}
	codec, err := wire.NewCodec(wire.Config{})
	if err != nil {
		return nil, err
	}
	return &Transport{base: u.Scheme + "://" + u.Host, c: &http.Client{Transport: tr, Timeout: timeout}, codec: codec}, nil
}

// Close drops idle connections.
func (t *Transport) Close() { t.c.CloseIdleConnections() }

// RequestError is a refused or failed request. Retryable says whether to
// try again (network errors, 408, 429, 5xx); RetryAfter is the shore's
// Retry-After when it sent one.
type RequestError struct {
	Status     int // 0 for a network error
	Code       pb.ErrorCode
	Detail     string
	Retryable  bool
	RetryAfter time.Duration
	Err        error
}

func (e *RequestError) Error() string {
	switch {
	case e.Status == 0:
		return fmt.Sprintf("shore unreachable: %v", e.Err)
	case e.Code != pb.ErrorCode_ERROR_CODE_UNSPECIFIED:
		return fmt.Sprintf("shore answered HTTP %d %s: %s", e.Status, e.Code, e.Detail)
	default:
		return fmt.Sprintf("shore answered HTTP %d", e.Status)
	}
}

func (e *RequestError) Unwrap() error { return e.Err }

// Upload posts one encoded batch and returns the per-event answer, in the
// compact form when the shore supports it (wire.ExpandStatuses gives one
// status per event either way).
func (t *Transport) Upload(ctx context.Context, body []byte) (*pb.UploadResponse, error) {
	var ur pb.UploadResponse
	if err := t.do(ctx, http.MethodPost, shore.PathBatches, body, &ur); err != nil {
		return nil, err
	}
	return &ur, nil
}

// Receipts returns the page of receipts after cursor, in the compact form
// when the shore supports it (wire.ExpandReceipts gives every receipt
// either way).
func (t *Transport) Receipts(ctx context.Context, cursor string, limit int) (*pb.ReceiptPage, error) {
	var page pb.ReceiptPage
	if err := t.page(ctx, shore.PathReceipts, cursor, limit, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// Commands returns the page of the node's downlink commands after cursor
// ("": from the first), at most limit of them, in sequence order.
func (t *Transport) Commands(ctx context.Context, cursor string, limit int) (*pb.CommandPage, error) {
	var page pb.CommandPage
	if err := t.page(ctx, shore.PathCommands, cursor, limit, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// page gets one page of path after cursor into out.
func (t *Transport) page(ctx context.Context, path, cursor string, limit int, out proto.Message) error {
	q := url.Values{}
	q.Set("cursor", cursor)
	q.Set("limit", strconv.Itoa(limit))
	return t.do(ctx, http.MethodGet, path+"?"+q.Encode(), nil, out)
}

// Acks posts the results of downlink commands; the answer holds one status
// per ack, in order, once the shore stored them.
func (t *Transport) Acks(ctx context.Context, b *pb.CommandAckBatch) (*pb.CommandAckResponse, error) {
	var r pb.CommandAckResponse
	if err := t.post(ctx, shore.PathAcks, b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// post posts msg to path and reads the answer into out.
func (t *Transport) post(ctx context.Context, path string, msg, out proto.Message) error {
	body, err := proto.Marshal(msg)
	if err != nil {
		return err
	}
	return t.do(ctx, http.MethodPost, path, body, out)
}

// Heartbeat posts hb.
func (t *Transport) Heartbeat(ctx context.Context, hb *pb.Heartbeat) (*pb.HeartbeatResponse, error) {
	var r pb.HeartbeatResponse
	if err := t.post(ctx, shore.PathHeartbeat, hb, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Config gets the node's config (GET /sync/v1/config).
func (t *Transport) Config(ctx context.Context) (*pb.NodeConfig, error) {
	var nc pb.NodeConfig
	if err := t.do(ctx, http.MethodGet, shore.PathConfig, nil, &nc); err != nil {
		return nil, err
	}
	return &nc, nil
}

// maxAnswer bounds an answer body read from the shore.
const maxAnswer = 16 << 20

func (t *Transport) do(ctx context.Context, method, path string, body []byte, out proto.Message) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, t.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", shore.ContentType)
	}
	req.Header.Set("Accept", shore.ContentType)
	// The shore compresses answers (upload statuses, receipt pages) on
	// request: on a weak link they are as large as the uploads otherwise.
	req.Header.Set("Accept-Encoding", wire.EncodingZstd)
	// And to name only what the ship acts on: the events not RECEIVED, the
	// plain APPLIED results as bare ids (the caller expands them).
	if !t.FullAnswers {
		req.Header.Set(wire.HeaderAnswers, wire.AnswersCompact)
	}
	resp, err := t.c.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t.linkSeen(false)
		return &RequestError{Retryable: true, Err: err}
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		t.linkSeen(false)
		return &RequestError{Retryable: true, Err: err}
	}
	t.linkSeen(true)
	if resp.Header.Get("Content-Encoding") == wire.EncodingZstd {
		if rb, err = t.codec.DecompressAnswer(rb, maxAnswer); err != nil {
			return &RequestError{Status: resp.StatusCode, Detail: "answer not decompressible", Err: err}
		}
	}
	if resp.StatusCode != http.StatusOK {
		e := &RequestError{Status: resp.StatusCode, Retryable: resp.StatusCode == http.StatusRequestTimeout ||
			resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
			e.RetryAfter = time.Duration(s) * time.Second
		}
		var eb pb.ErrorBody
		if proto.Unmarshal(rb, &eb) == nil {
			e.Code, e.Detail = eb.Code, bound(eb.Message, 200)
		}
		return e
	}
	if err := proto.Unmarshal(rb, out); err != nil {
		return &RequestError{Status: resp.StatusCode, Detail: "answer is not Protobuf", Err: err}
	}
	return nil
}

func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Backoff is the retry schedule of requests: full jitter, doubling from
// Base up to Cap (1 s … 5 min by default); a Retry-After from the shore
// takes precedence.
type Backoff struct {
	Base, Cap time.Duration
	Rand      *rand.Rand
}

// Backoff defaults.
const (
	BackoffBaseDefault = time.Second
	BackoffCapDefault  = 5 * time.Minute
)

// Delay returns the wait before retry number attempt (0 = the first
// retry) after err.
func (b Backoff) Delay(attempt int, err error) time.Duration {
	var re *RequestError
	if errors.As(err, &re) && re.RetryAfter > 0 {
		return min(re.RetryAfter, b.capOr())
	}
	base := b.Base
	if base <= 0 {
		base = BackoffBaseDefault
	}
	ceil := base
	for i := 0; i < attempt && ceil < b.capOr(); i++ {
		ceil *= 2
	}
	ceil = min(ceil, b.capOr())
	if b.Rand == nil {
		return time.Duration(rand.Int64N(int64(ceil) + 1))
	}
	return time.Duration(b.Rand.Int64N(int64(ceil) + 1))
}

func (b Backoff) capOr() time.Duration {
	if b.Cap <= 0 {
		return BackoffCapDefault
	}
	return b.Cap
}
