package relay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaytype"
)

// stateOf reads a state without failing the test (for require.Eventually,
// whose condition runs on another goroutine).
func (b *bundle) stateOf(id int64) relaytype.State {
	m, err := b.d.GetExecutor().MessageGet(context.Background(), b.engine.Queue(), id)
	if err != nil {
		return ""
	}
	return m.State
}

// TestStartLoop: a started engine is woken by Enqueue (PollInterval is an hour
// of fake time), and a FIFO head in backoff is retried when the engine's clock
// reaches its due time — no real sleeping anywhere.
func TestStartLoop(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var c calls
		b := setup(t, s, relay.Config{
			PollInterval: time.Hour,
			Handler: relay.HandlerFunc(func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
				if c.add(d.Message.ID) == 1 && d.Message.ID == 2 {
					return relay.Retry(relaytype.ClassInfra, errors.New("once"))
				}
				return relay.Succeeded()
			}),
		})
		require.NoError(t, b.engine.Start(b.ctx))
		require.Error(t, b.engine.Start(b.ctx), "an engine starts once")
		t.Cleanup(func() { require.NoError(t, b.engine.Stop(context.Background())) })

		b.enqueue(1)
		require.Eventually(t, func() bool { return b.stateOf(1) == relaytype.StateSucceeded }, 10*time.Second, time.Millisecond)
		b.enqueue(2, 3)
		require.Eventually(t, func() bool { return b.stateOf(2) == relaytype.StateFailed }, 10*time.Second, time.Millisecond)
		require.Equal(t, relaytype.StatePending, b.stateOf(3))
		require.Eventually(t, func() bool {
			b.clock.Advance(250 * time.Millisecond) // the 1s backoff, well before PollInterval
			return b.stateOf(3) == relaytype.StateSucceeded
		}, 10*time.Second, time.Millisecond)
		require.Less(t, b.clock.Now().Sub(t0), time.Hour, "woken by the head's due time, not the poll interval")
		require.Equal(t, relaytype.StateSucceeded, b.stateOf(2))
	})
}

// TestWakeDelayGathersABatch: a started engine woken by an Enqueue waits
// WakeDelay on its clock before it claims, so what is enqueued meanwhile is
// claimed and handled as one batch.
func TestWakeDelayGathersABatch(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		h := &batchProj{}
		b := setup(t, s, relay.Config{Mode: relay.ModeUnordered, TxBatch: 8, BatchSize: 8, Workers: 1,
			PollInterval: time.Hour, WakeDelay: time.Minute, Handler: h})
		b.createProj()
		require.NoError(t, b.engine.Start(b.ctx))
		t.Cleanup(func() { require.NoError(t, b.engine.Stop(context.Background())) })
		// Parked: the lease keeper's timer and the poll interval's, after the
		// first (empty) round.
		require.Eventually(t, func() bool { return b.clock.Waiters() >= 2 }, 10*time.Second, time.Millisecond)
		parked := b.clock.Waiters()

		for id := int64(1); id <= 5; id++ {
			b.enqueue(id)
		}
		// Woken, it waits the delay on the clock; nothing is claimed before.
		require.Eventually(t, func() bool { return b.clock.Waiters() > parked }, 10*time.Second, time.Millisecond)
		for id := int64(1); id <= 5; id++ {
			require.Equal(t, relaytype.StatePending, b.stateOf(id))
		}
		b.clock.Advance(time.Minute)
		require.Eventually(t, func() bool {
			for id := int64(1); id <= 5; id++ {
				if b.stateOf(id) != relaytype.StateSucceeded {
					return false
				}
			}
			return true
		}, 10*time.Second, time.Millisecond)
		h.mu.Lock()
		defer h.mu.Unlock()
		require.Len(t, h.batches, 1, "one batch: %v", h.batches)
		require.ElementsMatch(t, []int64{1, 2, 3, 4, 5}, h.batches[0])
	})
}

