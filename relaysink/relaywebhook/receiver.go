package relaywebhook

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaytype"
)

// Defaults for the zero fields of ReceiverConfig.
const (
	// DefaultMaxBodyBytes is the largest request body a Receiver reads when
	// ReceiverConfig.MaxBodyBytes is zero: 1 MiB.
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxRemembered caps the requests a Receiver remembers when
	// ReceiverConfig.MaxRemembered is zero. An entry lives about one
	// tolerance, so at DefaultSignatureTolerance this allows some 800
	// verified requests a second, sustained, in about 32 MB (some 130
	// bytes an entry).
	DefaultMaxRemembered = 250_000
)

// Errors of a Receiver besides the signature errors (test with errors.Is).
var (
	// ErrBodyTooLarge: the request body is longer than
	// ReceiverConfig.MaxBodyBytes.
	ErrBodyTooLarge = errors.New("request body too large")
	// ErrReplayed: a request with the same event id and signed timestamp
	// was already verified within the tolerance window: a replay.
	ErrReplayed = errors.New("request replayed")
	// ErrReplayMemoryFull: the Receiver already remembers
	// ReceiverConfig.MaxRemembered unexpired requests and refuses new ones
	// until some expire (the sender retries; raise the cap or shorten the
	// tolerance if this happens under normal load).
	ErrReplayMemoryFull = errors.New("replay memory full")
)

// ReceiverConfig configures a Receiver. Its String and GoString redact the
// secret.
type ReceiverConfig struct {
	// Secret is the HMAC-SHA256 key the sink signs with; required.
	Secret []byte
	// Clock is the receiver's time for the tolerance and the replay window;
	// default relayclock.System{}.
	Clock relaytype.Clock
	// Tolerance is how far a signed timestamp may be from Clock, either
	// way, and how long a verified request is remembered; default
	// DefaultSignatureTolerance; at least 1s. Whole seconds count (the
	// header's precision).
	Tolerance time.Duration
	// MaxBodyBytes is the largest body read; a longer one is refused with
	// ErrBodyTooLarge. Default DefaultMaxBodyBytes; the sink does not limit
	// payloads, so raise it to the largest event the topic carries.
	MaxBodyBytes int64
	// MaxRemembered caps the verified requests remembered for the replay
	// check; beyond it new requests are refused with ErrReplayMemoryFull.
	// Default DefaultMaxRemembered.
	MaxRemembered int
}

// String describes cfg with the secret redacted.
func (cfg ReceiverConfig) String() string {
	return fmt.Sprintf("relaywebhook.ReceiverConfig{Secret: %s, Tolerance: %v, MaxBodyBytes: %d, MaxRemembered: %d}",
		redacted(cfg.Secret), cfg.Tolerance, cfg.MaxBodyBytes, cfg.MaxRemembered)
}

// GoString is String, so %#v redacts too.
func (cfg ReceiverConfig) GoString() string { return cfg.String() }

// validate names the first bad field of cfg (after defaults are applied).
func (cfg ReceiverConfig) validate() error {
	switch {
	case len(cfg.Secret) == 0:
		return errors.New("relaywebhook: ReceiverConfig.Secret is required")
	case cfg.Tolerance < time.Second:
		return fmt.Errorf("relaywebhook: ReceiverConfig.Tolerance: %v, want at least 1s", cfg.Tolerance)
	case cfg.MaxBodyBytes < 0:
		return fmt.Errorf("relaywebhook: ReceiverConfig.MaxBodyBytes: negative %d", cfg.MaxBodyBytes)
	case cfg.MaxRemembered < 0:
		return fmt.Errorf("relaywebhook: ReceiverConfig.MaxRemembered: negative %d", cfg.MaxRemembered)
	}
	return nil
}

// Receiver verifies the requests of a webhook Sink on the receiving side:
// the v2 signature (HeaderSignatureV2) over the event id, type, key,
// sequence, topic and body, the timestamp within the tolerance of an
// injected clock, a bounded body, and no replay: a request whose event id
// and signed timestamp it already verified within the tolerance window is
// refused. Use Verify from a handler of your own, or Handler as middleware.
//
// The replay memory keys on the event id and the signed timestamp, not on
// the id alone: the sink re-sends an unconfirmed event (delivery is at least
// once) and signs each attempt anew, and that redelivery must pass; a
// captured request sent again carries the old timestamp, which cannot be
// changed without the secret. Receivers still dedupe by event id, as for
// any at-least-once sink. Memory is bounded: an entry is dropped once its
// timestamp is out of tolerance (the signature check refuses it from then
// on), and at most ReceiverConfig.MaxRemembered are kept. The memory lives
// in this process: receivers behind a load balancer each keep their own.
//
// A Receiver is safe for concurrent use.
type Receiver struct {
	secret    []byte
	clock     relaytype.Clock
	tolerance time.Duration
	maxBody   int64

	mu   sync.Mutex
	seen replayMemory
}

