package client

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/relayhq/relay/internal/app/shipsync/eta"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// TransferMeter accumulates what an uploader did between two heartbeats:
// the inputs of the shore's throughput history and ETA. Active time is the
// time spent in sends that reached the shore (the token bucket's waits
// included: the link was usable, the limit is the throughput); waits for
// work, for a window or after a failure are not active. Effective bytes are
// the wire bytes of events the shore durably received on their first send;
// physical bytes are every wire byte sent, failures and resends included.
// Incoming bytes are the raw bytes of new events captured since the
// stretch began (an old backlog read from the topic is not incoming).
type TransferMeter struct {
	mu    sync.Mutex
	since time.Time
	// active is the active time settled so far in this stretch; spans are
	// the answered attempts' times (clipped to since) that may still overlap
	// an attempt in flight. Several uploads run at once, so active time is
	// the union of their times, never their sum: it cannot exceed the
	// stretch's elapsed time.
	active                        time.Duration
	spans                         []span
	effective, physical, incoming int64
	ratio                         eta.Ratio
	// inflight are the starts of the attempts begun and not yet ended: a
	// send over a slow link can outlast a heartbeat, and each stretch gets
	// its own part of it.
	inflight []time.Time
}

// span is one stretch of time in which an upload was under way.
type span struct{ from, to time.Time }

// NewTransferMeter starts measuring at now.
func NewTransferMeter(now time.Time) *TransferMeter { return &TransferMeter{since: now} }

// Begin records that an upload attempt started at start; Sent with the
// same start ends it. Attempts may overlap (the client runs several
// uploads at once); time in which any is under way counts once.
func (m *TransferMeter) Begin(start time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inflight = append(m.inflight, start)
}

// Sent ends the upload attempt begun at start, which sent wire bytes and
// ended at end: ok when the shore answered, firstReceived the events of it
// received on their first send out of events in all. The part of an
// answered attempt since the stretch began is active time (the part before
// went with the previous stretch); a failed attempt adds physical bytes
// only.
func (m *TransferMeter) Sent(start, end time.Time, wire, raw int64, ok bool, firstReceived, events int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i := slices.Index(m.inflight, start); i >= 0 {
		m.inflight = slices.Delete(m.inflight, i, i+1)
	}
	m.physical += wire
	if !ok {
		return
	}
	if from := later(start, m.since); end.After(from) {
		m.spans = append(m.spans, span{from, end})
		m.settle()
	}
	if events > 0 {
		m.effective += wire * int64(firstReceived) / int64(events)
	}
	m.ratio.Observe(raw, wire)
}

// Captured records a new event of raw bytes captured at at.
func (m *TransferMeter) Captured(at time.Time, raw int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !at.Before(m.since) {
		m.incoming += int64(raw)
	}
}

// Take returns the stretch up to now and starts the next one, with the
// compression ratio (and whether it is measured).
func (m *TransferMeter) Take(now time.Time) (*pb.TransferInterval, float64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	all := m.spans
	for _, st := range m.inflight { // an attempt under way: its time so far
		all = append(all, span{later(st, m.since), now})
	}
	active := m.active
	for _, sp := range union(all) {
		if sp.to.After(now) {
			sp.to = now
		}
		if d := sp.to.Sub(sp.from); d > 0 {
			active += d
		}
	}
	m.spans = nil
	iv := &pb.TransferInterval{ElapsedSeconds: max(0, now.Sub(m.since).Seconds()), ActiveSeconds: active.Seconds(),
		EffectiveBytes: uint64(m.effective), PhysicalBytes: uint64(m.physical), IncomingRawBytes: uint64(m.incoming)}
	m.since, m.active, m.effective, m.physical, m.incoming = now, 0, 0, 0, 0
	r, measured := m.ratio.Value()
	return iv, r, measured
}

// settle merges the spans and moves into active those that no attempt in
// flight can overlap any more (they ended before the earliest in-flight
// attempt began; later attempts begin later still), so spans stays as small
// as the overlap with what is in flight.
func (m *TransferMeter) settle() {
	m.spans = union(m.spans)
	keep := m.spans[:0]
	for _, sp := range m.spans {
		if slices.ContainsFunc(m.inflight, func(st time.Time) bool { return st.Before(sp.to) }) {
			keep = append(keep, sp)
			continue
		}
		m.active += sp.to.Sub(sp.from)
	}
	m.spans = keep
}

// union returns spans sorted and merged where they overlap or touch.
func union(spans []span) []span {
	slices.SortFunc(spans, func(a, b span) int { return a.from.Compare(b.from) })
	out := spans[:0]
	for _, sp := range spans {
		if n := len(out); n > 0 && !sp.from.After(out[n-1].to) {
			out[n-1].to = later(out[n-1].to, sp.to)
			continue
		}
		out = append(out, sp)
	}
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// GiveBack returns a stretch whose heartbeat was not delivered, so the
// next heartbeat carries it.
func (m *TransferMeter) GiveBack(iv *pb.TransferInterval) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.since = m.since.Add(-time.Duration(iv.ElapsedSeconds * float64(time.Second)))
	m.active += time.Duration(iv.ActiveSeconds * float64(time.Second))
	m.effective += int64(iv.EffectiveBytes)
	m.physical += int64(iv.PhysicalBytes)
	m.incoming += int64(iv.IncomingRawBytes)
}

// unread is the backlog past the read positions: for every partition the
// client has read, the brokers' end offset less its read position, and
// their raw size estimated at the mean raw size of the events read so far
// (0 before any). Records the rules skip count too: an estimate, on the
// high side.
func (c *Client) unread(ctx context.Context) (events, raw uint64, err error) {
	if c.kc == nil {
		return 0, 0, nil
	}
	c.mu.Lock()
	reads := make(map[TP]int64, len(c.tr.parts))
	for tp, p := range c.tr.parts {
		reads[tp] = p.wm.ReadNext
	}
	c.mu.Unlock()
	if len(reads) == 0 {
		return 0, 0, nil
	}
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	byTopic := map[string]*kmsg.ListOffsetsRequestTopic{}
	for tp := range reads {
		t := byTopic[tp.Topic]
		if t == nil {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = tp.Topic
			t = &rt
			byTopic[tp.Topic] = t
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = tp.Partition, -1, -1 // -1: the end offset
		t.Partitions = append(t.Partitions, rp)
	}
	for _, t := range byTopic {
		req.Topics = append(req.Topics, *t)
	}
	resp, err := req.RequestWith(ctx, c.kc)
	if err != nil {
		return 0, 0, err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if kerr.ErrorForCode(p.ErrorCode) != nil {
				continue
			}
			if lag := p.Offset - reads[TP{t.Topic, p.Partition}]; lag > 0 {
				events += uint64(lag)
			}
		}
	}
	if n := c.readNew.Load(); n > 0 {
		raw = uint64(float64(events) * float64(c.readRaw.Load()) / float64(n))
	}
	return events, raw, nil
}
