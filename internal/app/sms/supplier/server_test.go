package supplier_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/supplier"
	"github.com/relayhq/relay/internal/app/sms/supplier/suppliertest"
)

// TestLogin: each Connect gets the Status the standard (or the documented
// extension) gives it, in the layout the ISMG speaks; a refused peer is cut
// off, an accepted one is signed with AuthenticatorISMG (Login checks it).
func TestLogin(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *supplier.Config) {
		c.Accounts = append(c.Accounts, supplier.Account{SourceAddr: "901236", Secret: "s30", Versions: []cmpp.Version{cmpp.V30}, MaxConns: 1})
	})
	for _, tc := range []struct {
		name, sp, secret string
		v                cmpp.Version
		status           uint32
		respVersion      cmpp.Version
	}{
		{"3.0", spBoth, secretBoth, cmpp.V30, 0, cmpp.V30},
		{"2.0", spBoth, secretBoth, cmpp.V20, 0, cmpp.V20},
		{"unknown source address", "999999", secretBoth, cmpp.V30, cmpp.ConnectBadSourceAddr, cmpp.V30},
		{"wrong secret", spBoth, "guess", cmpp.V30, cmpp.ConnectAuthFailed, cmpp.V30},
		{"version too high", sp20, secret20, cmpp.V30, cmpp.ConnectVersionTooHigh, cmpp.V20},
		{"version not allowed", "901236", "s30", cmpp.V20, supplier.StatusVersionRefused, cmpp.V30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := b.dial(t)
			resp, err := p.Login(tc.sp, tc.secret, tc.v, b.clock.Now())
			require.NoError(t, err)
			require.Equal(t, tc.status, resp.Status)
			require.Equal(t, tc.respVersion, resp.Version)
			if tc.status != 0 {
				require.Equal(t, [16]byte{}, resp.AuthenticatorISMG)
				b.closed(t, p)
				return
			}
			// The session works: an ActiveTest is answered.
			_, err = p.Send(&cmpp.ActiveTest{})
			require.NoError(t, err)
			next(t, p, cmpp.CmdActiveTestResp)
		})
	}
	t.Run("too many connections", func(t *testing.T) {
		b.login(t, "901236", "s30", cmpp.V30)
		p := b.dial(t)
		resp, err := p.Login("901236", "s30", cmpp.V30, b.clock.Now())
		require.NoError(t, err)
		require.Equal(t, uint32(supplier.StatusTooManyConns), resp.Status)
		b.closed(t, p)
	})
	st := b.srv.Stats()
	require.Equal(t, int64(3), st.Logins)
	require.Equal(t, int64(5), st.LoginFailures)
}

// TestLoginTimeoutAndFirstPacket: a connection that sends no Connect within
// LoginTimeout is closed; so is one whose first packet is not a Connect.
func TestLoginTimeoutAndFirstPacket(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	idle := b.dial(t)
	b.stats(t, func(s supplier.Stats) bool { return s.Connections == 1 && s.Scheduled == 1 })
	b.clock.Advance(supplier.LoginTimeoutDefault)
	b.closed(t, idle)

	rude := b.dial(t)
	_, err := rude.Send(&cmpp.ActiveTest{})
	require.NoError(t, err)
	b.closed(t, rude)
}

// TestSubmit500 sends 500 Submits back to back on each version: every one is
// answered Result 0 under its own Sequence_Id, with Msg_Ids unique across
// both connections and packed in the standard layout.
func TestSubmit500(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ids := map[uint64]bool{}
	for _, v := range []cmpp.Version{cmpp.V20, cmpp.V30} {
		p := b.login(t, spBoth, secretBoth, v)
		const n = 500
		seqs := map[uint32]bool{}
		for i := range n {
			s := suppliertest.Submit(spBoth, fmt.Sprintf("1380013%04d", i), "hello", 0)
			s.RegisteredDelivery = 0
			seq, err := p.Send(s)
			require.NoError(t, err)
			seqs[seq] = true
		}
		for range n {
			h, pkt := next(t, p, cmpp.CmdSubmitResp)
			require.True(t, seqs[h.SequenceID], "answer to a Submit sent, once")
			delete(seqs, h.SequenceID)
			resp := pkt.(*cmpp.SubmitResp)
			require.Zero(t, resp.Result)
			require.False(t, ids[resp.MsgID], "Msg_Id %d repeated", resp.MsgID)
			ids[resp.MsgID] = true
			parts := cmpp.ParseMsgID(resp.MsgID)
			require.Equal(t, uint32(supplier.ISMGCodeDefault), parts.Gateway)
			require.Equal(t, []uint8{9, 20, 10}, []uint8{parts.Month, parts.Day, parts.Hour}, "time in China Standard Time")
		}
	}
	st := b.srv.Stats()
	require.Equal(t, int64(1000), st.SubmitsAccepted)
	require.Equal(t, int64(1000), st.SubmitsReceived)
	require.Zero(t, st.SubmitsRefused)
}

