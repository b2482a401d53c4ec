package service

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// PassesConfig describes a service that works in passes, for NewPasses.
type PassesConfig struct {
	// What names the service in errors ("archiver of \"p\"").
	What string
	// Driver is the store whose engine schema Start checks.
	Driver relaydriver.Driver
	// Logger receives the failed and started logs.
	Logger *slog.Logger
	// Failed is the ERROR message of a failed pass of the started loop,
	// logged with Attrs and the error.
	Failed string
	// Attrs are the log attributes of a failed pass.
	Attrs []any
	// Started is the INFO message logged once Start succeeded, with
	// StartedAttrs.
	Started string
	// StartedAttrs are the log attributes of the started message.
	StartedAttrs []any
	// Idle returns the channel a started loop waits on between passes when
	// nothing notifies it (the clock's After of the service's interval).
	Idle func() <-chan time.Time
	// Clock stamps PassStats.LastPassAt. Required.
	Clock relaytype.Clock
}

// PassStats is what a service that works in passes has done since it was
// created (in this process; nothing is read from the store).
type PassStats struct {
	// Passes counts finished passes, failed ones included (Work calls and
	// the started loop's passes).
	Passes int64
	// Failed counts the passes that returned an error (a pass cut short by
	// Stop or a cancelled ctx included).
	Failed int64
	// Done counts the rows that reached an outcome over all passes.
	Done int64
	// LastPassAt is when the last pass ended, on the service's clock; zero
	// before the first.
	LastPassAt time.Time
	// LastDone is how many rows the last pass settled.
	LastDone int
	// LastError is the last pass's error; nil when it succeeded.
	LastError error
}

// Passes is the scaffolding of a service that works in passes (the ack
// writer, the archiver, retention): Work runs one pass, and Start runs one at
// once and then after each Notify or idle wait until Stop; passes never
// overlap. A pass gets the channel Stop closes (nil for Work) and returns how
// many rows reached an outcome.
type Passes struct {
	cfg  PassesConfig
	pass func(ctx context.Context, stop <-chan struct{}) (int, error)
	mu   sync.Mutex // serialises passes
	lc   *Lifecycle

	statsMu sync.Mutex
	stats   PassStats
}

// NewPasses returns the scaffolding that runs pass as cfg describes.
func NewPasses(cfg PassesConfig, pass func(ctx context.Context, stop <-chan struct{}) (int, error)) *Passes {
	return &Passes{cfg: cfg, pass: pass, lc: NewLifecycle(cfg.What)}
}

// Start checks the store's engine schema and starts the loop of passes,
// which runs until Stop. A service starts at most once.
func (p *Passes) Start(ctx context.Context) error {
	err := p.lc.Start(ctx, p.cfg.Driver, func(ctx context.Context, stop <-chan struct{}) {
		if _, err := p.run(ctx, stop); err != nil && ctx.Err() == nil {
			p.cfg.Logger.ErrorContext(ctx, p.cfg.Failed, append(p.cfg.Attrs[:len(p.cfg.Attrs):len(p.cfg.Attrs)], "error", err)...)
		}
	}, p.cfg.Idle)
	if err != nil {
		return err
	}
	p.cfg.Logger.InfoContext(ctx, p.cfg.Started, p.cfg.StartedAttrs...)
	return nil
}

// Stop asks the loop to take no more passes and waits for the one in flight
// (cancelling it when ctx ends first). Stop before Start returns nil; a
// second Stop is harmless.
func (p *Passes) Stop(ctx context.Context) error { return p.lc.Stop(ctx) }

// Notify wakes an idle started loop; it never blocks.
func (p *Passes) Notify() { p.lc.Notify() }

// Work runs one pass now.
func (p *Passes) Work(ctx context.Context) (int, error) { return p.run(ctx, nil) }

// Stats returns what the passes have done so far. It never blocks on a
// pass in flight.
func (p *Passes) Stats() PassStats {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	return p.stats
}

func (p *Passes) run(ctx context.Context, stop <-chan struct{}) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, err := p.pass(ctx, stop)
	at := p.cfg.Clock.Now()
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	p.stats.Passes++
	p.stats.Done += int64(n)
	p.stats.LastPassAt, p.stats.LastDone, p.stats.LastError = at, n, err
	if err != nil {
		p.stats.Failed++
	}
	return n, err
}
