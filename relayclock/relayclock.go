// Package relayclock provides the two Clock implementations: System for
// production and Fake for tests, which only moves when the test moves it.
package relayclock

import (
	"sort"
	"sync"
	"time"

	"github.com/relayhq/relay/relaytype"
)

// System is the real clock. Its zero value is ready to use.
type System struct{}

var _ relaytype.Clock = System{}

// Now returns time.Now() in UTC.
func (System) Now() time.Time { return time.Now().UTC() }

// After is time.After.
func (System) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Fake is a manually driven clock. Timers created by After fire when Advance or
// Set moves the clock to or past their deadline. Safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

var _ relaytype.Clock = (*Fake)(nil)

// NewFake returns a Fake clock reading t (converted to UTC).
func NewFake(t time.Time) *Fake { return &Fake{now: t.UTC()} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// After returns a channel that receives when the fake time reaches Now()+d. A
// non-positive d fires at once.
func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	at := f.now.Add(d)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, waiter{at: at, ch: ch})
	return ch
}

// Advance moves the clock forward by d and fires every timer that is due.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the clock to t (never backwards: an earlier t is ignored) and fires
// every timer that is due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.Before(f.now) {
		return
	}
	f.now = t.UTC()
	sort.Slice(f.waiters, func(i, j int) bool { return f.waiters[i].at.Before(f.waiters[j].at) })
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if !w.at.After(f.now) {
			w.ch <- f.now
			continue
		}
		kept = append(kept, w)
	}
	f.waiters = kept
}

// Waiters reports how many timers are pending; tests use it to know a loop is
// parked on the clock before they advance it.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}
