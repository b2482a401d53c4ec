package weaklink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayhq/relay/internal/flow"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// CutWithinDefault is Config.CutWithin's default: a connection chosen to be
// cut is cut after a uniformly random 1..64 KiB of its traffic.
const CutWithinDefault = 64 << 10

// delayLineChunks bounds the chunks in flight in one direction's delay line;
// at the largest chunk that is 32 MiB, far more than rate × latency of any
// link this imitates.
const delayLineChunks = 1024

// Config configures a Proxy.
type Config struct {
	// Target is the host:port every connection is forwarded to. Required.
	Target string
	// Rate is the limit in bytes per second, per direction, shared by all
	// connections. 0 is unlimited.
	Rate int
	// Latency is added one way to every byte (the round trip gains twice
	// this). 0 adds none.
	Latency time.Duration
	// CutProbability is the chance, per connection, that it is cut (both
	// sides reset) after a random number of bytes in 1..CutWithin, counted
	// over both directions. A connection that carries fewer bytes ends
	// before its cut. 0 never cuts; 1 cuts every connection.
	CutProbability float64
	// CutWithin bounds where a cut falls, in bytes (default CutWithinDefault).
	CutWithin int64
	// Seed fixes which connections are cut and where, in accept order.
	Seed int64
	// Clock paces the rate limit and the delay line (default
	// relayclock.System{}).
	Clock relaytype.Clock
}

func (c Config) validate() error {
	switch {
	case c.Target == "":
		return errors.New("weaklink: Target is empty")
	case c.Rate < 0:
		return fmt.Errorf("weaklink: Rate is negative (%d)", c.Rate)
	case c.Latency < 0:
		return fmt.Errorf("weaklink: Latency is negative (%s)", c.Latency)
	case c.CutProbability < 0 || c.CutProbability > 1:
		return fmt.Errorf("weaklink: CutProbability %v is outside [0, 1]", c.CutProbability)
	case c.CutWithin < 0:
		return fmt.Errorf("weaklink: CutWithin is negative (%d)", c.CutWithin)
	}
	return nil
}

// Stats are the proxy's counters since New.
type Stats struct {
	// BytesUp and BytesDown are the bytes delivered client → target and
	// target → client.
	BytesUp, BytesDown int64
	// Connections counts connections accepted and forwarded.
	Connections int64
	// Cuts counts connections cut: by CutProbability, or by SetDown(true).
	Cuts int64
	// Refused counts connections accepted while down and reset at once.
	Refused int64
	// DialFailures counts connections reset because Target did not answer.
	DialFailures int64
}

// Proxy is a weak-link TCP proxy. Its methods are safe for concurrent use.
type Proxy struct {
	cfg      Config
	clock    relaytype.Clock
	up, down *flow.TokenBucket // nil: unlimited
	chunk    int

	ctx    context.Context // ends when the proxy stops
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	rng     *rand.Rand
	ln      net.Listener
	links   map[*link]struct{}
	isDown  bool
	started bool

	bytesUp, bytesDown, conns, cuts, refused, dialFailures atomic.Int64
}

// New returns a proxy for cfg, or an error naming the bad field.
func New(cfg Config) (*Proxy, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.CutWithin == 0 {
		cfg.CutWithin = CutWithinDefault
	}
	p := &Proxy{
		cfg:   cfg,
		clock: cfg.Clock,
		rng:   rand.New(rand.NewPCG(uint64(cfg.Seed), 0x7765616b6c696e6b)),
		links: map[*link]struct{}{},
		chunk: 32 << 10,
	}
	if p.clock == nil {
		p.clock = relayclock.System{}
	}
	if cfg.Rate > 0 {
		// Chunks of 1/50 s of rate keep the pace even. The burst, 1/10 s of
		// rate, is what a reader woken late (a busy machine) may catch up
		// without the link losing throughput; the buckets start empty, so a
		// first transfer gets no head start.
		p.chunk = min(max(cfg.Rate/50, 512), 32<<10)
		burst := max(int64(p.chunk), int64(cfg.Rate/10))
		now := p.clock.Now()
		p.up = flow.NewTokenBucket(now, int64(cfg.Rate), burst)
		p.down = flow.NewTokenBucket(now, int64(cfg.Rate), burst)
		p.up.Reserve(now, burst)
		p.down.Reserve(now, burst)
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p, nil
}

// Start listens on 127.0.0.1 at a free port and returns its address. The
// proxy runs until Stop or until ctx is done.
func (p *Proxy) Start(ctx context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return "", errors.New("weaklink: already started")
	}
	if p.ctx.Err() != nil {
		return "", errors.New("weaklink: stopped")
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("weaklink: listen: %w", err)
	}
	p.ln, p.started = ln, true
	p.wg.Add(2)
	go p.accept()
	go func() {
		defer p.wg.Done()
		select {
		case <-ctx.Done():
			p.shutdown()
		case <-p.ctx.Done():
		}
	}()
	return ln.Addr().String(), nil
}

// Stop closes the listener, resets every open connection and waits for the
// proxy's goroutines, or until ctx is done.
func (p *Proxy) Stop(ctx context.Context) error {
	p.shutdown()
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("weaklink: stop: %w", ctx.Err())
	}
}

