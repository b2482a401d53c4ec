package relay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// Leases of the claim modes are renewed while their messages are in flight,
// so a handler may run longer than LeaseDuration; a renewal that finds a lease
// taken over lets go of the message. These run on PostgreSQL only: on SQLite
// a running handler holds the single writer, so no other instance can claim
// anything until it commits, and the renewal waits for it like everyone else.

// blockingHandler records each call and adds one effect per call in the
// engine's transaction, but first blocks message block until release is
// closed or its ctx ends; it reports the ctx's cause on ended.
func blockingHandler(c *calls, block int64, entered chan<- struct{}, release <-chan struct{}, ended chan<- error) relay.HandlerFunc {
	return func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
		c.add(d.Message.ID)
		if d.Message.ID == block {
			entered <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				ended <- context.Cause(ctx)
				return relay.Retry(relaytype.ClassInfra, ctx.Err())
			case <-time.After(20 * time.Second): // watchdog only: fails the test instead of hanging it
				ended <- errors.New("watchdog: the handler was never released nor cancelled")
				return relay.Retry(relaytype.ClassInfra, errors.New("watchdog"))
			}
		}
		if _, err := tx.Exec(ctx, "INSERT INTO effect (id, n) VALUES ($1, 1) ON CONFLICT (id) DO UPDATE SET n = effect.n + 1", d.Message.ID); err != nil {
			return relay.Retry(relaytype.ClassInfra, err)
		}
		return relay.Succeeded()
	}
}

// waitersAtLeast waits until n timers are pending on clock (the engine's loops
// are parked on it).
func waitersAtLeast(t *testing.T, clock *relayclock.Fake, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return clock.Waiters() >= n }, 10*time.Second, time.Millisecond)
}

// TestLeaseRenewedWhileHandlerRuns: a handler that blocks well past
// LeaseDuration keeps its message — a second instance, whose claims see the
// same clock, cannot take it — and then completes it, once.
func TestLeaseRenewedWhileHandlerRuns(t *testing.T) {
	t.Parallel()
	eachStoreWhere(t, func(s store) bool { return s.concurrentTx }, func(t *testing.T, s store) {
		d := s.open(t, true)
		clock := relayclock.NewFake(t0)
		const lease = 15 * time.Second
		var ca, cb calls
		entered, release, ended := make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
		a := setupOn(t, d, relay.Config{Mode: relay.ModeUnordered, InstanceID: "A", Clock: clock,
			LeaseDuration: lease, HandlerTimeout: time.Hour, Handler: blockingHandler(&ca, 1, entered, release, ended)})
		b := setupOn(t, d, relay.Config{Mode: relay.ModeUnordered, InstanceID: "B", Clock: clock,
			LeaseDuration: lease, Handler: batchHandler(&cb, nil)})
		a.createEffect()
		a.enqueue(1)

		aDone := make(chan int, 1)
		go func() {
			n, err := a.engine.Work(a.ctx)
			if err != nil {
				t.Errorf("A: %v", err)
			}
			aDone <- n
		}()
		<-entered
		// Four renewal periods: the clock ends a third of a lease past the
		// lease the claim took.
		for i := 1; i <= 4; i++ {
			waitersAtLeast(t, clock, 2) // A's renewal and its handler timeout
			clock.Advance(lease / 3)
			want := t0.Add(time.Duration(i)*lease/3 + lease)
			require.Eventually(t, func() bool { return a.get(1).LeaseExpiresAt.Equal(want) }, 10*time.Second, time.Millisecond,
				"renewal %d", i)
		}
		require.Equal(t, 0, b.work(), "the lease is live: B cannot claim message 1")
		require.Empty(t, cb.get())

		close(release)
		require.Equal(t, 1, <-aDone)
		require.Equal(t, relaytype.StateSucceeded, a.state(1))
		require.Equal(t, once(1), a.effects())
		require.Equal(t, []int64{1}, ca.get())
	})
}

// TestLeaseRenewalFindsLeaseTakenOver: A's leases expired (its process
// stalled) and B took both messages over and finished them. A's next renewal
// learns it: the handler still running on message 1 is cancelled with
// ErrLeaseLost, message 2, still waiting for A's only worker, is never
// started, and A decides nothing. Each effect exists once — B's.
func TestLeaseRenewalFindsLeaseTakenOver(t *testing.T) {
	t.Parallel()
	eachStoreWhere(t, func(s store) bool { return s.concurrentTx }, func(t *testing.T, s store) {
		d := s.open(t, true)
		clockA := relayclock.NewFake(t0)
		var ca, cb calls
		entered, ended := make(chan struct{}, 1), make(chan error, 1)
		a := setupOn(t, d, relay.Config{Mode: relay.ModeUnordered, InstanceID: "A", Clock: clockA, Workers: 1,
			Handler: blockingHandler(&ca, 1, entered, nil, ended)})
		// B's clock is past every lease A takes.
		b := setupOn(t, d, relay.Config{Mode: relay.ModeUnordered, InstanceID: "B",
			Clock: relayclock.NewFake(t0.Add(time.Hour)), Handler: batchHandler(&cb, nil)})
		a.createEffect()
		a.enqueue(1, 2)

		aDone := make(chan int, 1)
		go func() {
			n, err := a.engine.Work(a.ctx)
			if err != nil {
				t.Errorf("A: %v", err)
			}
			aDone <- n
		}()
		<-entered
		require.Equal(t, 2, b.work(), "B takes over both expired leases")

		waitersAtLeast(t, clockA, 2) // A's renewal and its handler timeout
		clockA.Advance(relay.LeaseDurationDefault / 3)
		require.ErrorIs(t, <-ended, relay.ErrLeaseLost, "the running handler is cancelled")
		require.Equal(t, 0, <-aDone, "A's decisions are dropped")
		require.Equal(t, []int64{1}, ca.get(), "message 2 was never started by A")
		require.ElementsMatch(t, []int64{1, 2}, cb.get())
		require.Equal(t, once(1, 2), a.effects())
		require.Equal(t, 1, a.logs.count("lease lost while the handler ran"))
		require.Equal(t, 1, a.logs.count("lease lost before processing"))
		for _, id := range []int64{1, 2} {
			require.Equal(t, relaytype.StateSucceeded, a.state(id))
		}
	})
}
