package relaynats

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/relayhq/relay/relaysink"
)

// DefaultTimeout bounds one Publish (and the dial and the flush in Close)
// when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// HeaderKey is the header that carries Event.Key: NATS messages have no key.
const HeaderKey = "relay-key"

// maxRedo caps the in-process memory of events to re-publish under a fresh
// Nats-Msg-Id (see the package doc). An entry is dropped once its event is
// confirmed; beyond the cap an arbitrary entry is dropped (it only matters
// if that event is re-published within the duplicate window).
const maxRedo = 1 << 16

// ErrConnectionLost is the reason of an event whose connection closed
// before the server acknowledged it; the event may still have been stored.
// Publish results wrap it (test with errors.Is) beside the reasons all sinks
// share, the relaysink sentinels.
var ErrConnectionLost = errors.New("connection lost before the ack")

// Config configures a Sink.
type Config struct {
	// URL is the NATS server URL (or a comma-separated list), for example
	// "nats://127.0.0.1:4222"; required.
	URL string
	// Name is the connection name the server shows; default "relay".
	Name string
	// Timeout bounds one Publish call (on top of its ctx), every dial, each
	// message's ack wait and the flush in Close. Default DefaultTimeout.
	Timeout time.Duration
	// Options are extra nats.go options (TLS, credentials, …). They are
	// applied before relaynats' own, so NoReconnect, the dial timeout and
	// the closed handler always hold (see the package doc for why).
	Options []nats.Option
}

// validate names the bad field of cfg.
func (cfg Config) validate() error {
	switch {
	case cfg.URL == "":
		return errors.New("relaynats: Config.URL is empty")
	case cfg.Timeout < 0:
		return fmt.Errorf("relaynats: Config.Timeout is negative (%v)", cfg.Timeout)
	}
	return nil
}

// Sink is the NATS JetStream relaysink.Sink. It is safe for concurrent use;
// concurrent Publish calls share one connection.
type Sink struct {
	cfg     Config
	closed  atomic.Bool
	dialing chan struct{} // a one-slot semaphore: one dial at a time, waited on with ctx

	mu   sync.Mutex
	cur  *conn             // nil before the first dial and after a lost connection
	redo map[string]string // event ID → the Nats-Msg-Id of its next publish
}

// conn is one connection and its JetStream context. done is closed when the
// connection closes: nats.go does not fail the pending acks of a closed
// connection, so Publish watches done itself.
type conn struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	done chan struct{}
}

var _ relaysink.Sink = (*Sink)(nil)

// New returns a Sink for cfg. It does not contact the server: the sink dials
// on the first Publish (and again after a lost connection).
func New(cfg Config) (*Sink, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name = "relay"
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Sink{cfg: cfg, dialing: make(chan struct{}, 1), redo: map[string]string{}}, nil
}

// pkg prefixes the sink's errors.
const pkg = "relaynats"

// Name returns "nats".
func (s *Sink) Name() string { return "nats" }

// streamKey is the unit of order: one key on one topic.
type streamKey struct{ topic, key string }

// Publish publishes events and waits for JetStream's acks (see
// relaysink.Sink). It returns when every message is acknowledged or failed,
// or when ctx or Config.Timeout ends, or when the connection is lost; events
// without an answer by then get that error (they may still be stored: at
// least once). A duplicate ack (the stream already held the Nats-Msg-Id)
// confirms the event.
//
// Every error is a *relaysink.PublishError; errors.Is finds the relaysink
// sentinels in it (relaysink.ErrPublishTimeout for Config.Timeout) or
// ErrConnectionLost. An invalid event (relaysink.Event.Validate, a topic
// that is not a NATS subject, a header NATS cannot carry or a reserved
// Nats-* header) is not sent and blocks the later events of its key, which
// are not sent either. On one connection relaysink.EnforceKeyOrder changes
// the result only when the server rejected an event but stored a later one
// of its key (a stream limit that a smaller message still fits, for
// example); noteRedo then makes sure the later event is stored again behind
// its predecessor.
func (s *Sink) Publish(ctx context.Context, events []relaysink.Event) []error {
	errs := make([]error, len(events))
	if len(events) == 0 {
		return errs
	}
	defer relaysink.FinishResult(pkg, events, errs) // in place, on every return
	if s.closed.Load() {
		for i := range errs {
			errs[i] = relaysink.ErrClosed
		}
		return errs
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.cfg.Timeout, relaysink.ErrPublishTimeout)
	defer cancel()

	c, err := s.conn(ctx)
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}

	futures := make([]jetstream.PubAckFuture, len(events))
	failed := map[streamKey]bool{}
	for i, ev := range events {
		sk := streamKey{ev.Topic, ev.Key}
		if failed[sk] {
			// Known before sending: do not send later events of a
			// failed key at all.
			errs[i] = relaysink.ErrEarlierFailed
			continue
		}
		f, err := s.send(ctx, c, ev)
		if err != nil {
			errs[i] = err
			failed[sk] = true
			continue
		}
		futures[i] = f
	}

	for i, f := range futures {
		if f == nil {
			continue
		}
		if err := wait(ctx, c, f); err != nil {
			if errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
				// The per-message ack timer is Config.Timeout too.
				err = fmt.Errorf("%w: %w", relaysink.ErrPublishTimeout, err)
			}
			errs[i] = err
		}
	}

	// Before noteRedo, which must see a confirmation behind a failure as
	// the failure it is reported as (FinishResult applies it again: no-op).
	relaysink.EnforceKeyOrder(events, errs)
	s.noteRedo(events, futures, errs)
	return errs
}

