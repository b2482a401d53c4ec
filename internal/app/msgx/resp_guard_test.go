package msgx_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/msgx"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// TestRespGuard drives SCHD-RESP messages through the running Service and
// checks the response guard (seed 000 §7.1 G-RESP-GUARD, §7.2): only a RESP
// echoing the SEQN of a SENT request, not older than its send time (minus the
// clock-skew tolerance), updates the plan, and it closes the request DONE in
// the same transaction; every other RESP is SKIPPED with its reason and writes
// no flight. The requests are registered and sent by a Requester on a fake
// clock, which writes real REQT-SCHD rows to COUTMSGS.
func TestRespGuard(t *testing.T) {
	b := setup(t)
	b.cfg.CutoverWatermark = "zero"
	b.cfg.ClockSkew = 2 * time.Minute
	t0 := time.Now().UTC().Truncate(time.Second)
	clock := relayclock.NewFake(t0)
	rq := msgx.NewRequester(b.cfg, b.store.Pool(), b.mailbox, clock, quiet())

	// A request sent at t0 and expired by the timeout (a Pass past it).
	expired, err := rq.Register(b.ctx, msgx.RequestSchd, "20261203")
	require.NoError(t, err)
	sent, n, err := rq.Pass(b.ctx)
	require.NoError(t, err)
	require.Equal(t, [2]int{1, 0}, [2]int{sent, n})
	clock.Advance(b.cfg.RequestTimeout + time.Second)
	sent, n, err = rq.Pass(b.ctx)
	require.NoError(t, err)
	require.Equal(t, [2]int{0, 1}, [2]int{sent, n}, "the request past msgx.request.timeout expires")

	// Three requests sent at t1, all open.
	var open, stale, skewed *reqInfo
	for _, x := range []struct {
		p   **reqInfo
		day string
	}{{&open, "20261201"}, {&stale, "20261202"}, {&skewed, "20261204"}} {
		r, err := rq.Register(b.ctx, msgx.RequestSchd, x.day)
		require.NoError(t, err)
		require.Equal(t, "PENDING", r.State)
		*x.p = &reqInfo{id: r.ID, seqn: r.SEQN, day: x.day}
	}
	t1 := clock.Now()
	sent, n, err = rq.Pass(b.ctx)
	require.NoError(t, err)
	require.Equal(t, [2]int{3, 0}, [2]int{sent, n})

	// What Pass wrote to COUTMSGS is the REQT-SCHD of the request.
	row, ok := b.request(t, open.id)
	require.True(t, ok)
	require.Equal(t, "SENT", row.State)
	require.NotNil(t, row.OutboxID)
	require.True(t, row.SentAt.Equal(t1), "SENT_AT is the requester clock's send time")
	reqt, err := sisxml.Decode([]byte(b.outboxContent(t, *row.OutboxID)))
	require.NoError(t, err)
	require.Equal(t, sisxml.KindRequest, reqt.Kind)
	require.Equal(t, sisxml.Meta{SNDR: b.cfg.SystemCode, RCVR: b.cfg.AODBCode, SEQN: open.seqn,
		DTTM: sisWall(b.cfg, t1), TYPE: "REQT", STYP: "SCHD"}, reqt.Meta)
	require.Equal(t, &sisxml.Request{Subtype: "SCHD", ODAY: sisxml.Val("20261201")}, reqt.Request)
	require.Equal(t, 4, b.mailboxCount(t, "COUTMSGS"), "one REQT per request, never two")

	b.start(t)
	sodt := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	after := sisWall(b.cfg, t1.Add(time.Minute))
	ids := map[string]int64{
		"unmatched": b.put(t, schd("RESP", "2001", after, "NO-SUCH-SEQN", plan("R1", "CA101", sodt))),
		"no-echo":   b.put(t, schd("RESP", "2002", after, "", plan("R2", "CA102", sodt))),
		// DTTM before SENT_AT by more than the clock-skew tolerance.
		"older": b.put(t, schd("RESP", "2003", sisWall(b.cfg, t1.Add(-b.cfg.ClockSkew-time.Minute)), stale.seqn,
			plan("R3", "CA103", sodt.AddDate(0, 0, 1)))),
		"expired": b.put(t, schd("RESP", "2004", after, expired.SEQN, plan("R4", "CA104", sodt.AddDate(0, 0, 2)))),
		"good":    b.put(t, schd("RESP", "2005", after, open.seqn, plan("R5", "CA105", sodt), plan("R6", "CA106", sodt))),
		// A late second answer to the request that is DONE now.
		"late": b.put(t, schd("RESP", "2006", after, open.seqn, plan("R5", "XX999", sodt))),
		// Older than SENT_AT, but within the tolerance (Q5).
		"skewed": b.put(t, schd("RESP", "2007", sisWall(b.cfg, t1.Add(-b.cfg.ClockSkew/2)), skewed.seqn,
			plan("R7", "CA107", sodt.AddDate(0, 0, 3)))),
	}

	for name, reason := range map[string]string{"unmatched": "resp-guard:unmatched", "no-echo": "resp-guard:no-echo",
		"older": "resp-guard:older-than-request", "expired": "resp-guard:unmatched", "late": "resp-guard:unmatched"} {
		m := b.terminal(t, ids[name])
		require.Equal(t, relaytype.StateSkipped, m.State, name)
		require.Equal(t, reason, m.LastError, name)
	}
	for _, name := range []string{"good", "skewed"} {
		m := b.terminal(t, ids[name])
		require.Equal(t, relaytype.StateSucceeded, m.State, "%s: %s", name, m.LastError)
	}

	// No guarded RESP wrote a flight or an event; the good ones did.
	require.Empty(t, b.flights(t, "R1", "R2", "R3", "R4"))
	require.Zero(t, b.count(t, "SELECT count(*) FROM relay_outbox WHERE key = ANY($1)", []string{"R1", "R2", "R3", "R4"}))
	got := b.flights(t, "R5", "R6", "R7")
	require.Len(t, got, 3)
	require.Equal(t, "CA105", got["R5"].FLNO, "the late answer to a DONE request changed nothing")
	require.Equal(t, int64(1), got["R5"].Version)
	require.Equal(t, ids["good"], got["R5"].LastMsgID)
	require.Equal(t, "20261201", got["R5"].OperationDay)

	// Request states: DONE only for the answered ones; a refused RESP closes nothing.
	for _, c := range []struct {
		id    int64
		state string
	}{{open.id, "DONE"}, {skewed.id, "DONE"}, {stale.id, "SENT"}, {expired.ID, "EXPIRED"}} {
		r, ok := b.request(t, c.id)
		require.True(t, ok)
		require.Equal(t, c.state, r.State, "request %d", c.id)
	}
	// seed 000 §7.2: the request completes with its data, in one transaction.
	require.Equal(t,
		b.xmin(t, "SELECT xmin::text FROM flight_schd WHERE flid = 'R5'"),
		b.xmin(t, "SELECT xmin::text FROM req_track WHERE id = $1", open.id),
		"the plan and the request's DONE commit in one transaction")
}

