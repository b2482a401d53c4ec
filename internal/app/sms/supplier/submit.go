package supplier

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/relaytype"
)

// SubmitResp Result codes the server gives on its own (3.0 §8.7.2); failure
// draws use Behaviour.ResultCodes.
const (
	resultStructure   = 1  // malformed Submit, inconsistent Pk_total/Pk_number or UDH
	resultDupSeq      = 3  // Sequence_Id of a Submit still unanswered
	resultTooLong     = 6  // Msg_Content over the Msg_Fmt limit
	resultFlowControl = 8  // window, rate, FlowControlRate, record failure
	resultMsgSrc      = 11 // Msg_src is not the account's SP_Id
	resultFeeTerminal = 12 // Fee_UserType 3 without a valid Fee_terminal_Id
	resultDest        = 13 // a Dest_terminal_Id that is not a number
)

// onSubmit decides a Submit's fate, in this order: decoding (Result 1), the
// window (a violation), a repeated Sequence_Id (3), the checks of
// checkSubmit, the account's Rate (8), then the draws — FlowControlRate (8),
// FailRate (ResultCodes). A Submit that passes is accepted: it gets Msg_Ids,
// is recorded, and then answered, left unanswered or followed by a drop of
// the connection, with its reports scheduled in every case. Refusals are
// answered at once with Msg_Id 0 and are not recorded.
func (c *conn) onSubmit(seq uint32, body []byte) {
	s := c.s
	a := c.acct.Load()
	b := &s.cfg.Behaviour
	now := s.clock.Now()
	s.stats.received.Add(1)
	sub := &c.sub
	if err := sub.DecodeBody(body, c.v); err != nil {
		s.log.Info("sms supplier: bad Submit", "conn", c.no, "seq", seq, "err", relaytype.ErrorText(err))
		c.refuse(seq, resultStructure)
		return
	}
	c.mu.Lock()
	unanswered := len(c.inflight)
	_, dupSeq := c.inflight[seq]
	c.mu.Unlock()
	if unanswered >= a.cfg.Window {
		s.stats.windowViolations.Add(1)
		if b.WindowAction == WindowDrop {
			c.drop("window exceeded")
			return
		}
		c.refuse(seq, resultFlowControl)
		return
	}
	if dupSeq {
		s.stats.duplicateSeqs.Add(1)
		c.refuse(seq, resultDupSeq)
		return
	}
	if code := checkSubmit(sub, a.cfg.SourceAddr); code != 0 {
		c.refuse(seq, code)
		return
	}
	n := len(sub.DestTerminalIDs)
	if !a.take(now, n) {
		c.refuse(seq, resultFlowControl)
		return
	}
	r := c.rng
	switch u := r.Float64(); {
	case u < b.FlowControlRate:
		c.refuse(seq, resultFlowControl)
		return
	case u < b.FlowControlRate+b.FailRate:
		c.refuse(seq, pick(b.ResultCodes, r, ResultDefault))
		return
	}

	msgID, err := s.ids.alloc(now, n)
	if err != nil {
		s.log.Error("sms supplier: Msg_Id not allocated", "err", relaytype.ErrorText(err))
		c.refuse(seq, resultFlowControl)
		return
	}
	c.accepted++
	noAnswer := r.Float64() < b.NoAnswerRate
	drop := r.Float64() < b.DropRate || (b.DropEvery > 0 && c.accepted%b.DropEvery == 0)
	latency := b.Latency.Draw(r)
	wantReport := sub.RegisteredDelivery == 1
	before := wantReport && r.Float64() < b.ReportBeforeRespRate
	if s.rec != nil {
		if err := s.rec.appendLine(recordLine{Kind: kindSubmit, Entry: c.entry(sub, seq, now, msgID, noAnswer || drop)}); err != nil {
			s.log.Error("sms supplier: Submit not recorded; refused", "err", relaytype.ErrorText(err))
			c.refuse(seq, resultFlowControl)
			return
		}
	}
	s.stats.accepted.Add(1)
	a.submits.Add(1)
	a.dests.Add(int64(n))

	respAt := now.Add(latency)
	var plan []plannedReport
	if wantReport {
		plan = c.planReports(sub, now, respAt, msgID, before)
	}
	var first []*delivery // reports that go ahead of the SubmitResp
	if before {
		for _, p := range plan {
			first = append(first, p.d)
		}
	}
	switch {
	case drop:
		c.drop("DropEvery/DropRate after an accepted Submit")
		if before { // no SubmitResp to go ahead of: the reports go when it would have
			s.sched.at(respAt, func() { a.push(first...) })
		}
	case noAnswer:
		s.stats.noAnswers.Add(1)
		if before {
			s.sched.at(respAt, func() { a.push(first...) })
		}
	case latency == 0:
		c.respond(a, seq, msgID, first)
	default:
		c.mu.Lock()
		c.inflight[seq] = struct{}{}
		c.mu.Unlock()
		s.sched.at(respAt, func() { c.respond(a, seq, msgID, first) })
	}
	// Scheduled after the SubmitResp, so a report due at the same time
	// follows it.
	for _, p := range plan {
		if !before {
			s.sched.at(p.at, func() { a.push(p.d) })
		}
		if p.dup != nil {
			s.sched.at(p.dupAt, func() { a.push(p.dup) })
		}
	}
}

