package service_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/service"
	"github.com/relayhq/relay/relayclock"
)

func TestScaffolding(t *testing.T) {
	c := service.Common{}.Defaults()
	require.NotNil(t, c.Clock)
	require.NotNil(t, c.Logger)

	var d any
	require.EqualError(t, service.NotNil("NewX", service.Dep{Name: "driver", Value: 1}, service.Dep{Name: "sink", Value: d}),
		"relay: NewX: nil sink")
	require.NoError(t, service.NotNil("NewX", service.Dep{Name: "driver", Value: 1}))
	require.EqualError(t, service.Invalid("XConfig")("Limit", "%d < 1", 0), "relay: invalid XConfig.Limit: 0 < 1")

	reg := prometheus.NewRegistry()
	m := service.NewMetrics(reg)
	a := m.Counter("x_total", "x", "target")
	b := service.NewMetrics(reg).Counter("x_total", "x", "target")
	require.NoError(t, m.Err())
	require.Same(t, a, b, "a second registration shares the first collector")
	m.Gauge("x_total", "clash", "other")
	require.Error(t, m.Err())
}

func TestDrain(t *testing.T) {
	ns := []int{3, 3, 1, 3}
	calls := 0
	n, err := service.Drain(context.Background(), nil, 3, func() (int, error) { calls++; return ns[calls-1], nil })
	require.NoError(t, err)
	require.Equal(t, 7, n)
	require.Equal(t, 3, calls, "a short batch ends the pass")

	boom := errors.New("boom")
	n, err = service.Drain(context.Background(), nil, 3, func() (int, error) { return 2, boom })
	require.ErrorIs(t, err, boom)
	require.Equal(t, 2, n)

	stop := make(chan struct{})
	close(stop)
	require.True(t, service.Stopping(stop))
	require.False(t, service.Stopping(nil))
	n, _ = service.Drain(context.Background(), stop, 3, func() (int, error) { return 3, nil })
	require.Zero(t, n)
}

func TestRefreshThrottle(t *testing.T) {
	var r service.RefreshThrottle
	t0 := time.Unix(100, 0)
	require.True(t, r.Due(t0))
	require.False(t, r.Due(t0.Add(service.RefreshInterval-1)))
	require.True(t, r.Due(t0.Add(service.RefreshInterval)))
}

// TestWithClockTimeout: on the system clock (a runtime timer) and on a fake
// clock (a goroutine on clock.After) the context ends with the cause once d
// has passed, and with context.Canceled when stopped first.
func TestWithClockTimeout(t *testing.T) {
	t.Parallel()
	errLate := errors.New("late")
	t.Run("system clock", func(t *testing.T) {
		t.Parallel()
		ctx, stop := service.WithClockTimeout(context.Background(), relayclock.System{}, time.Millisecond, errLate)
		defer stop()
		<-ctx.Done()
		require.ErrorIs(t, context.Cause(ctx), errLate)

		ctx, stop = service.WithClockTimeout(context.Background(), relayclock.System{}, time.Hour, errLate)
		stop()
		<-ctx.Done()
		require.ErrorIs(t, context.Cause(ctx), context.Canceled)
	})
	t.Run("fake clock", func(t *testing.T) {
		t.Parallel()
		clock := relayclock.NewFake(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
		ctx, stop := service.WithClockTimeout(context.Background(), clock, time.Minute, errLate)
		defer stop()
		require.NoError(t, ctx.Err(), "armed, not yet passed")
		clock.Advance(time.Minute)
		<-ctx.Done()
		require.ErrorIs(t, context.Cause(ctx), errLate)

		ctx, stop = service.WithClockTimeout(context.Background(), clock, time.Minute, errLate)
		stop()
		<-ctx.Done()
		require.ErrorIs(t, context.Cause(ctx), context.Canceled)
	})
}
