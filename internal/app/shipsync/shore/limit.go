package shore

import (
	"container/heap"
	"math"
	"sync"
	"time"
)

// bucket is a token bucket on an injected clock: rate tokens per second up
// to burst. It is not safe for concurrent use by itself (limiter locks).
type bucket struct {
	tokens float64
	last   time.Time
}

// take takes one token at now, or says how long until one is there.
func (b *bucket) take(now time.Time, rate float64, burst int) (ok bool, wait time.Duration) {
	if b.last.IsZero() {
		b.tokens = float64(burst)
	} else if d := now.Sub(b.last).Seconds(); d > 0 {
		b.tokens = math.Min(float64(burst), b.tokens+d*rate)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / rate * float64(time.Second))
}

// limiter holds the global and per-node request limits: requests in flight
// (concurrency) and requests per second (rate). It is safe for concurrent
// use.
type limiter struct {
	cfg      Limits
	mu       sync.Mutex
	inflight int
	peak     int // the highest inflight since the limiter was made
	global   bucket
	nodes    map[string]*nodeLimit
}

type nodeLimit struct {
	inflight int
	bucket   bucket
	// seen is the node's last authenticated request.
	seen time.Time
}

func newLimiter(cfg Limits) *limiter {
	return &limiter{cfg: cfg, nodes: make(map[string]*nodeLimit)}
}

// acquireGlobal admits a request under the global limits, or returns how
// long the client should wait. release must be called once when admitted.
func (l *limiter) acquireGlobal(now time.Time) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight >= l.cfg.GlobalConcurrency {
		return false, time.Second
	}
	if ok, wait := l.global.take(now, l.cfg.GlobalRate, l.cfg.GlobalBurst); !ok {
		return false, wait
	}
	l.inflight++
	l.peak = max(l.peak, l.inflight)
	return true, 0
}

// peakInflight returns the most requests in flight at once so far.
func (l *limiter) peakInflight() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.peak
}

func (l *limiter) releaseGlobal() {
	l.mu.Lock()
	l.inflight--
	l.mu.Unlock()
}

// acquireNode admits a request of node under its own limits.
func (l *limiter) acquireNode(node string, now time.Time) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.nodes[node]
	if n == nil {
		n = &nodeLimit{}
		l.nodes[node] = n
	}
	n.seen = now
	if n.inflight >= l.cfg.NodeConcurrency {
		return false, time.Second
	}
	if ok, wait := n.bucket.take(now, l.cfg.NodeRate, l.cfg.NodeBurst); !ok {
		return false, wait
	}
	n.inflight++
	return true, 0
}

func (l *limiter) releaseNode(node string) {
	l.mu.Lock()
	l.nodes[node].inflight--
	l.mu.Unlock()
}

// connected counts the nodes with an authenticated request within the
// last period before now.
func (l *limiter) connected(now time.Time, period time.Duration) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := 0
	for _, n := range l.nodes {
		if now.Sub(n.seen) < period {
			k++
		}
	}
	return k
}

// retryQueue holds when the requests answered 429 were told to come back:
// its depth is the clients refused and not yet due (seed 004 §18
// sync_reconnect_queue_depth). Entries leave once their time has passed,
// so it holds at most the refusals of the longest Retry-After. It is safe
// for concurrent use.
type retryQueue struct {
	mu sync.Mutex
	at timeHeap
}

// push records a client told at now to come back at due.
func (q *retryQueue) push(now, due time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.expire(now)
	heap.Push(&q.at, due)
}

// depth returns how many clients told to come back are not yet due.
func (q *retryQueue) depth(now time.Time) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.expire(now)
	return len(q.at)
}

func (q *retryQueue) expire(now time.Time) {
	for len(q.at) > 0 && !q.at[0].After(now) {
		heap.Pop(&q.at)
	}
}

// timeHeap is a min-heap of times (container/heap).
type timeHeap []time.Time

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *timeHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
