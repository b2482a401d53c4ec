package flow

import (
	"fmt"
	"sync"
	"time"
)

// JumpThresholdDefault is TrustedClockConfig.Threshold's default: a wall clock
// that disagrees with the elapsed time by more than this has jumped.
const JumpThresholdDefault = 2 * time.Minute

// TrustedClockConfig configures a TrustedClock.
type TrustedClockConfig struct {
	// Threshold is the largest disagreement, either way, between the wall
	// clock and the last trusted time plus the elapsed time, that is still
	// taken as drift (NTP slewing) rather than a jump. Default
	// JumpThresholdDefault; negative is invalid.
	Threshold time.Duration
	// LastTrusted is the last trusted time persisted before a restart, or
	// zero. A first wall reading earlier than LastTrusted−Threshold is a jump
	// backwards across the restart (the elapsed reading does not survive a
	// restart, so a forward jump across one cannot be told from downtime).
	LastTrusted time.Time
}

// TrustedClock keeps the node's last trusted time (seed 004 §13.3). It is fed
// pairs of readings: the wall clock (which an operator, a dead RTC battery or
// a bad GPS fix can move) and an elapsed time from a monotonic source (which
// only moves forward at the real rate, and which tests inject). When the wall
// clock disagrees with trusted time + elapsed by more than Threshold, the
// clock has jumped: Trusted turns false and stays false, time windows keep
// being evaluated on the trusted estimate, and window-only BULK rules pause
// (the caller's SchedulerConfig.EligibleFunc asks Trusted) until Anchor
// re-anchors it to a server time from an operator or a heartbeat.
//
// In production the wall reading is relayclock.System{}.Now() and the elapsed
// reading time.Since of a time.Now taken once at start-up (its monotonic
// reading); this package reads neither itself. Safe for concurrent use.
type TrustedClock struct {
	mu        sync.Mutex
	threshold time.Duration
	started   bool
	jumped    bool
	skew      time.Duration // wall − expected at the last jump
	offset    time.Duration // added to wall readings: server time − wall at Anchor
	anchor    time.Time     // trusted time at anchorElapsed
	anchorEl  time.Duration
	last      time.Time // last trusted time (persist it)
}

// NewTrustedClock returns a clock that trusts its first wall reading, unless
// that reading is before cfg.LastTrusted by more than the threshold.
func NewTrustedClock(cfg TrustedClockConfig) (*TrustedClock, error) {
	if cfg.Threshold < 0 {
		return nil, fmt.Errorf("flow: trusted clock: Threshold is negative (%s)", cfg.Threshold)
	}
	c := &TrustedClock{threshold: cfg.Threshold, last: cfg.LastTrusted}
	if c.threshold == 0 {
		c.threshold = JumpThresholdDefault
	}
	return c, nil
}

// Observe takes a wall reading and the elapsed reading taken with it, checks
// them against the last trusted time, and returns the trusted time: the
// corrected wall time while trusted, or the last trusted time plus the
// elapsed time since, while jumped. jumped is true only for the reading that
// found the jump, so the caller alerts once (seed 004 §13.3); Trusted and
// Skew give the state after. A reading within the threshold while trusted
// becomes the new anchor, so slow drift is followed, not accumulated.
func (c *TrustedClock) Observe(wall time.Time, elapsed time.Duration) (now time.Time, jumped bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	wall = wall.Add(c.offset)
	if !c.started {
		c.started = true
		c.anchor, c.anchorEl = wall, elapsed
		if !c.last.IsZero() && c.last.Sub(wall) > c.threshold {
			c.jumped, c.skew = true, wall.Sub(c.last)
			c.anchor = c.last
			return c.anchor, true
		}
		c.last = maxTime(c.last, wall)
		return c.anchor, false
	}
	expected := c.anchor.Add(elapsed - c.anchorEl)
	if !c.jumped {
		if skew := wall.Sub(expected); skew > c.threshold || -skew > c.threshold {
			c.jumped, c.skew, jumped = true, skew, true
		}
	}
	if c.jumped {
		// The elapsed time is still trustworthy: the estimate moves on.
		c.last = maxTime(c.last, expected)
		return expected, jumped
	}
	c.anchor, c.anchorEl = wall, elapsed
	c.last = maxTime(c.last, wall)
	return wall, false
}

// Anchor re-anchors the clock to serverTime, read together with wall and
// elapsed readings, and trusts it again. From now on wall readings are
// corrected by serverTime−wall, so a wall clock that is still wrong does not
// jump again.
func (c *TrustedClock) Anchor(serverTime, wall time.Time, elapsed time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset = serverTime.Sub(wall)
	c.started, c.jumped, c.skew = true, false, 0
	c.anchor, c.anchorEl = serverTime, elapsed
	c.last = serverTime
}

// Trusted reports whether no jump has been seen since the start or the last
// Anchor.
func (c *TrustedClock) Trusted() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.jumped
}

// Skew returns how far the wall clock was from the trusted time when it
// jumped (positive: forwards), or 0 while trusted.
func (c *TrustedClock) Skew() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.skew
}

// LastTrusted returns the latest trusted time seen, to persist for
// TrustedClockConfig.LastTrusted after a restart.
func (c *TrustedClock) LastTrusted() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}
