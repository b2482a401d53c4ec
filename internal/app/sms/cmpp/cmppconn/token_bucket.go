package cmppconn

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayhq/relay/relaytype"
)

// tokenBucket is a rate limit of rate events per second with bursts of up to
// burst, on an injected clock. It reserves in arrival order (a generic cell
// rate algorithm): each caller is given the moment it may pass and waits on
// the clock until then, so under load the callers pass evenly spaced, one
// every 1/rate, and a test that moves a fake clock by d lets exactly
// rate × d more through. Safe for concurrent use.
type tokenBucket struct {
	clock    relaytype.Clock
	interval time.Duration // 1/rate
	slack    time.Duration // (burst−1) × interval: how far ahead a caller may pass

	mu  sync.Mutex
	tat time.Time // theoretical arrival time of the next caller

	waiting atomic.Int64 // callers parked on the clock (tests read it)
}

// newTokenBucket returns nil for rate 0 (no limit).
func newTokenBucket(clock relaytype.Clock, rate float64, burst int) *tokenBucket {
	if rate <= 0 {
		return nil
	}
	interval := max(time.Duration(float64(time.Second)/rate), 1)
	return &tokenBucket{clock: clock, interval: interval, slack: time.Duration(burst-1) * interval}
}

// errStopped is what wait returns when its stop channel closes; the caller
// puts its own reason in its place.
var errStopped = errors.New("stopped")

// wait returns once the caller may pass, or ctx.Err() / errStopped (stop
// closed) if one comes first; a caller that gives up returns its
// reservation when no later caller holds one.
func (b *tokenBucket) wait(ctx context.Context, stop <-chan struct{}) error {
	b.mu.Lock()
	now := b.clock.Now()
	at := b.tat
	if at.Before(now) {
		at = now
	}
	b.tat = at.Add(b.interval)
	reserved := b.tat
	b.mu.Unlock()
	d := at.Add(-b.slack).Sub(now)
	if d <= 0 {
		return nil
	}
	b.waiting.Add(1)
	defer b.waiting.Add(-1)
	var err error
	select {
	case <-b.clock.After(d):
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-stop:
		err = errStopped
	}
	b.mu.Lock()
	if b.tat.Equal(reserved) {
		b.tat = b.tat.Add(-b.interval)
	}
	b.mu.Unlock()
	return err
}
