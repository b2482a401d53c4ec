package flow_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/flow"
)

// readings feeds a TrustedClock the way a ship node does: elapsed is the
// monotonic time since start, wall is what the system clock says.
type readings struct {
	c       *flow.TrustedClock
	elapsed time.Duration
}

func (r *readings) observe(t *testing.T, step time.Duration, wall time.Time) time.Time {
	t.Helper()
	now, _ := r.observeJump(step, wall)
	return now
}

func (r *readings) observeJump(step time.Duration, wall time.Time) (time.Time, bool) {
	r.elapsed += step
	return r.c.Observe(wall, r.elapsed)
}

func newTrusted(t *testing.T, cfg flow.TrustedClockConfig) *readings {
	t.Helper()
	c, err := flow.NewTrustedClock(cfg)
	require.NoError(t, err)
	return &readings{c: c}
}

func TestTrustedClockFollowsDriftAndDetectsJumps(t *testing.T) {
	t.Parallel()
	for _, jump := range []time.Duration{3 * time.Hour, -3 * time.Hour} {
		r := newTrusted(t, flow.TrustedClockConfig{Threshold: time.Minute})
		require.Equal(t, t0, r.observe(t, 0, t0))
		// Drift of 30 s a minute, for ten minutes: each step is within the
		// threshold, so it is followed, not summed into a jump.
		wall := t0
		for range 10 {
			wall = wall.Add(90 * time.Second)
			require.Equal(t, wall, r.observe(t, time.Minute, wall))
		}
		require.True(t, r.c.Trusted())
		require.Equal(t, wall, r.c.LastTrusted())

		// The wall clock jumps; trusted time goes on by the elapsed time.
		got, jumped := r.observeJump(time.Minute, wall.Add(time.Minute+jump))
		require.True(t, jumped, "the reading that finds the jump says so")
		require.False(t, r.c.Trusted(), "jump %s", jump)
		require.Equal(t, jump, r.c.Skew())
		require.Equal(t, wall.Add(time.Minute), got)
		// Coming back by itself does not restore trust: only Anchor does.
		got, jumped = r.observeJump(time.Minute, wall.Add(2*time.Minute))
		require.Equal(t, wall.Add(2*time.Minute), got)
		require.False(t, jumped, "once")
		require.False(t, r.c.Trusted())
		require.Equal(t, wall.Add(2*time.Minute), r.c.LastTrusted(), "the estimate moves on")

		// The server says the time; the wall clock is still off by the jump
		// and later readings are corrected by it, so there is no second jump.
		server := wall.Add(2 * time.Minute)
		r.c.Anchor(server, server.Add(jump), r.elapsed)
		require.True(t, r.c.Trusted())
		require.Zero(t, r.c.Skew())
		require.Equal(t, server.Add(time.Minute), r.observe(t, time.Minute, server.Add(jump+time.Minute)))
		require.True(t, r.c.Trusted())
	}
}

func TestTrustedClockAcrossRestart(t *testing.T) {
	t.Parallel()
	last := t0.Add(48 * time.Hour)
	r := newTrusted(t, flow.TrustedClockConfig{LastTrusted: last, Threshold: time.Minute})
	got, jumped := r.observeJump(0, t0)
	require.Equal(t, last, got, "a wall clock behind the persisted time is a jump back")
	require.True(t, jumped)
	require.False(t, r.c.Trusted())
	require.Equal(t, -48*time.Hour, r.c.Skew())
	require.Equal(t, last.Add(time.Hour), r.observe(t, time.Hour, t0.Add(time.Hour)))

	r = newTrusted(t, flow.TrustedClockConfig{LastTrusted: t0})
	require.Equal(t, last, r.observe(t, 0, last), "later than the persisted time: downtime")
	require.True(t, r.c.Trusted())

	_, err := flow.NewTrustedClock(flow.TrustedClockConfig{Threshold: -1})
	require.ErrorContains(t, err, "Threshold is negative")
}

// TestTrustedClockPausesWindowOnlyBulk wires the pieces as the ship client
// does: a window-only BULK rule waits while the clock is not trusted, a
// CRITICAL rule goes on.
func TestTrustedClockPausesWindowOnlyBulk(t *testing.T) {
	t.Parallel()
	r := newTrusted(t, flow.TrustedClockConfig{Threshold: time.Minute})
	night := parse(t, "22:00-06:00", time.UTC)
	windowOnly := map[string]bool{"logbook/0": true}
	var trustedNow time.Time
	s := newScheduler(t, flow.SchedulerConfig[item]{
		EligibleFunc: func(lane string, class flow.Class, _ time.Time) bool {
			if !windowOnly[lane] {
				return true
			}
			return class != flow.Bulk || (r.c.Trusted() && night.Open(trustedNow))
		},
	})
	midnight := time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)
	trustedNow = r.observe(t, 0, midnight)
	s.Push("logbook/0", flow.Bulk, item{}, midnight)
	s.Push("alarm/0", flow.Critical, item{}, midnight)

	trustedNow = r.observe(t, time.Second, midnight.Add(12*time.Hour)) // jumped to noon
	b, ok := s.Next(trustedNow)
	require.True(t, ok)
	require.Equal(t, "alarm/0", b.Lane)
	_, ok = s.Next(trustedNow)
	require.False(t, ok, "window-only BULK waits while the clock is not trusted")

	require.True(t, night.Open(trustedNow), "trusted time is still in the night window")
	r.c.Anchor(trustedNow, midnight.Add(12*time.Hour), r.elapsed)
	b, ok = s.Next(trustedNow)
	require.True(t, ok)
	require.Equal(t, "logbook/0", b.Lane)
}
