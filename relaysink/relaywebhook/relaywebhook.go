package relaywebhook

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaytype"
)

// Defaults for the zero fields of Config.
const (
	// DefaultRequestTimeout bounds one HTTP request when Config.RequestTimeout
	// is zero.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultConcurrency is the sink's limit on requests in flight when
	// Config.Concurrency is zero.
	DefaultConcurrency = 8
)

// Header names the sink sets besides the relaysink standard ones and
// HeaderSignature.
const (
	// HeaderKey carries Event.Key percent-encoded with url.PathEscape (decode
	// with url.PathUnescape), so that any key fits an HTTP header value.
	HeaderKey = "relay-key"
	// HeaderIdempotencyKey carries Event.ID, for receivers that dedupe by the
	// common Idempotency-Key convention.
	HeaderIdempotencyKey = "Idempotency-Key"
)

// StatusError is the reason of an event the receiver answered with a status
// other than 2xx (3xx included: redirects are not followed); Publish results
// wrap it (test with errors.As) beside the relaysink sentinels.
type StatusError struct {
	// StatusCode is the HTTP status code of the answer.
	StatusCode int
}

// Error returns "status <code> <text>".
func (e *StatusError) Error() string {
	return fmt.Sprintf("status %d %s", e.StatusCode, http.StatusText(e.StatusCode))
}

// Config configures a Sink. Its String and GoString redact the secret and
// any password in URL, so a Config may be logged.
type Config struct {
	// URL is the receiver's base URL, http or https, without query or
	// fragment; an event goes to URL + "/" + url.PathEscape(Event.Topic).
	// Required.
	URL string
	// Secret is the HMAC-SHA256 key requests are signed with; required.
	Secret []byte
	// DisableV1Signature stops the v1 signature (HeaderSignature, over the
	// timestamp and body only). By default every request carries both the
	// v2 signature (HeaderSignatureV2, always sent) and v1, so receivers
	// that check v1 keep working while they move to v2; set it once they
	// all check v2.
	DisableV1Signature bool
	// Clock stamps the signatures; default relayclock.System{}.
	Clock relaytype.Clock
	// RequestTimeout bounds each request (on top of Publish's ctx); default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Concurrency caps the requests in flight for the whole sink, across
	// concurrent Publish calls; default DefaultConcurrency.
	Concurrency int
	// Client is the HTTP client to use (TLS, proxy, a custom transport);
	// default a client of the sink's own on a clone of
	// http.DefaultTransport, whose idle connections Close releases. The sink
	// uses a copy that never follows redirects, so a signed request is only
	// ever sent to URL.
	Client *http.Client
}

// String describes cfg with the secret and any URL password redacted.
func (cfg Config) String() string {
	u := "<invalid>"
	if p, err := url.Parse(cfg.URL); err == nil {
		u = p.Redacted()
	}
	return fmt.Sprintf("relaywebhook.Config{URL: %s, Secret: %s, DisableV1Signature: %t, RequestTimeout: %v, Concurrency: %d, custom Client: %t}",
		u, redacted(cfg.Secret), cfg.DisableV1Signature, cfg.RequestTimeout, cfg.Concurrency, cfg.Client != nil)
}

// GoString is String, so %#v redacts too.
func (cfg Config) GoString() string { return cfg.String() }

// redacted stands for a secret in a String: "<redacted>", or "<none>" for
// an empty one.
func redacted(secret []byte) string {
	if len(secret) == 0 {
		return "<none>"
	}
	return "<redacted>"
}

