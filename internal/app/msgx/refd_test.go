package msgx_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx"
	"github.com/relayhq/relay/internal/app/msgx/flightstore"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// refdResp is a REFD-RESP of rtype answering rqsq with key=value records
// (a value "-" leaves RVAL absent).
func refdResp(seqn string, dttm time.Time, rtype, rqsq string, kv ...string) *sisxml.Message {
	d := &sisxml.RefData{RTYP: rtype, RQSQ: sisxml.Val(rqsq)}
	for i := 0; i < len(kv); i += 2 {
		rec := sisxml.RefRecord{RKEY: kv[i]}
		if kv[i+1] != "-" {
			rec.RVAL = sisxml.Val(kv[i+1])
		}
		d.Records = append(d.Records, rec)
	}
	return &sisxml.Message{Meta: aodb(seqn, "REFD", "RESP", dttm), Kind: sisxml.KindRef, Ref: d}
}

// TestRefdResponse checks the reference-data flow (seed 000 §7.2): a REQT-REFD
// written to COUTMSGS, its REFD-RESP written into REF_MASTER with the request
// closed DONE in the same transaction; a REFD-RESP whose RTYP is not the one
// the echoed request asked for is DEAD(PROTOCOL) and writes nothing; a late
// answer to the DONE request is SKIPPED and changes nothing.
func TestRefdResponse(t *testing.T) {
	b := setup(t)
	b.cfg.CutoverWatermark = "zero"
	t0 := time.Now().UTC().Truncate(time.Second)
	rq := msgx.NewRequester(b.cfg, b.store.Pool(), b.mailbox, relayclock.NewFake(t0), quiet())
	airline, err := rq.Register(b.ctx, msgx.RequestRefd, "AIRLINE")
	require.NoError(t, err)
	gate, err := rq.Register(b.ctx, msgx.RequestRefd, "GATE")
	require.NoError(t, err)
	sent, _, err := rq.Pass(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 2, sent)

	row, ok := b.request(t, airline.ID)
	require.True(t, ok)
	require.Equal(t, "SENT", row.State)
	reqt, err := sisxml.Decode([]byte(b.outboxContent(t, *row.OutboxID)))
	require.NoError(t, err)
	require.Equal(t, "REQT-REFD", reqt.Meta.Kind())
	require.Equal(t, airline.SEQN, reqt.Meta.SEQN)
	require.Equal(t, &sisxml.Request{Subtype: "REFD", RTYP: sisxml.Val("AIRLINE")}, reqt.Request)

	b.start(t)
	dttm := sisWall(b.cfg, t0.Add(time.Minute))
	good := b.put(t, refdResp("5001", dttm, "AIRLINE", airline.SEQN, "CA", "Air China", "MU", "China Eastern", "ZH", "-"))
	wrongType := b.put(t, refdResp("5002", dttm, "AIRLINE", gate.SEQN, "CA", "WRONG", "3U", "Sichuan"))
	late := b.put(t, refdResp("5003", dttm, "AIRLINE", airline.SEQN, "CA", "LATE"))

	m := b.terminal(t, good)
	require.Equal(t, relaytype.StateSucceeded, m.State, m.LastError)
	m = b.terminal(t, wrongType)
	require.Equal(t, relaytype.StateDead, m.State)
	require.Equal(t, relaytype.ClassProtocol, m.ErrorClass)
	require.True(t, strings.Contains(m.LastError, "AIRLINE") && strings.Contains(m.LastError, "GATE"), m.LastError)
	m = b.terminal(t, late)
	require.Equal(t, relaytype.StateSkipped, m.State)
	require.Equal(t, "resp-guard:unmatched", m.LastError)

	refs, err := flightstore.LoadRefs(b.ctx, b.store.Pool(), "AIRLINE")
	require.NoError(t, err)
	require.Equal(t, map[string]flightstore.RefRow{
		"CA": {RKey: "CA", RVal: "Air China", HasVal: true},
		"MU": {RKey: "MU", RVal: "China Eastern", HasVal: true},
		"ZH": {RKey: "ZH"},
	}, refs, "only the matching answer is applied")
	gates, err := flightstore.LoadRefs(b.ctx, b.store.Pool(), "GATE")
	require.NoError(t, err)
	require.Empty(t, gates)
	require.Equal(t, 3, b.count(t, "SELECT count(*) FROM ref_master WHERE last_msg_id = $1", good))

	r, _ := b.request(t, airline.ID)
	require.Equal(t, "DONE", r.State)
	r, _ = b.request(t, gate.ID)
	require.Equal(t, "SENT", r.State, "a rejected answer does not close the request")
	require.Equal(t,
		b.xmin(t, "SELECT xmin::text FROM ref_master WHERE rtype = 'AIRLINE' AND rkey = 'CA'"),
		b.xmin(t, "SELECT xmin::text FROM req_track WHERE id = $1", airline.ID),
		"REF_MASTER and the request's DONE commit in one transaction")
}
