package client

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

func TestBackoffFullJitterDoublesToCap(t *testing.T) {
	b := Backoff{Base: time.Second, Cap: 5 * time.Minute, Rand: rand.New(rand.NewPCG(1, 2))}
	for attempt, ceil := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		var most time.Duration
		for range 2000 {
			d := b.Delay(attempt, errors.New("network"))
			if d < 0 || d > ceil {
				t.Fatalf("attempt %d: delay %s outside [0, %s]", attempt, d, ceil)
			}
			most = max(most, d)
		}
		if most < ceil*9/10 {
			t.Fatalf("attempt %d: the largest of 2000 delays is %s; full jitter should reach near %s", attempt, most, ceil)
		}
	}
	for range 1000 {
		if d := b.Delay(40, nil); d > 5*time.Minute {
			t.Fatalf("delay %s above the cap", d)
		}
	}
}

func TestBackoffHonoursRetryAfter(t *testing.T) {
	b := Backoff{Rand: rand.New(rand.NewPCG(1, 2))}
	err := &RequestError{Status: 429, Retryable: true, RetryAfter: 7 * time.Second}
	if d := b.Delay(0, err); d != 7*time.Second {
		t.Fatalf("Retry-After 7s gave %s", d)
	}
	err.RetryAfter = time.Hour
	if d := b.Delay(0, err); d != BackoffCapDefault {
		t.Fatalf("a Retry-After beyond the cap gave %s, want the cap", d)
	}
}
