package service

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/relayhq/relay/relaydriver"
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

func (p *Passes) run(ctx context.Context, stop <-chan struct{}) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pass(ctx, stop)
}
