package supplier_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/supplier"
	"github.com/relayhq/relay/internal/app/sms/supplier/suppliertest"
)

// noReportYet proves that nothing was sent ahead of time: after an
// ActiveTest round trip, which follows everything the server had queued,
// the next packet is its answer and no report went out.
func noReportYet(t *testing.T, b *bundle, p *suppliertest.Peer) {
	t.Helper()
	_, err := p.Send(&cmpp.ActiveTest{})
	require.NoError(t, err)
	next(t, p, cmpp.CmdActiveTestResp)
	require.Zero(t, b.srv.Stats().ReportsSent)
}

// TestReportsPerSegment: a long message goes as one Submit per segment, and
// each segment gets its own report with its own Msg_Id, ReportDelay after
// its SubmitResp on the fake clock — on both versions, whose report layouts
// differ.
func TestReportsPerSegment(t *testing.T) {
	t.Parallel()
	for _, v := range []cmpp.Version{cmpp.V20, cmpp.V30} {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *supplier.Config) { c.Behaviour.ReportDelay = supplier.Fixed(10 * time.Second) })
			p := b.login(t, spBoth, secretBoth, v)
			segs, err := cmpp.Split(strings.Repeat("长短信分段回执", 30), cmpp.FmtUCS2, cmpp.SplitOpts{RefFunc: func() uint16 { return 42 }})
			require.NoError(t, err)
			require.Len(t, segs, 4)
			var ids []uint64
			for _, seg := range segs {
				s := suppliertest.Submit(spBoth, "13800138000", "", 5001)
				s.PkTotal, s.PkNumber, s.TPUDHI, s.MsgFmt, s.MsgContent = seg.PkTotal, seg.PkNumber, seg.TPUDHI, cmpp.FmtUCS2, seg.Content
				ids = append(ids, submitOK(t, p, s))
			}
			b.clock.Advance(9 * time.Second)
			noReportYet(t, b, p)
			b.clock.Advance(time.Second)
			for i := range segs {
				d, rp := report(t, p)
				require.Equal(t, ids[i], rp.MsgID, "segment %d's own Msg_Id", i+1)
				require.Equal(t, "DELIVRD", rp.Stat)
				require.Equal(t, "13800138000", rp.DestTerminalID)
				require.Equal(t, "13800138000", d.SrcTerminalID)
				require.Equal(t, "1069"+spBoth, d.DestID)
				require.Equal(t, "2609201000", rp.SubmitTime)
				require.Equal(t, "2609201000", rp.DoneTime)
				require.NotEqual(t, rp.MsgID, d.MsgID, "the Deliver has a Msg_Id of its own")
			}
			st := b.stats(t, func(s supplier.Stats) bool { return s.ReportsSent == 4 })
			require.Zero(t, st.DeliversHeld)
		})
	}
}

// TestReportsPerDestination: a Submit to three numbers gets a report for
// each, Msg_Id, Msg_Id+1 and Msg_Id+2, with the Stat drawn per number.
func TestReportsPerDestination(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *supplier.Config) {
		c.Behaviour.ReportStats = []supplier.Weighted[string]{{Value: "UNDELIV", Weight: 1}, {Value: "EXPIRED", Weight: 1}}
	})
	p := b.login(t, spBoth, secretBoth, cmpp.V30)
	s := suppliertest.Submit(spBoth, "", "group", 0)
	s.DestTerminalIDs = []string{"13800000001", "13800000002", "13800000003"}
	id := submitOK(t, p, s)
	stats := map[string]int{}
	for k := range 3 {
		_, rp := report(t, p)
		require.Equal(t, id+uint64(k), rp.MsgID)
		require.Equal(t, s.DestTerminalIDs[k], rp.DestTerminalID)
		stats[rp.Stat]++
	}
	require.Zero(t, stats["DELIVRD"])
	require.Equal(t, 3, stats["UNDELIV"]+stats["EXPIRED"])
}

