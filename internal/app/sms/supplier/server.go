package supplier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/relaytype"
)

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("supplier: server closed")

// Server is a simulated ISMG: a CMPP 2.0/3.0 server that logs SP accounts
// in, answers and records their Submits, and sends status reports and MO
// messages, misbehaving as its Behaviour says. New, then Serve on a
// listener; Close ends it. Stats and SendMO are safe for concurrent use.
type Server struct {
	cfg      Config
	log      *slog.Logger
	clock    relaytype.Clock
	sched    *scheduler
	ids      *msgIDs
	rec      *recorder // nil without a record
	boot     int
	accounts []*account
	byAddr   map[string]*account
	stats    counters

	connNo  atomic.Uint64 // connections accepted
	smscSeq atomic.Uint32 // SMSC_sequence of reports
	moRef   atomic.Uint32 // UDH references of long MO messages

	mu     sync.Mutex
	ln     net.Listener
	conns  map[*conn]struct{}
	closed bool
	cancel context.CancelFunc
	served chan struct{} // closed when Serve returns
	wg     sync.WaitGroup
}

// New checks cfg, applies its defaults and opens the record (appending a boot
// line to it). The server does nothing until Serve.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	mo := cfg.Behaviour.MO
	if _, err := cmpp.Split(mo.Text, moFmt(mo.Fmt, mo.Text), cmpp.SplitOpts{RefFunc: func() uint16 { return 0 }}); err != nil {
		return nil, fmt.Errorf("supplier: Behaviour.MO.Text: %w", err)
	}
	s := &Server{
		cfg:    cfg,
		log:    cfg.Logger,
		clock:  cfg.Clock,
		sched:  newScheduler(cfg.Clock),
		byAddr: map[string]*account{},
		conns:  map[*conn]struct{}{},
	}
	for _, a := range cfg.Accounts {
		acct := &account{s: s, cfg: a}
		s.accounts = append(s.accounts, acct)
		s.byAddr[a.SourceAddr] = acct
	}
	now := cfg.Clock.Now()
	from := now.Unix() + 1 // without a record: a restart within the second still gets new ids
	var reserve func(int64) error
	if cfg.Record.Path != "" {
		rec, read, err := openRecorder(cfg.Record.Path, cfg.Record.Sync, now)
		if err != nil {
			return nil, err
		}
		if read.TornTail {
			s.log.Warn("sms supplier: record ended in a partial line; cut off", "path", cfg.Record.Path)
		}
		s.rec, s.boot = rec, read.Boots+1
		from = max(from, read.reservedUntil)
		reserve = func(until int64) error {
			return rec.appendLine(recordLine{Kind: kindIDs, Until: until, Entry: Entry{Boot: s.boot}})
		}
	}
	s.ids = newMsgIDs(cfg.ISMGCode, cfg.Location, from, reserve)
	return s, nil
}

// Serve accepts connections on ln until ctx ends or Close is called, then
// sends Terminate on every connection, closes them and returns nil; it
// returns the error of an Accept that failed otherwise. It may be called
// once.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return ErrServerClosed
	case s.ln != nil:
		s.mu.Unlock()
		return errors.New("supplier: Serve called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	s.ln, s.cancel, s.served = ln, cancel, make(chan struct{})
	if every := s.cfg.Behaviour.MO.Every; every > 0 { // before Addr answers: ticks count from here
		s.moTicks(s.clock.Now().Add(every))
	}
	s.mu.Unlock()
	defer close(s.served)

	var bg sync.WaitGroup
	bg.Go(func() { s.sched.run(ctx) })
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()
	s.log.Info("sms supplier: listening", "addr", ln.Addr().String(), "accounts", len(s.accounts))
	var err error
	for {
		nc, aerr := ln.Accept()
		if aerr != nil {
			if ctx.Err() == nil {
				err = fmt.Errorf("supplier: accept: %w", aerr)
			}
			break
		}
		s.startConn(nc)
	}
	cancel()
	bg.Wait()
	s.shutdownConns()
	return err
}

// Addr returns the listener's address once Serve has been called, else nil.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Close stops Serve (waiting for it to return) and closes the record. It is
// safe to call more than once and without Serve.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	cancel, served := s.cancel, s.served
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-served
	}
	if s.rec != nil {
		return s.rec.close()
	}
	return nil
}

func (s *Server) startConn(nc net.Conn) {
	c := newConn(s, nc, s.connNo.Add(1))
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.stats.connects.Add(1)
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		c.writeLoop()
	}()
	go func() {
		defer s.wg.Done()
		c.serve()
	}()
}

