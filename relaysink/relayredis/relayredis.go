package relayredis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relayhq/relay/relaysink"
)

// DefaultTimeout bounds one Publish (and the wait for in-flight publishes in
// Close) when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Field names of a stream entry (see the package documentation). The standard
// headers use their relaysink names (relaysink.HeaderEventID, HeaderSeq,
// HeaderType) as field names.
const (
	// FieldKey holds Event.Key.
	FieldKey = "key"
	// FieldPayload holds Event.Payload; a tombstone has no such field.
	FieldPayload = "payload"
	// HeaderFieldPrefix prefixes the field name of each user header:
	// header "x-tenant" is field "h:x-tenant".
	HeaderFieldPrefix = "h:"
)

// Config configures a Sink.
type Config struct {
	// Addr is the Redis server, "host:port"; required.
	Addr string
	// Options are extra go-redis client options (password, TLS, pool
	// size, …); optional, copied, and their Addr is replaced by Addr.
	// relayredis always sets MaxRetries to -1 (no client retries: XADD is
	// not idempotent) and ContextTimeoutEnabled (so ctx deadlines reach the
	// socket); zero ReadTimeout and WriteTimeout default to Timeout.
	Options *redis.Options
	// Timeout bounds one Publish call on top of its ctx, and the wait for
	// in-flight publishes in Close. Default DefaultTimeout.
	Timeout time.Duration
	// MaxLen, when positive, trims each stream to about MaxLen entries on
	// every XADD (XADD MAXLEN). Default 0: never trim. Trimming drops the
	// oldest entries whether or not consumers have read them, so it bounds
	// memory at the price of losing events for consumers that fall behind.
	MaxLen int64
	// MaxLenApprox trims with "MAXLEN ~" (whole radix-tree nodes, much
	// cheaper; the stream may keep somewhat more than MaxLen entries)
	// instead of exactly. Ignored when MaxLen is 0.
	MaxLenApprox bool
}

// validate names the first bad field of cfg.
func (cfg Config) validate() error {
	switch {
	case cfg.Addr == "":
		return errors.New("relayredis: Config.Addr is required")
	case cfg.Timeout < 0:
		return fmt.Errorf("relayredis: Config.Timeout is negative (%v)", cfg.Timeout)
	case cfg.MaxLen < 0:
		return fmt.Errorf("relayredis: Config.MaxLen is negative (%d)", cfg.MaxLen)
	}
	return nil
}

// Sink is the Redis Streams relaysink.Sink. It is safe for concurrent use:
// concurrent Publish calls run on separate pooled connections.
type Sink struct {
	client  *redis.Client
	timeout time.Duration
	maxLen  int64
	approx  bool

	mu       sync.RWMutex // guards closed and inflight.Add
	closed   bool
	inflight sync.WaitGroup // Publish calls that passed the closed check
}

var _ relaysink.Sink = (*Sink)(nil)

// New returns a Sink for cfg. It does not contact Redis: the client connects
// on the first Publish.
func New(cfg Config) (*Sink, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	timeout := cmp.Or(cfg.Timeout, DefaultTimeout)
	var opt redis.Options
	if cfg.Options != nil {
		opt = *cfg.Options
	}
	opt.Addr = cfg.Addr
	// A pipeline retried after a broken connection would append the
	// events Redis already took a second time, behind the ones it took
	// after them; the dispatcher re-publishes from the first unconfirmed
	// event instead.
	opt.MaxRetries = -1
	opt.ContextTimeoutEnabled = true
	if opt.ReadTimeout == 0 {
		opt.ReadTimeout = timeout
	}
	if opt.WriteTimeout == 0 {
		opt.WriteTimeout = timeout
	}
	return &Sink{
		client:  redis.NewClient(&opt),
		timeout: timeout,
		maxLen:  cfg.MaxLen,
		approx:  cfg.MaxLenApprox,
	}, nil
}

// Name returns "redis".
func (s *Sink) Name() string { return "redis" }

// pkg prefixes the sink's errors.
const pkg = "relayredis"

// streamKey is the unit of order: one key on one topic.
type streamKey struct{ topic, key string }