// TestReportBeforeResp: the known race on purpose — the report reaches the
// SP before the SubmitResp that tells it the Msg_Id.
func TestReportBeforeResp(t *testing.T) {
	t.Parallel()
	for _, latency := range []time.Duration{0, 2 * time.Second} {
		t.Run(latency.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(c *supplier.Config) {
				c.Behaviour.Latency = supplier.Fixed(latency)
				c.Behaviour.ReportBeforeRespRate = 1
				c.Behaviour.ReportDelay = supplier.Fixed(time.Hour) // ignored for these
			})
			p := b.login(t, spBoth, secretBoth, cmpp.V20)
			seq, err := p.Send(suppliertest.Submit(spBoth, "13800138000", "race", 0))
			require.NoError(t, err)
			b.stats(t, func(s supplier.Stats) bool { return s.SubmitsAccepted == 1 })
			b.clock.Advance(latency)
			_, rp := report(t, p)
			h, pkt := next(t, p, cmpp.CmdSubmitResp)
			require.Equal(t, seq, h.SequenceID)
			require.Equal(t, rp.MsgID, pkt.(*cmpp.SubmitResp).MsgID)
			require.Equal(t, int64(1), b.srv.Stats().ReportsBeforeResp)
		})
	}
}

// TestDuplicateReports: each report comes twice, the same report in two
// Delivers, the second another ReportDelay later.
func TestDuplicateReports(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *supplier.Config) {
		c.Behaviour.DuplicateReportRate = 1
		c.Behaviour.ReportDelay = supplier.Fixed(5 * time.Second)
	})
	p := b.login(t, spBoth, secretBoth, cmpp.V30)
	id := submitOK(t, p, suppliertest.Submit(spBoth, "13800138000", "dup", 0))
	b.clock.Advance(5 * time.Second)
	d1, rp1 := report(t, p)
	require.Equal(t, id, rp1.MsgID)
	b.stats(t, func(s supplier.Stats) bool { return s.ReportsSent == 1 })
	b.clock.Advance(5 * time.Second)
	d2, rp2 := report(t, p)
	require.Equal(t, rp1, rp2)
	require.NotEqual(t, d1.MsgID, d2.MsgID)
	st := b.stats(t, func(s supplier.Stats) bool { return s.ReportsSent == 2 })
	require.Equal(t, int64(1), st.DuplicateReports)
}

// TestNoAnswer: a withheld SubmitResp still means an accepted message — its
// report comes, with the Msg_Id the SP never learnt.
func TestNoAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *supplier.Config) { c.Behaviour.NoAnswerRate = 1 })
	p := b.login(t, spBoth, secretBoth, cmpp.V30)
	_, err := p.Send(suppliertest.Submit(spBoth, "13800138000", "lost answer", 0))
	require.NoError(t, err)
	_, rp := report(t, p)
	require.NotZero(t, rp.MsgID)
	st := b.srv.Stats()
	require.Equal(t, int64(1), st.NoAnswers)
	require.Equal(t, int64(1), st.SubmitsAccepted)
}

// TestDropEvery: the connection dies right after every third accepted Submit,
// unanswered; the Submit stands, and its report waits for the account's next
// connection.
func TestDropEvery(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *supplier.Config) {
		c.Behaviour.DropEvery = 3
		c.Behaviour.ReportDelay = supplier.Fixed(time.Minute)
	})
	p := b.login(t, spBoth, secretBoth, cmpp.V30)
	submitOK(t, p, suppliertest.Submit(spBoth, "13800000001", "a", 0))
	submitOK(t, p, suppliertest.Submit(spBoth, "13800000002", "b", 0))
	_, err := p.Send(suppliertest.Submit(spBoth, "13800000003", "c", 0))
	require.NoError(t, err)
	b.closed(t, p)
	st := b.stats(t, func(s supplier.Stats) bool { return s.Connections == 0 })
	require.Equal(t, int64(1), st.Drops)
	require.Equal(t, int64(3), st.SubmitsAccepted)

	b.clock.Advance(time.Minute)
	b.stats(t, func(s supplier.Stats) bool { return s.DeliversHeld == 3 })
	q := b.login(t, spBoth, secretBoth, cmpp.V20)
	got := map[string]bool{}
	for range 3 {
		_, rp := report(t, q)
		got[rp.DestTerminalID] = true
	}
	require.Len(t, got, 3, "the dropped Submit's report too, on the new connection")
}