// send publishes ev asynchronously on c. An error means the message was not
// handed to the connection.
func (s *Sink) send(ctx context.Context, c *conn, ev relaysink.Event) (jetstream.PubAckFuture, error) {
	s.mu.Lock()
	msgID, ok := s.redo[ev.ID]
	s.mu.Unlock()
	if !ok {
		msgID = ev.ID
	}
	msg, err := message(ev, msgID)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		// Do not start messages after the caller gave up.
		return nil, context.Cause(ctx)
	}
	deadline, _ := ctx.Deadline() // always set: Publish adds Config.Timeout
	stall := time.Until(deadline)
	if stall <= 0 {
		return nil, context.Cause(ctx)
	}
	// No retries: nats.go would re-publish a "no responders" message after
	// a pause, behind later messages of its key.
	return c.js.PublishMsgAsync(msg, jetstream.WithRetryAttempts(0), jetstream.WithStallWait(stall))
}

// wait returns nil once f is acknowledged, the server's or client's error,
// the ctx cause when ctx ends first, or ErrConnectionLost when c closes
// first. An answer that is already there wins over ctx and the connection.
func wait(ctx context.Context, c *conn, f jetstream.PubAckFuture) error {
	okCh, errCh := f.Ok(), f.Err()
	answer := func() (error, bool) {
		select {
		case <-okCh:
			return nil, true
		case err := <-errCh:
			return err, true
		default:
			return nil, false
		}
	}
	select {
	case <-okCh:
		return nil
	case err := <-errCh:
		return err
	case <-c.done:
		if err, ok := answer(); ok {
			return err
		}
		return ErrConnectionLost
	case <-ctx.Done():
		if err, ok := answer(); ok {
			return err
		}
		return context.Cause(ctx)
	}
}

// noteRedo updates the redo memory after a Publish: an event that was sent
// behind an unconfirmed event of its key may be stored ahead of its
// predecessor's eventual copy, so its next publish gets a fresh Nats-Msg-Id
// (JetStream would otherwise drop it as a duplicate of the misplaced copy).
// A confirmed event leaves the memory; any other event keeps its Nats-Msg-Id,
// so a copy stored in its right place is deduplicated.
func (s *Sink) noteRedo(events []relaysink.Event, futures []jetstream.PubAckFuture, errs []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	failed := map[streamKey]bool{}
	for i, ev := range events {
		sk := streamKey{ev.Topic, ev.Key}
		switch {
		case errs[i] == nil:
			delete(s.redo, ev.ID)
		case futures[i] != nil && failed[sk]:
			if len(s.redo) >= maxRedo {
				for id := range s.redo {
					delete(s.redo, id)
					break
				}
			}
			s.redo[ev.ID] = ev.ID + "~" + nuid.Next()
		}
		if errs[i] != nil {
			failed[sk] = true
		}
	}
}

