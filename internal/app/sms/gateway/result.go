package gateway

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/cmpp/cmppconn"
)

// Result is one submit result on the result stream.
type Result struct {
	// EventID is the dedupe key: SubmitEventID(SubmitID), or
	// "malformed:<entry id>" for a command that did not parse. A result
	// may be written more than once (a crash between XADD and XACK, a
	// duplicate command); every copy carries the same EventID and values.
	EventID string
	// SubmitID is the command's submitId; 0 when it did not parse.
	SubmitID uint64
	// Channel is the command's channel ("" when malformed).
	Channel string
	// State is ACCEPTED, REJECTED or UNKNOWN.
	State State
	// MsgID is the supplier's Msg_Id (ACCEPTED; REJECTED when one came).
	MsgID uint64
	// Result is "0" when accepted, "<code> <text>" when the supplier
	// rejected it, "malformed: <field>: <why>", "unknown channel",
	// "outcome unknown" or ResultClaimNotSettled.
	Result string
}

// Values returns the stream fields of r.
func (r Result) Values() map[string]any {
	msgID := ""
	if r.MsgID != 0 {
		msgID = strconv.FormatUint(r.MsgID, 10)
	}
	return map[string]any{"event_id": r.EventID, "submit_id": strconv.FormatUint(r.SubmitID, 10),
		"channel": r.Channel, "state": string(r.State), "msg_id": msgID, "result": r.Result}
}

// ParseResult reads a result stream entry's fields.
func ParseResult(values map[string]any) (Result, error) {
	get := func(k string) string { s, _ := values[k].(string); return s }
	r := Result{EventID: get("event_id"), Channel: get("channel"), State: State(get("state")), Result: get("result")}
	var err error
	if r.SubmitID, err = strconv.ParseUint(get("submit_id"), 10, 64); err != nil {
		return r, fmt.Errorf("gateway: result submit_id: %w", err)
	}
	if s := get("msg_id"); s != "" {
		if r.MsgID, err = strconv.ParseUint(s, 10, 64); err != nil {
			return r, fmt.Errorf("gateway: result msg_id: %w", err)
		}
	}
	if r.EventID == "" || r.State == "" {
		return r, fmt.Errorf("gateway: result without event_id or state")
	}
	return r, nil
}

// ReportEventID is the event id of a status report: the channel, the
// Msg_Id of the segment and the Stat. A report the ISMG sends again (no
// answer, a duplicate) carries the same id.
func ReportEventID(channel string, msgID uint64, stat string) string {
	return "report:" + channel + ":" + strconv.FormatUint(msgID, 10) + ":" + stat
}

// MOEventID is the event id of an MO part: the channel and the Deliver's
// own Msg_Id, which a resent Deliver keeps.
func MOEventID(channel string, msgID uint64) string {
	return "mo:" + channel + ":" + strconv.FormatUint(msgID, 10)
}

// deliverFunc writes every Deliver of ch to the report stream before it is
// answered (cmppconn answers after DeliverFunc returns): Result 0 once the
// event is in the stream, 8 (flow control) when the write failed, so that
// the ISMG sends it again. The write goes through the report writer: the
// Delivers that arrive together share a pipeline, and each is answered by
// its own XADD's outcome.
func (g *Gateway) deliverFunc(ch *channel) func(ctx context.Context, d *cmpp.Deliver) uint32 {
	return func(ctx context.Context, d *cmpp.Deliver) uint32 {
		var v map[string]any
		if d.IsReport() {
			var rp cmpp.Report
			if err := rp.Decode(d.MsgContent, ch.version); err != nil {
				// Answered 0: resending cannot make it decode. Logged with
				// the Deliver's Msg_Id so that it can be found.
				g.stats.badDelivs.Add(1)
				g.log.Warn("sms gateway: report does not decode", "channel", ch.name, "deliver_msg_id", d.MsgID, "err", err)
				return 0
			}
			stat := strings.TrimSpace(rp.Stat)
			v = map[string]any{"event_id": ReportEventID(ch.name, rp.MsgID, stat), "kind": "report",
				"channel": ch.name, "msg_id": strconv.FormatUint(rp.MsgID, 10), "stat": stat,
				"submit_time": rp.SubmitTime, "done_time": rp.DoneTime,
				"smsc_sequence": strconv.FormatUint(uint64(rp.SMSCSequence), 10)}
		} else {
			v = map[string]any{"event_id": MOEventID(ch.name, d.MsgID), "kind": "mo", "channel": ch.name,
				"msg_id": strconv.FormatUint(d.MsgID, 10), "src": d.SrcTerminalID, "dest_id": d.DestID,
				"service_id": d.ServiceID, "msg_fmt": strconv.Itoa(int(d.MsgFmt)),
				"tp_udhi": strconv.Itoa(int(d.TPUDHI)), "content": base64.StdEncoding.EncodeToString(d.MsgContent)}
		}
		if err := g.reports.write(ctx, v); err != nil {
			g.log.Warn("sms gateway: write deliver event; answered flow control", "channel", ch.name, "err", err)
			return cmppconn.ResultFlowControl
		}
		if d.IsReport() {
			g.stats.reports.Add(1)
		} else {
			g.stats.mo.Add(1)
		}
		return 0
	}
}
