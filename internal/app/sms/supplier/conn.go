package supplier

import (
	"bufio"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/relaytype"
)

// maxOutBuf bounds the bytes waiting to be written to one connection; a peer
// that reads slower than that is dropped rather than let the buffer grow.
const maxOutBuf = 8 << 20

// conn is one SP connection. Its reader goroutine (serve) reads and handles
// packets; its writer goroutine (writeLoop) writes what anyone queued, so
// neither the reader nor the scheduler ever blocks on the network.
type conn struct {
	s   *Server
	nc  net.Conn
	no  uint64
	rng *rand.Rand // the reader goroutine's draws only

	acct atomic.Pointer[account] // set at login
	v    cmpp.Version            // set at login, before acct

	seq      atomic.Uint32 // Sequence_Id of the server's requests
	accepted int           // Submits accepted (reader goroutine only)
	sub      cmpp.Submit   // decode buffer (reader goroutine only)

	mu       sync.Mutex
	inflight map[uint32]struct{} // Sequence_Ids of Submits not yet answered
	lastRecv time.Time
	atSent   time.Time // last ActiveTest sent
	atOut    int       // ActiveTests unanswered

	// pending are the Delivers written and not yet answered, by
	// Sequence_Id; guarded by the account's mu.
	pending map[uint32]*delivery

	wmu      sync.Mutex
	wbuf     []byte
	closing  bool // close once wbuf is written
	overflow bool // wbuf passed maxOutBuf: drop
	wake     chan struct{}

	done      chan struct{}
	closeOnce sync.Once
}

