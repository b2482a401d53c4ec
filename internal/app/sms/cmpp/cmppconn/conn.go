package cmppconn

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

// connIDs numbers connections across the process (Conn.ID).
var connIDs atomic.Uint64

// loginSeq is the Sequence_Id of the Connect; Submits count up from it.
const loginSeq = 1

// connectRespLen20 is the body length of a 2.0 ConnectResp (1-byte Status);
// a 3.0 one is 21 bytes.
const connectRespLen20 = 18

// bufSize is the starting size of each write buffer and the read buffer: a
// full window of typical Submits.
const bufSize = 16 << 10

// Conn is one logged-in CMPP connection to an ISMG. Its methods are safe for
// concurrent use; Submit is meant to be called from many goroutines at once,
// which is how the window fills.
//
// Three goroutines run it: one writer, which alone writes the socket and
// writes whatever has queued up since its last write in one call; one
// reader, which reads every packet and completes the waiting request with
// the same Sequence_Id; and the keep-alive. DeliverFunc calls run on
// goroutines of their own.
type Conn struct {
	cfg    Config
	id     uint64
	nc     net.Conn
	fr     *cmpp.FrameReader
	log    *slog.Logger
	limit  *tokenBucket
	slots  chan struct{} // the window: one token per Submit without a response
	kick   chan struct{} // wakes the writer
	done   chan struct{} // closed when the connection is closed
	ctx    context.Context
	cancel context.CancelFunc
	// deliverSem bounds the DeliverFunc calls running at once.
	deliverSem chan struct{}
	wg         sync.WaitGroup

	lastRecv    atomic.Int64 // Clock time (UnixNano) of the last packet read
	slotWaiters atomic.Int64 // Submits blocked on a full window
	refusing    atomic.Bool  // closed or closing: mirrors mu's state for Pool.pick
	writes      atomic.Uint64
	stats       counters

	// mu guards everything below. Nothing under it logs, calls back or does
	// I/O (closing the socket aside): seed 002 §10.12.
	mu       sync.Mutex
	closed   bool
	cause    error // why it closed
	closing  error // set by Close (ErrClosed) or the ISMG's Terminate: no new Submits
	seq      uint32
	pending  map[uint32]*request
	submits  int           // Submits in pending
	drained  chan struct{} // closed once closing is set and submits is 0
	isDrain  bool          // drained is closed
	out      []byte        // packets queued for the writer
	outReqs  []queued      // the requests among them, in order
	spare    []byte        // the writer's other buffer
	spareReq []queued
	late     lateRing
}

// request is one request waiting for its response: a Submit, ActiveTest or
// Terminate.
type request struct {
	want  cmpp.CommandID // the response's Command_Id
	state reqState
	slot  bool       // holds a window slot (Submits)
	done  chan reply // receives exactly one reply; buffered
}

type reqState uint8

const (
	stateQueued  reqState = iota // its bytes sit in Conn.out
	stateWriting                 // the writer is writing them
	stateWritten                 // at least its first byte went to the socket
)

// queued places a request's packet in a write buffer.
type queued struct {
	seq   uint32
	start int // offset of its first byte
	req   *request
}

// reply settles a request.
type reply struct {
	outcome Outcome
	msgID   uint64
	result  uint32
	err     error
}

