// Package eta estimates when a node's backlog will have drained: the
// compressed size of what is left (raw bytes times a moving average of the
// compressed/raw ratio of recent batches), the effective throughput (bytes
// of payload that reached a terminal result, over the time the link was
// actually usable and allowed — retries count in the physical figure only),
// the rate at which new backlog arrives, and the transfer windows the
// remaining time is mapped onto. It gives a P50 and a P90 completion time
// from the spread of the last 24 hours' throughput, says "cannot predict"
// when the backlog is not shrinking, and marks an estimate low-confidence
// when it rests on less than ten minutes of samples or on the default
// ratio. It is pure: the caller passes the clock's now and its samples.
package eta

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/relayhq/relay/internal/flow"
)

// Defaults.
const (
	// RatioDefault is the compressed/raw ratio assumed before any batch was
	// measured: conservative (changes of narrow rows compress to about a
	// fifth to a third).
	RatioDefault = 0.5
	// RatioAlphaDefault weighs a new batch in the moving average.
	RatioAlphaDefault = 0.2
	// WindowDefault is the span the effective throughput is measured over.
	WindowDefault = 30 * time.Minute
	// HistoryDefault is the span the P50/P90 spread is taken from.
	HistoryDefault = 24 * time.Hour
	// ConfidentAfter is how much active transfer time the throughput must
	// rest on for a confident estimate.
	ConfidentAfter = 10 * time.Minute
)

// Ratio is the exponential moving average of compressed/raw bytes of
// recent successful batches. The zero value uses the defaults.
type Ratio struct {
	// Alpha weighs each new batch (default RatioAlphaDefault).
	Alpha float64
	// Default is the ratio before any batch (default RatioDefault).
	Default float64
	v       float64
	n       int
}

// Observe adds one successful batch of raw bytes sent as compressed bytes;
// an empty batch is ignored.
func (r *Ratio) Observe(raw, compressed int64) {
	if raw <= 0 || compressed < 0 {
		return
	}
	x := float64(compressed) / float64(raw)
	if r.n == 0 {
		r.v = x
	} else {
		a := cmp.Or(r.Alpha, RatioAlphaDefault)
		r.v = a*x + (1-a)*r.v
	}
	r.n++
}

// Known is a Ratio holding v: measured or, when measured is false, a
// default (what a node reports in its heartbeat).
func Known(v float64, measured bool) *Ratio {
	if !measured || v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return &Ratio{Default: cmp.Or(max(v, 0), RatioDefault)}
	}
	return &Ratio{v: v, n: 1}
}

// Value is the ratio and whether it rests on measured batches (false: the
// default, low confidence).
func (r *Ratio) Value() (float64, bool) {
	if r.n == 0 {
		return cmp.Or(r.Default, RatioDefault), false
	}
	return r.v, true
}

// Interval is one stretch of transfer: when it ended, how long the link was
// usable and allowed during it (Active; outages and closed windows are not
// active), the payload bytes that reached a terminal result in it
// (Effective, compressed wire bytes of first sends only) and every byte
// sent (Physical, retries included).
type Interval struct {
	End                 time.Time
	Active              time.Duration
	Effective, Physical int64
	// Open is how much of the stretch transfer was allowed while there was
	// something to send (0: not known). Active over Open is the link's
	// availability.
	Open time.Duration
}

// Meter keeps the intervals of the last History. The zero value uses the
// defaults; it is not safe for concurrent use.
type Meter struct {
	// Window is the span the throughput is measured over (default
	// WindowDefault); History how long intervals are kept for the spread
	// (default HistoryDefault).
	Window, History time.Duration
	ivs             []Interval
}

// Add records an interval (in End order) and drops those older than the
// history.
func (m *Meter) Add(iv Interval) {
	m.ivs = append(m.ivs, iv)
	cut := iv.End.Add(-cmp.Or(m.History, HistoryDefault))
	i := 0
	for i < len(m.ivs) && m.ivs[i].End.Before(cut) {
		i++
	}
	m.ivs = m.ivs[i:]
}

// recent is the intervals of the last history before now: (now − History,
// now], a run of ivs, which are in End order.
func (m *Meter) recent(now time.Time) []Interval {
	from := now.Add(-cmp.Or(m.History, HistoryDefault))
	lo := sort.Search(len(m.ivs), func(i int) bool { return m.ivs[i].End.After(from) })
	hi := sort.Search(len(m.ivs), func(i int) bool { return m.ivs[i].End.After(now) })
	return m.ivs[lo:max(lo, hi)]
}

