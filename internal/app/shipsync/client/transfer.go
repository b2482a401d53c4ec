package client

import (
	"sync"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/eta"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// transferMeter accumulates what the uploader did between two heartbeats:
// the inputs of the shore's throughput history and ETA. Active time is the
// time spent in sends that reached the shore (the token bucket's waits
// included: the link was usable, the limit is the throughput); waits for
// work, for a window or after a failure are not active. Effective bytes are
// the wire bytes of events the shore durably received on their first send;
// physical bytes are every wire byte sent, failures and resends included.
// Incoming bytes are the raw bytes of new events captured since the
// stretch began (an old backlog read from the topic is not incoming).
type transferMeter struct {
	mu                            sync.Mutex
	since                         time.Time
	active                        time.Duration
	effective, physical, incoming int64
	ratio                         eta.Ratio
}

func newTransferMeter(now time.Time) *transferMeter { return &transferMeter{since: now} }

// sent records one upload attempt of wire bytes that took from start to
// end: ok when the shore answered, firstReceived the events of it received
// on their first send out of events in all.
func (m *transferMeter) sent(start, end time.Time, wire, raw int64, ok bool, firstReceived, events int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.physical += wire
	if !ok {
		return
	}
	if d := end.Sub(start); d > 0 {
		m.active += d
	}
	if events > 0 {
		m.effective += wire * int64(firstReceived) / int64(events)
	}
	m.ratio.Observe(raw, wire)
}

// captured records a new event of raw bytes captured at at.
func (m *transferMeter) captured(at time.Time, raw int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !at.Before(m.since) {
		m.incoming += int64(raw)
	}
}

// take returns the stretch up to now and starts the next one, with the
// compression ratio (and whether it is measured).
func (m *transferMeter) take(now time.Time) (*pb.TransferInterval, float64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	iv := &pb.TransferInterval{ElapsedSeconds: max(0, now.Sub(m.since).Seconds()), ActiveSeconds: m.active.Seconds(),
		EffectiveBytes: uint64(m.effective), PhysicalBytes: uint64(m.physical), IncomingRawBytes: uint64(m.incoming)}
	m.since, m.active, m.effective, m.physical, m.incoming = now, 0, 0, 0, 0
	r, measured := m.ratio.Value()
	return iv, r, measured
}

// giveBack returns a stretch whose heartbeat was not delivered, so the
// next heartbeat carries it.
func (m *transferMeter) giveBack(iv *pb.TransferInterval) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.since = m.since.Add(-time.Duration(iv.ElapsedSeconds * float64(time.Second)))
	m.active += time.Duration(iv.ActiveSeconds * float64(time.Second))
	m.effective += int64(iv.EffectiveBytes)
	m.physical += int64(iv.PhysicalBytes)
	m.incoming += int64(iv.IncomingRawBytes)
}