// Dial connects to cfg.Addr, logs in, and returns the running connection.
// ctx bounds the dial and the login; the login also gives up after
// cfg.ActiveTestTimeout (T). A ConnectResp with Status other than 0 is a
// *LoginError (ErrLoginRefused); one whose AuthenticatorISMG does not prove
// the secret is ErrISMGAuth.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	nc, err := cfg.DialFunc(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("cmppconn: dial %s: %w", cfg.Addr, err)
	}
	c := &Conn{
		cfg:        cfg,
		id:         connIDs.Add(1),
		nc:         nc,
		fr:         cmpp.NewFrameReader(bufio.NewReaderSize(nc, bufSize)),
		log:        cfg.Logger,
		limit:      newTokenBucket(cfg.Clock, cfg.RateLimit, cfg.RateBurst),
		slots:      make(chan struct{}, cfg.Window),
		kick:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		deliverSem: make(chan struct{}, cfg.DeliverConcurrency),
		seq:        loginSeq,
		pending:    make(map[uint32]*request, cfg.Window+2),
		drained:    make(chan struct{}),
		out:        make([]byte, 0, bufSize),
		spare:      make([]byte, 0, bufSize),
	}
	if err := c.login(ctx); err != nil {
		_ = nc.Close()
		return nil, err
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.lastRecv.Store(cfg.Clock.Now().UnixNano())
	c.log.Info("cmppconn: logged in", "conn", c.id, "addr", cfg.Addr, "version", cfg.Version.String(), "window", cfg.Window)
	c.wg.Add(3)
	go c.readLoop()
	go c.writeLoop()
	go c.keepalive()
	return c, nil
}

// login sends the Connect and checks the ConnectResp, on the socket alone:
// no other goroutine runs yet. A watchdog closes the socket when ctx ends or
// T passes, which ends a blocked read or write.
func (c *Conn) login(ctx context.Context) error {
	const (
		running = iota
		finished
		expired
	)
	var state atomic.Int32
	var why error
	stop := make(chan struct{})
	go func() {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			why = ctx.Err()
		case <-c.cfg.Clock.After(c.cfg.ActiveTestTimeout):
			why = ErrLoginTimeout
		}
		if state.CompareAndSwap(running, expired) {
			_ = c.nc.Close()
		}
	}()
	err := c.loginExchange()
	close(stop)
	if !state.CompareAndSwap(running, finished) {
		// The watchdog closed the socket; why was written before its swap.
		return fmt.Errorf("cmppconn: login to %s: %w", c.cfg.Addr, why)
	}
	return err
}

func (c *Conn) loginExchange() error {
	v := c.cfg.Version
	now := c.cfg.Clock.Now().In(c.cfg.Location)
	req := cmpp.NewConnect(c.cfg.SourceAddr, c.cfg.Secret, v, now)
	pkt, err := cmpp.AppendPacket(nil, v, loginSeq, &req)
	if err != nil {
		return fmt.Errorf("cmppconn: login: %w", err)
	}
	if _, err := c.nc.Write(pkt); err != nil {
		return fmt.Errorf("cmppconn: login to %s: write: %w", c.cfg.Addr, err)
	}
	h, body, err := c.fr.Next()
	if err != nil {
		return fmt.Errorf("cmppconn: login to %s: read: %w", c.cfg.Addr, err)
	}
	if h.CommandID != cmpp.CmdConnectResp || h.SequenceID != loginSeq {
		return fmt.Errorf("cmppconn: login to %s: %w: got %s seq=%d, want CONNECT_RESP seq=%d",
			c.cfg.Addr, ErrProtocol, h.CommandID, h.SequenceID, loginSeq)
	}
	var resp cmpp.ConnectResp
	if err := resp.DecodeBody(body, v); err != nil {
		return fmt.Errorf("cmppconn: login to %s: %w: %w", c.cfg.Addr, ErrProtocol, err)
	}
	if resp.Status != cmpp.ConnectOK {
		return &LoginError{Status: resp.Status}
	}
	layout := cmpp.V30
	if len(body) == connectRespLen20 {
		layout = cmpp.V20
	}
	if layout != v {
		return fmt.Errorf("cmppconn: login to %s: %w: ISMG answered in the %s layout, configured %s",
			c.cfg.Addr, ErrProtocol, layout, v)
	}
	if !resp.Verify(v, req.AuthenticatorSource, c.cfg.Secret) {
		return fmt.Errorf("cmppconn: login to %s: %w", c.cfg.Addr, ErrISMGAuth)
	}
	return nil
}

