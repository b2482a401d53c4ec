package msgx

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/flightstore"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/relaytype"
)

// matchRequest applies the response guard (seed 000 §7.1 G-RESP-GUARD,
// §7.2): a response counts only when its RQSQ echoes the SEQN of an open
// request of type typ that was SENT, and it is not older than the request's
// send time (minus the clock-skew tolerance). Requests are matched exactly by
// the echo; a response without one is not matched (no degraded matching, so
// no cross-generation mismatch to audit, C-23). It returns the request, or nil
// and the reason the guard refused.
func (c *call) matchRequest(ctx context.Context, typ string, rqsq sisxml.Field[string]) (*flightstore.Request, string, error) {
	if rqsq.Presence != sisxml.Set {
		return nil, "no-echo", nil
	}
	r, err := flightstore.RequestFindOpen(ctx, c.ptx, typ, c.p.cfg.SystemCode, rqsq.Value)
	if errors.Is(err, flightstore.ErrNoRequest) {
		// Unknown, DONE or EXPIRED: a late or stray response must not change
		// what a closed request covered.
		return nil, "unmatched", nil
	}
	if err != nil {
		return nil, "", err
	}
	if r.State == flightstore.RequestStatePending {
		if ok, err := c.recordSend(ctx, r); err != nil || !ok {
			return nil, "not-sent", err
		}
	}
	sent := wallClock(c.msg.Meta.DTTM, c.p.cfg.Flight.MessageLocation())
	if sent.Add(c.p.cfg.ClockSkew).Before(r.SentAt) {
		return nil, "older-than-request", nil
	}
	return r, "", nil
}

// recordSend handles a response that echoes a request still PENDING. The echo
// shows the AODB received the REQT, so the requester wrote it to COUTMSGS and
// has not recorded that yet (a crash between the two, or the answer beat the
// mark). Seed 000 §7.2 wants a request SENT only with its outbound row: the
// row is looked up by SEQN, as the requester's own compensation does, and r
// is marked SENT with its id and CREATETIME in this transaction; the guard
// then applies as for any SENT request. It reports false when the mailbox
// has no such row (the echo is not ours to trust) or there is no lookup.
func (c *call) recordSend(ctx context.Context, r *flightstore.Request) (bool, error) {
	if c.p.sends == nil {
		return false, nil
	}
	outID, at, found, err := c.p.sends.FindSent(ctx, r)
	if err != nil || !found {
		return false, err
	}
	if err := flightstore.RequestMarkSent(ctx, c.ptx, r.ID, outID, at); err != nil {
		return false, err
	}
	c.p.log.InfoContext(ctx, "msgx: response to a request not yet marked sent; send recorded from COUTMSGS",
		"request_id", r.ID, "coutmsgs_id", outID, "msg_id", c.id)
	r.State, r.OutboxID, r.SentAt = flightstore.RequestStateSent, outID, at
	return true, nil
}

// wallClock reads a zone-less SIS wall clock (held in time.UTC) as a time in loc.
func wallClock(t time.Time, loc *time.Location) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), loc)
}

// reference applies a REFD-RESP to REF_MASTER when it answers an open REFD
// request (seed 000 §7.2), completing the request in the same transaction.
func (c *call) reference(ctx context.Context) relay.Result {
	if err := flightstore.LockPipeline(ctx, c.ptx); err != nil {
		return infra(err)
	}
	ref := c.msg.Ref
	r, reason, err := c.matchRequest(ctx, "REFD", ref.RQSQ)
	if err != nil {
		return infra(err)
	}
	if r == nil {
		return relay.Skip("resp-guard:" + reason)
	}
	if r.Scope != ref.RTYP {
		return relay.Dead(relaytype.ClassProtocol, fmt.Errorf("msgx: REFD-RESP of type %s answers a request for %s", relaytype.QuoteValue(ref.RTYP), r.Scope))
	}
	rows := make([]flightstore.RefRow, len(ref.Records))
	for i, rec := range ref.Records {
		rows[i] = flightstore.RefRow{RKey: rec.RKEY, RVal: rec.RVAL.Value, HasVal: rec.RVAL.Presence == sisxml.Set}
	}
	if err := flightstore.UpsertRefs(ctx, c.ptx, ref.RTYP, rows, c.id, c.now); err != nil {
		return infra(err)
	}
	if _, err := flightstore.RequestDone(ctx, c.ptx, r.ID, c.now); err != nil {
		return infra(err)
	}
	return relay.Succeeded()
}

// snapEntry is the SCHD_SNAP_LOG trace of this SCHD package.
func (c *call) snapEntry(applied int, outcome string) *flightstore.SnapLogEntry {
	e := &flightstore.SnapLogEntry{MsgID: c.id, Kind: c.msg.Meta.Kind(), Identity: c.identity,
		Records: len(c.msg.Schd.Flights), Applied: applied, Outcome: outcome, RecvAt: c.now}
	for _, f := range c.msg.Schd.Flights {
		if f.SODT.Presence != sisxml.Set {
			continue
		}
		day := c.p.cfg.Flight.OperationDay(f.SODT.Value)
		if e.ScopeStart == "" || day < e.ScopeStart {
			e.ScopeStart = day
		}
		if day > e.ScopeEnd {
			e.ScopeEnd = day
		}
	}
	return e
}

// traceRejected appends the trace of a package rejected as a whole, outside
// the business transaction that is rolled back (seed 000 §7.1 step 4: a crash
// may lose a trace; state never depends on it).
func (c *call) traceRejected(ctx context.Context, perr *flight.ProtocolError) {
	if c.p.traceDB == nil || c.msg.Kind != sisxml.KindSchd {
		return
	}
	if err := flightstore.AppendSnapLog(ctx, c.p.traceDB, c.snapEntry(0, "DEAD(PROTOCOL): "+perr.Reason)); err != nil {
		c.p.log.WarnContext(ctx, "msgx: schedule trace not written", "msg_id", c.id, "error", err)
	}
}
