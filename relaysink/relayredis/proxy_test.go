package relayredis_test

import (
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// proxy is a real TCP peer between the sink and the real Redis server. It
// forwards bytes both ways unchanged and, on demand, injects the two faults
// Redis itself cannot be made to show to one client on demand:
//
//   - cut: on the next connections that carry replies, forward only the
//     first cutAfter bytes of Redis's replies, then close both sides (the
//     client has read some XADD replies and loses the rest, whose commands
//     Redis did execute: an ambiguous failure);
//   - stall: hold every byte from the client (Redis never sees the commands,
//     so nothing is answered; connections stay open) until released.
//
// It never parses or answers RESP itself: every reply the sink reads comes
// from Redis.
type proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	closed   bool
	gate     chan struct{} // non-nil while stalled; closed on release
	cuts     int           // cuts left to make
	cutAfter int           // reply bytes a connection forwards before it is cut
	cutGen   int           // bumped by each cut(); resets the per-connection count
	wg       sync.WaitGroup
}

// newProxy listens on a free local port and forwards to target; it is closed
// in t.Cleanup.
func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// addr is the address the sink dials.
func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.wg.Add(2)
		go p.upstream(c, s)
		go p.downstream(c, s)
	}
}

// track registers a connection pair, or closes it if the proxy is closed.
func (p *proxy) track(c, s net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		_ = s.Close()
		return false
	}
	p.conns[c], p.conns[s] = struct{}{}, struct{}{}
	return true
}

func (p *proxy) drop(c, s net.Conn) {
	_ = c.Close()
	_ = s.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

// upstream forwards the client's commands to Redis, holding them while the
// proxy is stalled.
func (p *proxy) upstream(c, s net.Conn) {
	defer p.wg.Done()
	defer p.drop(c, s)
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			if gate != nil {
				<-gate // released, or the proxy closed
			}
			if _, werr := s.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// downstream forwards Redis's replies to the client, cutting the connection
// when a cut is due.
func (p *proxy) downstream(c, s net.Conn) {
	defer p.wg.Done()
	defer p.drop(c, s)
	buf := make([]byte, 32<<10)
	gen, count := 0, 0
	for {
		n, err := s.Read(buf)
		if n > 0 {
			chunk, cut := buf[:n], false
			p.mu.Lock()
			if p.cuts > 0 {
				if gen != p.cutGen {
					gen, count = p.cutGen, 0
				}
				if count+n > p.cutAfter {
					chunk, cut = chunk[:p.cutAfter-count], true
					p.cuts--
				}
				count += len(chunk)
			}
			p.mu.Unlock()
			if _, werr := c.Write(chunk); werr != nil || cut {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// cut arms n connection cuts, each after a connection forwarded after bytes
// of replies from now on.
func (p *proxy) cut(n, after int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cuts, p.cutAfter = n, after
	p.cutGen++
}

// cutsLeft is how many armed cuts have not happened yet.
func (p *proxy) cutsLeft() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// stall holds every command from now on until release is called; release
// is idempotent.
func (p *proxy) stall() (release func()) {
	gate := make(chan struct{})
	p.mu.Lock()
	if p.gate != nil {
		close(p.gate)
	}
	p.gate = gate
	p.mu.Unlock()
	// Whoever takes the gate out of p.gate closes it: release or close.
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.gate == gate {
			p.gate = nil
			close(gate)
		}
	}
}

// close stops accepting, releases a stall, closes every connection and waits
// for the forwarding goroutines.
func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}