// ID returns the connection's process-wide number (SubmitResult.ConnID).
func (c *Conn) ID() uint64 { return c.id }

// Version returns the protocol version the connection speaks.
func (c *Conn) Version() cmpp.Version { return c.cfg.Version }

// Done returns a channel closed when the connection is closed, for any
// reason; Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection closed (wrapping ErrConnClosed), or nil
// while it is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cause
}

// InFlight returns how many window slots are taken: Submits between passing
// the window and being settled.
func (c *Conn) InFlight() int { return len(c.slots) }

// Submit sends one Submit and waits for its outcome. It returns err == nil
// only for OutcomeAccepted; otherwise a *SubmitError with the outcome, and
// SubmitResult says the same (see Outcome for what each allows).
//
// In order: it waits for the rate limit (Config.RateLimit) and for a window
// slot, blocking while Config.Window Submits wait for responses; allocates
// the Sequence_Id and registers the request, both before any byte is
// written, so the fastest SubmitResp finds it; queues the packet for the
// writer; and waits up to Config.ResponseTimeout for the SubmitResp with its
// Sequence_Id.
//
// ctx governs every wait. Ending it before the request is registered gives
// NotSent; after, Unknown (the packet is on its way and cannot be called
// back). The caller may reuse s once Submit returns.
func (c *Conn) Submit(ctx context.Context, s *cmpp.Submit) (SubmitResult, error) {
	res := SubmitResult{ConnID: c.id}
	if err := ctx.Err(); err != nil {
		return c.notSent(res, err)
	}
	if c.limit != nil {
		if err := c.limit.wait(ctx, c.done); err != nil {
			return c.notSent(res, c.stopErr(err))
		}
	}
	if err := c.acquire(ctx); err != nil {
		return c.notSent(res, err)
	}
	c.mu.Lock()
	if c.closed || c.closing != nil {
		cause := c.closeCauseLocked()
		c.mu.Unlock()
		<-c.slots
		return c.notSent(res, cause)
	}
	seq := c.nextSeqLocked()
	start := len(c.out)
	out, err := cmpp.AppendPacket(c.out, c.cfg.Version, seq, s)
	if err != nil {
		c.mu.Unlock()
		<-c.slots
		return c.notSent(res, err)
	}
	c.out = out
	req := &request{want: cmpp.CmdSubmitResp, slot: true, done: make(chan reply, 1)}
	c.pending[seq] = req
	c.submits++
	c.outReqs = append(c.outReqs, queued{seq: seq, start: start, req: req})
	c.mu.Unlock()
	c.wake()

	res.Seq = seq
	var r reply
	select {
	case r = <-req.done:
	case <-c.cfg.Clock.After(c.cfg.ResponseTimeout):
		r = c.abandon(seq, req, fmt.Errorf("%w (%s)", ErrResponseTimeout, c.cfg.ResponseTimeout))
	case <-ctx.Done():
		r = c.abandon(seq, req, ctx.Err())
	}
	res.Outcome, res.MsgID, res.Result = r.outcome, r.msgID, r.result
	if r.outcome == OutcomeAccepted {
		return res, nil
	}
	return res, &SubmitError{Outcome: r.outcome, Seq: seq, ConnID: c.id, Result: r.result, Err: r.err}
}

// notSent returns the NotSent result of a Submit that was never registered.
func (c *Conn) notSent(res SubmitResult, cause error) (SubmitResult, error) {
	c.stats.notSent.Add(1)
	res.Outcome = OutcomeNotSent
	return res, &SubmitError{Outcome: OutcomeNotSent, ConnID: c.id, Err: cause}
}

// stopErr turns the token bucket's errStopped into the connection's reason.
func (c *Conn) stopErr(err error) error {
	if err == errStopped {
		return c.Err()
	}
	return err
}

