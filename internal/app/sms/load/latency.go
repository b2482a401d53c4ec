package load

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Latencies collects request latencies and answers percentiles over all of
// them (a sorted copy; a tier of 120,000 requests is under a megabyte).
// Safe for concurrent use.
type Latencies struct {
	mu     sync.Mutex
	d      []time.Duration
	sorted bool
}

// Add records one latency.
func (l *Latencies) Add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.sorted = false
	l.mu.Unlock()
}

// Len is the number of latencies recorded.
func (l *Latencies) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

// Percentile returns the p-th percentile (0 < p ≤ 100) by the nearest-rank
// method: the smallest recorded value with at least p % of the values at or
// below it. 0 when nothing was recorded.
func (l *Latencies) Percentile(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	if !l.sorted {
		slices.Sort(l.d)
		l.sorted = true
	}
	rank := int(math.Ceil(p / 100 * float64(len(l.d))))
	return l.d[min(max(rank, 1), len(l.d))-1]
}

// Summary returns p50, p95, p99 and the maximum.
func (l *Latencies) Summary() Summary {
	return Summary{P50: l.Percentile(50), P95: l.Percentile(95), P99: l.Percentile(99), Max: l.Percentile(100)}
}

// Summary is a latency distribution in four figures.
type Summary struct {
	P50, P95, P99, Max time.Duration
}