// TestMsgIDBlockPerDestination: a Submit to n numbers gets one Msg_Id that
// stands for n, so the next Submit's id is n further on.
func TestMsgIDBlockPerDestination(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	p := b.login(t, spBoth, secretBoth, cmpp.V30)
	s := suppliertest.Submit(spBoth, "13800000001", "hi", 0)
	s.RegisteredDelivery = 0
	s.DestTerminalIDs = []string{"13800000001", "13800000002", "13800000003"}
	first := submitOK(t, p, s)
	second := submitOK(t, p, s)
	require.Equal(t, first+3, second)
}

// TestWindow: with answers held back by latency, a Window+1-th unanswered
// Submit is a violation — answered Result 8 at once, or the connection is
// dropped — and the held answers still come when the clock moves.
func TestWindow(t *testing.T) {
	t.Parallel()
	t.Run("flow control", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *supplier.Config) {
			c.Accounts[0].Window = 4
			c.Behaviour.Latency = supplier.Fixed(time.Second)
		})
		p := b.login(t, spBoth, secretBoth, cmpp.V30)
		var seqs []uint32
		for i := range 6 {
			s := suppliertest.Submit(spBoth, "13800000000", "w", uint64(i+1))
			s.RegisteredDelivery = 0
			seq, err := p.Send(s)
			require.NoError(t, err)
			seqs = append(seqs, seq)
		}
		for _, want := range seqs[4:] { // refused at once, ahead of the held answers
			h, pkt := next(t, p, cmpp.CmdSubmitResp)
			require.Equal(t, want, h.SequenceID)
			require.Equal(t, uint32(8), pkt.(*cmpp.SubmitResp).Result)
			require.Zero(t, pkt.(*cmpp.SubmitResp).MsgID)
		}
		st := b.srv.Stats()
		require.Equal(t, int64(2), st.WindowViolations)
		require.Equal(t, int64(2), st.FlowControlled)
		b.clock.Advance(time.Second)
		for _, want := range seqs[:4] {
			h, pkt := next(t, p, cmpp.CmdSubmitResp)
			require.Equal(t, want, h.SequenceID)
			require.Zero(t, pkt.(*cmpp.SubmitResp).Result)
		}
		// The window has room again.
		s := suppliertest.Submit(spBoth, "13800000000", "w", 7)
		s.RegisteredDelivery = 0
		_, err := p.Send(s)
		require.NoError(t, err)
		b.stats(t, func(s supplier.Stats) bool { return s.SubmitsReceived == 7 })
		b.clock.Advance(time.Second)
		_, pkt := next(t, p, cmpp.CmdSubmitResp)
		require.Zero(t, pkt.(*cmpp.SubmitResp).Result)
	})
	t.Run("drop", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *supplier.Config) {
			c.Accounts[0].Window = 2
			c.Behaviour.Latency = supplier.Fixed(time.Second)
			c.Behaviour.WindowAction = supplier.WindowDrop
		})
		p := b.login(t, spBoth, secretBoth, cmpp.V20)
		for i := range 3 {
			_, err := p.Send(suppliertest.Submit(spBoth, "13800000000", "w", uint64(i+1)))
			require.NoError(t, err)
		}
		b.closed(t, p)
		st := b.stats(t, func(s supplier.Stats) bool { return s.Connections == 0 })
		require.Equal(t, int64(1), st.WindowViolations)
		require.Equal(t, int64(1), st.Drops)
		require.Equal(t, int64(2), st.SubmitsAccepted)
	})
}

// TestDuplicateSequence: a Submit reusing the Sequence_Id of one still
// unanswered is refused with Result 3.
func TestDuplicateSequence(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *supplier.Config) { c.Behaviour.Latency = supplier.Fixed(time.Second) })
	p := b.login(t, spBoth, secretBoth, cmpp.V30)
	s := suppliertest.Submit(spBoth, "13800000000", "d", 1)
	s.RegisteredDelivery = 0
	require.NoError(t, p.SendSeq(9, s))
	require.NoError(t, p.SendSeq(9, s))
	h, pkt := next(t, p, cmpp.CmdSubmitResp)
	require.Equal(t, uint32(9), h.SequenceID)
	require.Equal(t, uint32(3), pkt.(*cmpp.SubmitResp).Result)
	b.clock.Advance(time.Second)
	_, pkt = next(t, p, cmpp.CmdSubmitResp)
	require.Zero(t, pkt.(*cmpp.SubmitResp).Result)
	require.Equal(t, int64(1), b.srv.Stats().DuplicateSeqs)
}

