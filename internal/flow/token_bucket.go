package flow

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/relayhq/relay/relaytype"
)

// TokenBucket meters bytes (seed 004 §13.1): Rate bytes per second on long-run
// average, with up to Burst bytes sent at once after an idle spell. The bytes
// counted are the compressed wire bytes of a batch, which are known only after
// the batch is built; so the bucket never refuses: Reserve accounts for n
// bytes at once, possibly taking the level below zero (debt), and says how
// long the caller must wait before sending them. A batch bigger than Burst
// therefore goes after a wait of (n-level)/Rate instead of never.
//
// The bound it keeps: over any interval [a, b] of send times (a reservation's
// time plus its wait), the bytes sent are at most Rate×(b−a) + max(Burst,
// largest single batch); with batches no bigger than Burst, Rate×(b−a)+Burst.
//
// A Rate of 0 (or less) means unlimited: Reserve always answers 0 and the
// level stays full. Zero Rate is "unlimited" rather than "stopped" because a
// stopped link is a transfer window or an outage, not a rate, and a zero
// value that silently stops all traffic would be a trap in configuration.
//
// Times passed in come from the caller's clock; a time earlier than the last
// one seen adds no tokens (a clock stepping back never mints bytes). Safe for
// concurrent use.
type TokenBucket struct {
	mu     sync.Mutex
	rate   float64 // bytes per second; <= 0 is unlimited
	burst  float64
	tokens float64 // may be negative: debt
	last   time.Time
}

// NewTokenBucket returns a full bucket of rate bytes/s and burst bytes at now.
// A burst of 0 (or less) takes one second of rate. A rate of 0
// (or less) is unlimited.
func NewTokenBucket(now time.Time, rate, burst int64) *TokenBucket {
	b := &TokenBucket{last: now}
	b.configure(rate, burst)
	b.tokens = b.burst
	return b
}

// configure sets rate and burst, applying the defaults NewTokenBucket
// documents. The caller holds mu (or owns b).
func (b *TokenBucket) configure(rate, burst int64) {
	b.rate = float64(max(rate, 0))
	if burst <= 0 {
		burst = max(rate, 0)
	}
	b.burst = float64(burst)
}

// refill adds the tokens earned since last, capped at burst. The caller holds mu.
func (b *TokenBucket) refill(now time.Time) {
	if !now.After(b.last) {
		return
	}
	if b.rate > 0 {
		b.tokens = min(b.burst, b.tokens+b.rate*now.Sub(b.last).Seconds())
	}
	b.last = now
}

// wait is how long the level needs to climb from tokens to zero. The caller
// holds mu.
func (b *TokenBucket) wait(tokens float64) time.Duration {
	if tokens >= 0 || b.rate <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(-tokens / b.rate * float64(time.Second)))
}

// Reserve accounts for n bytes at now and returns how long the caller must
// wait before sending them (0: send now). The bytes are counted whether or
// not the caller waits; a later Reserve queues behind this one's debt. n <= 0
// reserves nothing and returns the wait a zero-byte send would have (the
// current debt's).
func (b *TokenBucket) Reserve(now time.Time, n int64) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	if b.rate <= 0 {
		return 0
	}
	b.tokens -= float64(max(n, 0))
	return b.wait(b.tokens)
}

// Delay returns the wait Reserve(now, n) would answer, without reserving.
func (b *TokenBucket) Delay(now time.Time, n int64) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	return b.wait(b.tokens - float64(max(n, 0)))
}

// Available returns the level at now, in whole bytes: negative while in debt,
// at most Burst. An unlimited bucket returns math.MaxInt64.
func (b *TokenBucket) Available(now time.Time) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	if b.rate <= 0 {
		return math.MaxInt64
	}
	return int64(math.Floor(b.tokens))
}

// SetRate reconfigures the bucket at now, smoothly (seed 004 §13.1: a change
// never hands out a fresh full burst): tokens earned so far at the old rate
// are kept, capped at the new burst, and a debt is kept as it is. Leaving
// unlimited (rate 0) starts from a full new burst, since an unlimited bucket
// is full. Defaults as in NewTokenBucket.
func (b *TokenBucket) SetRate(now time.Time, rate, burst int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now)
	wasUnlimited := b.rate <= 0
	b.configure(rate, burst)
	if wasUnlimited {
		b.tokens = b.burst
	}
	b.tokens = min(b.tokens, b.burst)
}

// Rate returns the configured rate (0: unlimited) and burst, in bytes.
func (b *TokenBucket) Rate() (rate, burst int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int64(b.rate), int64(b.burst)
}

// Wait reserves n bytes at clock.Now() and blocks on clock until they may be
// sent, or until ctx is done (ctx governs only the wait). The reservation is
// kept when ctx ends the wait: the bytes were promised to the link and later
// senders still queue behind them.
func (b *TokenBucket) Wait(ctx context.Context, clock relaytype.Clock, n int64) error {
	d := b.Reserve(clock.Now(), n)
	if d <= 0 {
		return nil
	}
	select {
	case <-clock.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
