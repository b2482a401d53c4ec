package cmppconn

import (
	"bufio"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/relayclock"
)

// The account every test logs in with.
const (
	testSPID   = "901234"
	testSecret = "s3cret"
)

// answerMode is how the test ISMG answers Submits.
type answerMode int

const (
	answerNow      answerMode = iota // at once, in order
	answerReversed                   // in groups of ismgConfig.group, each group in reverse order
	answerHold                       // not until the test releases them
)

// ismgConfig shapes a testISMG.
type ismgConfig struct {
	version cmpp.Version
	// loginStatus, when not 0, refuses every login with it.
	loginStatus uint32
	// badAuth sends a wrong AuthenticatorISMG.
	badAuth bool
	mode    answerMode
	group   int
	// unknownSeq sends, before each SubmitResp, one for a Sequence_Id
	// nobody used.
	unknownSeq bool
	// silentActiveTest leaves the client's ActiveTests unanswered.
	silentActiveTest bool
	// noLoginAnswer reads the Connect and never answers it.
	noLoginAnswer bool
}

// testISMG is a small ISMG for these tests, built from the codec over real
// TCP (the supplier simulator is another package's): it logs clients in and
// answers each Submit with a Msg_Id derived from the Submit's content
// (msgIDFor), so a response matched to the wrong request shows.
type testISMG struct {
	cfg ismgConfig
	ln  net.Listener
	wg  sync.WaitGroup

	mu          sync.Mutex
	conns       []*ismgConn
	submits     int // Submits read, all connections
	activeTests int // ActiveTests read
	held        []heldSubmit
	deliverResp []seqPacket[cmpp.DeliverResp]
	atResps     []uint32 // Sequence_Ids of ActiveTestResps read
	terminates  int      // Terminates read
	termResps   int      // TerminateResps read
}

type heldSubmit struct {
	conn *ismgConn
	seq  uint32
	resp cmpp.SubmitResp
}

type seqPacket[P any] struct {
	seq uint32
	p   P
}

// ismgConn is one client connection of the test ISMG.
type ismgConn struct {
	srv     *testISMG
	nc      net.Conn
	br      *bufio.Reader
	wmu     sync.Mutex
	bw      *bufio.Writer
	submits int // read on this connection (reader goroutine only, read under srv.mu)
	group   []heldSubmit
}

