package relaylock_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
	"github.com/relayhq/relay/relaylock"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

func sqliteStore(t *testing.T) *relaysqlite.Driver {
	t.Helper()
	ctx := context.Background()
	d, err := relaysqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"))
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	_, err = relaymigrate.Up(ctx, d, relayclock.System{}, relaymigrate.EngineLineOf(d))
	require.NoError(t, err)
	return d
}

// A waiting instance takes over once the holder releases; it never runs while
// the holder runs.
func TestRunWaitsThenTakesOver(t *testing.T) {
	t.Parallel()
	d := sqliteStore(t)
	clock := relayclock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx := context.Background()

	aCtx, stopA := context.WithCancel(ctx)
	aRunning := make(chan struct{})
	aDone := make(chan error, 1)
	go func() {
		aDone <- relaylock.Run(aCtx, d, relaylock.Params{Name: "queue:p", Owner: "A", TTL: 30 * time.Second, Clock: clock},
			func(ctx context.Context) error { close(aRunning); <-ctx.Done(); return nil })
	}()
	<-aRunning

	waiting := make(chan struct{})
	bRunning := make(chan struct{})
	bCtx, stopB := context.WithCancel(ctx)
	defer stopB()
	bDone := make(chan error, 1)
	go func() {
		bDone <- relaylock.Run(bCtx, d, relaylock.Params{Name: "queue:p", Owner: "B", TTL: 30 * time.Second,
			RetryEvery: time.Second, Clock: clock, OnWaiting: func() { close(waiting) }},
			func(ctx context.Context) error { close(bRunning); <-ctx.Done(); return nil })
	}()
	<-waiting
	select {
	case <-bRunning:
		t.Fatal("B runs while A holds the lock")
	default:
	}

	stopA()
	require.NoError(t, <-aDone)
	// B retries on its clock: move time until it has acquired.
	require.Eventually(t, func() bool {
		clock.Advance(time.Second)
		select {
		case <-bRunning:
			return true
		default:
			return false
		}
	}, 10*time.Second, 5*time.Millisecond)
	stopB()
	require.NoError(t, <-bDone)
}

// When the lease is lost (another owner took it after it expired), Run cancels
// fn and reports ErrLost, so the old holder stops writing.
func TestRunStopsWhenLockLost(t *testing.T) {
	t.Parallel()
	d := sqliteStore(t)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := relayclock.NewFake(start)
	ctx := context.Background()
	const ttl = 30 * time.Second

	running := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- relaylock.Run(ctx, d, relaylock.Params{Name: "queue:p", Owner: "A", TTL: ttl, Clock: clock},
			func(ctx context.Context) error { close(running); <-ctx.Done(); return ctx.Err() })
	}()
	<-running
	// A stalled past its lease (no renewal yet); C takes the expired lease.
	lock, err := d.TryLock(ctx, &relaydriver.LockParams{Name: "queue:p", Owner: "C", TTL: ttl, Now: start.Add(ttl + time.Second)})
	require.NoError(t, err)
	defer lock.Release(ctx)
	// A's next renewal finds the lease gone.
	require.Eventually(t, func() bool { return clock.Waiters() > 0 }, 5*time.Second, time.Millisecond)
	clock.Advance(ttl / 3)
	err = <-done
	require.True(t, errors.Is(err, relaylock.ErrLost), "got %v", err)
}

// TryHold waits at most its wait for the lock: a dead holder's lease (never
// renewed) runs out within TTL and the lock is taken; a live holder (Run,
// renewing) keeps it, and TryHold refuses with ErrLocked.
func TestTryHoldWaitsOutDeadHolderOnly(t *testing.T) {
	t.Parallel()
	d := sqliteStore(t)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := relayclock.NewFake(start)
	ctx := context.Background()
	const ttl = 9 * time.Second
	p := func(owner string) relaylock.Params {
		return relaylock.Params{Name: "instance:x", Owner: owner, TTL: ttl, RetryEvery: time.Second, Clock: clock}
	}
	// advanceWhile moves the clock a second at a time, once n timers are
	// parked on it, until fn has returned.
	advanceWhile := func(n int, fn func() error) error {
		done := make(chan error, 1)
		go func() { done <- fn() }()
		for {
			var err error
			returned := false
			require.Eventually(t, func() bool {
				select {
				case err = <-done:
					returned = true
					return true
				default:
					return clock.Waiters() >= n
				}
			}, 10*time.Second, time.Millisecond)
			if returned {
				return err
			}
			clock.Advance(time.Second)
		}
	}

	_, err := d.TryLock(ctx, &relaydriver.LockParams{Name: "instance:x", Owner: "dead", TTL: ttl, Now: start})
	require.NoError(t, err)
	var h *relaylock.Held
	require.NoError(t, advanceWhile(1, func() (err error) { h, err = relaylock.TryHold(ctx, d, p("B"), ttl); return err }))
	require.Equal(t, start.Add(ttl), clock.Now(), "taken when the dead holder's lease ran out")
	require.NoError(t, h.Err())

	// h renews (a timer parked on the clock); C waits a full TTL, then gives up.
	err = advanceWhile(2, func() error { _, err := relaylock.TryHold(ctx, d, p("C"), ttl); return err })
	require.ErrorIs(t, err, relaytype.ErrLocked)
	require.NoError(t, h.Err(), "B kept the lock")
	h.Release(ctx)
	h.Release(ctx) // harmless
	hc, err := relaylock.TryHold(ctx, d, p("C"), 0)
	require.NoError(t, err, "released: free at once")
	hc.Release(ctx)
}

// With NoWait, a Run that finds the lock taken returns ErrLocked at once and
// never calls fn; once the lock is free it runs.
func TestRunNoWait(t *testing.T) {
	t.Parallel()
	d := sqliteStore(t)
	clock := relayclock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx := context.Background()
	params := func(owner string) relaylock.Params {
		return relaylock.Params{Name: "outbox:t", Owner: owner, TTL: 30 * time.Second, Clock: clock, NoWait: true}
	}
	holding, release := make(chan struct{}), make(chan struct{})
	aDone := make(chan error, 1)
	go func() {
		aDone <- relaylock.Run(ctx, d, params("A"), func(context.Context) error { close(holding); <-release; return nil })
	}()
	<-holding
	called := false
	err := relaylock.Run(ctx, d, params("B"), func(context.Context) error { called = true; return nil })
	require.ErrorIs(t, err, relaytype.ErrLocked)
	require.False(t, called)
	close(release)
	require.NoError(t, <-aDone)
	require.NoError(t, relaylock.Run(ctx, d, params("B"), func(context.Context) error { called = true; return nil }))
	require.True(t, called)
}