// conn returns the live connection, dialing one if there is none (or the
// last one closed). The dial is bounded by ctx and Config.Timeout.
func (s *Sink) conn(ctx context.Context) (*conn, error) {
	if c := s.live(); c != nil {
		return c, nil
	}
	select {
	case s.dialing <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { <-s.dialing }()
	if c := s.live(); c != nil {
		return c, nil // another Publish dialed meanwhile
	}
	if s.closed.Load() {
		return nil, relaysink.ErrClosed
	}

	timeout := s.cfg.Timeout
	if deadline, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(deadline))
	}
	if timeout <= 0 {
		return nil, context.Cause(ctx)
	}
	c := &conn{done: make(chan struct{})}
	var once sync.Once
	opts := append(slices.Clone(s.cfg.Options),
		nats.Name(s.cfg.Name),
		nats.NoReconnect(),
		nats.Timeout(timeout), // bounds the TCP dial and the CONNECT/PONG handshake
		nats.ClosedHandler(func(*nats.Conn) { once.Do(func() { close(c.done) }) }),
	)
	nc, err := nats.Connect(s.cfg.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", s.cfg.URL, err)
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(s.cfg.Timeout))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	c.nc, c.js = nc, js

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() { // Close ran during the dial
		nc.Close()
		return nil, relaysink.ErrClosed
	}
	s.cur = c
	return c, nil
}

// live returns the current connection if it is open.
func (s *Sink) live() *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.nc.IsClosed() {
		s.cur = nil
	}
	return s.cur
}

// message builds the NATS message of ev with the given Nats-Msg-Id, or an
// error wrapping relaysink.ErrInvalidEvent.
func message(ev relaysink.Event, msgID string) (*nats.Msg, error) {
	if err := ev.Validate(); err != nil {
		return nil, err
	}
	switch {
	case !validSubject(ev.Topic):
		return nil, fmt.Errorf("%w: topic is not a NATS subject", relaysink.ErrInvalidEvent)
	case !validHeaderValue(ev.ID) || !validHeaderValue(ev.Key):
		return nil, fmt.Errorf("%w: ID or key has a line break", relaysink.ErrInvalidEvent)
	}
	h := make(nats.Header, 5+len(ev.Headers))
	h.Set(jetstream.MsgIDHeader, msgID)
	h.Set(relaysink.HeaderEventID, ev.ID)
	h.Set(relaysink.HeaderSeq, strconv.FormatInt(ev.Seq, 10))
	h.Set(relaysink.HeaderType, string(ev.Type))
	h.Set(HeaderKey, ev.Key)
	for _, name := range slices.Sorted(maps.Keys(ev.Headers)) {
		switch name {
		case relaysink.HeaderEventID, relaysink.HeaderSeq, relaysink.HeaderType, HeaderKey:
			// The standard headers come from the event's fields; a user
			// header of the same name would make them ambiguous.
			continue
		}
		if strings.HasPrefix(strings.ToLower(name), "nats-") {
			// Nats-* headers steer the server (dedupe id, expected
			// stream or sequence, TTL): not a user's to set here.
			return nil, fmt.Errorf("%w: reserved header %q", relaysink.ErrInvalidEvent, name)
		}
		if !validHeaderName(name) || !validHeaderValue(ev.Headers[name]) {
			return nil, fmt.Errorf("%w: header %q cannot be carried by NATS", relaysink.ErrInvalidEvent, name)
		}
		h.Set(name, ev.Headers[name])
	}
	var data []byte
	if ev.Type == relaysink.Upsert {
		data = ev.Payload
	}
	return &nats.Msg{Subject: ev.Topic, Header: h, Data: data}, nil
}

// validSubject reports whether s is a subject one can publish to: non-empty
// dot-separated tokens without whitespace or wildcards.
func validSubject(s string) bool {
	if s == "" {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return false
		}
		if strings.ContainsAny(tok, " \t\r\n\f\v") {
			return false
		}
	}
	return true
}

// validHeaderName reports whether name fits a NATS header line.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r <= ' ' || r == ':' || r == 0x7f {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether v fits a NATS header line.
func validHeaderValue(v string) bool { return !strings.ContainsAny(v, "\r\n") }

// Close flushes what the connection still buffers within ctx (and
// Config.Timeout), then closes it; acks still outstanding are lost and their
// Publish calls fail with ErrConnectionLost. Later Publish calls fail every
// event with relaysink.ErrClosed. Close is idempotent: only the first call flushes and
// can return an error.
func (s *Sink) Close(ctx context.Context) error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.mu.Lock()
	c := s.cur
	s.cur = nil
	s.mu.Unlock()
	if c == nil || c.nc.IsClosed() {
		return nil
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.cfg.Timeout, relaysink.ErrPublishTimeout)
	defer cancel()
	err := c.nc.FlushWithContext(ctx)
	c.nc.Close()
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = cause
		}
		return fmt.Errorf("relaynats: close: flush: %w", err)
	}
	return nil
}