// acquire takes a window slot, blocking while the window is full.
func (c *Conn) acquire(ctx context.Context) error {
	select {
	case c.slots <- struct{}{}:
		return nil
	default:
	}
	c.slotWaiters.Add(1)
	defer c.slotWaiters.Add(-1)
	select {
	case c.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return c.Err()
	}
}

// closeCauseLocked is the reason a Submit is refused on a closed or closing
// connection.
func (c *Conn) closeCauseLocked() error {
	if c.closed {
		return c.cause
	}
	return c.closing
}

// nextSeqLocked allocates the next Sequence_Id: counting up by one and
// wrapping, skipping 0 and any still waiting for a response.
func (c *Conn) nextSeqLocked() uint32 {
	for {
		c.seq++
		if c.seq == 0 {
			continue
		}
		if _, busy := c.pending[c.seq]; !busy {
			return c.seq
		}
	}
}

// wake tells the writer there is something to write.
func (c *Conn) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// abandon settles a request its waiter gives up on (timeout, ctx) as
// Unknown, unless a reply beat it, and returns the request's reply. A
// SubmitResp that comes later is reported as late.
func (c *Conn) abandon(seq uint32, req *request, cause error) reply {
	c.mu.Lock()
	if c.pending[seq] == req {
		if req.want == cmpp.CmdSubmitResp {
			c.late.add(seq)
		}
		c.finishLocked(seq, req, reply{outcome: OutcomeUnknown, err: cause})
	}
	c.mu.Unlock()
	return <-req.done
}

// finishLocked removes a request from pending, frees its window slot and
// hands it its reply. Whoever removes a request settles it: exactly once.
func (c *Conn) finishLocked(seq uint32, req *request, r reply) {
	delete(c.pending, seq)
	if req.want == cmpp.CmdSubmitResp {
		c.submits--
		c.stats.count(r.outcome)
		c.checkDrainedLocked()
	}
	if req.slot {
		<-c.slots
	}
	req.done <- r
}

// checkDrainedLocked closes drained once the connection is closing and no
// Submit waits.
func (c *Conn) checkDrainedLocked() {
	if c.closing != nil && c.submits == 0 && !c.isDrain {
		c.isDrain = true
		close(c.drained)
	}
}

// request registers and queues a control request (ActiveTest, Terminate),
// which takes no window slot.
func (c *Conn) request(p cmpp.Packet, want cmpp.CommandID) (uint32, *request, error) {
	c.mu.Lock()
	if c.closed {
		cause := c.cause
		c.mu.Unlock()
		return 0, nil, cause
	}
	seq := c.nextSeqLocked()
	start := len(c.out)
	out, err := cmpp.AppendPacket(c.out, c.cfg.Version, seq, p)
	if err != nil {
		c.mu.Unlock()
		return 0, nil, err
	}
	c.out = out
	req := &request{want: want, done: make(chan reply, 1)}
	c.pending[seq] = req
	c.outReqs = append(c.outReqs, queued{seq: seq, start: start, req: req})
	c.mu.Unlock()
	c.wake()
	return seq, req, nil
}

// send queues a response (ActiveTestResp, DeliverResp, TerminateResp); on a
// closed connection it is dropped.
func (c *Conn) send(seq uint32, p cmpp.Packet) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	out, err := cmpp.AppendPacket(c.out, c.cfg.Version, seq, p)
	if err == nil {
		c.out = out
	}
	c.mu.Unlock()
	if err != nil {
		c.log.Error("cmppconn: response not sent", "conn", c.id, "seq", seq, "err", err)
		return
	}
	c.wake()
}

// writeLoop is the only writer of the socket.
func (c *Conn) writeLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.kick:
		case <-c.done:
			return
		}
		// Let the Submits that are runnable now queue their packets too, so
		// one write carries them all: under load this cuts the writes per
		// Submit about eightfold (docs/sms/cmpp.md); with nothing else to
		// run it returns at once.
		runtime.Gosched()
		if !c.flush() {
			return
		}
	}
}

