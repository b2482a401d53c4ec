package relaywebhook_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysink/relaysinktest"
	"github.com/relayhq/relay/relaysink/relaywebhook"
	"github.com/relayhq/relay/relaytype"
)

// secret is the receivers' signing secret.
var secret = []byte("whsec-test-0123456789")

// basePath is where the receivers mount their topic routes, so the sink's
// URL has a path of its own.
const basePath = "/hooks"

// TestConformance runs the sink suite against a real HTTP receiver of ours
// on loopback, one per case.
func TestConformance(t *testing.T) {
	relaysinktest.Run(t, relaysinktest.Features{Tombstones: true, FailSome: true, Stall: true, OwnTimeout: true},
		relaysinktest.Harness{New: newBackend})
}

// newBackend starts a receiver with routes for the case's topics and a sink
// on it.
func newBackend(t *testing.T, topics []string) relaysinktest.Backend {
	rc := newReceiver(t, relayclock.System{}, topics...)
	newSink := func(t *testing.T, timeout time.Duration) relaysink.Sink {
		sink, err := relaywebhook.New(relaywebhook.Config{URL: rc.srv.URL + basePath, Secret: secret, RequestTimeout: timeout})
		require.NoError(t, err)
		relaysinktest.CloseOnCleanup(t, sink)
		return sink
	}
	return relaysinktest.Backend{
		// Longer than the suite's stall deadline, so BoundedTimeout proves
		// that Publish honours its ctx rather than this timeout.
		Sink: newSink(t, 30*time.Second),
		Consume: func(_ context.Context, topic string) ([]relaysinktest.Delivered, error) {
			return rc.delivered(topic), nil
		},
		FailSome: func(*testing.T) { rc.failSome(24) },
		Stall: func(*testing.T) func() {
			// A request the client abandoned may still be woken by the
			// release after its key was re-published: per-key overlap is
			// expected then, so the check is off for this receiver.
			rc.mu.Lock()
			rc.checkSerial = false
			rc.mu.Unlock()
			return rc.stall()
		},
		WithTimeout: newSink,
	}
}

// seen is one request the receiver accepted, as it arrived.
type seen struct {
	topic  string
	header http.Header
	body   []byte
}

// receiver is our webhook endpoint: it verifies every signature, records
// each accepted delivery per topic in arrival order, and has the fault hooks.
// Anything a correct sink must never send (a bad signature, an unknown
// route, a missing header, overlapping requests of one key) is a problem the
// test fails on in its cleanup.
type receiver struct {
	srv   *httptest.Server
	clock relaytype.Clock

	mu          sync.Mutex
	topics      map[string]bool // routes; nil accepts any topic
	got         map[string][]relaysinktest.Delivered
	seen        []seen
	problems    []string
	requests    int                               // verified requests, for failSome
	failLeft    int                               // failSome budget
	answer      func(relaysinktest.Delivered) int // optional: a non-zero status overrides 200
	gate        chan struct{}                     // non-nil while stalled
	checkSerial bool                              // fail on overlapping requests of one (topic, key)
	busy        map[[2]string]bool                // (topic, key) with a request in the handler
	inflight    int
	maxInflight int
}

// newReceiver starts a receiver on loopback that checks signatures against
// clock, with routes for topics (any topic when none are given).
func newReceiver(t *testing.T, clock relaytype.Clock, topics ...string) *receiver {
	t.Helper()
	rc := &receiver{
		clock:       clock,
		got:         map[string][]relaysinktest.Delivered{},
		checkSerial: true,
		busy:        map[[2]string]bool{},
	}
	if len(topics) > 0 {
		rc.topics = map[string]bool{}
		for _, topic := range topics {
			rc.topics[topic] = true
		}
	}
	rc.srv = httptest.NewServer(rc)
	t.Cleanup(rc.srv.Close) // last: after the sink is closed and stalls released
	t.Cleanup(func() {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		require.Empty(t, rc.problems, "the receiver saw requests a correct sink never sends")
	})
	return rc
}

func (rc *receiver) problem(format string, args ...any) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.problems = append(rc.problems, fmt.Sprintf(format, args...))
}

