package gateway

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/relayhq/relay/internal/app/sms/cmpp/cmppconn"
)

// Late responses. A Submit whose SubmitResp did not come within
// SubmitTimeout is settled UNKNOWN; if its connection lives on, the
// SubmitResp may still come (cmppconn hands it to LateResponseFunc). The
// gateway then records it in gateway_late_response and writes a
// "late_resp" event to the report stream. The settled row stays UNKNOWN —
// the result was already written and acted on — and the late fact is the
// evidence whoever reconciles it uses.
//
// A late SubmitResp is keyed by its connection and sequence id; the table
// below joins it to the submit id. Either side may come first: the
// response can arrive between the timeout and the moment the gateway
// files the submit as unknown.

// lateQueue is how many late facts may wait to be written; past it they
// are logged and dropped (the row stays UNKNOWN, as without this path).
const lateQueue = 1024

type lateKey struct {
	conn uint64
	seq  uint32
}

type lateSubmit struct {
	submitID uint64
	channel  string
	at       time.Time
}

type lateResp struct {
	resp cmppconn.LateResponse
	at   time.Time
}

// lateFact is a late SubmitResp joined to its submit.
type lateFact struct {
	submit lateSubmit
	resp   cmppconn.LateResponse
	at     time.Time
}

// lateTable joins late SubmitResps to the submits filed unknown.
type lateTable struct {
	mu       sync.Mutex
	submits  map[lateKey]lateSubmit
	early    map[lateKey]lateResp
	keep     time.Duration // how long an unmatched side is kept
	closed   bool
	facts    chan lateFact
	inserted int
}

func newLateTable(keep time.Duration) *lateTable {
	return &lateTable{submits: map[lateKey]lateSubmit{}, early: map[lateKey]lateResp{}, keep: keep,
		facts: make(chan lateFact, lateQueue)}
}

// unknown files a submit whose outcome was unknown although it was sent.
func (t *lateTable) unknown(k lateKey, s lateSubmit) (lateFact, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.early[k]; ok {
		delete(t.early, k)
		return lateFact{submit: s, resp: r.resp, at: r.at}, true
	}
	t.submits[k] = s
	t.sweep(s.at)
	return lateFact{}, false
}

// response takes a late SubmitResp.
func (t *lateTable) response(k lateKey, r lateResp) (lateFact, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.submits[k]; ok {
		delete(t.submits, k)
		return lateFact{submit: s, resp: r.resp, at: r.at}, true
	}
	t.early[k] = r
	t.sweep(r.at)
	return lateFact{}, false
}

// sweep drops, every 256 insertions, the entries older than keep: a
// submit whose connection died can never be answered.
func (t *lateTable) sweep(now time.Time) {
	if t.inserted++; t.inserted%256 != 0 {
		return
	}
	for k, s := range t.submits {
		if now.Sub(s.at) > t.keep {
			delete(t.submits, k)
		}
	}
	for k, r := range t.early {
		if now.Sub(r.at) > t.keep {
			delete(t.early, k)
		}
	}
}

// send queues f without blocking; false when the queue is full or closed.
func (t *lateTable) send(f lateFact) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	select {
	case t.facts <- f:
		return true
	default:
		return false
	}
}

// close ends the queue; facts still in it are written by run.
func (t *lateTable) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		close(t.facts)
	}
}

// fileUnknown is called for a Submit settled UNKNOWN that was sent.
func (g *Gateway) fileUnknown(ch *channel, submitID uint64, res cmppconn.SubmitResult) {
	if res.Seq == 0 {
		return // never written: no answer can come
	}
	if f, ok := g.late.unknown(lateKey{res.ConnID, res.Seq}, lateSubmit{submitID: submitID, channel: ch.name, at: g.now()}); ok {
		g.queueLate(f)
	}
}

// lateFunc is ch's cmppconn LateResponseFunc. It runs on the connection's
// reading goroutine and never blocks.
func (g *Gateway) lateFunc() func(cmppconn.LateResponse) {
	return func(r cmppconn.LateResponse) {
		if f, ok := g.late.response(lateKey{r.ConnID, r.Seq}, lateResp{resp: r, at: g.now()}); ok {
			g.queueLate(f)
		}
	}
}

func (g *Gateway) queueLate(f lateFact) {
	if !g.late.send(f) {
		g.log.Warn("sms gateway: late SubmitResp not recorded (queue full or stopping); the submit stays UNKNOWN",
			"submit_id", f.submit.submitID, "channel", f.submit.channel, "msg_id", f.resp.MsgID, "result", f.resp.Result)
	}
}

// writeLate records the late facts until the queue is closed: a row in
// gateway_late_response, then a "late_resp" event on the report stream,
// written through the report writer (it may share a pipeline with
// Delivers; writeLate waits for its own XADD's outcome, as before).
func (g *Gateway) writeLate(ctx context.Context) {
	for f := range g.late.facts {
		g.stats.late.Add(1)
		g.log.Info("sms gateway: late SubmitResp for a submit settled UNKNOWN", "submit_id", f.submit.submitID,
			"channel", f.submit.channel, "msg_id", f.resp.MsgID, "result", f.resp.Result)
		if err := g.store.late(ctx, f.submit.submitID, f.submit.channel, f.resp.MsgID, f.resp.Result, f.at); err != nil {
			g.log.Warn("sms gateway: late SubmitResp", "submit_id", f.submit.submitID, "err", err)
			continue
		}
		v := map[string]any{"event_id": LateEventID(f.submit.channel, f.submit.submitID), "kind": "late_resp",
			"channel": f.submit.channel, "submit_id": strconv.FormatUint(f.submit.submitID, 10),
			"msg_id": strconv.FormatUint(f.resp.MsgID, 10), "result": strconv.FormatUint(uint64(f.resp.Result), 10)}
		if err := g.reports.write(ctx, v); err != nil {
			g.log.Warn("sms gateway: write late SubmitResp event (recorded in gateway_late_response)",
				"submit_id", f.submit.submitID, "err", err)
		}
	}
}

// LateEventID is the event id of a late SubmitResp on the report stream.
func LateEventID(channel string, submitID uint64) string {
	return "late:" + channel + ":" + strconv.FormatUint(submitID, 10)
}
