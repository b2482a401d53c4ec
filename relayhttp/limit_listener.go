package relayhttp

import (
	"net"
	"sync"
)

// limitListener returns ln accepting at most n connections at once: Accept
// waits until an accepted connection closes, and further clients wait in the
// kernel's accept queue meanwhile. It does what
// golang.org/x/net/netutil.LimitListener does, without that module.
func limitListener(ln net.Listener, n int) net.Listener {
	return &limitedListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

type limitedListener struct {
	net.Listener
	slots     chan struct{} // one value per open connection
	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

// Accept takes a slot, then a connection; the slot is freed when the
// connection closes.
func (l *limitedListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close closes the listener and wakes an Accept waiting for a slot.
func (l *limitedListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitedConn frees its slot on its first Close.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// CloseWrite half-closes a TCP connection. net/http does that before it
// closes a connection whose request body it did not read, so the client gets
// the answer rather than a reset; the wrapper must not hide it.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