// ServeHTTP handles one delivery: route, body, stall gate, signature,
// headers, then the fault decision and the record.
func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		rc.problem("method %s", r.Method)
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), basePath+"/")
	topic, err := url.PathUnescape(rest)
	rc.mu.Lock()
	known := ok && err == nil && (rc.topics == nil || rc.topics[topic])
	rc.mu.Unlock()
	if !known {
		rc.problem("request to unknown route %s", r.URL.EscapedPath())
		w.WriteHeader(http.StatusNotFound)
		return
	}
	// Read the whole body first: the server notices a client that went
	// away (and cancels r.Context) only once the body is consumed.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // the client went away mid-body
	}
	key, err := url.PathUnescape(r.Header.Get(relaywebhook.HeaderKey))
	if err != nil {
		rc.problem("bad %s header: %v", relaywebhook.HeaderKey, err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	sk := [2]string{topic, key}
	rc.enter(sk)
	code := rc.handle(r, topic, key, body)
	rc.leave(sk) // before answering: the sink may send the key's next event at once
	if code >= 300 && code < 400 {
		// Somewhere a following client would go: back to this route.
		w.Header().Set("Location", r.URL.String())
	}
	if code != 0 {
		w.WriteHeader(code)
	}
}

// handle does the work of a request whose key is marked busy; it returns
// the status to answer (0: none, the client is gone).
func (rc *receiver) handle(r *http.Request, topic, key string, body []byte) int {
	rc.mu.Lock()
	gate := rc.gate
	rc.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
			return 0
		}
	}
	if r.Context().Err() != nil {
		return 0 // the client gave up: not processed
	}
	// v1 where the sink sends it (TestRequestShape pins that it does by
	// default); v2 always, below, once the signed fields are decoded.
	if v1 := r.Header.Get(relaywebhook.HeaderSignature); v1 != "" {
		if err := relaywebhook.VerifySignature(secret, v1, body, rc.clock.Now(), time.Minute); err != nil {
			rc.problem("%s key=%s: %v", topic, key, err)
			return http.StatusUnauthorized
		}
	}
	headers := make(map[string]string, len(r.Header))
	for name, values := range r.Header {
		headers[strings.ToLower(name)] = values[0]
	}
	if id := headers[relaysink.HeaderEventID]; headers["idempotency-key"] != id {
		rc.problem("%s: Idempotency-Key %q, event id %q", topic, headers["idempotency-key"], id)
		return http.StatusBadRequest
	}
	payload := body
	if payload == nil {
		payload = []byte{}
	}
	if headers[relaysink.HeaderType] == string(relaysink.Tombstone) {
		if len(body) > 0 {
			rc.problem("%s key=%s: tombstone with a body", topic, key)
			return http.StatusBadRequest
		}
		payload = nil // the type tells a null value from an empty one
	}
	d, err := relaysinktest.Decode(key, headers, payload)
	if err != nil {
		rc.problem("%s: %v", topic, err)
		return http.StatusBadRequest
	}
	signed := relaysink.Event{ID: d.ID, Topic: topic, Key: key, Seq: d.Seq, Type: d.Type, Payload: payload}
	if err := relaywebhook.VerifySignatureV2(secret, r.Header.Get(relaywebhook.HeaderSignatureV2), signed, rc.clock.Now(), time.Minute); err != nil {
		rc.problem("%s key=%s: %v", topic, key, err)
		return http.StatusUnauthorized
	}

	rc.mu.Lock()
	defer rc.mu.Unlock()
	code, store := http.StatusOK, true
	rc.requests++
	if rc.failLeft > 0 && rc.requests%3 == 0 {
		// Every third request fails while the budget lasts; every other
		// failure is ambiguous: stored, yet answered 503.
		rc.failLeft--
		code, store = http.StatusServiceUnavailable, rc.failLeft%2 == 0
	}
	if rc.answer != nil {
		if c := rc.answer(d); c != 0 {
			code, store = c, false
		}
	}
	if store {
		rc.got[topic] = append(rc.got[topic], d)
		rc.seen = append(rc.seen, seen{topic: topic, header: r.Header.Clone(), body: body})
	}
	return code
}

func (rc *receiver) enter(sk [2]string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.inflight++
	rc.maxInflight = max(rc.maxInflight, rc.inflight)
	if rc.busy[sk] && rc.checkSerial {
		rc.problems = append(rc.problems, fmt.Sprintf("two requests of %s key=%s at once", sk[0], sk[1]))
	}
	rc.busy[sk] = true
}

func (rc *receiver) leave(sk [2]string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.inflight--
	delete(rc.busy, sk)
}

// setAnswer makes f decide the status of every verified request (0: the
// normal answer); an event answered by f is not recorded.
func (rc *receiver) setAnswer(f func(relaysinktest.Delivered) int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.answer = f
}

// failSome makes every third verified request fail with 503 until n have.
func (rc *receiver) failSome(n int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.failLeft = n
}

// stall holds every request that arrives from now on (after reading its
// body) until release, or until its client gives up; release may be called
// more than once.
func (rc *receiver) stall() (release func()) {
	gate := make(chan struct{})
	rc.mu.Lock()
	rc.gate = gate
	rc.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			rc.mu.Lock()
			rc.gate = nil
			rc.mu.Unlock()
			close(gate)
		})
	}
}

// delivered returns the deliveries recorded for topic, in arrival order.
func (rc *receiver) delivered(topic string) []relaysinktest.Delivered {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]relaysinktest.Delivered(nil), rc.got[topic]...)
}

func (rc *receiver) requestsSeen() []seen {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]seen(nil), rc.seen...)
}

func (rc *receiver) inFlight() (now, peak int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.inflight, rc.maxInflight
}

// setup returns a receiver accepting any topic and a sink on it.
func setup(t *testing.T, cfg relaywebhook.Config) (*relaywebhook.Sink, *receiver) {
	t.Helper()
	clock := cfg.Clock
	if clock == nil {
		clock = relayclock.System{}
	}
	rc := newReceiver(t, clock)
	cfg.URL = rc.srv.URL + basePath + "/" // a trailing slash is trimmed
	cfg.Secret = secret
	sink, err := relaywebhook.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, sink.Close(context.Background())) })
	return sink, rc
}