// Publish appends events to their streams in one pipeline and returns one
// error per event (see relaysink.Sink): nil when Redis answered its XADD
// with an entry ID. It returns when every reply is read, or when ctx or
// Config.Timeout ends; events without a reply by then get the context's
// cause (they may still be appended: at least once).
//
// Every error is a *relaysink.PublishError; errors.Is finds the relaysink
// sentinels in it (relaysink.ErrPublishTimeout when Config.Timeout ended the
// call). Invalid events (relaysink.Event.Validate) are not sent and block the
// later events of their key, which are not sent either. An event whose XADD
// fails inside the pipeline (a Redis error such as WRONGTYPE or OOM, or a
// broken connection) cannot stop the later XADDs of its key, which are
// already on the wire; those are reported with relaysink.ErrEarlierFailed
// even if Redis appended them (relaysink.EnforceKeyOrder says why).
func (s *Sink) Publish(ctx context.Context, events []relaysink.Event) []error {
	errs := make([]error, len(events))
	if len(events) == 0 {
		return errs
	}
	defer relaysink.FinishResult(pkg, events, errs) // in place, on every return
	if !s.begin() {
		for i := range errs {
			errs[i] = relaysink.ErrClosed
		}
		return errs
	}
	defer s.inflight.Done()

	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, relaysink.ErrPublishTimeout)
	defer cancel()

	pipe := s.client.Pipeline()
	cmds := make([]*redis.StringCmd, len(events))
	failed := map[streamKey]bool{}
	sent := 0
	for i, ev := range events {
		sk := streamKey{ev.Topic, ev.Key}
		if failed[sk] {
			// Known before sending: the later events of the key stay
			// off the wire.
			errs[i] = relaysink.ErrEarlierFailed
			continue
		}
		if err := ev.Validate(); err != nil {
			errs[i] = err
			failed[sk] = true
			continue
		}
		cmds[i] = pipe.XAdd(ctx, s.xaddArgs(ev))
		sent++
	}

	if sent > 0 {
		done := make(chan struct{})
		go func() {
			defer close(done)
			// The per-command errors are read below; Exec's own error is
			// the first of them.
			_, _ = pipe.Exec(ctx)
		}()
		select {
		case <-done:
			for i, cmd := range cmds {
				if cmd == nil {
					continue
				}
				if err := replyErr(cmd); err != nil {
					errs[i] = s.classify(ctx, err)
				}
			}
		case <-ctx.Done():
			// A cancelled ctx (without a deadline that reached the
			// socket) does not interrupt a read in progress; stop
			// waiting. The pipeline ends in the background by its
			// deadline, and its replies are not looked at.
			cause := context.Cause(ctx)
			for i, cmd := range cmds {
				if cmd != nil {
					errs[i] = cause
				}
			}
		}
	}

	return errs
}

// replyErr is the outcome of one XADD of a pipeline: nil when Redis
// answered it with an entry ID.
//
// When the connection breaks (or its deadline passes) part way through the
// replies, go-redis sets the transport error on every command of the
// pipeline, also on those whose replies it had already read; the entry ID it
// read stays in the command's value. That ID is Redis's own answer (the entry
// was appended), so the event is confirmed; only the commands whose replies
// were not read fail, and they may still have been appended (at least once).
// Without this, one broken connection would fail the whole batch and every
// event in it would be written again.
func replyErr(cmd *redis.StringCmd) error {
	err := cmd.Err()
	if err == nil {
		return nil
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) && cmd.Val() != "" {
		return nil
	}
	return err
}

// begin registers a Publish call unless the sink is closed.
func (s *Sink) begin() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return false
	}
	s.inflight.Add(1)
	return true
}

// classify adds the context's cause to a transport error that the ctx
// deadline caused, so that errors.Is finds relaysink.ErrPublishTimeout or
// context.DeadlineExceeded, and relaysink.ErrClosed to a closed client's
// error. Redis replies (redis.Error) stay as they are.
func (s *Sink) classify(ctx context.Context, err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return err
	}
	if errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("%w: %w", relaysink.ErrClosed, err)
	}
	if nerr, ok := errors.AsType[net.Error](err); ok && nerr.Timeout() {
		// The socket deadline is ctx's deadline (ReadTimeout and
		// WriteTimeout default to Config.Timeout, which ctx already
		// carries); the socket can report it a moment before ctx's own
		// timer fires and sets the cause.
		if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
			<-ctx.Done()
		}
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}

// xaddArgs builds the XADD of ev (see the package documentation for the
// fields).
func (s *Sink) xaddArgs(ev relaysink.Event) *redis.XAddArgs {
	values := make([]any, 0, 2*(5+len(ev.Headers)))
	values = append(values,
		FieldKey, ev.Key,
		relaysink.HeaderEventID, ev.ID,
		relaysink.HeaderSeq, strconv.FormatInt(ev.Seq, 10),
		relaysink.HeaderType, string(ev.Type),
	)
	for _, name := range slices.Sorted(maps.Keys(ev.Headers)) {
		switch name {
		case relaysink.HeaderEventID, relaysink.HeaderSeq, relaysink.HeaderType:
			// The standard headers come from the event's fields; a user
			// header of the same name would make them ambiguous to a
			// consumer that merges both (as relaykafka does).
			continue
		}
		values = append(values, HeaderFieldPrefix+name, ev.Headers[name])
	}
	if ev.Type == relaysink.Upsert {
		// Always present for an upsert, even when empty: its absence is
		// what marks a tombstone. A []byte is sent as a bulk string
		// as is; never logged.
		payload := ev.Payload
		if payload == nil {
			payload = []byte{}
		}
		values = append(values, FieldPayload, payload)
	}
	return &redis.XAddArgs{
		Stream: ev.Topic,
		MaxLen: s.maxLen,
		Approx: s.maxLen > 0 && s.approx,
		ID:     "*",
		Values: values,
	}
}

// Close waits, within ctx and Config.Timeout, for the Publish calls in
// flight to finish, then closes the client's connections; calls still in
// flight then fail. Publish sends nothing in the background, so there is no
// buffer to flush. Later Publish calls fail every event with
// relaysink.ErrClosed.
// Close is idempotent: only the first call waits and can return an error.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()

	ctx, cancel := context.WithTimeoutCause(ctx, s.timeout, relaysink.ErrPublishTimeout)
	defer cancel()
	idle := make(chan struct{})
	go func() {
		s.inflight.Wait()
		close(idle)
	}()
	var waitErr error
	select {
	case <-idle:
	case <-ctx.Done():
		waitErr = fmt.Errorf("relayredis: close: wait for publishes in flight: %w", context.Cause(ctx))
	}
	if err := s.client.Close(); err != nil {
		return errors.Join(waitErr, fmt.Errorf("relayredis: close: %w", err))
	}
	return waitErr
}