// flush writes everything queued in one Write and settles the requests it
// carried by how far the write got: a request whose first byte went is
// written (Unknown if the connection then closes); one after the point the
// write failed is NotSent. It reports whether the connection is still open.
func (c *Conn) flush() bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	if len(c.out) == 0 {
		c.mu.Unlock()
		return true
	}
	buf, reqs := c.out, c.outReqs
	c.out, c.outReqs = c.spare[:0], c.spareReq[:0]
	for _, q := range reqs {
		if c.pending[q.seq] == q.req {
			q.req.state = stateWriting
		}
	}
	c.mu.Unlock()

	n, werr := c.nc.Write(buf)
	c.writes.Add(1)

	c.mu.Lock()
	var lost error
	if werr != nil && !c.closed {
		lost = fmt.Errorf("%w: write: %w", ErrConnLost, werr)
		c.closeLocked(lost)
	}
	for _, q := range reqs {
		if c.pending[q.seq] != q.req {
			continue // already answered or abandoned
		}
		switch {
		case q.start >= n:
			c.finishLocked(q.seq, q.req, reply{outcome: OutcomeNotSent, err: c.cause})
		case c.closed:
			c.finishLocked(q.seq, q.req, reply{outcome: OutcomeUnknown, err: c.cause})
		default:
			q.req.state = stateWritten
		}
	}
	if !c.closed && c.closing == ErrTerminated && len(c.out) == 0 {
		// The TerminateResp to the ISMG's Terminate has been written.
		c.closeLocked(ErrTerminated)
		lost = ErrTerminated
	}
	clear(reqs)
	c.spare, c.spareReq = buf[:0], reqs[:0]
	open := !c.closed
	c.mu.Unlock()
	if lost != nil {
		c.log.Warn("cmppconn: connection closed", "conn", c.id, "err", lost)
	}
	return open
}

// closeWith closes the connection for cause unless it is closed already.
func (c *Conn) closeWith(cause error) {
	c.mu.Lock()
	first := !c.closed
	c.closeLocked(cause)
	c.mu.Unlock()
	switch {
	case !first:
	case cause == ErrClosed:
		c.log.Info("cmppconn: connection closed", "conn", c.id)
	default:
		c.log.Warn("cmppconn: connection closed", "conn", c.id, "err", cause)
	}
}

// closeLocked closes the connection: requests still queued become NotSent,
// requests written become Unknown, requests being written are left to the
// writer, which settles them by how far its write got.
func (c *Conn) closeLocked(cause error) {
	if c.closed {
		return
	}
	c.closed, c.cause = true, cause
	c.refusing.Store(true)
	for seq, req := range c.pending {
		switch req.state {
		case stateQueued:
			c.finishLocked(seq, req, reply{outcome: OutcomeNotSent, err: cause})
		case stateWritten:
			c.finishLocked(seq, req, reply{outcome: OutcomeUnknown, err: cause})
		}
	}
	c.out = c.out[:0]
	clear(c.outReqs)
	c.outReqs = c.outReqs[:0]
	close(c.done)
	if c.cancel != nil {
		c.cancel()
	}
	_ = c.nc.Close()
}