// shutdownConns sends Terminate on every connection and waits until their
// writers have flushed and closed them; past ResponseTimeout on the clock it
// closes the rest at once.
func (s *Server) shutdownConns() {
	s.mu.Lock()
	conns := slices.Collect(maps.Keys(s.conns))
	s.mu.Unlock()
	for _, c := range conns {
		c.terminate()
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-s.clock.After(s.cfg.ResponseTimeout):
		for _, c := range conns {
			c.close("shutdown")
		}
		<-done
	}
}

// DropConns closes every open connection at once, without a Terminate, as
// a network failure would: SubmitResps and Delivers not yet written are
// lost, unanswered Delivers are held for the account's next connection.
// Each closed connection counts in Stats.Drops. It returns how many were
// closed; safe for concurrent use.
func (s *Server) DropConns() int {
	s.mu.Lock()
	conns := slices.Collect(maps.Keys(s.conns))
	s.mu.Unlock()
	n := 0
	for _, c := range conns {
		if !c.closed() {
			c.drop("dropped on request")
			n++
		}
	}
	return n
}

// removeConn forgets a closed connection.
func (s *Server) removeConn(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Stats are the server's counters since New. Counters only grow; the
// fields marked "now" are gauges.
type Stats struct {
	// Connections is the number of open connections now, logged in or not;
	// LoggedIn those logged in.
	Connections, LoggedIn int
	// Connects counts connections accepted; Logins successful logins;
	// LoginFailures Connects answered with a non-zero Status.
	Connects, Logins, LoginFailures int64
	// SubmitsReceived counts Submit packets; SubmitsAccepted those accepted
	// (recorded); SubmitsRefused those answered with a non-zero Result.
	// Received = Accepted + Refused + those a window drop cut off.
	SubmitsReceived, SubmitsAccepted, SubmitsRefused int64
	// FlowControlled counts the refusals with Result 8 (rate, window,
	// FlowControlRate).
	FlowControlled int64
	// WindowViolations counts Submits that arrived while Window others of
	// their connection were unanswered.
	WindowViolations int64
	// DuplicateSeqs counts Submits refused with Result 3 because their
	// Sequence_Id was that of a Submit still unanswered on the connection.
	DuplicateSeqs int64
	// NoAnswers counts accepted Submits whose SubmitResp was withheld
	// (NoAnswerRate); Drops connections the server dropped on purpose
	// (DropEvery, DropRate, WindowDrop, keep-alive, a slow reader).
	NoAnswers, Drops int64
	// ReportsSent counts status reports sent (each once, duplicates
	// included); DuplicateReports the duplicates among them;
	// ReportsBeforeResp those sent before their SubmitResp.
	ReportsSent, DuplicateReports, ReportsBeforeResp int64
	// MOsSent counts MO Delivers sent (one per part of a long MO).
	MOsSent int64
	// DeliverResends counts Delivers sent again after ResponseTimeout
	// without an answer; DeliversAbandoned those given up after Tries;
	// DeliversDropped those lost to the MaxHeld bound or a layout that
	// cannot carry them; DeliversHeld those waiting now for a connection.
	DeliverResends, DeliversAbandoned, DeliversDropped int64
	DeliversHeld                                       int
	// ActiveTestsSent counts keep-alives the server sent.
	ActiveTestsSent int64
	// Scheduled is the number of timed events waiting now (answers, reports,
	// timeouts).
	Scheduled int
}

// counters are the Stats counters.
type counters struct {
	connects, logins, loginFailures                   atomic.Int64
	received, accepted, refused, flowControlled       atomic.Int64
	windowViolations, duplicateSeqs, noAnswers, drops atomic.Int64
	reports, duplicateReports, reportsBeforeResp, mos atomic.Int64
	resends, abandoned, dropped, activeTests          atomic.Int64
}

// Stats returns the counters now.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	st := Stats{Connections: len(s.conns)}
	s.mu.Unlock()
	for _, a := range s.accounts {
		a.mu.Lock()
		st.LoggedIn += len(a.conns)
		st.DeliversHeld += len(a.held)
		a.mu.Unlock()
	}
	c := &s.stats
	st.Connects, st.Logins, st.LoginFailures = c.connects.Load(), c.logins.Load(), c.loginFailures.Load()
	st.SubmitsReceived, st.SubmitsAccepted, st.SubmitsRefused = c.received.Load(), c.accepted.Load(), c.refused.Load()
	st.FlowControlled, st.WindowViolations, st.DuplicateSeqs = c.flowControlled.Load(), c.windowViolations.Load(), c.duplicateSeqs.Load()
	st.NoAnswers, st.Drops = c.noAnswers.Load(), c.drops.Load()
	st.ReportsSent, st.DuplicateReports, st.ReportsBeforeResp = c.reports.Load(), c.duplicateReports.Load(), c.reportsBeforeResp.Load()
	st.MOsSent = c.mos.Load()
	st.DeliverResends, st.DeliversAbandoned, st.DeliversDropped = c.resends.Load(), c.abandoned.Load(), c.dropped.Load()
	st.ActiveTestsSent = c.activeTests.Load()
	st.Scheduled = s.sched.len()
	return st
}