// newISMG listens on a loopback port and serves until close.
func newISMG(cfg ismgConfig) (*testISMG, error) {
	if cfg.version == 0 {
		cfg.version = cmpp.V30
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &testISMG{cfg: cfg, ln: ln}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// startISMG is newISMG for a test, closed by its cleanup.
func startISMG(t testing.TB, cfg ismgConfig) *testISMG {
	t.Helper()
	s, err := newISMG(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

func (s *testISMG) addr() string { return s.ln.Addr().String() }

// clientConfig is a client Config for this ISMG on clock.
func (s *testISMG) clientConfig(clock *testClock) Config {
	cfg := Config{Addr: s.addr(), Version: s.cfg.version, SourceAddr: testSPID, Secret: testSecret,
		Logger: slog.New(slog.DiscardHandler)}
	if clock != nil {
		cfg.Clock = clock
	}
	return cfg
}

func (s *testISMG) close() {
	_ = s.ln.Close()
	s.dropAll()
	s.wg.Wait()
}

// dropAll closes every client connection from the ISMG's side.
func (s *testISMG) dropAll() {
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for _, c := range conns {
		_ = c.nc.Close()
	}
}

func (s *testISMG) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		c := &ismgConn{srv: s, nc: nc, br: bufio.NewReaderSize(nc, 64<<10), bw: bufio.NewWriterSize(nc, 64<<10)}
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer nc.Close()
			c.serve()
		}()
	}
}

func (c *ismgConn) serve() {
	s, v := c.srv, c.srv.cfg.version
	fr := cmpp.NewFrameReader(c.br)
	h, body, err := fr.Next()
	if err != nil || h.CommandID != cmpp.CmdConnect {
		return
	}
	var login cmpp.Connect
	if login.DecodeBody(body, v) != nil || s.cfg.noLoginAnswer {
		_, _ = c.br.Discard(1 << 20) // wait for the client to go
		return
	}
	status := s.cfg.loginStatus
	switch {
	case status != 0:
	case login.SourceAddr != testSPID:
		status = cmpp.ConnectBadSourceAddr
	case !login.Verify(testSecret):
		status = cmpp.ConnectAuthFailed
	}
	resp := cmpp.ConnectResp{Status: status, Version: v}
	if status == 0 {
		resp.AuthenticatorISMG = cmpp.AuthenticatorISMG(v, status, login.AuthenticatorSource, testSecret)
		if s.cfg.badAuth {
			resp.AuthenticatorISMG[0] ^= 0xff
		}
	}
	c.send(h.SequenceID, &resp)
	if status != 0 {
		return
	}
	var sub cmpp.Submit
	for {
		h, body, err := fr.Next()
		if err != nil {
			return
		}
		switch h.CommandID {
		case cmpp.CmdSubmit:
			if err := sub.DecodeBody(body, v); err != nil {
				c.write(h.SequenceID, &cmpp.SubmitResp{Result: 1})
				break
			}
			c.submit(h.SequenceID, &sub)
		case cmpp.CmdActiveTest:
			s.mu.Lock()
			s.activeTests++
			silent := s.cfg.silentActiveTest
			s.mu.Unlock()
			if !silent {
				c.write(h.SequenceID, &cmpp.ActiveTestResp{})
			}
		case cmpp.CmdActiveTestResp:
			s.mu.Lock()
			s.atResps = append(s.atResps, h.SequenceID)
			s.mu.Unlock()
		case cmpp.CmdDeliverResp:
			var dr cmpp.DeliverResp
			if err := dr.DecodeBody(body, v); err != nil {
				return
			}
			s.mu.Lock()
			s.deliverResp = append(s.deliverResp, seqPacket[cmpp.DeliverResp]{h.SequenceID, dr})
			s.mu.Unlock()
		case cmpp.CmdTerminate:
			s.mu.Lock()
			s.terminates++
			s.mu.Unlock()
			c.send(h.SequenceID, &cmpp.TerminateResp{})
			return
		case cmpp.CmdTerminateResp:
			s.mu.Lock()
			s.termResps++
			s.mu.Unlock()
		}
		if !c.frameBuffered() {
			c.flush()
		}
	}
}

// submit answers, groups or holds one Submit.
func (c *ismgConn) submit(seq uint32, sub *cmpp.Submit) {
	s := c.srv
	resp := cmpp.SubmitResp{MsgID: msgIDFor(sub.MsgContent), Result: resultFor(sub.MsgContent)}
	s.mu.Lock()
	s.submits++
	c.submits++
	mode := s.cfg.mode
	if mode == answerHold {
		s.held = append(s.held, heldSubmit{c, seq, resp})
	}
	s.mu.Unlock()
	switch mode {
	case answerNow:
		c.answer(seq, resp)
	case answerReversed:
		c.group = append(c.group, heldSubmit{c, seq, resp})
		if len(c.group) == s.cfg.group {
			for i := len(c.group) - 1; i >= 0; i-- {
				c.answer(c.group[i].seq, c.group[i].resp)
			}
			c.group = c.group[:0]
		}
	}
}

func (c *ismgConn) answer(seq uint32, resp cmpp.SubmitResp) {
	if c.srv.cfg.unknownSeq {
		c.write(seq+1_000_000, &cmpp.SubmitResp{MsgID: 1})
	}
	c.write(seq, &resp)
}

// frameBuffered reports whether a whole packet is already buffered, so the
// answers so far can wait to go out with the next ones (write coalescing
// on the ISMG side too).
func (c *ismgConn) frameBuffered() bool {
	if c.br.Buffered() < cmpp.HeaderLen {
		return false
	}
	hdr, err := c.br.Peek(cmpp.HeaderLen)
	return err == nil && int(binary.BigEndian.Uint32(hdr)) <= c.br.Buffered()
}

// write appends a packet to the write buffer; flush sends it.
func (c *ismgConn) write(seq uint32, p cmpp.Packet) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	pkt, err := cmpp.AppendPacket(nil, c.srv.cfg.version, seq, p)
	if err != nil {
		panic(err)
	}
	_, _ = c.bw.Write(pkt)
}

func (c *ismgConn) flush() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.bw.Flush()
}

// send writes and flushes one packet.
func (c *ismgConn) send(seq uint32, p cmpp.Packet) {
	c.write(seq, p)
	c.flush()
}

// conn returns the i-th connection accepted (and not dropped).
func (s *testISMG) conn(i int) *ismgConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.conns) {
		return nil
	}
	return s.conns[i]
}

