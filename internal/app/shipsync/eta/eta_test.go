package eta_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/eta"
	"github.com/relayhq/relay/internal/flow"
)

var t0 = time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC)

// steady returns a meter with n one-minute intervals ending at t0, each
// fully active at rate bytes/s (physical twice that: retries).
func steady(n int, rate int64) *eta.Meter {
	m := &eta.Meter{}
	for i := n - 1; i >= 0; i-- {
		m.Add(eta.Interval{End: t0.Add(-time.Duration(i) * time.Minute), Active: time.Minute, Effective: 60 * rate,
			Physical: 120 * rate})
	}
	return m
}

func measured(ratio float64) *eta.Ratio {
	r := &eta.Ratio{}
	r.Observe(1000, int64(ratio*1000))
	return r
}

// TestRatio: the default before any batch (low confidence), then the
// moving average of the batches.
func TestRatio(t *testing.T) {
	t.Parallel()
	var r eta.Ratio
	v, ok := r.Value()
	require.Equal(t, eta.RatioDefault, v)
	require.False(t, ok)
	r.Observe(1000, 300)
	r.Observe(0, 10) // empty: ignored
	v, ok = r.Value()
	require.True(t, ok)
	require.InDelta(t, 0.3, v, 1e-9)
	r.Observe(1000, 500)
	v, _ = r.Value()
	require.InDelta(t, 0.2*0.5+0.8*0.3, v, 1e-9)
}

// TestEffectiveIsOverActiveTime: throughput counts active time only, and
// retried bytes appear in the physical figure, not the effective one.
func TestEffectiveIsOverActiveTime(t *testing.T) {
	t.Parallel()
	m := &eta.Meter{}
	m.Add(eta.Interval{End: t0.Add(-5 * time.Minute), Active: 30 * time.Second, Effective: 30_000, Physical: 45_000})
	m.Add(eta.Interval{End: t0, Active: 0, Effective: 0, Physical: 0}) // an outage
	eff, phys, active := m.Rates(t0)
	require.Equal(t, 1000.0, eff)
	require.Equal(t, 1500.0, phys)
	require.Equal(t, 30*time.Second, active)
	// The window is 30 minutes of active time, not of the wall clock: a
	// long outage does not empty it, and older intervals fall out only once
	// newer ones fill it.
	m.Add(eta.Interval{End: t0.Add(3 * time.Hour), Active: time.Second, Effective: 5, Physical: 5})
	eff, _, active = m.Rates(t0.Add(3 * time.Hour))
	require.Equal(t, 30_005.0/31, eff)
	require.Equal(t, 31*time.Second, active)
	for i := range 30 {
		m.Add(eta.Interval{End: t0.Add(4*time.Hour + time.Duration(i)*time.Minute), Active: time.Minute,
			Effective: 60 * 200, Physical: 60 * 200})
	}
	eff, _, active = m.Rates(t0.Add(5 * time.Hour))
	require.Equal(t, 200.0, eff)
	require.Equal(t, 30*time.Minute, active)
}

// TestCannotPredict: no throughput, or new backlog arriving as fast as it
// drains, gives no date.
func TestCannotPredict(t *testing.T) {
	t.Parallel()
	e := eta.Compute(eta.Input{Now: t0, RemainingRaw: 1 << 20, Ratio: measured(0.5), Meter: &eta.Meter{}})
	require.False(t, e.Predictable)
	require.Contains(t, e.Reason, "not shrinking")
	e = eta.Compute(eta.Input{Now: t0, RemainingRaw: 1 << 20, Ratio: measured(0.5), Meter: steady(20, 1000), IncomingRate: 2000})
	require.False(t, e.Predictable)
	require.Equal(t, 1000.0, e.Incoming)
	require.Zero(t, e.Net)
	require.True(t, e.P50.IsZero())
}

// TestSteadyDrain: remaining compressed bytes over the net rate, with the
// inputs shown; confident after ten minutes of samples with a measured
// ratio, not before.
func TestSteadyDrain(t *testing.T) {
	t.Parallel()
	e := eta.Compute(eta.Input{Now: t0, RemainingRaw: 7_200_000, Ratio: measured(0.5), Meter: steady(20, 1000),
		IncomingRate: 0, RateLimit: 131072})
	require.True(t, e.Predictable)
	require.Equal(t, int64(3_600_000), e.RemainingBytes)
	require.Equal(t, 1000.0, e.Effective)
	require.Equal(t, 2000.0, e.Physical)
	require.Equal(t, t0.Add(time.Hour), e.P50)
	require.Equal(t, e.P50, e.P90, "a steady rate has no spread")
	require.False(t, e.LowConfidence, "%v", e.Why)
	e = eta.Compute(eta.Input{Now: t0, RemainingRaw: 7_200_000, Meter: steady(5, 1000)})
	require.True(t, e.LowConfidence)
	require.Len(t, e.Why, 2, "the default ratio and five minutes of samples")
	e = eta.Compute(eta.Input{Now: t0, RemainingRaw: 0, Meter: &eta.Meter{}})
	require.True(t, e.Predictable)
	require.Equal(t, t0, e.P50)
}