// MO is one mobile-originated message for SendMO.
type MO struct {
	// From is the sending handset (Src_terminal_Id); default MOConfig.From.
	From string
	// To is the SP number it was sent to (Dest_Id); default MOConfig.To, or
	// the account's SourceAddr.
	To string
	// ServiceID is the Service_Id; empty by default.
	ServiceID string
	// Text is the message; longer than one message, it goes in parts with a
	// concatenation UDH.
	Text string
	// Fmt is the Msg_Fmt; 0 chooses ASCII or UCS2 by the text.
	Fmt cmpp.MsgFmt
	// Ref16 uses the 16-bit reference UDH instead of the 8-bit one.
	Ref16 bool
}

// SendMO queues an MO message (as many Delivers as it has parts) for the
// account with SourceAddr sourceAddr. The parts go out on its logged-in
// connections, or wait for one (see Config.MaxHeld).
func (s *Server) SendMO(sourceAddr string, mo MO) error {
	a := s.byAddr[sourceAddr]
	if a == nil {
		return fmt.Errorf("supplier: SendMO: no account %s", relaytype.QuoteValue(sourceAddr))
	}
	def := s.cfg.Behaviour.MO
	if mo.From == "" {
		mo.From = def.From
	}
	if mo.To == "" {
		mo.To = def.To
	}
	if mo.To == "" {
		mo.To = a.cfg.SourceAddr
	}
	f := moFmt(mo.Fmt, mo.Text)
	segs, err := cmpp.Split(mo.Text, f, cmpp.SplitOpts{Ref16: mo.Ref16, RefFunc: func() uint16 { return uint16(s.moRef.Add(1)) }})
	if err != nil {
		return fmt.Errorf("supplier: SendMO: %w", err)
	}
	now := s.clock.Now()
	parts := make([]*delivery, len(segs))
	for i, seg := range segs {
		id, err := s.ids.alloc(now, 1)
		if err != nil {
			return fmt.Errorf("supplier: SendMO: %w", err)
		}
		parts[i] = &delivery{msgID: id, destID: mo.To, serviceID: mo.ServiceID, src: mo.From,
			fmt: f, udhi: seg.TPUDHI, content: seg.Content}
	}
	a.push(parts...)
	return nil
}

// moTicks schedules the periodic MO at `at`, and the next one Every later:
// the configured MO goes to every account with a connection.
func (s *Server) moTicks(at time.Time) {
	mo := s.cfg.Behaviour.MO
	s.sched.at(at, func() {
		for _, a := range s.accounts {
			a.mu.Lock()
			online := len(a.conns) > 0
			a.mu.Unlock()
			if online {
				if err := s.SendMO(a.cfg.SourceAddr, MO{Text: mo.Text, Fmt: mo.Fmt}); err != nil {
					s.log.Warn("sms supplier: MO not sent", "account", a.cfg.SourceAddr, "err", relaytype.ErrorText(err))
				}
			}
		}
		s.moTicks(at.Add(mo.Every))
	})
}

// moFmt returns f, or the coding ChooseFmt picks for text when f is 0.
func moFmt(f cmpp.MsgFmt, text string) cmpp.MsgFmt {
	if f == 0 {
		return cmpp.ChooseFmt(text)
	}
	return f
}

// newRand returns the random source of stream n of the server's seed.
func (s *Server) newRand(n uint64) *rand.Rand { return rand.New(rand.NewPCG(s.cfg.Seed, n)) }

// timeField formats t as YYMMDDHHMM in the server's zone (report times).
func (s *Server) timeField(t time.Time) string { return t.In(s.cfg.Location).Format("0601021504") }