// validate names the first bad field of cfg (after defaults are applied).
func (cfg Config) validate() error {
	u, err := url.Parse(cfg.URL)
	switch {
	case cfg.URL == "":
		return errors.New("relaywebhook: Config.URL is required")
	case err != nil:
		return fmt.Errorf("relaywebhook: Config.URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("relaywebhook: Config.URL: scheme %q, want http or https", u.Scheme)
	case u.Host == "":
		return errors.New("relaywebhook: Config.URL: no host")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return errors.New("relaywebhook: Config.URL: query or fragment not allowed (the topic is appended to the path)")
	case len(cfg.Secret) == 0:
		return errors.New("relaywebhook: Config.Secret is required")
	case cfg.RequestTimeout < 0:
		return fmt.Errorf("relaywebhook: Config.RequestTimeout: negative %v", cfg.RequestTimeout)
	case cfg.Concurrency < 0:
		return fmt.Errorf("relaywebhook: Config.Concurrency: negative %d", cfg.Concurrency)
	}
	return nil
}

// Sink is the webhook relaysink.Sink. It is safe for concurrent use.
type Sink struct {
	base      string // Config.URL without a trailing slash
	secret    []byte
	noV1      bool // Config.DisableV1Signature
	clock     relaytype.Clock
	timeout   time.Duration
	client    *http.Client
	ownClient bool          // Close releases the client's idle connections
	sem       chan struct{} // one token per request in flight

	// stop cancels every Publish in flight; Close calls it when its ctx
	// ends before they finish.
	stopCtx context.Context
	stop    context.CancelFunc

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup // Publish calls; Add only under mu while !closed
}

var _ relaysink.Sink = (*Sink)(nil)

// New returns a Sink for cfg, after checking it. It does not contact the
// receiver.
func New(cfg Config) (*Sink, error) {
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, DefaultRequestTimeout)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	if cfg.Clock == nil {
		cfg.Clock = relayclock.System{}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Sink{
		base:    strings.TrimRight(cfg.URL, "/"),
		secret:  bytes.Clone(cfg.Secret),
		noV1:    cfg.DisableV1Signature,
		clock:   cfg.Clock,
		timeout: cfg.RequestTimeout,
		sem:     make(chan struct{}, cfg.Concurrency),
	}
	if cfg.Client != nil {
		c := *cfg.Client
		s.client = &c
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = cfg.Concurrency
		s.client, s.ownClient = &http.Client{Transport: tr}, true
	}
	s.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	var cancel context.CancelCauseFunc
	s.stopCtx, cancel = context.WithCancelCause(context.Background())
	s.stop = func() { cancel(relaysink.ErrClosed) }
	return s, nil
}

// pkg prefixes the sink's errors.
const pkg = "relaywebhook"

// Name returns "webhook".
func (s *Sink) Name() string { return "webhook" }

// streamKey is the unit of order: one key on one topic.
type streamKey struct{ topic, key string }

// Publish POSTs events and returns one error per event in input order (see
// relaysink.Sink): nil for a 2xx answer. The events of one (topic, key) are
// sent one after another in input order; different keys in parallel, within
// the sink's Config.Concurrency. A key's first unconfirmed event (invalid,
// non-2xx, transport error, Config.RequestTimeout, ctx done, sink closed)
// stops the key: its later events are not sent and wrap
// relaysink.ErrEarlierFailed.
// ctx bounds the whole call and every request; events not yet answered when
// it ends get its cause (a request in flight may still have been processed:
// at least once). Publish never retries; the dispatcher re-publishes.
//
// Every error is a *relaysink.PublishError; errors.Is finds the relaysink
// sentinels in it (relaysink.ErrPublishTimeout for Config.RequestTimeout,
// relaysink.ErrInvalidEvent for an event relaysink.Event.Validate or HTTP
// refuses, relaysink.ErrClosed), errors.As a *StatusError.
//
// User headers come first; a user header named like one the sink sets
// (relay-event-id, relay-seq, relay-type, relay-key, Idempotency-Key,
// Relay-Signature, Relay-Signature-V2) or one of HTTP's framing headers
// (Host, Content-Length, Transfer-Encoding, Connection, …) is dropped, as
// relaykafka drops the standard names; Content-Type may be set by the event.
// A header name or value HTTP cannot carry (control characters) makes the
// event invalid.
func (s *Sink) Publish(ctx context.Context, events []relaysink.Event) []error {
	errs := make([]error, len(events))
	if len(events) == 0 {
		return errs
	}
	// In place, on every return. Its prefix rule changes nothing as long
	// as runLane stops each key at its first failure.
	defer relaysink.FinishResult(pkg, events, errs)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		for i := range errs {
			errs[i] = relaysink.ErrClosed
		}
		return errs
	}
	s.inflight.Add(1)
	s.mu.Unlock()
	defer s.inflight.Done()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopWatch := context.AfterFunc(s.stopCtx, func() { cancel(relaysink.ErrClosed) })
	defer stopWatch()

	// Lanes: each (topic, key)'s event indexes in input order, lanes in
	// order of first appearance.
	laneOf := map[streamKey]int{}
	var lanes [][]int
	for i, ev := range events {
		sk := streamKey{ev.Topic, ev.Key}
		l, ok := laneOf[sk]
		if !ok {
			l = len(lanes)
			laneOf[sk] = l
			lanes = append(lanes, nil)
		}
		lanes[l] = append(lanes[l], i)
	}

	// At most cap(sem) workers per call take lanes in order; sem bounds the
	// requests of all calls together. Each worker writes only the errs of
	// its lanes.
	var (
		wg   sync.WaitGroup
		next = make(chan []int, len(lanes))
	)
	for _, l := range lanes {
		next <- l
	}
	close(next)
	for range min(cap(s.sem), len(lanes)) {
		wg.Go(func() {
			for lane := range next {
				s.runLane(ctx, events, lane, errs)
			}
		})
	}
	wg.Wait()
	return errs
}

// runLane sends one key's events in order and stops at the first that is
// not confirmed.
func (s *Sink) runLane(ctx context.Context, events []relaysink.Event, lane []int, errs []error) {
	for n, i := range lane {
		if err := s.send(ctx, events[i]); err != nil {
			errs[i] = err
			for _, j := range lane[n+1:] {
				errs[j] = relaysink.ErrEarlierFailed
			}
			return
		}
	}
}