// readLoop reads every packet and routes it.
func (c *Conn) readLoop() {
	defer c.wg.Done()
	var sr cmpp.SubmitResp
	for {
		h, body, err := c.fr.Next()
		if err != nil {
			c.closeWith(fmt.Errorf("%w: read: %w", ErrConnLost, err))
			return
		}
		c.lastRecv.Store(c.cfg.Clock.Now().UnixNano())
		switch h.CommandID {
		case cmpp.CmdSubmitResp:
			c.complete(h, submitReply(&sr, sr.DecodeBody(body, c.cfg.Version)))
		case cmpp.CmdActiveTestResp:
			c.complete(h, reply{outcome: OutcomeAccepted})
		case cmpp.CmdTerminateResp:
			if c.complete(h, reply{outcome: OutcomeAccepted}) {
				// Our Terminate is answered: the session is over, whatever
				// the ISMG does with the socket next.
				c.closeWith(ErrClosed)
				return
			}
		case cmpp.CmdActiveTest:
			c.send(h.SequenceID, &cmpp.ActiveTestResp{})
		case cmpp.CmdDeliver:
			c.deliver(h.SequenceID, body)
		case cmpp.CmdTerminate:
			c.peerTerminate(h.SequenceID)
		default:
			c.log.Warn("cmppconn: packet ignored", "conn", c.id, "command", h.CommandID.String(), "seq", h.SequenceID)
		}
	}
}

// submitReply turns a decoded SubmitResp into its outcome. A SubmitResp
// that does not decode leaves the Submit's outcome Unknown.
func submitReply(sr *cmpp.SubmitResp, err error) reply {
	if err != nil {
		return reply{outcome: OutcomeUnknown, err: fmt.Errorf("%w: malformed SUBMIT_RESP: %w", ErrProtocol, err)}
	}
	r := reply{msgID: sr.MsgID, result: sr.Result}
	switch sr.Result {
	case ResultOK:
		r.outcome = OutcomeAccepted
	case ResultFlowControl:
		r.outcome = OutcomeFlowControl
	default:
		r.outcome = OutcomeRejected
	}
	return r
}

// complete settles the request a response answers: same Sequence_Id, the
// expected Command_Id, and already handed to the writer (a response to a
// request whose bytes have not left cannot be its response). Anything else
// is unmatched: counted, logged, and reported if it is a late SubmitResp.
func (c *Conn) complete(h cmpp.Header, r reply) (matched bool) {
	c.mu.Lock()
	req := c.pending[h.SequenceID]
	if req != nil && req.want == h.CommandID && req.state != stateQueued {
		c.finishLocked(h.SequenceID, req, r)
		c.mu.Unlock()
		return true
	}
	late := req == nil && h.CommandID == cmpp.CmdSubmitResp && c.late.has(h.SequenceID)
	c.mu.Unlock()
	c.stats.unmatched.Add(1)
	if late {
		c.stats.late.Add(1)
		c.log.Info("cmppconn: late response", "conn", c.id, "seq", h.SequenceID, "result", r.result)
		if f := c.cfg.LateResponseFunc; f != nil && r.err == nil {
			f(LateResponse{ConnID: c.id, Seq: h.SequenceID, MsgID: r.msgID, Result: r.result})
		}
		return false
	}
	c.log.Warn("cmppconn: response matches no request", "conn", c.id, "command", h.CommandID.String(), "seq", h.SequenceID)
	return false
}

// deliver hands a Deliver to DeliverFunc on a goroutine of its own and
// answers it when DeliverFunc returns, or answers 8 (flow control) at once
// when DeliverConcurrency calls are running, so the reader never waits.
func (c *Conn) deliver(seq uint32, body []byte) {
	d := new(cmpp.Deliver)
	if err := d.DecodeBody(body, c.cfg.Version); err != nil {
		var id uint64
		if len(body) >= 8 {
			id = binary.BigEndian.Uint64(body)
		}
		c.send(seq, &cmpp.DeliverResp{MsgID: id, Result: 1})
		c.log.Warn("cmppconn: malformed DELIVER answered with Result 1", "conn", c.id, "seq", seq, "err", err)
		return
	}
	if c.cfg.DeliverFunc == nil {
		c.stats.deliversDeferred.Add(1)
		c.send(seq, &cmpp.DeliverResp{MsgID: d.MsgID, Result: ResultFlowControl})
		return
	}
	select {
	case c.deliverSem <- struct{}{}:
	default:
		c.stats.deliversDeferred.Add(1)
		c.send(seq, &cmpp.DeliverResp{MsgID: d.MsgID, Result: ResultFlowControl})
		return
	}
	c.wg.Add(1) // the reader holds a count, so this never races Wait from zero
	go func() {
		defer c.wg.Done()
		defer func() { <-c.deliverSem }()
		result := c.cfg.DeliverFunc(c.ctx, d)
		c.stats.delivers.Add(1)
		c.send(seq, &cmpp.DeliverResp{MsgID: d.MsgID, Result: result})
	}()
}