// TestSpread: P90 comes from the slow end of the day's throughput, P50
// from its middle, both over ten-minute stretches of active time.
func TestSpread(t *testing.T) {
	t.Parallel()
	m := &eta.Meter{}
	for i := range 200 {
		rate := int64(1000)
		if i/10%10 == 0 {
			rate = 250 // one ten-minute stretch in ten is slow
		}
		m.Add(eta.Interval{End: t0.Add(-time.Duration(199-i) * time.Minute), Active: time.Minute, Effective: 60 * rate,
			Physical: 60 * rate})
	}
	e := eta.Compute(eta.Input{Now: t0, RemainingRaw: 3_600_000, Ratio: measured(1), Meter: m})
	require.True(t, e.Predictable)
	require.Equal(t, t0.Add(time.Hour), e.P50)
	require.Equal(t, t0.Add(4*time.Hour), e.P90)
}

// TestWindowMapping: the time needed is spent only while the window is
// open: three hours needed at 20:00 with a 22:00–06:00 window end at 01:00;
// a window that never opens cannot be predicted.
func TestWindowMapping(t *testing.T) {
	t.Parallel()
	w, err := flow.ParseWindow("22:00-06:00", time.UTC)
	require.NoError(t, err)
	at, ok := eta.AfterOpen(w, t0, 3*time.Hour)
	require.True(t, ok)
	require.Equal(t, time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC), at)
	at, ok = eta.AfterOpen(w, t0, 10*time.Hour) // 8 h tonight, 2 h the next night
	require.True(t, ok)
	require.Equal(t, time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC), at)
	e := eta.Compute(eta.Input{Now: t0, RemainingRaw: 10_800_000, Ratio: measured(1), Meter: steady(20, 1000), Window: w})
	require.Equal(t, time.Date(2026, 12, 4, 1, 0, 0, 0, time.UTC), e.P50)
	require.Equal(t, "22:00-06:00", e.Window)

	// New capture keeps arriving while the window is closed: 7,200,000
	// bytes at 20:00, 100 B/s arriving, 1,000 B/s sent while open. By 22:00
	// 7,920,000 are left, drained at a net 900 B/s: 8,800 s, at 00:26:40.
	at, ok = eta.Drain(w, t0, 7_200_000, 1000, 100)
	require.True(t, ok)
	require.Equal(t, time.Date(2026, 12, 4, 0, 26, 40, 0, time.UTC), at)
	// Open 8 h a day cannot keep up with capture at half the send rate all
	// day long: a large backlog grows by 14.4 MB a day and never drains (a
	// small one still drains in the first night).
	_, ok = eta.Drain(w, t0, 100_000_000, 1000, 500)
	require.False(t, ok)
	at, ok = eta.Drain(w, t0, 1000, 1000, 500)
	require.True(t, ok)
	require.Equal(t, time.Date(2026, 12, 4, 0, 0, 2, 0, time.UTC), at, "3,601,000 bytes at 22:00, net 500 B/s")
}

// TestAvailability: when the link is down for part of the allowed time,
// the remaining time is stretched by the share it was usable; a single
// lumpy minute does not move the spread.
func TestAvailability(t *testing.T) {
	t.Parallel()
	m := &eta.Meter{}
	for i := range 60 {
		iv := eta.Interval{End: t0.Add(-time.Duration(59-i) * time.Minute), Open: time.Minute}
		if i%4 != 0 { // down one minute in four
			iv.Active, iv.Effective = time.Minute, 60_000
		}
		m.Add(iv)
	}
	require.InDelta(t, 0.75, m.Availability(t0), 1e-9)
	e := eta.Compute(eta.Input{Now: t0, RemainingRaw: 2_700_000, Ratio: measured(1), Meter: m})
	require.True(t, e.Predictable)
	require.InDelta(t, 0.75, e.Availability, 1e-9)
	require.Equal(t, t0.Add(time.Hour), e.P50, "2.7 MB at 1,000 B/s, usable three quarters of the time")
	require.Equal(t, 1.0, (&eta.Meter{}).Availability(t0), "unknown: assumed usable")
}