// TestDeliverResend: an unanswered Deliver is sent again after
// ResponseTimeout with the same Msg_Id, Tries times in all, then given up.
func TestDeliverResend(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *supplier.Config) {
		c.ResponseTimeout = 10 * time.Second
		c.Tries = 2
	})
	p := b.login(t, spBoth, secretBoth, cmpp.V30)
	id := submitOK(t, p, suppliertest.Submit(spBoth, "13800138000", "resend", 0))
	_, first := next(t, p, cmpp.CmdDeliver) // not answered
	b.stats(t, func(s supplier.Stats) bool { return s.ReportsSent == 1 })
	b.clock.Advance(10 * time.Second)
	h, again := next(t, p, cmpp.CmdDeliver)
	require.Equal(t, first.(*cmpp.Deliver).MsgID, again.(*cmpp.Deliver).MsgID)
	var rp cmpp.Report
	require.NoError(t, rp.Decode(again.(*cmpp.Deliver).MsgContent, cmpp.V30))
	require.Equal(t, id, rp.MsgID)
	b.stats(t, func(s supplier.Stats) bool { return s.DeliverResends == 1 })
	b.clock.Advance(10 * time.Second)
	st := b.stats(t, func(s supplier.Stats) bool { return s.DeliversAbandoned == 1 })
	require.Equal(t, int64(1), st.ReportsSent)
	// An answer after the server gave up changes nothing.
	require.NoError(t, p.Answer(h, again))
}

// TestDeliverWindow: at most Window Delivers are unanswered per connection;
// the rest wait and follow as answers free the window.
func TestDeliverWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *supplier.Config) { c.Accounts[0].Window = 2 })
	p := b.login(t, spBoth, secretBoth, cmpp.V30)
	s := suppliertest.Submit(spBoth, "", "many", 0)
	s.DestTerminalIDs = []string{"13800000001", "13800000002", "13800000003", "13800000004", "13800000005"}
	submitOK(t, p, s)
	// Two out, three waiting (and staying so: nothing is answered yet).
	b.stats(t, func(s supplier.Stats) bool { return s.ReportsSent == 2 && s.DeliversHeld == 3 })
	for range 5 {
		report(t, p) // each answer lets one more out
	}
	st := b.stats(t, func(s supplier.Stats) bool { return s.ReportsSent == 5 })
	require.Zero(t, st.DeliversHeld)
}

// TestMO: a long MO arrives as UDH parts the codec's Reassembler puts back
// together; the periodic MO goes to logged-in accounts on the clock.
func TestMO(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *supplier.Config) {
		c.Behaviour.MO = supplier.MOConfig{Every: time.Minute, Text: "TD", From: "13900000000"}
	})
	p := b.login(t, sp20, secret20, cmpp.V20)
	text := strings.Repeat("上行长短信，", 30)
	require.NoError(t, b.srv.SendMO(sp20, supplier.MO{From: "13700000000", Text: text}))
	ra, err := cmpp.NewReassembler(cmpp.ReassemblerConfig{})
	require.NoError(t, err)
	var whole cmpp.Message
	for i := 0; ; i++ {
		h, pkt := next(t, p, cmpp.CmdDeliver)
		d := pkt.(*cmpp.Deliver)
		require.False(t, d.IsReport())
		require.Equal(t, uint8(1), d.TPUDHI)
		require.Equal(t, "13700000000", d.SrcTerminalID)
		require.Equal(t, sp20, d.DestID)
		require.NoError(t, p.Answer(h, pkt))
		msg, done, err := ra.Add(b.clock.Now(), cmpp.Part{SrcTerminalID: d.SrcTerminalID, DestID: d.DestID, MsgFmt: d.MsgFmt, Content: d.MsgContent})
		require.NoError(t, err)
		if done {
			whole = msg
			require.Equal(t, 3, i+1)
			break
		}
	}
	got, err := cmpp.DecodeText(whole.Content, whole.MsgFmt)
	require.NoError(t, err)
	require.Equal(t, text, got)

	b.clock.Advance(time.Minute)
	h, pkt := next(t, p, cmpp.CmdDeliver)
	d := pkt.(*cmpp.Deliver)
	require.Equal(t, "TD", string(d.MsgContent))
	require.Equal(t, "13900000000", d.SrcTerminalID)
	require.NoError(t, p.Answer(h, pkt))
	st := b.stats(t, func(s supplier.Stats) bool { return s.MOsSent == 4 })
	require.Zero(t, st.ReportsSent)
	require.ErrorContains(t, b.srv.SendMO("000000", supplier.MO{Text: "x"}), "no account")
}