// reqInfo is what a test keeps of a registered request.
type reqInfo struct {
	id   int64
	seqn string
	day  string
}

// handleOne decodes m as message id and runs p.Handle on it in its own store
// transaction, committing when the result commits — the pump's work for one
// head, without a running service (whose request sender would race the test).
func (b *bundle) handleOne(t *testing.T, p *msgx.Processor, id int64, m *sisxml.Message) relay.Result {
	t.Helper()
	msg := &relaytype.Message{ID: id, Payload: encode(t, m)}
	dec, err := p.Decode(b.ctx, msg)
	require.NoError(t, err)
	tx, err := b.store.Begin(b.ctx)
	require.NoError(t, err)
	res := p.Handle(b.ctx, tx, &relay.Delivery{Message: msg, Decoded: dec})
	if res.Commits() {
		require.NoError(t, tx.Commit(b.ctx))
	} else {
		require.NoError(t, tx.Rollback(b.ctx))
	}
	return res
}

// TestRespToPendingRequest: a SCHD-RESP echoing a request still PENDING whose
// REQT is in COUTMSGS (the requester crashed before marking it SENT) records
// the send from that row — its id and CREATETIME — and is then matched like
// any other (seed 000 §7.2 compensation); the requester later neither marks
// nor sends it again. A request whose REQT is not in the mailbox is not
// matched (resp-guard:not-sent). A SCHD-RESP carrying a flight of another
// operating day than the one requested is DEAD(PROTOCOL) and writes nothing.
func TestRespToPendingRequest(t *testing.T) {
	b := setup(t)
	t0 := time.Now().UTC().Truncate(time.Second)
	clock := relayclock.NewFake(t0)
	rq := msgx.NewRequester(b.cfg, b.store.Pool(), b.mailbox, clock, quiet())
	p := msgx.NewProcessor(b.cfg, msgx.ProcessorDeps{Clock: clock, Logger: quiet(), TraceDB: b.store.Pool(), Sends: rq})

	written, err := rq.Register(b.ctx, msgx.RequestSchd, "20261201")
	require.NoError(t, err)
	sentAt := t0.Add(1500 * time.Millisecond)
	res, err := b.mailbox.ExecContext(b.ctx, "INSERT INTO COUTMSGS (MSGCONTENT, CREATETIME) VALUES (?, ?)",
		"<MSG><META><SEQN>"+written.SEQN+"</SEQN><TYPE>REQT</TYPE></META></MSG>", sentAt)
	require.NoError(t, err)
	outID, err := res.LastInsertId()
	require.NoError(t, err)
	unwritten, err := rq.Register(b.ctx, msgx.RequestSchd, "20261202")
	require.NoError(t, err)

	sodt := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	after := sisWall(b.cfg, t0.Add(time.Minute))
	r := b.handleOne(t, p, 1, schd("RESP", "3001", after, written.SEQN, plan("P1", "CA201", sodt)))
	require.Equal(t, relay.Succeeded().String(), r.String())
	row, ok := b.request(t, written.ID)
	require.True(t, ok)
	require.Equal(t, "DONE", row.State)
	require.NotNil(t, row.OutboxID)
	require.Equal(t, outID, *row.OutboxID, "the send is the mailbox row's")
	require.True(t, sentAt.Equal(*row.SentAt), "SENT_AT is the row's CREATETIME: %v", row.SentAt)
	require.Len(t, b.flights(t, "P1"), 1)

	r = b.handleOne(t, p, 2, schd("RESP", "3002", after, unwritten.SEQN, plan("P2", "CA202", sodt.AddDate(0, 0, 1))))
	require.Equal(t, relay.Skip("resp-guard:not-sent").String(), r.String())
	row, ok = b.request(t, unwritten.ID)
	require.True(t, ok)
	require.Equal(t, "PENDING", row.State)
	require.Empty(t, b.flights(t, "P2"))

	// The requester sends only the unwritten request; the answered one keeps its row.
	sent, _, err := rq.Pass(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, sent)
	require.Equal(t, 2, b.mailboxCount(t, "COUTMSGS"))

	// Now SENT for 20261202: an answer carrying a flight of 20261203 is refused whole.
	r = b.handleOne(t, p, 3, schd("RESP", "3003", sisWall(b.cfg, t0.Add(2*time.Minute)), unwritten.SEQN,
		plan("P3", "CA203", sodt.AddDate(0, 0, 1)), plan("P4", "CA204", sodt.AddDate(0, 0, 2))))
	require.False(t, r.Commits())
	require.Contains(t, r.String(), "PROTOCOL")
	require.Contains(t, r.String(), "carries a flight of day 20261203")
	row, ok = b.request(t, unwritten.ID)
	require.True(t, ok)
	require.Equal(t, "SENT", row.State, "a refused answer closes nothing")
	require.Empty(t, b.flights(t, "P3", "P4"))
}