// release answers up to n held Submits, oldest first (all for n < 0), and
// returns how many it answered.
func (s *testISMG) release(n int) int {
	s.mu.Lock()
	if n < 0 || n > len(s.held) {
		n = len(s.held)
	}
	out := s.held[:n:n]
	s.held = s.held[n:]
	s.mu.Unlock()
	for _, h := range out {
		h.conn.send(h.seq, &h.resp)
	}
	return n
}

// counts returns the Submits read and held so far.
func (s *testISMG) counts() (submits, held int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.submits, len(s.held)
}

// waitDeliverResp waits for the i-th DeliverResp read (from 0) and
// returns it.
func (s *testISMG) waitDeliverResp(t *testing.T, i int) seqPacket[cmpp.DeliverResp] {
	t.Helper()
	var got seqPacket[cmpp.DeliverResp]
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.deliverResp) <= i {
			return false
		}
		got = s.deliverResp[i]
		return true
	}, 10*time.Second, time.Millisecond)
	return got
}

func (s *testISMG) activeTestCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.activeTests
}

func (s *testISMG) setSilentActiveTest(silent bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.silentActiveTest = silent
}

// msgIDFor is the Msg_Id the test ISMG gives a Submit: a hash of its
// content, so each test Submit (distinct content) has its own.
func msgIDFor(content []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(content)
	return h.Sum64()
}

// resultFor is the Result the test ISMG gives a Submit: 8 for content
// starting "throttle", 13 for "reject", else 0.
func resultFor(content []byte) uint32 {
	switch {
	case strings.HasPrefix(string(content), "throttle"):
		return ResultFlowControl
	case strings.HasPrefix(string(content), "reject"):
		return 13
	}
	return ResultOK
}

// testSubmit is a Submit whose content is text.
func testSubmit(text string) *cmpp.Submit {
	return &cmpp.Submit{PkTotal: 1, PkNumber: 1, RegisteredDelivery: 1, ServiceID: "MXT0001", MsgSrc: testSPID,
		SrcID: "106900001", DestTerminalIDs: []string{"13800138000"}, MsgContent: []byte(text)}
}

// testClock is a relayclock.Fake that counts After calls by duration, so a
// test knows a goroutine is parked on a timer before it moves the clock.
// Timers that nobody waits on any more (a request answered before its
// timeout) stay in the Fake and fire into their buffered channels
// harmlessly when the clock passes them.
type testClock struct {
	*relayclock.Fake
	mu      sync.Mutex
	afters  map[time.Duration]int
	changed chan struct{}
}

func newTestClock() *testClock {
	return &testClock{
		Fake:    relayclock.NewFake(time.Date(2026, 3, 2, 8, 30, 0, 0, time.UTC)),
		afters:  map[time.Duration]int{},
		changed: make(chan struct{}),
	}
}

func (c *testClock) After(d time.Duration) <-chan time.Time {
	ch := c.Fake.After(d)
	c.mu.Lock()
	c.afters[d]++
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	return ch
}

// afterCount returns how many timers of d were asked for.
func (c *testClock) afterCount(d time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.afters[d]
}

// waitAfters blocks until n timers of d have been asked for in all. The
// guard of 10 s of real time only turns a hang into a failure.
func (c *testClock) waitAfters(t testing.TB, d time.Duration, n int) {
	t.Helper()
	guard := time.After(10 * time.Second)
	for {
		c.mu.Lock()
		got, changed := c.afters[d], c.changed
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-guard:
			t.Fatalf("timers of %s: %d asked for, want %d", d, got, n)
		}
	}
}

// faultConn wraps a client's real TCP connection to make the write
// failures a live ISMG cannot be made to cause on demand.
type faultConn struct {
	net.Conn
	mu sync.Mutex
	// gate, when set, holds the next Write until it is closed.
	gate chan struct{}
	// failAfter, when ≥ 0, makes the next Write write only that many bytes
	// and fail.
	failAfter int
}

var errInjected = errors.New("injected write failure")

func (f *faultConn) Write(b []byte) (int, error) {
	f.mu.Lock()
	gate, failAfter := f.gate, f.failAfter
	f.gate, f.failAfter = nil, -1
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if failAfter >= 0 {
		n, _ := f.Conn.Write(b[:min(failAfter, len(b))])
		return n, errInjected
	}
	return f.Conn.Write(b)
}

func (f *faultConn) arm(gate chan struct{}, failAfter int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gate, f.failAfter = gate, failAfter
}
