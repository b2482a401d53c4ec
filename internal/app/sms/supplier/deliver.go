package supplier

import (
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/relaytype"
)

// account is an Account at run time: its logged-in connections, the
// Delivers owed to it and its rate bucket. An ISMG delivers an account's
// reports and MO messages on any of its connections, so they queue here,
// not on the connection that sent the Submit. At most Window Delivers are
// unanswered per connection; past that, and while no connection is logged
// in, they wait in held (at most MaxHeld).
type account struct {
	s   *Server
	cfg Account

	// Counters for Query answers.
	submits, dests, mos atomic.Int64

	mu     sync.Mutex
	conns  []*conn
	rr     int
	held   []*delivery
	tokens float64   // rate bucket
	filled time.Time // when tokens was last refilled
}

// delivery is one Deliver owed to an account: a status report or an MO part.
type delivery struct {
	msgID     uint64 // the Deliver's own Msg_Id (a resend keeps it)
	destID    string // Dest_Id: the SP number
	serviceID string
	src       string       // Src_terminal_Id: the handset
	report    *cmpp.Report // a status report; nil for MO
	dup       bool         // a duplicate report
	fmt       cmpp.MsgFmt  // MO coding
	udhi      uint8
	content   []byte // MO content

	tries int // times sent
}

// packet returns the Deliver in version v's layout.
func (d *delivery) packet(v cmpp.Version) (cmpp.Deliver, error) {
	p := cmpp.Deliver{MsgID: d.msgID, DestID: d.destID, ServiceID: d.serviceID, SrcTerminalID: d.src,
		MsgFmt: d.fmt, TPUDHI: d.udhi, MsgContent: d.content}
	if d.report != nil {
		content, err := d.report.AppendTo(nil, v)
		if err != nil {
			return p, err
		}
		p.RegisteredDelivery, p.MsgFmt, p.TPUDHI, p.MsgContent = 1, cmpp.FmtASCII, 0, content
	}
	return p, nil
}

// attach logs c in: unless the account is at MaxConns, it adds c to the
// connections, queues the ConnectResp and then whatever Delivers were held,
// so that nothing reaches the peer before its ConnectResp. False when full.
func (a *account) attach(c *conn, seq uint32, resp *cmpp.ConnectResp) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.conns) >= a.cfg.MaxConns {
		return false
	}
	c.acct.Store(a)
	if c.closed() { // close ran before the Store and could not detach it
		return true
	}
	a.conns = append(a.conns, c)
	a.s.stats.logins.Add(1)
	c.send(seq, resp)
	a.pump()
	return true
}

// detach forgets a closed connection and requeues its unanswered Delivers
// (in the order they were sent) for the other connections.
func (a *account) detach(c *conn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.conns = slices.DeleteFunc(a.conns, func(x *conn) bool { return x == c })
	var again []*delivery
	for _, seq := range slices.Sorted(maps.Keys(c.pending)) {
		if d := c.pending[seq]; d.tries < a.s.cfg.Tries {
			again = append(again, d)
		} else {
			a.s.stats.abandoned.Add(1)
		}
	}
	clear(c.pending)
	a.held = append(again, a.held...)
	a.pump()
}

// push queues Delivers and sends what the connections have room for.
func (a *account) push(ds ...*delivery) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.held = append(a.held, ds...)
	if over := len(a.held) - a.s.cfg.MaxHeld; over > 0 {
		clear(a.held[:over])
		a.held = a.held[over:]
		a.s.stats.dropped.Add(int64(over))
		a.s.log.Warn("sms supplier: Delivers dropped: too many held", "account", a.cfg.SourceAddr, "dropped", over)
	}
	a.pump()
}

// pump sends held Delivers while a connection has room. a.mu is held.
func (a *account) pump() {
	for len(a.held) > 0 {
		c := a.pick()
		if c == nil {
			return
		}
		d := a.held[0]
		a.held[0] = nil
		a.held = a.held[1:]
		a.sendOn(c, d)
	}
}

// pick returns the next connection, round robin, with fewer than Window
// Delivers unanswered; nil when none has room. a.mu is held.
func (a *account) pick() *conn {
	for i := range a.conns {
		c := a.conns[(a.rr+i)%len(a.conns)]
		if len(c.pending) < a.cfg.Window && !c.closed() {
			a.rr = (a.rr + i + 1) % len(a.conns)
			return c
		}
	}
	return nil
}

// sendOn writes d on c and arms its response timeout. a.mu is held. The
// timeout is armed before the write, so a peer that has read the Deliver
// knows its timeout runs from then.
func (a *account) sendOn(c *conn, d *delivery) {
	s := a.s
	seq := c.seq.Add(1)
	c.pending[seq] = d
	s.sched.after(s.cfg.ResponseTimeout, func() { a.expire(c, seq, d) })
	resend := d.tries > 0
	d.tries++
	p, err := d.packet(c.v)
	if err == nil {
		err = c.sendV(c.v, seq, &p)
	}
	if err != nil {
		delete(c.pending, seq)
		s.stats.dropped.Add(1)
		s.log.Warn("sms supplier: Deliver not sent", "conn", c.no, "account", a.cfg.SourceAddr, "err", relaytype.ErrorText(err))
		return
	}
	switch {
	case resend:
		s.stats.resends.Add(1)
	case d.report != nil:
		s.stats.reports.Add(1)
		if d.dup {
			s.stats.duplicateReports.Add(1)
		}
	default:
		s.stats.mos.Add(1)
		a.mos.Add(1)
	}
}

// sendBefore writes a Submit's reports on c ahead of its SubmitResp,
// whatever the window, so that they are on the wire first; to the queue
// when c is gone.
func (a *account) sendBefore(c *conn, ds []*delivery) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.closed() || !slices.Contains(a.conns, c) {
		a.held = append(a.held, ds...)
		a.pump()
		return
	}
	for _, d := range ds {
		a.sendOn(c, d)
	}
	a.s.stats.reportsBeforeResp.Add(int64(len(ds)))
}

// answered takes a DeliverResp. Result 0 settles the Deliver; any other
// Result (8, flow control, or an error) leaves it to be sent again after
// ResponseTimeout, as an unanswered one is.
func (a *account) answered(c *conn, seq uint32, result uint32) {
	if result != 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := c.pending[seq]; !ok {
		return
	}
	delete(c.pending, seq)
	a.pump()
}

// expire runs ResponseTimeout after d was sent as seq on c: unless
// answered, d is queued again at the front, or given up after Tries.
func (a *account) expire(c *conn, seq uint32, d *delivery) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c.pending[seq] != d {
		return
	}
	delete(c.pending, seq)
	if d.tries >= a.s.cfg.Tries {
		a.s.stats.abandoned.Add(1)
	} else {
		a.held = append([]*delivery{d}, a.held...)
	}
	a.pump()
}

// take takes n Submits (destinations) from the rate bucket at now; false
// when the account is over its Rate. A full bucket lets a Submit of more
// destinations than it holds through, into debt.
func (a *account) take(now time.Time, n int) bool {
	if a.cfg.Rate <= 0 {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	burst := max(a.cfg.Rate, 1)
	if a.filled.IsZero() {
		a.tokens = burst
	} else if d := now.Sub(a.filled); d > 0 {
		a.tokens = min(burst, a.tokens+d.Seconds()*a.cfg.Rate)
	}
	if now.After(a.filled) {
		a.filled = now
	}
	if a.tokens < float64(n) && a.tokens < burst {
		return false
	}
	a.tokens -= float64(n)
	return true
}