// Rates returns the effective and physical throughput of the latest
// Window of active time before now (within the history), in bytes per
// active second, and the active time they rest on (0, 0, 0 without any).
// The window is measured in active time, not on the wall clock, so a
// closed transfer window or an outage does not empty it: the figure is the
// link's recent throughput while it could be used.
func (m *Meter) Rates(now time.Time) (effective, physical float64, active time.Duration) {
	window := cmp.Or(m.Window, WindowDefault)
	var eff, phys int64
	ivs := m.recent(now)
	for i := len(ivs) - 1; i >= 0 && active < window; i-- {
		eff, phys, active = eff+ivs[i].Effective, phys+ivs[i].Physical, active+ivs[i].Active
	}
	if active <= 0 {
		return 0, 0, 0
	}
	s := active.Seconds()
	return float64(eff) / s, float64(phys) / s, active
}

// bucket is how much active time one throughput figure of the spread
// rests on: single heartbeats are lumpy (a batch's bytes land in the
// stretch it ends in), so consecutive ones are pooled.
const bucket = 10 * time.Minute

// Quantile is the q-quantile (0…1) of the effective throughput of the
// last history before now, taken over consecutive stretches of about ten
// minutes of active time each and weighed by their active time (0 without
// any).
func (m *Meter) Quantile(now time.Time, q float64) float64 {
	type rate struct {
		r float64
		w time.Duration
	}
	var rs []rate
	var total, acc time.Duration
	var eff int64
	flush := func() {
		if acc > 0 {
			rs = append(rs, rate{float64(eff) / acc.Seconds(), acc})
			total += acc
		}
		acc, eff = 0, 0
	}
	for _, iv := range m.recent(now) {
		if iv.Active > 0 {
			acc, eff = acc+iv.Active, eff+iv.Effective
			if acc >= bucket {
				flush()
			}
		}
	}
	flush()
	if len(rs) == 0 {
		return 0
	}
	slices.SortFunc(rs, func(a, b rate) int { return cmp.Compare(a.r, b.r) })
	target := time.Duration(q * float64(total))
	acc = 0
	for _, r := range rs {
		acc += r.w
		if acc >= target {
			return r.r
		}
	}
	return rs[len(rs)-1].r
}

// Availability is the share of the time transfer was allowed, with
// something to send, that the link was actually usable, over the last
// history before now (1 when not known).
func (m *Meter) Availability(now time.Time) float64 {
	var active, open time.Duration
	for _, iv := range m.recent(now) {
		if iv.Open > 0 {
			active, open = active+iv.Active, open+iv.Open
		}
	}
	if open <= 0 {
		return 1
	}
	return min(1, active.Seconds()/open.Seconds())
}

// Input is what an estimate is made from.
type Input struct {
	Now time.Time
	// RemainingRaw is the backlog's raw (uncompressed) size.
	RemainingRaw int64
	Ratio        *Ratio
	Meter        *Meter
	// IncomingRate is how fast new backlog arrives, raw bytes per second
	// (converted with the ratio).
	IncomingRate float64
	// Window is when transfer is allowed (nil: always).
	Window *flow.Window
	// RateLimit is the node's configured limit in bytes per second (0:
	// none), shown beside the estimate.
	RateLimit float64
}

// Estimate is an ETA with every input it was computed from, so a reader
// sees why, not only a date.
type Estimate struct {
	ComputedAt time.Time
	// RemainingBytes is the backlog's estimated compressed size; Ratio the
	// compressed/raw ratio used.
	RemainingBytes int64
	Ratio          float64
	// Effective and Physical are the throughput over the window, Incoming
	// the new backlog's compressed rate, Net = Effective − Incoming (bytes
	// per second); Active the transfer time they rest on.
	Effective, Physical, Incoming, Net float64
	Active                             time.Duration
	RateLimit                          float64
	// Availability is the share of the allowed time the link was usable
	// over the last history; the remaining time is stretched by it.
	Availability float64
	Window       string
	// Predictable is false when no completion can be given (Reason says
	// why: the backlog does not shrink, or the window never opens).
	Predictable bool
	Reason      string
	// LowConfidence with the reasons (too little sample time, the default
	// ratio).
	LowConfidence bool
	Why           []string
	// P50 and P90 are the completion times (zero: cannot be given at
	// that level); P50 from the median throughput of the last history,
	// P90 from its 10th percentile.
	P50, P90 time.Time
}