// TestSubmitChecks: fields an ISMG refuses on sight get their Result.
func TestSubmitChecks(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	p := b.login(t, spBoth, secretBoth, cmpp.V30)
	// Msg_Fmt 8 with 150 bytes: written by hand, the codec refuses to.
	over := suppliertest.Submit(spBoth, "13800138000", strings.Repeat("x", 150), 0)
	raw, err := cmpp.AppendPacket(nil, cmpp.V30, 77, over)
	require.NoError(t, err)
	raw[cmpp.HeaderLen+58] = byte(cmpp.FmtUCS2)
	require.NoError(t, p.Write(raw))
	h, pkt := next(t, p, cmpp.CmdSubmitResp)
	require.Equal(t, uint32(77), h.SequenceID)
	require.Equal(t, uint32(6), pkt.(*cmpp.SubmitResp).Result, "over the Msg_Fmt limit")
	for _, tc := range []struct {
		name   string
		mod    func(*cmpp.Submit)
		result uint32
	}{
		{"Pk_number past Pk_total", func(s *cmpp.Submit) { s.PkTotal, s.PkNumber = 2, 3 }, 1},
		{"bad UDH", func(s *cmpp.Submit) { s.TPUDHI, s.MsgContent = 1, []byte{5, 0, 3, 1, 0, 1} }, 1},
		{"Msg_src of another SP", func(s *cmpp.Submit) { s.MsgSrc = "900000" }, 11},
		{"charged number missing", func(s *cmpp.Submit) { s.FeeUserType = 3 }, 12},
		{"destination not a number", func(s *cmpp.Submit) { s.DestTerminalIDs = []string{"1380013800x"} }, 13},
	} {
		s := suppliertest.Submit(spBoth, "13800138000", "c", 0)
		tc.mod(s)
		seq, err := p.Send(s)
		require.NoError(t, err, tc.name)
		h, pkt := next(t, p, cmpp.CmdSubmitResp)
		require.Equal(t, seq, h.SequenceID)
		require.Equal(t, tc.result, pkt.(*cmpp.SubmitResp).Result, tc.name)
	}
	require.Equal(t, int64(6), b.srv.Stats().SubmitsRefused)
}

// TestRatesAndResults: FailRate answers with the configured Results,
// FlowControlRate with 8, and an account's Rate refuses what exceeds it
// until the clock refills the bucket.
func TestRatesAndResults(t *testing.T) {
	t.Parallel()
	t.Run("fail", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *supplier.Config) {
			c.Behaviour.FailRate = 1
			c.Behaviour.ResultCodes = []supplier.Weighted[uint32]{{Value: 10, Weight: 1}}
		})
		p := b.login(t, spBoth, secretBoth, cmpp.V20)
		_, err := p.Send(suppliertest.Submit(spBoth, "13800138000", "f", 0))
		require.NoError(t, err)
		_, pkt := next(t, p, cmpp.CmdSubmitResp)
		require.Equal(t, uint32(10), pkt.(*cmpp.SubmitResp).Result)
	})
	t.Run("flow control", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *supplier.Config) { c.Behaviour.FlowControlRate = 1 })
		p := b.login(t, spBoth, secretBoth, cmpp.V30)
		_, err := p.Send(suppliertest.Submit(spBoth, "13800138000", "f", 0))
		require.NoError(t, err)
		_, pkt := next(t, p, cmpp.CmdSubmitResp)
		require.Equal(t, uint32(8), pkt.(*cmpp.SubmitResp).Result)
		require.Equal(t, int64(1), b.srv.Stats().FlowControlled)
	})
	t.Run("account rate", func(t *testing.T) {
		t.Parallel()
		b := setup(t, func(c *supplier.Config) { c.Accounts[0].Rate = 2 })
		p := b.login(t, spBoth, secretBoth, cmpp.V30)
		require.Equal(t, []uint32{0, 0, 8}, results(t, p, 3))
		b.clock.Advance(time.Second)
		require.Equal(t, []uint32{0, 0, 8}, results(t, p, 3))
	})
}

// TestSeedDecides: the same seed and traffic meet the same decisions; another
// seed meets others.
func TestSeedDecides(t *testing.T) {
	t.Parallel()
	run := func(seed uint64) string {
		b := setup(t, func(c *supplier.Config) {
			c.Seed = seed
			c.Behaviour.FailRate = 0.3
			c.Behaviour.FlowControlRate = 0.2
			c.Behaviour.ResultCodes = []supplier.Weighted[uint32]{{Value: 9, Weight: 1}, {Value: 13, Weight: 2}}
		})
		p := b.login(t, spBoth, secretBoth, cmpp.V30)
		return fmt.Sprint(results(t, p, 40))
	}
	a := run(3)
	require.Equal(t, a, run(3))
	require.NotEqual(t, a, run(4))
	require.Contains(t, a, " 8 ")
	require.Contains(t, a, " 13 ")
}

// TestDropConns: DropConns closes every logged-in connection without a
// Terminate and counts each as a drop; the account logs in again after it.
func TestDropConns(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	p1 := b.login(t, spBoth, secretBoth, cmpp.V30)
	p2 := b.login(t, sp20, secret20, cmpp.V20)
	b.stats(t, func(st supplier.Stats) bool { return st.LoggedIn == 2 })
	require.Equal(t, 2, b.srv.DropConns())
	b.closed(t, p1)
	b.closed(t, p2)
	st := b.stats(t, func(st supplier.Stats) bool { return st.Connections == 0 })
	require.Equal(t, int64(2), st.Drops)
	require.Zero(t, b.srv.DropConns())
	b.login(t, spBoth, secretBoth, cmpp.V30)
}
