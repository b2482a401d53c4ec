// Package service is what relay's long-running services share (the
// dispatcher, the acknowledgement writer, the archiver and retention): the
// Start/Stop/Notify loop, a clock-bound timeout, the refresh throttle of
// aggregate gauges, and the scaffolding of their constructors — defaults of
// the common settings, nil checks, validation messages and metrics
// registration — written once here instead of once per service.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/relayhq/relay/internal/metric"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// Common are the settings every service's config has. Their zero values take
// the defaults of Defaults.
type Common struct {
	// Clock is the only source of time. Default relayclock.System{}.
	Clock relaytype.Clock
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer, when set, receives the service's metrics. Default nil: no
	// metrics.
	Registerer prometheus.Registerer
}

// Defaults returns c with a nil Clock and Logger defaulted.
func (c Common) Defaults() Common {
	if c.Clock == nil {
		c.Clock = relayclock.System{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Dep is a required dependency of a constructor, for NotNil.
type Dep struct {
	Name  string // "driver", "sink", "source"
	Value any    // a nil interface is refused
}

// NotNil returns "relay: <ctor>: nil <name>" for the first dependency whose
// value is a nil interface, else nil.
func NotNil(ctor string, deps ...Dep) error {
	for _, d := range deps {
		if d.Value == nil {
			return fmt.Errorf("relay: %s: nil %s", ctor, d.Name)
		}
	}
	return nil
}

// Invalid returns the validation error builder of the config type named
// config: Invalid("ArchiverConfig")("Limit", "%d < 1", 0) is
// "relay: invalid ArchiverConfig.Limit: 0 < 1".
func Invalid(config string) func(field, format string, args ...any) error {
	return func(field, format string, args ...any) error {
		return fmt.Errorf("relay: invalid %s.%s: %s", config, field, fmt.Sprintf(format, args...))
	}
}

// Metrics registers a service's collectors on a Registerer, sharing each
// with an identical one already registered (metric.Register). The first
// failure is kept for Err; after it, every call returns an unregistered
// collector. With a nil Registerer nothing is registered.
type Metrics struct {
	r   prometheus.Registerer
	err error
}

// NewMetrics returns a Metrics registering on r.
func NewMetrics(r prometheus.Registerer) *Metrics { return &Metrics{r: r} }

// Counter registers a counter vector with labels.
func (m *Metrics) Counter(name, help string, labels ...string) *prometheus.CounterVec {
	return register(m, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

// Gauge registers a gauge vector with labels.
func (m *Metrics) Gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	return register(m, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

// Err returns the first registration failure.
func (m *Metrics) Err() error { return m.err }

func register[C prometheus.Collector](m *Metrics, c C) C {
	if m.err != nil {
		return c
	}
	c, m.err = metric.Register(m.r, c)
	return c
}

// Drain runs batch until it returns fewer than limit rows, an error, stop is
// closed or ctx ends, and returns the rows of all batches. It is the pass of
// a maintenance job that works through a backlog in bounded statements.
func Drain(ctx context.Context, stop <-chan struct{}, limit int, batch func() (int, error)) (int, error) {
	total := 0
	for ctx.Err() == nil && !Stopping(stop) {
		n, err := batch()
		total += n
		if err != nil {
			return total, err
		}
		if n < limit {
			break
		}
	}
	return total, nil
}

// Stopping reports whether stop was closed (nil never is).
func Stopping(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// WithClockTimeout returns a context that is cancelled with cause once d has
// passed on clock (armed before it returns, so deterministic with a fake
// clock), and a stop function that releases it; call stop when the bounded
// call has returned. context.Cause tells a timeout from any other end.
//
// On relayclock.System, whose time is the runtime's, the context is
// context.WithTimeoutCause's: a runtime timer, no goroutine. The FIFO pump
// bounds every Handler call with it, and a goroutine per call with its
// wake-up at stop cost about 10 µs of CPU per message there (strict-FIFO
// scenario of bench/peers, docs/benchmarks.md). Any other clock gets a
// goroutine that waits on clock.After.
func WithClockTimeout(ctx context.Context, clock relaytype.Clock, d time.Duration, cause error) (context.Context, func()) {
	if _, ok := clock.(relayclock.System); ok {
		return context.WithTimeoutCause(ctx, d, cause)
	}
	tctx, cancel := context.WithCancelCause(ctx)
	timer := clock.After(d)
	done := make(chan struct{})
	go func() {
		select {
		case <-timer:
			cancel(cause)
		case <-done:
		}
	}()
	return tctx, func() {
		close(done)
		cancel(nil)
	}
}

// RefreshInterval is the least time between two refreshes of a component's
// gauges. The aggregates behind them read a whole queue or target, so they
// must not run after each of the many short rounds a busy component makes (at
// a few hundred rounds per second they would cost more than the work itself);
// a Prometheus scrape is rarely more frequent anyway.
const RefreshInterval = time.Second

// RefreshThrottle lets a gauge refresh through at most once per
// RefreshInterval of a clock. Its user serialises the calls (each holds its
// work lock). The zero value is ready.
type RefreshThrottle struct {
	last time.Time // zero: never refreshed
}

// Due reports whether a refresh at now may run, and if so records it.
func (r *RefreshThrottle) Due(now time.Time) bool {
	if !r.last.IsZero() && now.Sub(r.last) < RefreshInterval {
		return false
	}
	r.last = now
	return true
}

// PollIntervalDefault is how long an idle started service (and an idle
// engine) waits on its clock between rounds when nothing wakes it
// (relay.PollIntervalDefault).
const PollIntervalDefault = time.Second
