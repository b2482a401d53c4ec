package cmppconn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/backoff"
)

// Defaults of PoolConfig.
const (
	// PoolSizeDefault is one connection per channel.
	PoolSizeDefault = 1
	// BackoffLevelsDefault levels of doubling from backoff.FirstDefault (1 s)
	// make the default reconnect schedule 1, 2, 4, 8, 16, 32 s, the last
	// repeating.
	BackoffLevelsDefault = 6
)

// PoolConfig describes a channel: Size connections to one ISMG account,
// kept up with backoff, behind one rate limit.
type PoolConfig struct {
	// Conn is every connection's Config. Its Clock and Logger serve the
	// pool too; its RateLimit, if set, applies per connection, under the
	// pool's.
	Conn Config
	// Size is how many connections (K) the pool keeps up; default
	// PoolSizeDefault. The ISMG account's connection quota bounds it.
	Size int
	// RateLimit caps Submits per second across the pool, the channel's
	// contracted speed; 0 means no limit. RateBurst as in Config; default 1.
	RateLimit float64
	RateBurst int
	// Backoff is the wait before each redial: after the n-th failed dial in
	// a row Backoff[n-1], the last level repeating; after a connection that
	// was up goes down, Backoff[0]. A login refused with a Status that
	// retrying cannot cure (LoginError.Permanent) waits the last level.
	// Default backoff.Doubling(backoff.FirstDefault, BackoffLevelsDefault).
	Backoff []time.Duration
}

// Pool is a channel: it keeps Size connections to one ISMG account up,
// redialling with backoff, and spreads Submits over them. Safe for
// concurrent use.
type Pool struct {
	cfg     PoolConfig
	log     *slog.Logger
	limit   *tokenBucket
	backoff []time.Duration
	stop    chan struct{} // closed by Stop
	wg      sync.WaitGroup

	mu      sync.Mutex
	cancel  context.CancelFunc // ends dialling and backoff waits
	conns   []*Conn            // by slot; nil while that slot is down
	up      chan struct{}      // closed, and replaced, when a connection comes up
	lastErr error
	started bool
	stopped bool
	rr      int
}

// NewPool checks cfg and returns a pool that is not started.
func NewPool(cfg PoolConfig) (*Pool, error) {
	cfg.Conn = cfg.Conn.withDefaults()
	if err := cfg.Conn.validate(); err != nil {
		return nil, err
	}
	cfg.Size = cmp.Or(cfg.Size, PoolSizeDefault)
	cfg.RateBurst = cmp.Or(cfg.RateBurst, 1)
	levels := cfg.Backoff
	if len(levels) == 0 {
		levels = backoff.Doubling(backoff.FirstDefault, BackoffLevelsDefault)
	}
	switch {
	case cfg.Size < 1:
		return nil, fmt.Errorf("cmppconn: pool config: Size %d below 1", cfg.Size)
	case cfg.RateLimit < 0:
		return nil, fmt.Errorf("cmppconn: pool config: RateLimit %g is negative", cfg.RateLimit)
	case cfg.RateBurst < 1:
		return nil, fmt.Errorf("cmppconn: pool config: RateBurst %d below 1", cfg.RateBurst)
	case backoff.Negative(levels) != "":
		return nil, fmt.Errorf("cmppconn: pool config: Backoff: %s", backoff.Negative(levels))
	}
	return &Pool{
		cfg:     cfg,
		log:     cfg.Conn.Logger,
		limit:   newTokenBucket(cfg.Conn.Clock, cfg.RateLimit, cfg.RateBurst),
		backoff: slices.Clone(levels),
		stop:    make(chan struct{}),
		conns:   make([]*Conn, cfg.Size),
		up:      make(chan struct{}),
	}, nil
}

// Start starts one goroutine per connection slot, which dials, waits for
// the connection to go down, and dials again, until Stop. It returns at
// once; Submit waits for a connection to come up. ctx governs Start only:
// the connections live until Stop (its values are kept for the dials).
func (p *Pool) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return errors.New("cmppconn: pool already started")
	}
	p.started = true
	dialCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	p.wg.Add(p.cfg.Size)
	for k := range p.cfg.Size {
		go p.keepUp(dialCtx, k)
	}
	return nil
}

// Stop stops redialling, refuses new Submits (NotSent, ErrClosed), and
// closes every connection gracefully (Conn.Close: Submits in flight are
// settled, Terminate is exchanged). ctx bounds it; when it ends the
// connections are closed at once and Stop returns ctx.Err().
func (p *Pool) Stop(ctx context.Context) error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil
	}
	p.stopped = true
	close(p.stop)
	if p.cancel != nil {
		p.cancel()
	}
	var live []*Conn
	for _, c := range p.conns {
		if c != nil {
			live = append(live, c)
		}
	}
	p.mu.Unlock()

	errs := make(chan error, len(live))
	for _, c := range live {
		go func() { errs <- c.Close(ctx) }()
	}
	var all []error
	for range live {
		all = append(all, <-errs)
	}
	if err := waitCtx(ctx, &p.wg); err != nil {
		all = append(all, fmt.Errorf("cmppconn: pool stop: %w", err))
	}
	return errors.Join(all...)
}