// NewReceiver returns a Receiver for cfg, after checking it.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	cfg.Tolerance = cmp.Or(cfg.Tolerance, DefaultSignatureTolerance)
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, DefaultMaxBodyBytes)
	cfg.MaxRemembered = cmp.Or(cfg.MaxRemembered, DefaultMaxRemembered)
	if cfg.Clock == nil {
		cfg.Clock = relayclock.System{}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Receiver{
		secret:    bytes.Clone(cfg.Secret),
		clock:     cfg.Clock,
		tolerance: cfg.Tolerance,
		maxBody:   cfg.MaxBodyBytes,
		seen:      replayMemory{max: cfg.MaxRemembered, index: map[[sha256.Size]byte]bool{}},
	}, nil
}

// Verify reads r's body (at most ReceiverConfig.MaxBodyBytes) and checks
// that r is a request of the sink signed with v2 under the secret, within
// the tolerance, and not a replay. It returns the event r carries: ID from
// relay-event-id, Seq from relay-seq, Type from relay-type, Key from
// relay-key (path-unescaped), Topic from the last segment of the URL path
// (path-unescaped; the sink posts to Config.URL + "/" + topic), Payload the
// body (nil for a Tombstone); Headers is nil, the request's own headers
// being unsigned. Use these fields, not the raw headers: they are what the
// signature covers.
//
// The error wraps ErrBodyTooLarge, ErrSignatureMalformed (also for a missing
// or unparsable signed field, a tombstone with a body, or an
// Idempotency-Key that differs from the event id), ErrSignatureMismatch,
// ErrSignatureExpired, ErrReplayed or ErrReplayMemoryFull, or is the body's
// read error; its text never holds the body, header values or the secret.
// Verify consumes r.Body and does not close it (the server does). A request
// is remembered as soon as it verifies, whatever the caller then answers.
func (rv *Receiver) Verify(r *http.Request) (relaysink.Event, error) {
	const prefix = "relaywebhook: verify request"
	if r.ContentLength > rv.maxBody {
		return relaysink.Event{}, fmt.Errorf("%s: %w: %d bytes, limit %d", prefix, ErrBodyTooLarge, r.ContentLength, rv.maxBody)
	}
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(io.LimitReader(r.Body, rv.maxBody+1))
		if err != nil {
			return relaysink.Event{}, fmt.Errorf("%s: read body: %w", prefix, err)
		}
		if int64(len(body)) > rv.maxBody {
			return relaysink.Event{}, fmt.Errorf("%s: %w: limit %d", prefix, ErrBodyTooLarge, rv.maxBody)
		}
	}
	ev, err := eventOf(r, body)
	if err != nil {
		return relaysink.Event{}, fmt.Errorf("%s: %w: %s", prefix, ErrSignatureMalformed, err)
	}
	now := rv.clock.Now()
	t, err := verify("v2", rv.secret, r.Header.Get(HeaderSignatureV2), now, rv.tolerance,
		func(t string) []byte { return macV2(rv.secret, t, ev) })
	if err != nil {
		return relaysink.Event{}, err
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if err := rv.seen.add(replayKey(ev.ID, t), t+int64(rv.tolerance/time.Second), now.Unix()); err != nil {
		return relaysink.Event{}, fmt.Errorf("%s %s: %w", prefix, idForError(ev.ID), err)
	}
	return ev, nil
}

// Remembered returns how many verified requests the Receiver remembers for
// the replay check, after dropping the expired ones.
func (rv *Receiver) Remembered() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.seen.expire(rv.clock.Now().Unix())
	return len(rv.seen.index)
}

