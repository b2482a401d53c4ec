package supplier_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/supplier"
	"github.com/relayhq/relay/internal/app/sms/supplier/suppliertest"
	"github.com/relayhq/relay/relayclock"
)

// Accounts of every test server: one that allows both versions, one that
// allows 2.0 only.
const (
	spBoth, secretBoth = "901234", "s3cret-both"
	sp20, secret20     = "901235", "s3cret-20"
)

// start is the fake clock's start: 20 September, 10:00 in Beijing.
var start = time.Date(2026, 9, 20, 2, 0, 0, 0, time.UTC)

// bundle is one running server on loopback with a fake clock.
type bundle struct {
	srv   *supplier.Server
	clock *relayclock.Fake
	addr  string
	ctx   context.Context
	// stop closes the server and waits for Serve; cleanup calls it too.
	stop func()
}

// setup starts a server with the test accounts, the fake clock and seed 7;
// mod adjusts the configuration first. The server is closed at cleanup.
func setup(t *testing.T, mod func(*supplier.Config)) *bundle {
	t.Helper()
	clock := relayclock.NewFake(start)
	cfg := supplier.Config{
		Accounts: []supplier.Account{
			{SourceAddr: spBoth, Secret: secretBoth},
			{SourceAddr: sp20, Secret: secret20, Versions: []cmpp.Version{cmpp.V20}},
		},
		Clock: clock,
		Seed:  7,
	}
	if mod != nil {
		mod(&cfg)
	}
	return serve(t, cfg, clock)
}

// serve runs a server of cfg until cleanup.
func serve(t *testing.T, cfg supplier.Config, clock *relayclock.Fake) *bundle {
	t.Helper()
	srv, err := supplier.New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second) // watchdog: a stuck read fails
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	stop := sync.OnceFunc(func() {
		require.NoError(t, srv.Close())
		require.NoError(t, <-done)
		cancel()
	})
	t.Cleanup(stop)
	require.Eventually(t, func() bool { return srv.Addr() != nil }, 10*time.Second, time.Millisecond)
	return &bundle{srv: srv, clock: clock, addr: ln.Addr().String(), ctx: ctx, stop: stop}
}

// dial connects a peer, closed at cleanup.
func (b *bundle) dial(t *testing.T) *suppliertest.Peer {
	t.Helper()
	p, err := suppliertest.Dial(b.ctx, b.addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// login connects and logs in, requiring Status 0.
func (b *bundle) login(t *testing.T, sp, secret string, v cmpp.Version) *suppliertest.Peer {
	t.Helper()
	p := b.dial(t)
	resp, err := p.Login(sp, secret, v, b.clock.Now())
	require.NoError(t, err)
	require.Zero(t, resp.Status)
	return p
}

// stats waits until cond holds on the server's stats and returns them.
func (b *bundle) stats(t *testing.T, cond func(supplier.Stats) bool) supplier.Stats {
	t.Helper()
	var st supplier.Stats
	require.Eventually(t, func() bool {
		st = b.srv.Stats()
		return cond(st)
	}, 20*time.Second, time.Millisecond, "stats never matched; last %+v", &st)
	return st
}

// next reads the next packet other than an ActiveTest (answered on the way)
// and requires command cmd.
func next(t *testing.T, p *suppliertest.Peer, cmd cmpp.CommandID) (cmpp.Header, cmpp.Packet) {
	t.Helper()
	for {
		h, pkt, err := p.Read()
		require.NoError(t, err)
		if h.CommandID == cmpp.CmdActiveTest {
			require.NoError(t, p.Answer(h, pkt))
			continue
		}
		require.Equal(t, cmd, h.CommandID, "packet seq %d", h.SequenceID)
		return h, pkt
	}
}

// report reads a status-report Deliver, answers it and returns it with its
// decoded report.
func report(t *testing.T, p *suppliertest.Peer) (*cmpp.Deliver, cmpp.Report) {
	t.Helper()
	h, pkt := next(t, p, cmpp.CmdDeliver)
	d := pkt.(*cmpp.Deliver)
	require.True(t, d.IsReport())
	var rp cmpp.Report
	require.NoError(t, rp.Decode(d.MsgContent, p.V))
	require.NoError(t, p.Answer(h, pkt))
	return d, rp
}

// closed requires the server to close p's connection: reading ends (before
// the watchdog).
func (b *bundle) closed(t *testing.T, p *suppliertest.Peer) {
	t.Helper()
	for {
		h, _, err := p.Read()
		if err != nil {
			require.NoError(t, b.ctx.Err(), "the watchdog closed the connection")
			return
		}
		require.NotEqual(t, cmpp.CmdSubmitResp, h.CommandID, "connection still answering")
	}
}

// submitOK sends s and requires an immediate Result 0; it returns the Msg_Id.
func submitOK(t *testing.T, p *suppliertest.Peer, s *cmpp.Submit) uint64 {
	t.Helper()
	seq, err := p.Send(s)
	require.NoError(t, err)
	h, pkt := next(t, p, cmpp.CmdSubmitResp)
	require.Equal(t, seq, h.SequenceID)
	resp := pkt.(*cmpp.SubmitResp)
	require.Zero(t, resp.Result)
	require.NotZero(t, resp.MsgID)
	return resp.MsgID
}

// results sends n Submits without a report request, one after the other's
// answer, and returns their Results (answered at once).
func results(t *testing.T, p *suppliertest.Peer, n int) []uint32 {
	t.Helper()
	var out []uint32
	for range n {
		s := suppliertest.Submit(spBoth, "13800138000", "r", 0)
		s.RegisteredDelivery = 0
		_, err := p.Send(s)
		require.NoError(t, err)
		_, pkt := next(t, p, cmpp.CmdSubmitResp)
		out = append(out, pkt.(*cmpp.SubmitResp).Result)
	}
	return out
}