// TestStopDrainsInFlight: Stop waits for the message in flight to reach its
// decision before it returns.
func TestStopDrainsInFlight(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		started, release := make(chan struct{}), make(chan struct{})
		b := setup(t, s, relay.Config{Handler: relay.HandlerFunc(func(context.Context, relay.Tx, *relay.Delivery) relay.Result {
			close(started)
			<-release
			return relay.Succeeded()
		})})
		require.NoError(t, b.engine.Start(b.ctx))
		b.enqueue(1)
		<-started
		stopped := make(chan error, 1)
		go func() { stopped <- b.engine.Stop(context.Background()) }()
		close(release)
		require.NoError(t, <-stopped)
		require.Equal(t, relaytype.StateSucceeded, b.state(1), "the in-flight message finished before Stop returned")
		require.NoError(t, b.engine.Stop(context.Background()), "Stop is idempotent")
	})
}

// TestStopDeadlineInterruptsHandler: when Stop's ctx ends first, the handler's
// ctx is cancelled and the interrupted attempt leaves the message as it was
// (no attempt counted, nothing committed).
func TestStopDeadlineInterruptsHandler(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		started, returned := make(chan struct{}), make(chan struct{})
		b := setup(t, s, relay.Config{Handler: relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
			_ = insertProj(ctx, tx, d.Message.ID)
			close(started)
			<-ctx.Done()
			close(returned)
			return relay.Succeeded()
		})})
		b.createProj()
		require.NoError(t, b.engine.Start(b.ctx))
		b.enqueue(1)
		<-started
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.ErrorIs(t, b.engine.Stop(ctx), context.Canceled)
		<-returned
		require.NoError(t, b.engine.Stop(context.Background()), "waits for the loop to exit")
		m := b.get(1)
		require.Equal(t, relaytype.StatePending, m.State)
		require.Zero(t, m.Attempts)
		require.Empty(t, b.projRows())
	})
}

// gauge returns the value of the metric name with the given labels (-1 when absent).
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			return value(m)
		}
	}
	return -1
}

func value(m *dto.Metric) float64 {
	if m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// TestMetrics: outcomes are counted, and the backlog, oldest-unprocessed age
// (on the engine's clock) and per-state gauges follow the store; engines of two
// queues share one registry.
func TestMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	b := setup(t, stores()[1], relay.Config{
		Mode: relay.ModeUnordered, Workers: 1, Registerer: reg,
		Handler: relay.HandlerFunc(func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
			switch d.Message.ID {
			case 2:
				return relay.RetryAfter(time.Hour, relaytype.ClassInfra, errors.New("later"))
			case 3:
				return relay.Dead(relaytype.ClassProtocol, errors.New("no"))
			case 4:
				return relay.Skip("no-match")
			}
			return relay.Succeeded()
		}),
	})
	other := setupOn(t, b.d, relay.Config{Queue: "q", Registerer: reg, Handler: okHandler()})
	b.enqueue(1, 2, 3, 4)
	require.Equal(t, 4, b.work())
	b.clock.Advance(90 * time.Second)
	require.Equal(t, 0, b.work())

	p := map[string]string{"queue": "p"}
	with := func(k, v string) map[string]string { return map[string]string{"queue": "p", k: v} }
	for outcome, want := range map[string]float64{"succeeded": 1, "retry": 1, "dead": 1, "skipped": 1, "exhausted": 0} {
		require.Equal(t, want, metricValue(t, reg, "relay_processed_total", with("outcome", outcome)), outcome)
	}
	require.Equal(t, 1.0, metricValue(t, reg, "relay_backlog_messages", p))
	require.Equal(t, 90.0, metricValue(t, reg, "relay_backlog_oldest_unprocessed_seconds", p))
	for state, want := range map[string]float64{"PENDING": 0, "FAILED": 1, "SUCCEEDED": 1, "SKIPPED": 1, "DEAD": 1, "ARCHIVED": 0} {
		require.Equal(t, want, metricValue(t, reg, "relay_messages", with("state", state)), state)
	}

	_, err := other.engine.Work(other.ctx)
	require.NoError(t, err)
	require.Equal(t, 0.0, metricValue(t, reg, "relay_backlog_messages", map[string]string{"queue": "q"}))
}
