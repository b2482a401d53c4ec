package flow_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/flow"
	"github.com/relayhq/relay/relayclock"
)

var t0 = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

func TestTokenBucketReserveAndDebt(t *testing.T) {
	t.Parallel()
	b := flow.NewTokenBucket(t0, 1000, 500)
	require.Equal(t, int64(500), b.Available(t0), "starts full")
	require.Zero(t, b.Reserve(t0, 500))
	require.Equal(t, 100*time.Millisecond, b.Delay(t0, 100), "Delay does not reserve")
	require.Equal(t, 100*time.Millisecond, b.Reserve(t0, 100))
	require.Equal(t, int64(-100), b.Available(t0))
	require.Equal(t, 150*time.Millisecond, b.Reserve(t0, 50), "queues behind the debt")
	require.Equal(t, int64(0), b.Available(t0.Add(150*time.Millisecond)))

	// A batch ten times the burst still goes, after its share of time.
	at := t0.Add(time.Hour)
	require.Equal(t, int64(500), b.Available(at), "refill caps at the burst")
	require.Equal(t, 4500*time.Millisecond, b.Reserve(at, 5000))
	require.Zero(t, b.Reserve(at.Add(4500*time.Millisecond), 0))
	r, burst := b.Rate()
	require.Equal(t, [2]int64{1000, 500}, [2]int64{r, burst})
}

func TestTokenBucketDefaultsAndUnlimited(t *testing.T) {
	t.Parallel()
	b := flow.NewTokenBucket(t0, 2000, 0)
	_, burst := b.Rate()
	require.Equal(t, int64(2000), burst, "burst defaults to one second of rate")

	u := flow.NewTokenBucket(t0, 0, 0)
	require.Zero(t, u.Reserve(t0, 1<<40))
	require.Zero(t, u.Delay(t0, 1<<40))
	require.Equal(t, int64(math.MaxInt64), u.Available(t0))
	u.SetRate(t0, 100, 300)
	require.Equal(t, int64(300), u.Available(t0), "an unlimited bucket is full")
	require.Equal(t, time.Second, u.Reserve(t0, 400))
}

func TestTokenBucketSetRateIsSmooth(t *testing.T) {
	t.Parallel()
	b := flow.NewTokenBucket(t0, 1000, 1000)
	b.Reserve(t0, 800)
	b.SetRate(t0, 100, 5000)
	require.Equal(t, int64(200), b.Available(t0), "a bigger burst is not handed out at once")
	require.Equal(t, int64(300), b.Available(t0.Add(time.Second)), "new rate from the change on")

	b.SetRate(t0.Add(time.Second), 100, 50)
	require.Equal(t, int64(50), b.Available(t0.Add(time.Second)), "kept tokens are capped at the new burst")

	b.Reserve(t0.Add(time.Second), 350) // level -300
	b.SetRate(t0.Add(time.Second), 2000, 1000)
	require.Equal(t, int64(-300), b.Available(t0.Add(time.Second)), "the debt is kept")
	require.Equal(t, 150*time.Millisecond, b.Delay(t0.Add(time.Second), 0), "and paid at the new rate")
}

func TestTokenBucketClockBackwardsMintsNothing(t *testing.T) {
	t.Parallel()
	b := flow.NewTokenBucket(t0, 1000, 1000)
	b.Reserve(t0, 1000)
	require.Equal(t, int64(0), b.Available(t0.Add(-time.Hour)))
	require.Equal(t, int64(500), b.Available(t0.Add(500*time.Millisecond)))
	require.Equal(t, int64(500), b.Available(t0), "an earlier time does not move last back")
	require.Equal(t, int64(600), b.Available(t0.Add(600*time.Millisecond)))
}

// send is one batch as the link sees it: n bytes at the reservation time
// plus its wait.
type send struct {
	at time.Time
	n  int64
}

// checkBound asserts that for every interval [a, b] between send times the
// bytes sent are at most rate×(b−a)+allowance (+1 byte for float rounding).
func checkBound(t *testing.T, sends []send, rate, allowance int64) {
	t.Helper()
	slices.SortStableFunc(sends, func(a, b send) int { return a.at.Compare(b.at) })
	for i := range sends {
		var sum int64
		for j := i; j < len(sends); j++ {
			sum += sends[j].n
			limit := float64(rate)*sends[j].at.Sub(sends[i].at).Seconds() + float64(allowance) + 1
			if float64(sum) > limit {
				t.Fatalf("sends %d..%d: %d bytes in %s > rate %d × interval + %d",
					i, j, sum, sends[j].at.Sub(sends[i].at), rate, allowance)
			}
		}
	}
}

// TestTokenBucketBoundProperty: over any interval the bytes granted stay
// within rate×interval + burst (batches ≤ burst) or + the largest batch
// (batches up to 4× burst, which go into debt), whether the caller reserves
// after each send or ahead of it; and a saturating sender gets the full rate.
func TestTokenBucketBoundProperty(t *testing.T) {
	t.Parallel()
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		rate := 1 + rng.Int64N(1_000_000)
		burst := 1 + rng.Int64N(4*rate)
		oversize := seed%2 == 1
		ahead := seed%4 >= 2 // reserve again before the last send is out
		b := flow.NewTokenBucket(t0, rate, burst)
		now := t0
		var sends []send
		var largest int64
		for range 150 {
			n := 1 + rng.Int64N(burst)
			if oversize {
				n = 1 + rng.Int64N(4*burst)
			}
			largest = max(largest, n)
			at := now.Add(b.Reserve(now, n))
			sends = append(sends, send{at: at, n: n})
			gap := time.Duration(rng.Int64N(int64(2 * float64(burst) / float64(rate) * float64(time.Second))))
			if ahead {
				now = now.Add(gap / 4)
			} else {
				now = at.Add(gap)
			}
		}
		checkBound(t, sends, rate, max(burst, largest))
	}
}

func TestTokenBucketSaturatedSenderGetsTheRate(t *testing.T) {
	t.Parallel()
	const rate, burst, batch = 10_000, 4_000, 3_000
	b := flow.NewTokenBucket(t0, rate, burst)
	now := t0
	var sent int64
	end := t0.Add(100 * time.Second)
	for {
		at := now.Add(b.Reserve(now, batch))
		if at.After(end) {
			break
		}
		sent += batch
		now = at
	}
	require.InDelta(t, rate*100+burst, sent, batch, "no under-use, no over-use")
}

func TestTokenBucketWaitOnTheClock(t *testing.T) {
	t.Parallel()
	clock := relayclock.NewFake(t0)
	b := flow.NewTokenBucket(t0, 1000, 1000)
	require.NoError(t, b.Wait(context.Background(), clock, 1000), "no wait within the burst")

	done := make(chan error, 1)
	go func() { done <- b.Wait(context.Background(), clock, 500) }()
	require.Eventually(t, func() bool { return clock.Waiters() == 1 }, 5*time.Second, time.Millisecond)
	clock.Advance(499 * time.Millisecond)
	select {
	case <-done:
		t.Fatal("returned before the bytes were earned")
	default:
	}
	clock.Advance(time.Millisecond)
	require.NoError(t, <-done)

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- b.Wait(ctx, clock, 500) }()
	require.Eventually(t, func() bool { return clock.Waiters() == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	require.Equal(t, int64(-500), b.Available(clock.Now()), "a cancelled wait keeps its reservation")
}