// send POSTs one event and returns nil for a 2xx answer.
func (s *Sink) send(ctx context.Context, ev relaysink.Event) error {
	req, err := s.request(ev)
	if err != nil {
		return err
	}
	if err := context.Cause(ctx); err != nil {
		return err // do not start a request the caller gave up on
	}
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	rctx, cancel := context.WithTimeoutCause(ctx, s.timeout, relaysink.ErrPublishTimeout)
	defer cancel()
	// The signatures are stamped when the request goes out, after any wait
	// for a token, so that a receiver's tolerance measures the network.
	now := s.clock.Now()
	req.Header.Set(HeaderSignatureV2, SignV2(s.secret, now, ev))
	if !s.noV1 {
		req.Header.Set(HeaderSignature, Sign(s.secret, now, bodyOf(ev)))
	}
	resp, err := s.client.Do(req.WithContext(rctx))
	if err != nil {
		if cause := context.Cause(rctx); cause != nil {
			return fmt.Errorf("%w (%w)", cause, err)
		}
		return err
	}
	// Drain a little so the connection can be reused; the answer's body is
	// not interpreted.
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &StatusError{StatusCode: resp.StatusCode}
	}
	return nil
}

// bodyOf is the request body of ev: its payload, or nothing for a tombstone.
func bodyOf(ev relaysink.Event) []byte {
	if ev.Type == relaysink.Tombstone {
		return nil
	}
	return ev.Payload
}

// reserved are the header names (canonical form) a user header may not set:
// the sink's own and HTTP's framing and hop-by-hop headers.
var reserved = map[string]bool{}

func init() {
	for _, name := range []string{
		relaysink.HeaderEventID, relaysink.HeaderSeq, relaysink.HeaderType,
		HeaderKey, HeaderIdempotencyKey, HeaderSignature, HeaderSignatureV2,
		"Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive",
		"Proxy-Connection", "Upgrade", "Te", "Trailer", "Expect",
	} {
		reserved[http.CanonicalHeaderKey(name)] = true
	}
}

// request builds the unsigned request of ev, or an error wrapping
// relaysink.ErrInvalidEvent.
func (s *Sink) request(ev relaysink.Event) (*http.Request, error) {
	if err := ev.Validate(); err != nil {
		return nil, err
	}
	switch {
	case ev.Topic == "." || ev.Topic == "..":
		return nil, fmt.Errorf("%w: topic %q is not a path segment", relaysink.ErrInvalidEvent, ev.Topic)
	case !validHeaderValue(ev.ID):
		return nil, fmt.Errorf("%w: ID has control characters", relaysink.ErrInvalidEvent)
	}
	body := bodyOf(ev)
	req, err := http.NewRequest(http.MethodPost, s.base+"/"+url.PathEscape(ev.Topic), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", relaysink.ErrInvalidEvent, err)
	}
	h := req.Header
	h.Set("Content-Type", "application/octet-stream")
	for _, name := range slices.Sorted(maps.Keys(ev.Headers)) {
		if !validHeaderName(name) {
			return nil, fmt.Errorf("%w: header name %q", relaysink.ErrInvalidEvent, name)
		}
		if !validHeaderValue(ev.Headers[name]) {
			return nil, fmt.Errorf("%w: header %q has control characters", relaysink.ErrInvalidEvent, name)
		}
		if reserved[http.CanonicalHeaderKey(name)] {
			continue
		}
		h.Set(name, ev.Headers[name])
	}
	h.Set(relaysink.HeaderEventID, ev.ID)
	h.Set(relaysink.HeaderSeq, strconv.FormatInt(ev.Seq, 10))
	h.Set(relaysink.HeaderType, string(ev.Type))
	h.Set(HeaderKey, url.PathEscape(ev.Key))
	h.Set(HeaderIdempotencyKey, ev.ID)
	return req, nil
}

// validHeaderName reports whether name is an RFC 9110 token.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := range len(name) {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue reports whether v has no control characters other than
// horizontal tab (what net/http refuses to send).
func validHeaderValue(v string) bool {
	for i := range len(v) {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// Close marks the sink closed (later Publish calls fail every event with
// relaysink.ErrClosed), waits within ctx for the Publish calls in flight to
// finish, and releases the idle connections of the sink's own client. If ctx
// ends first, the calls in flight are cancelled (their unanswered events fail
// with relaysink.ErrClosed) and Close returns ctx's error after they return. Nothing is
// buffered, so there is nothing else to flush. Close is idempotent.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()

	done := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		s.stop()
		<-done
		err = fmt.Errorf("relaywebhook: close: publishes in flight cancelled: %w", context.Cause(ctx))
	}
	if s.ownClient {
		s.client.CloseIdleConnections()
	}
	return err
}