// eventOf reads the signed fields of r; its errors name the field, never
// its value.
func eventOf(r *http.Request, body []byte) (relaysink.Event, error) {
	h := r.Header
	ev := relaysink.Event{ID: h.Get(relaysink.HeaderEventID), Type: relaysink.EventType(h.Get(relaysink.HeaderType))}
	if ev.ID == "" {
		return ev, errors.New("no " + relaysink.HeaderEventID)
	}
	if ik := h.Get(HeaderIdempotencyKey); ik != "" && ik != ev.ID {
		return ev, errors.New(HeaderIdempotencyKey + " differs from " + relaysink.HeaderEventID)
	}
	seq, err := strconv.ParseInt(h.Get(relaysink.HeaderSeq), 10, 64)
	if err != nil {
		return ev, errors.New(relaysink.HeaderSeq + " is not an integer")
	}
	ev.Seq = seq
	if ev.Key, err = url.PathUnescape(h.Get(HeaderKey)); err != nil {
		return ev, errors.New(HeaderKey + " is not path-escaped")
	}
	path := r.URL.EscapedPath()
	if ev.Topic, err = url.PathUnescape(path[strings.LastIndexByte(path, '/')+1:]); err != nil || ev.Topic == "" {
		return ev, errors.New("the URL path does not end in a topic")
	}
	ev.Payload = body
	if ev.Type == relaysink.Tombstone {
		if len(body) > 0 {
			return ev, errors.New("a tombstone with a body")
		}
		ev.Payload = nil
	} else if ev.Payload == nil {
		ev.Payload = []byte{}
	}
	return ev, nil
}

// idForError is an event id short enough for an error message.
func idForError(id string) string {
	const limit = 64
	if len(id) > limit {
		return fmt.Sprintf("id=%q…", id[:limit])
	}
	return fmt.Sprintf("id=%q", id)
}

// eventKey is the context key of the event Handler verified.
type eventKey struct{}

// EventFromContext returns the event a Receiver's Handler verified for the
// request whose context ctx is, and whether there is one.
func EventFromContext(ctx context.Context) (relaysink.Event, bool) {
	ev, ok := ctx.Value(eventKey{}).(relaysink.Event)
	return ev, ok
}

// Handler returns middleware that verifies each request with Verify before
// next sees it. A request that fails is answered without calling next:
// 413 for ErrBodyTooLarge, 400 for ErrSignatureMalformed or an unreadable
// body, 401 for ErrSignatureMismatch and ErrSignatureExpired, 409 for
// ErrReplayed, 503 for ErrReplayMemoryFull, with the error class as a short
// text (never the details). A verified request reaches next with its body
// restored (next may read it again) and its event in the context
// (EventFromContext). next confirms the event to the sink by answering 2xx.
func (rv *Receiver) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev, err := rv.Verify(r)
		if err != nil {
			code, text := http.StatusBadRequest, "bad request"
			for _, c := range []struct {
				err  error
				code int
			}{
				{ErrBodyTooLarge, http.StatusRequestEntityTooLarge},
				{ErrSignatureMalformed, http.StatusBadRequest},
				{ErrSignatureMismatch, http.StatusUnauthorized},
				{ErrSignatureExpired, http.StatusUnauthorized},
				{ErrReplayed, http.StatusConflict},
				{ErrReplayMemoryFull, http.StatusServiceUnavailable},
			} {
				if errors.Is(err, c.err) {
					code, text = c.code, c.err.Error()
					break
				}
			}
			http.Error(w, text, code)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), eventKey{}, ev))
		r.Body = io.NopCloser(bytes.NewReader(ev.Payload))
		next.ServeHTTP(w, r)
	})
}

// replayKey identifies one signed request: its event id and timestamp,
// hashed so that an entry has a fixed size however long the id.
func replayKey(id string, t int64) [sha256.Size]byte {
	h := sha256.New()
	writeNetstring(h, []byte(id))
	writeNetstring(h, strconv.AppendInt(nil, t, 10))
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}

// replayMemory remembers keys until their expiry (unix seconds), at most max
// at a time. Not safe for concurrent use (Receiver holds mu).
type replayMemory struct {
	max   int
	index map[[sha256.Size]byte]bool
	queue expiryHeap
}

// add remembers key until expires, after dropping what expired before now;
// it fails with ErrReplayed if key is remembered, ErrReplayMemoryFull if max
// keys are.
func (m *replayMemory) add(key [sha256.Size]byte, expires, now int64) error {
	m.expire(now)
	if m.index[key] {
		return ErrReplayed
	}
	if len(m.index) >= m.max {
		return fmt.Errorf("%w: %d requests within the window", ErrReplayMemoryFull, len(m.index))
	}
	m.index[key] = true
	heap.Push(&m.queue, expiring{key: key, at: expires})
	return nil
}

// expire drops the keys whose expiry is before now.
func (m *replayMemory) expire(now int64) {
	for len(m.queue) > 0 && m.queue[0].at < now {
		delete(m.index, heap.Pop(&m.queue).(expiring).key)
	}
}

// expiring is one remembered key and when it expires.
type expiring struct {
	key [sha256.Size]byte
	at  int64
}

// expiryHeap is a min-heap of expiring by at (container/heap).
type expiryHeap []expiring

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiring)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
