package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaymigrate"
)

// Lifecycle is the Start/Stop/Notify machinery the background components share
// (Dispatcher, AckWriter, Retention, Archiver): start once after a schema
// check, run rounds on one goroutine until Stop, drain the round in flight on
// Stop (or cancel it when Stop's ctx ends first), and wake an idle loop on
// Notify. Make one with NewLifecycle.
type Lifecycle struct {
	what string // "dispatcher \"kafka:msg\"", for errors

	mu        sync.Mutex
	wake      chan struct{}
	started   bool
	stopped   bool
	stopCh    chan struct{}
	cancelRun context.CancelFunc
	done      chan struct{}
}

// NewLifecycle returns the lifecycle of the service named what in errors
// ("dispatcher \"kafka:msg\"").
func NewLifecycle(what string) *Lifecycle {
	return &Lifecycle{what: what, wake: make(chan struct{}, 1)}
}

// Start refuses a second start and an outdated engine schema
// (relaytype.ErrSchemaOutdated), then runs the loop: round, then wait for
// Stop, a Notify or idle(), round again. ctx governs only the schema check;
// the loop runs until Stop.
func (l *Lifecycle) Start(ctx context.Context, d relaydriver.Driver, round func(ctx context.Context, stop <-chan struct{}), idle func() <-chan time.Time) error {
	return l.StartRun(ctx, d, func(ctx context.Context, stop, wake <-chan struct{}) {
		for {
			round(ctx, stop)
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-wake:
			case <-idle():
			}
		}
	})
}

// StartRun is Start for a component that runs its own loop: after the same
// checks it calls run once, on its own goroutine, with a ctx cancelled only
// when Stop's ctx ends first, the channel Stop closes and the channel Notify
// signals. run must return soon after stop is closed or ctx ends.
func (l *Lifecycle) StartRun(ctx context.Context, d relaydriver.Driver, run func(ctx context.Context, stop, wake <-chan struct{})) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return fmt.Errorf("relay: Start: %s already started", l.what)
	}
	if err := relaymigrate.Check(ctx, d, relaymigrate.EngineLineOf(d)); err != nil {
		return fmt.Errorf("relay: Start %s: %w", l.what, err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.started = true
	l.stopCh = make(chan struct{})
	l.cancelRun = cancel
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		run(runCtx, l.stopCh, l.wake)
	}()
	return nil
}

// Stop asks the loop to take no more rounds and waits for the one in flight;
// when ctx ends first it cancels the round and returns ctx.Err() wrapped. Stop
// before Start returns nil; a second Stop is harmless.
func (l *Lifecycle) Stop(ctx context.Context) error {
	l.mu.Lock()
	if !l.started {
		l.mu.Unlock()
		return nil
	}
	if !l.stopped {
		l.stopped = true
		close(l.stopCh)
	}
	done, cancel := l.done, l.cancelRun
	l.mu.Unlock()
	select {
	case <-done:
		cancel()
		return nil
	case <-ctx.Done():
		cancel()
		return fmt.Errorf("relay: Stop %s: %w", l.what, ctx.Err())
	}
}

// Notify wakes an idle loop; it never blocks.
func (l *Lifecycle) Notify() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}