func (p *Proxy) shutdown() {
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
	}
	for l := range p.links {
		l.abort()
	}
}

// SetDown starts (true) or ends (false) an outage: while down, new
// connections are accepted and reset at once (counted in Refused; a TCP
// listener cannot refuse without giving up its port), and SetDown(true)
// cuts every open connection (counted in Cuts).
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.isDown = down
	if !down {
		return
	}
	for l := range p.links {
		if l.abort() {
			p.cuts.Add(1)
		}
	}
}

// Stats returns the counters.
func (p *Proxy) Stats() Stats {
	return Stats{
		BytesUp:      p.bytesUp.Load(),
		BytesDown:    p.bytesDown.Load(),
		Connections:  p.conns.Load(),
		Cuts:         p.cuts.Load(),
		Refused:      p.refused.Load(),
		DialFailures: p.dialFailures.Load(),
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed by shutdown
		}
		p.mu.Lock()
		down := p.isDown
		var cutAfter int64
		if !down && p.cfg.CutProbability > 0 && p.rng.Float64() < p.cfg.CutProbability {
			cutAfter = 1 + p.rng.Int64N(p.cfg.CutWithin)
		}
		p.mu.Unlock()
		if down {
			p.refused.Add(1)
			reset(c)
			continue
		}
		p.wg.Add(1)
		go p.serve(c.(*net.TCPConn), cutAfter)
	}
}

// reset closes c with a TCP reset, as a dropped link looks to the peer.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (p *Proxy) serve(client *net.TCPConn, cutAfter int64) {
	defer p.wg.Done()
	var d net.Dialer
	tc, err := d.DialContext(p.ctx, "tcp", p.cfg.Target)
	if err != nil {
		p.dialFailures.Add(1)
		reset(client)
		return
	}
	l := &link{p: p, client: client, target: tc.(*net.TCPConn), cutAfter: cutAfter}
	l.ctx, l.cancel = context.WithCancel(p.ctx)
	p.mu.Lock()
	if p.isDown || p.ctx.Err() != nil {
		p.mu.Unlock()
		p.refused.Add(1)
		reset(client)
		reset(l.target)
		l.cancel()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	p.conns.Add(1)

	var dirs sync.WaitGroup
	dirs.Add(2)
	go l.pipe(&dirs, client, l.target, p.up, &p.bytesUp)
	go l.pipe(&dirs, l.target, client, p.down, &p.bytesDown)
	dirs.Wait()

	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
	l.cancel()
	client.Close()
	l.target.Close()
}

// link is one proxied connection.
type link struct {
	p              *Proxy
	client, target *net.TCPConn
	ctx            context.Context
	cancel         context.CancelFunc
	cutAfter       int64 // bytes over both directions before the cut; 0 never
	forwarded      atomic.Int64
	aborted        atomic.Bool
}

// abort resets both sides once and reports whether this call did it.
func (l *link) abort() bool {
	if !l.aborted.CompareAndSwap(false, true) {
		return false
	}
	l.cancel()
	reset(l.client)
	reset(l.target)
	return true
}

type chunk struct {
	data []byte
	due  time.Time
}

// pipe forwards src → dst: a reader paced by the bucket feeds a delay line
// (a FIFO of chunks stamped with their due time) that a writer drains, so
// the latency is added once to every byte and does not slow the rate.
func (l *link) pipe(dirs *sync.WaitGroup, src, dst *net.TCPConn, bucket *flow.TokenBucket, bytes *atomic.Int64) {
	defer dirs.Done()
	line := make(chan chunk, delayLineChunks)
	l.p.wg.Add(1)
	go l.read(src, bucket, line)
	for c := range line {
		if d := c.due.Sub(l.p.clock.Now()); d > 0 {
			select {
			case <-l.p.clock.After(d):
			case <-l.ctx.Done():
				return
			}
		}
		data, cut := c.data, false
		if l.cutAfter > 0 {
			total := l.forwarded.Add(int64(len(data)))
			if before := total - int64(len(data)); total >= l.cutAfter {
				data, cut = data[:max(0, l.cutAfter-before)], true
			}
		}
		n, err := dst.Write(data)
		bytes.Add(int64(n))
		if cut {
			if l.abort() {
				l.p.cuts.Add(1)
			}
			return
		}
		if err != nil {
			l.abort()
			return
		}
	}
	if l.ctx.Err() == nil {
		_ = dst.CloseWrite() // pass the half-close on, after the delayed bytes
	}
}

// read fills the delay line from src until EOF (close line) or an error
// (reset the link: the other side must see the break).
func (l *link) read(src *net.TCPConn, bucket *flow.TokenBucket, line chan<- chunk) {
	defer l.p.wg.Done()
	defer close(line)
	for {
		buf := make([]byte, l.p.chunk)
		n, err := src.Read(buf)
		if n > 0 {
			if bucket != nil && bucket.Wait(l.ctx, l.p.clock, int64(n)) != nil {
				return
			}
			select {
			case line <- chunk{data: buf[:n], due: l.p.clock.Now().Add(l.p.cfg.Latency)}:
			case <-l.ctx.Done():
				return
			}
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			l.abort()
			return
		}
	}
}
