package supplier

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/relayhq/relay/relaytype"
)

// scheduler runs functions at times of the injected clock: one heap of
// events and one goroutine that waits on clock.After for the earliest. Tests
// drive it with a fake clock; nothing sleeps. Events due at the same time run
// in the order they were scheduled. Safe for concurrent use; the functions
// run one at a time on the scheduler's goroutine and must not block.
type scheduler struct {
	clock relaytype.Clock
	wake  chan struct{}

	mu    sync.Mutex
	h     eventHeap
	n     uint64    // events scheduled so far: the tie-break
	armed time.Time // the deadline the loop waits for; zero when idle
}

type event struct {
	at time.Time
	n  uint64
	fn func()
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].n < h[j].n
	}
	return h[i].at.Before(h[j].at)
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = event{}
	*h = old[:len(old)-1]
	return e
}

func newScheduler(clock relaytype.Clock) *scheduler {
	return &scheduler{clock: clock, wake: make(chan struct{}, 1)}
}

// at runs fn at t (at once, on the scheduler goroutine, when t has passed).
func (s *scheduler) at(t time.Time, fn func()) {
	s.mu.Lock()
	s.n++
	heap.Push(&s.h, event{at: t, n: s.n, fn: fn})
	earlier := s.armed.IsZero() || t.Before(s.armed)
	s.mu.Unlock()
	if earlier {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// after runs fn d from now on the clock.
func (s *scheduler) after(d time.Duration, fn func()) { s.at(s.clock.Now().Add(d), fn) }

// len returns the number of events waiting.
func (s *scheduler) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.h)
}

// run runs due events until ctx ends; the events left are dropped.
func (s *scheduler) run(ctx context.Context) {
	for {
		now := s.clock.Now()
		s.mu.Lock()
		if len(s.h) > 0 && !s.h[0].at.After(now) {
			e := heap.Pop(&s.h).(event)
			s.mu.Unlock()
			e.fn()
			continue
		}
		var wait, recheck <-chan time.Time
		if len(s.h) > 0 {
			next := s.h[0].at
			s.armed = next
			wait = s.clock.After(next.Sub(now))
			// A clock moved between Now and After (a test advancing a fake
			// clock) would leave the timer late by that much: arm a second
			// one from the clock's new reading.
			if now2 := s.clock.Now(); !now2.Equal(now) {
				recheck = s.clock.After(next.Sub(now2))
			}
		} else {
			s.armed = time.Time{}
		}
		s.mu.Unlock()
		select {
		case <-wait:
		case <-recheck:
		case <-s.wake:
		case <-ctx.Done():
			s.mu.Lock()
			s.h = nil
			s.mu.Unlock()
			return
		}
	}
}