// keepUp keeps slot k's connection up until Stop.
func (p *Pool) keepUp(ctx context.Context, k int) {
	defer p.wg.Done()
	clock := p.cfg.Conn.Clock
	failures := 0 // 0: dial now; n: wait backoff level n-1 first
	for {
		if failures > 0 {
			select {
			case <-clock.After(p.backoff[min(failures, len(p.backoff))-1]):
			case <-ctx.Done():
				return
			}
		}
		c, err := Dial(ctx, p.cfg.Conn)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			p.lastErr = err
			p.mu.Unlock()
			failures++
			if le := (*LoginError)(nil); errors.As(err, &le) && le.Permanent() {
				failures = len(p.backoff)
				p.log.Error("cmppconn: login refused", "slot", k, "err", err)
			} else {
				p.log.Warn("cmppconn: dial failed", "slot", k, "err", err, "failures", failures)
			}
			continue
		}
		if !p.setConn(k, c) {
			_ = c.Close(ctx) // Stop came while dialling; ctx is cancelled: closes at once
			return
		}
		<-c.Done()
		p.mu.Lock()
		p.conns[k] = nil
		p.lastErr = c.Err()
		p.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		p.log.Warn("cmppconn: pool connection down", "slot", k, "conn", c.ID(), "err", c.Err())
		failures = 1
	}
}

// setConn publishes slot k's new connection, or reports false after Stop.
func (p *Pool) setConn(k int, c *Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	p.conns[k] = c
	close(p.up)
	p.up = make(chan struct{})
	return true
}

// Submit sends s over the least loaded connection that takes Submits
// (fewest window slots taken and Submits waiting for one; ties in turn),
// after the pool's rate limit. It waits for a connection while none is up,
// as long as ctx allows (then NotSent, ErrNoConnection). When the chosen
// connection closes before the Submit was registered on it (NotSent,
// ErrConnClosed), it tries another: no byte had left. Results and errors
// are Conn.Submit's; OutcomeFlowControl asks the caller to try later.
func (p *Pool) Submit(ctx context.Context, s *cmpp.Submit) (SubmitResult, error) {
	if p.limit != nil {
		if err := p.limit.wait(ctx, p.stop); err != nil {
			if err == errStopped {
				err = ErrClosed
			}
			return poolNotSent(err)
		}
	}
	for {
		c, up, err := p.pick()
		if err != nil {
			return poolNotSent(err)
		}
		if c == nil {
			select {
			case <-up:
				continue
			case <-ctx.Done():
				return poolNotSent(fmt.Errorf("%w: %w", ErrNoConnection, ctx.Err()))
			case <-p.stop:
				return poolNotSent(ErrClosed)
			}
		}
		res, err := c.Submit(ctx, s)
		if res.Outcome == OutcomeNotSent && errors.Is(err, ErrConnClosed) {
			continue
		}
		return res, err
	}
}

func poolNotSent(cause error) (SubmitResult, error) {
	return SubmitResult{Outcome: OutcomeNotSent}, &SubmitError{Outcome: OutcomeNotSent, Err: cause}
}

// pick returns the least loaded connection taking Submits, or nil and a
// channel closed when one comes up; ErrClosed after Stop.
func (p *Pool) pick() (*Conn, <-chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil, nil, ErrClosed
	}
	var best *Conn
	bestLoad := 0
	n := len(p.conns)
	p.rr = (p.rr + 1) % n
	for i := range n {
		c := p.conns[(p.rr+i)%n]
		if c == nil || !c.accepting() {
			continue
		}
		if load := c.InFlight() + int(c.slotWaiters.Load()); best == nil || load < bestLoad {
			best, bestLoad = c, load
		}
	}
	return best, p.up, nil
}

// Live returns how many connections are up and taking Submits.
func (p *Pool) Live() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.conns {
		if c != nil && c.accepting() {
			n++
		}
	}
	return n
}

// Stats returns the counters of the connections up now, by slot (a zero
// Stats for a slot that is down).
func (p *Pool) Stats() []Stats {
	p.mu.Lock()
	conns := slices.Clone(p.conns)
	p.mu.Unlock()
	out := make([]Stats, len(conns))
	for k, c := range conns {
		if c != nil {
			out[k] = c.Stats()
		}
	}
	return out
}

// LastErr returns the last dial error or connection loss, for health
// reporting; nil if there was none.
func (p *Pool) LastErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}