// respond sends a SubmitResp with Result 0, preceded by reports to send
// first.
func (c *conn) respond(a *account, seq uint32, msgID uint64, first []*delivery) {
	c.mu.Lock()
	delete(c.inflight, seq)
	c.mu.Unlock()
	if c.closed() {
		if len(first) > 0 {
			a.push(first...)
		}
		return
	}
	if len(first) > 0 {
		a.sendBefore(c, first)
	}
	c.send(seq, &cmpp.SubmitResp{MsgID: msgID})
}

// refuse answers a Submit with a failure Result at once.
func (c *conn) refuse(seq uint32, result uint32) {
	c.s.stats.refused.Add(1)
	if result == resultFlowControl {
		c.s.stats.flowControlled.Add(1)
	}
	c.send(seq, &cmpp.SubmitResp{Result: result})
}

// plannedReport is one destination's status report and when it goes, with
// its duplicate if one was drawn.
type plannedReport struct {
	d, dup    *delivery
	at, dupAt time.Time
}

// planReports makes the status reports of an accepted Submit, one per
// destination (Msg_Id + k for the k-th), due ReportDelay after respAt, or
// at respAt when they go before the SubmitResp. A duplicate — the same
// report in a Deliver with its own Msg_Id — is due another ReportDelay after
// its original. Draws are made in destination order.
func (c *conn) planReports(sub *cmpp.Submit, now, respAt time.Time, msgID uint64, before bool) []plannedReport {
	s, a, b, r := c.s, c.acct.Load(), &c.s.cfg.Behaviour, c.rng
	destID := sub.SrcID
	if destID == "" {
		destID = a.cfg.SourceAddr
	}
	mk := func(rp *cmpp.Report, dup bool) *delivery {
		id, err := s.ids.alloc(now, 1)
		if err != nil {
			s.log.Error("sms supplier: Msg_Id not allocated; report lost", "err", relaytype.ErrorText(err))
			return nil
		}
		return &delivery{msgID: id, destID: destID, serviceID: sub.ServiceID, src: rp.DestTerminalID, report: rp, dup: dup}
	}
	out := make([]plannedReport, 0, len(sub.DestTerminalIDs))
	for k, dest := range sub.DestTerminalIDs {
		p := plannedReport{at: respAt}
		stat := pick(b.ReportStats, r, StatDefault)
		if !before {
			p.at = p.at.Add(b.ReportDelay.Draw(r))
		}
		if r.Float64() < b.DuplicateReportRate {
			p.dupAt = p.at.Add(b.ReportDelay.Draw(r))
		}
		// The duplicate is the same report in a Deliver of its own.
		rp := &cmpp.Report{MsgID: msgID + uint64(k), Stat: stat, SubmitTime: s.timeField(now),
			DoneTime: s.timeField(p.at), DestTerminalID: dest, SMSCSequence: s.smscSeq.Add(1)}
		if p.d = mk(rp, false); p.d == nil {
			continue
		}
		if !p.dupAt.IsZero() {
			p.dup = mk(rp, true)
		}
		out = append(out, p)
	}
	return out
}

// checkSubmit returns the Result for a Submit the ISMG refuses on sight, 0
// when it is acceptable. Lenient where real ISMGs differ: Pk_total 0 is read
// as 1, an empty Msg_src is allowed.
func checkSubmit(sub *cmpp.Submit, spID string) uint32 {
	switch {
	case sub.PkTotal > 0 && (sub.PkNumber == 0 || sub.PkNumber > sub.PkTotal):
		return resultStructure
	case len(sub.MsgContent) > cmpp.MaxContent(sub.MsgFmt):
		return resultTooLong
	case sub.MsgSrc != "" && sub.MsgSrc != spID:
		return resultMsgSrc
	case sub.FeeUserType == 3 && !isNumber(sub.FeeTerminalID):
		return resultFeeTerminal
	}
	if sub.TPUDHI == 1 {
		if _, _, err := cmpp.ParseUDH(sub.MsgContent); err != nil {
			return resultStructure
		}
	}
	for _, d := range sub.DestTerminalIDs {
		if !isNumber(d) {
			return resultDest
		}
	}
	return 0
}

// isNumber reports whether s is a terminal number: 1 to 32 decimal digits.
func isNumber(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// submitKey is the submit key an SP tagged a Submit with: its own Msg_Id
// field in decimal when not 0 (any version), else the 3.0 LinkID.
func submitKey(sub *cmpp.Submit) string {
	if sub.MsgID != 0 {
		return strconv.FormatUint(sub.MsgID, 10)
	}
	return sub.LinkID
}

// entry is the record line of an accepted Submit.
func (c *conn) entry(sub *cmpp.Submit, seq uint32, now time.Time, msgID uint64, noAnswer bool) Entry {
	sum := sha256.Sum256(sub.MsgContent)
	e := Entry{Boot: c.s.boot, At: now, Conn: c.no, Account: c.account(), Version: c.v.String(), Seq: seq,
		MsgID: msgID, Key: submitKey(sub), Dests: len(sub.DestTerminalIDs), PkTotal: sub.PkTotal, PkNumber: sub.PkNumber,
		Fmt: uint8(sub.MsgFmt), Len: len(sub.MsgContent), Hash: hex.EncodeToString(sum[:8]),
		Report: sub.RegisteredDelivery == 1, NoAnswer: noAnswer}
	if sub.TPUDHI == 1 {
		if h, _, err := cmpp.ParseUDH(sub.MsgContent); err == nil {
			e.UDHRef, e.UDHTotal, e.UDHSeq = h.Ref, h.Total, h.Seq
		}
	}
	return e
}
