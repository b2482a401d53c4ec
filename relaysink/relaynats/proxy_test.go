package relaynats_test

import (
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// proxy is a real TCP peer between the sink and the real NATS server, used
// for the fault hooks the server cannot do on demand: it forwards bytes both
// ways and, when told, cuts connections part-way through what the client sends
// (cut) or stops forwarding in both directions while keeping connections open
// (stall). It never answers anything itself.
type proxy struct {
	ln     net.Listener
	target string
	done   chan struct{}

	mu       sync.Mutex
	gate     chan struct{} // closed while forwarding; open (blocking) while stalled
	conns    map[net.Conn]struct{}
	cutsLeft int // connections still to cut
	cutAfter int // client→server bytes each cut lets through
	budget   int // bytes left before the next cut
}

// newProxy listens on a free loopback port and forwards to target until the
// test ends.
func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	open := make(chan struct{})
	close(open)
	p := &proxy{ln: ln, target: target, done: make(chan struct{}), gate: open, conns: map[net.Conn]struct{}{}}
	var wg sync.WaitGroup
	wg.Go(p.accept)
	t.Cleanup(func() {
		close(p.done)
		_ = ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	return p
}

// addr is the proxy's "host:port".
func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		go p.pump(client, server, true)
		go p.pump(server, client, false)
	}
}

// track registers a connection pair; false once the proxy is shut down.
func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	default:
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// pump copies src to dst chunk by chunk, waiting at the gate before each
// write; on the client→server side (up) it applies the cut budget.
func (p *proxy) pump(src, dst net.Conn, up bool) {
	defer func() {
		_ = src.Close()
		_ = dst.Close()
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			select {
			case <-gate:
			case <-p.done:
				return
			}
			cut := false
			if up {
				n, cut = p.take(n)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil || cut {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// take returns how many of n client bytes to forward and whether to cut the
// connection after them.
func (p *proxy) take(n int) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cutsLeft == 0 {
		return n, false
	}
	if n < p.budget {
		p.budget -= n
		return n, false
	}
	n, p.budget = p.budget, p.cutAfter
	p.cutsLeft--
	return n, true
}

// cut makes the proxy cut the next count client connections, each after it
// forwarded after more client bytes (counted from now on): the server gets a
// prefix of what the client sent, and the answers in flight are lost.
func (p *proxy) cut(count, after int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutsLeft, p.cutAfter, p.budget = count, after, after
}

// stall stops forwarding in both directions, connections staying open, until
// release is called (safe to call more than once); then what was held goes
// through.
func (p *proxy) stall() (release func()) {
	gate := make(chan struct{})
	p.mu.Lock()
	p.gate = gate
	p.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(gate) }) }
}