// peerTerminate answers the ISMG's Terminate: no new Submits, the
// TerminateResp is queued, and the writer closes the connection once it has
// written it. Submits still waiting become Unknown then.
func (c *Conn) peerTerminate(seq uint32) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closing = ErrTerminated
	c.refusing.Store(true)
	c.checkDrainedLocked()
	out, err := cmpp.AppendPacket(c.out, c.cfg.Version, seq, &cmpp.TerminateResp{})
	if err == nil {
		c.out = out
	}
	c.mu.Unlock()
	c.log.Info("cmppconn: ISMG sent Terminate", "conn", c.id)
	c.wake()
}

// Close ends the connection gracefully: it refuses new Submits (NotSent,
// ErrClosed), waits for the Submits in flight to be settled, sends
// Terminate and waits up to ActiveTestTimeout (T) for TerminateResp, then
// closes the socket; Submits still waiting then become Unknown. ctx bounds
// the whole; when it ends, Close closes at once. It returns once the
// connection's goroutines (DeliverFunc calls included) have ended, or
// ctx.Err() if they have not by then. Safe to call more than once.
func (c *Conn) Close(ctx context.Context) error {
	c.mu.Lock()
	ours := !c.closed && c.closing == nil
	if ours {
		c.closing = ErrClosed
		c.refusing.Store(true)
		c.checkDrainedLocked()
	}
	c.mu.Unlock()
	if ours {
		c.terminate(ctx)
	} else {
		// Already closing: an earlier Close, or the ISMG's Terminate whose
		// TerminateResp the writer is writing before it closes.
		select {
		case <-c.done:
		case <-ctx.Done():
		}
	}
	c.closeWith(ErrClosed)
	if err := waitCtx(ctx, &c.wg); err != nil {
		return fmt.Errorf("cmppconn: close conn=%d: goroutines still running: %w", c.id, err)
	}
	return nil
}

// waitCtx waits for wg, or returns ctx.Err() if ctx ends first.
func waitCtx(ctx context.Context, wg *sync.WaitGroup) error {
	stopped := make(chan struct{})
	go func() {
		wg.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// terminate waits for the Submits in flight, then sends Terminate and waits
// for TerminateResp up to T; ctx or the connection closing cut it short.
func (c *Conn) terminate(ctx context.Context) {
	select {
	case <-c.drained:
	case <-ctx.Done():
		return
	case <-c.done:
		return
	}
	_, req, err := c.request(&cmpp.Terminate{}, cmpp.CmdTerminateResp)
	if err != nil {
		return
	}
	select {
	case <-req.done:
	case <-c.cfg.Clock.After(c.cfg.ActiveTestTimeout):
	case <-ctx.Done():
	}
}

// lateKept is how many abandoned Sequence_Ids a connection remembers to
// recognise their late SubmitResps.
const lateKept = 1024

// lateRing holds the last lateKept Sequence_Ids whose Submits were
// abandoned as Unknown.
type lateRing struct {
	seqs [lateKept]uint32
	n    int
}

func (r *lateRing) add(seq uint32) {
	r.seqs[r.n%lateKept] = seq
	r.n++
}

func (r *lateRing) has(seq uint32) bool {
	for _, s := range r.seqs[:min(r.n, lateKept)] {
		if s == seq {
			return true
		}
	}
	return false
}

// accepting reports whether the connection takes new Submits.
func (c *Conn) accepting() bool { return !c.refusing.Load() }