// Compute makes the estimate for in.
func Compute(in Input) Estimate {
	ratio, measured := RatioDefault, false
	if in.Ratio != nil {
		ratio, measured = in.Ratio.Value()
	}
	m := in.Meter
	if m == nil {
		m = &Meter{}
	}
	e := Estimate{ComputedAt: in.Now, Ratio: ratio, RemainingBytes: int64(math.Ceil(float64(in.RemainingRaw) * ratio)),
		Incoming: in.IncomingRate * ratio, RateLimit: in.RateLimit, Window: "always"}
	if in.Window != nil {
		e.Window = in.Window.String()
	}
	e.Effective, e.Physical, e.Active = m.Rates(in.Now)
	e.Availability = m.Availability(in.Now)
	e.Net = e.Effective - e.Incoming
	if !measured {
		e.LowConfidence, e.Why = true, append(e.Why, "no measured compression ratio yet: the default is assumed")
	}
	if e.Active < ConfidentAfter {
		e.LowConfidence, e.Why = true, append(e.Why, "less than 10 minutes of transfer measured")
	}
	if e.RemainingBytes == 0 {
		e.Predictable, e.P50, e.P90 = true, in.Now, in.Now
		return e
	}
	if e.Net <= 0 {
		e.Reason = "the backlog is not shrinking (effective throughput does not exceed the incoming rate)"
		return e
	}
	finish := func(rate float64) (time.Time, bool) {
		return Drain(in.Window, in.Now, float64(e.RemainingBytes), rate*e.Availability, e.Incoming)
	}
	p50 := m.Quantile(in.Now, 0.5)
	if p50 == 0 {
		p50 = e.Effective
	}
	var ok bool
	if e.P50, ok = finish(p50); !ok {
		e.Reason = "cannot predict at the median throughput (the window never opens or the backlog does not shrink)"
		return e
	}
	e.Predictable = true
	if p10 := m.Quantile(in.Now, 0.1); p10 > 0 {
		e.P90, _ = finish(p10)
	} else {
		e.P90 = e.P50
	}
	return e
}

// AfterOpen is the instant by which window w (nil: always open) has been
// open for need from from on; false when it never opens enough.
func AfterOpen(w *flow.Window, from time.Time, need time.Duration) (time.Time, bool) {
	return Drain(w, from, need.Seconds(), 1, 0)
}

// maxChanges bounds how many window openings and closings Drain walks
// (about 13 years of a daily window).
const maxChanges = 10000

// Drain is the instant a backlog of remaining bytes has drained from
// from on, sent at rate bytes per second while window w (nil: always) is
// open, while new backlog arrives at incoming bytes per second all the
// time (through closed windows too); false when it never drains.
func Drain(w *flow.Window, from time.Time, remaining, rate, incoming float64) (time.Time, bool) {
	at := func(t time.Time, secs float64) time.Time {
		return t.Add(time.Duration(math.Ceil(secs * float64(time.Second))))
	}
	if remaining <= 0 {
		return from, true
	}
	net := rate - incoming
	if w == nil || w.Always() {
		if net <= 0 {
			return time.Time{}, false
		}
		return at(from, remaining/net), true
	}
	t := from
	// A window repeats weekly: a backlog no smaller after a week never
	// drains.
	weekFrom, weekLeft := from, remaining
	for range maxChanges {
		if t.Sub(weekFrom) >= 7*24*time.Hour {
			if remaining >= weekLeft {
				return time.Time{}, false
			}
			weekFrom, weekLeft = t, remaining
		}
		next := w.NextChange(t)
		if next.IsZero() { // the window never changes again
			if w.Open(t) && net > 0 {
				return at(t, remaining/net), true
			}
			return time.Time{}, false
		}
		span := next.Sub(t).Seconds()
		if w.Open(t) {
			if net > 0 && remaining/net <= span {
				return at(t, remaining/net), true
			}
			remaining -= net * span
		} else {
			remaining += incoming * span
		}
		t = next
	}
	return time.Time{}, false
}