func newConn(s *Server, nc net.Conn, no uint64) *conn {
	return &conn{s: s, nc: nc, no: no, rng: s.newRand(no), inflight: map[uint32]struct{}{},
		pending: map[uint32]*delivery{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// closed reports whether the connection is closed.
func (c *conn) closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// close closes the connection at once (what was queued and not yet written
// is lost) and hands its unanswered Delivers back to the account.
func (c *conn) close(reason string) {
	c.closeOnce.Do(func() {
		close(c.done)
		_ = c.nc.Close()
		c.s.removeConn(c)
		if a := c.acct.Load(); a != nil {
			a.detach(c)
		}
		c.s.log.Debug("sms supplier: connection closed", "conn", c.no, "reason", reason)
	})
}

// drop closes the connection on purpose (a simulated failure or a peer
// breaking the rules) and counts it.
func (c *conn) drop(reason string) {
	if c.closed() {
		return
	}
	c.s.stats.drops.Add(1)
	c.s.log.Info("sms supplier: connection dropped", "conn", c.no, "account", c.account(), "reason", reason)
	c.close(reason)
}

// account returns the logged-in account's SourceAddr, or "".
func (c *conn) account() string {
	if a := c.acct.Load(); a != nil {
		return a.cfg.SourceAddr
	}
	return ""
}

// sendV queues packet p with Sequence_Id seq in version v's layout.
func (c *conn) sendV(v cmpp.Version, seq uint32, p cmpp.Packet) error {
	c.wmu.Lock()
	if c.closing {
		c.wmu.Unlock()
		return nil
	}
	var err error
	c.wbuf, err = cmpp.AppendPacket(c.wbuf, v, seq, p)
	if len(c.wbuf) > maxOutBuf {
		c.overflow = true // the writer drops the connection: callers may hold an account's lock
	}
	c.wmu.Unlock()
	if err != nil {
		return err
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// send queues p in the connection's version; an encoding failure (a value
// the layout cannot carry) is logged, never content.
func (c *conn) send(seq uint32, p cmpp.Packet) {
	if err := c.sendV(c.v, seq, p); err != nil {
		c.s.log.Warn("sms supplier: packet not sent", "conn", c.no, "command", p.Command().String(), "err", relaytype.ErrorText(err))
	}
}

// finish closes the connection once what is queued has been written (after
// TerminateResp, a failed login, or the server's Terminate). A peer that
// stops reading is cut off after ResponseTimeout.
func (c *conn) finish() {
	c.wmu.Lock()
	c.closing = true
	c.wmu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	c.s.sched.after(c.s.cfg.ResponseTimeout, func() { c.close("no flush") })
}

// terminate sends Terminate (to a logged-in peer) and finishes.
func (c *conn) terminate() {
	if c.acct.Load() != nil {
		c.send(c.seq.Add(1), &cmpp.Terminate{})
	}
	c.finish()
}

func (c *conn) writeLoop() {
	var buf []byte
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		c.wmu.Lock()
		buf, c.wbuf = c.wbuf, buf[:0]
		closing, overflow := c.closing, c.overflow
		c.wmu.Unlock()
		if overflow {
			c.drop("peer reads too slowly")
			return
		}
		if len(buf) > 0 {
			if _, err := c.nc.Write(buf); err != nil {
				c.close("write failed")
				return
			}
		}
		if closing {
			c.wmu.Lock()
			empty := len(c.wbuf) == 0
			c.wmu.Unlock()
			if empty {
				c.close("finished")
				return
			}
		}
	}
}

// serve is the reader goroutine: login, then one packet at a time.
func (c *conn) serve() {
	s := c.s
	s.sched.after(s.cfg.LoginTimeout, func() {
		if c.acct.Load() == nil && !c.closed() {
			c.close("no login in time")
		}
	})
	fr := cmpp.NewFrameReader(bufio.NewReader(c.nc))
	h, body, err := fr.Next()
	if err != nil || h.CommandID != cmpp.CmdConnect {
		c.close("no Connect")
		return
	}
	if !c.login(h.SequenceID, body) {
		c.finish()
		return
	}
	c.touch()
	c.scheduleKeepalive(s.clock.Now())
	for {
		h, body, err := fr.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !c.closed() {
				s.log.Info("sms supplier: read failed", "conn", c.no, "account", c.account(), "err", relaytype.ErrorText(err))
			}
			c.finish() // what was answered still goes out, if the peer listens
			return
		}
		c.touch()
		if !c.handle(h, body) {
			c.finish()
			return
		}
	}
}

// handle handles one packet after login; false ends the connection.
func (c *conn) handle(h cmpp.Header, body []byte) bool {
	s := c.s
	switch h.CommandID {
	case cmpp.CmdSubmit:
		c.onSubmit(h.SequenceID, body)
	case cmpp.CmdDeliverResp:
		var r cmpp.DeliverResp
		if err := r.DecodeBody(body, c.v); err != nil {
			s.log.Info("sms supplier: bad DeliverResp", "conn", c.no, "err", relaytype.ErrorText(err))
			return true
		}
		c.acct.Load().answered(c, h.SequenceID, r.Result)
	case cmpp.CmdActiveTest:
		c.send(h.SequenceID, &cmpp.ActiveTestResp{})
	case cmpp.CmdActiveTestResp:
		// touch already counted it as a sign of life
	case cmpp.CmdTerminate:
		c.send(h.SequenceID, &cmpp.TerminateResp{})
		return false
	case cmpp.CmdTerminateResp:
		return false
	case cmpp.CmdQuery:
		c.onQuery(h.SequenceID, body)
	case cmpp.CmdCancel:
		// The simulator delivers at once in effect: nothing is left to cancel.
		c.send(h.SequenceID, &cmpp.CancelResp{SuccessID: 1})
	default:
		s.log.Debug("sms supplier: packet ignored", "conn", c.no, "command", h.CommandID.String())
	}
	return true
}

// touch notes that the peer sent something: the keep-alive starts over.
func (c *conn) touch() {
	now := c.s.clock.Now()
	c.mu.Lock()
	c.lastRecv = now
	c.atOut = 0
	c.mu.Unlock()
}

// scheduleKeepalive arms the idle check at the later of at and now.
func (c *conn) scheduleKeepalive(at time.Time) {
	if c.s.cfg.Keepalive < 0 {
		return
	}
	c.s.sched.at(at, c.keepalive)
}

// keepalive runs when the connection may have been idle for Keepalive (C):
// it sends ActiveTest, again every ResponseTimeout (T) while none is
// answered, and drops the connection after Tries (N) unanswered ones.
func (c *conn) keepalive() {
	if c.closed() {
		return
	}
	cfg := &c.s.cfg
	now := c.s.clock.Now()
	c.mu.Lock()
	var next time.Time
	send := false
	switch {
	case c.atOut >= cfg.Tries:
		c.mu.Unlock()
		c.drop("keep-alive unanswered")
		return
	case c.atOut > 0 || !now.Before(c.lastRecv.Add(cfg.Keepalive)):
		if c.atOut > 0 && now.Before(c.atSent.Add(cfg.ResponseTimeout)) {
			next = c.atSent.Add(cfg.ResponseTimeout)
			break
		}
		send = true
		c.atOut++
		c.atSent = now
		next = now.Add(cfg.ResponseTimeout)
	default:
		next = c.lastRecv.Add(cfg.Keepalive)
	}
	c.mu.Unlock()
	if send {
		c.s.stats.activeTests.Add(1)
		c.send(c.seq.Add(1), &cmpp.ActiveTest{})
	}
	c.scheduleKeepalive(next)
}

// login answers the Connect; true when the peer is logged in.
func (c *conn) login(seq uint32, body []byte) bool {
	s := c.s
	var req cmpp.Connect
	status, respV := uint32(cmpp.ConnectOK), cmpp.V30
	var a *account
	if err := req.DecodeBody(body, cmpp.V30); err != nil { // the same layout in both versions
		status = cmpp.ConnectBadStructure
	} else if a = s.byAddr[req.SourceAddr]; a == nil {
		status = cmpp.ConnectBadSourceAddr
	} else {
		maxV := a.cfg.maxVersion()
		respV = maxV
		switch {
		case !req.Verify(a.cfg.Secret):
			status = cmpp.ConnectAuthFailed
		case req.Version > maxV:
			status = cmpp.ConnectVersionTooHigh
		case !slices.Contains(a.cfg.Versions, req.Version):
			status = StatusVersionRefused
		}
		if req.Version == cmpp.V20 || req.Version == cmpp.V30 {
			if status != cmpp.ConnectVersionTooHigh {
				respV = req.Version
			}
		}
	}
	if status == cmpp.ConnectOK {
		c.v = req.Version
		resp := cmpp.ConnectResp{Status: status, Version: c.v,
			AuthenticatorISMG: cmpp.AuthenticatorISMG(c.v, status, req.AuthenticatorSource, a.cfg.Secret)}
		if !a.attach(c, seq, &resp) {
			status = StatusTooManyConns
		}
	}
	if status != cmpp.ConnectOK {
		// In the layout of the version asked, if the ISMG speaks it; the
		// Version field says the highest it speaks.
		resp := cmpp.ConnectResp{Status: status, Version: cmpp.V30}
		if a != nil {
			resp.Version = a.cfg.maxVersion()
		}
		s.stats.loginFailures.Add(1)
		s.log.Info("sms supplier: login refused", "conn", c.no, "remote", c.nc.RemoteAddr().String(),
			"source_addr", relaytype.BoundText(req.SourceAddr, 6), "version", req.Version.String(), "status", status)
		if err := c.sendV(respV, seq, &resp); err != nil {
			s.log.Warn("sms supplier: ConnectResp not sent", "conn", c.no, "err", relaytype.ErrorText(err))
		}
		return false
	}
	s.log.Info("sms supplier: login", "conn", c.no, "remote", c.nc.RemoteAddr().String(),
		"account", a.cfg.SourceAddr, "version", c.v.String())
	return true
}

// onQuery answers a Query with the account's counters (totals whatever the
// day or service asked).
func (c *conn) onQuery(seq uint32, body []byte) {
	var q cmpp.Query
	if err := q.DecodeBody(body, c.v); err != nil {
		c.s.log.Info("sms supplier: bad Query", "conn", c.no, "err", relaytype.ErrorText(err))
		return
	}
	a := c.acct.Load()
	c.send(seq, &cmpp.QueryResp{Time: q.Time, QueryType: q.QueryType, QueryCode: q.QueryCode,
		MTTLMsg: uint32(a.submits.Load()), MTTlusr: uint32(a.dests.Load()), MTScs: uint32(a.submits.Load()),
		MOScs: uint32(a.mos.Load())})
}
