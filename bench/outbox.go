package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaytype"
)

// OutboxOptions shape one outbox measurement.
type OutboxOptions struct {
	// Target names the run's outbox target (unique per run on a shared store).
	Target string
	// Topic is the destination topic/stream of the events.
	Topic string
	// Events are appended in business transactions of PerTx events each, over Keys keys.
	Events, Keys, PerTx int
	// BatchSize is the dispatcher's batch (events per sink call).
	BatchSize int
	Clock     relaytype.Clock
}

// OutboxResult is one measured run.
type OutboxResult struct {
	Events       int
	WriteElapsed time.Duration // appending the events in business transactions
	RelayElapsed time.Duration // dispatcher: fetch, publish, mark SENT, until drained
}

// WriteRate and RelayRate return events per second of each phase.
func (r OutboxResult) WriteRate() float64 { return float64(r.Events) / r.WriteElapsed.Seconds() }

// RelayRate returns the dispatcher's events per second.
func (r OutboxResult) RelayRate() float64 { return float64(r.Events) / r.RelayElapsed.Seconds() }

// RunOutbox appends Events outbox events in business transactions, then
// measures how fast a Dispatcher relays them to sink. It verifies before it
// reports: every event confirmed by the sink exactly once in per-key sequence
// order (a redelivery is allowed, a gap or inversion is not), and every outbox
// row SENT.
func RunOutbox(ctx context.Context, d relaydriver.Driver, sink relaysink.Sink, o OutboxOptions) (OutboxResult, error) {
	res := OutboxResult{Events: o.Events}
	start := o.Clock.Now()
	for i := 0; i < o.Events; i += o.PerTx {
		tx, err := d.Begin(ctx)
		if err != nil {
			return res, err
		}
		evs := make([]*relay.OutboxEvent, 0, o.PerTx)
		for j := i; j < min(i+o.PerTx, o.Events); j++ {
			evs = append(evs, &relay.OutboxEvent{ID: o.Target + "-" + strconv.Itoa(j), Target: o.Target, Topic: o.Topic,
				Key: "k" + strconv.Itoa(j%o.Keys), Payload: []byte(strconv.Itoa(j))})
		}
		if _, err := relay.AppendEventsTx(ctx, tx, evs...); err != nil {
			_ = tx.Rollback(ctx)
			return res, err
		}
		if err := tx.Commit(ctx); err != nil {
			return res, err
		}
	}
	res.WriteElapsed = o.Clock.Now().Sub(start)

	check := &orderCheck{Sink: sink, next: map[string]int64{}}
	disp, err := relay.NewDispatcher(d, check, relay.DispatcherConfig{Target: o.Target, BatchSize: o.BatchSize, Clock: o.Clock})
	if err != nil {
		return res, err
	}
	start = o.Clock.Now()
	for {
		n, err := disp.Work(ctx)
		if err != nil {
			return res, err
		}
		if n == 0 {
			break
		}
	}
	res.RelayElapsed = o.Clock.Now().Sub(start)

	if err := check.verdict(o.Events); err != nil {
		return res, err
	}
	st, err := d.GetExecutor().OutboxStats(ctx, o.Target)
	if err != nil {
		return res, err
	}
	if st.Sent != int64(o.Events) || st.Pending != 0 || st.Dead != 0 {
		return res, fmt.Errorf("bench: outbox ended with %d sent, %d pending, %d dead of %d", st.Sent, st.Pending, st.Dead, o.Events)
	}
	return res, nil
}

// orderCheck wraps a sink and checks what it confirms: per key, sequences
// advance by one (a confirmed redelivery of an older seq is allowed; a gap or
// an inversion is a failure).
type orderCheck struct {
	relaysink.Sink
	mu        sync.Mutex
	next      map[string]int64
	confirmed int
	err       error
}

func (c *orderCheck) Publish(ctx context.Context, events []relaysink.Event) []error {
	errs := c.Sink.Publish(ctx, events)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, ev := range events {
		if errs[i] != nil {
			continue
		}
		switch last := c.next[ev.Key]; {
		case ev.Seq == last+1:
			c.next[ev.Key] = ev.Seq
			c.confirmed++
		case ev.Seq <= last: // redelivery
		default:
			if c.err == nil {
				c.err = fmt.Errorf("bench: key %s confirmed seq %d after %d", ev.Key, ev.Seq, last)
			}
		}
	}
	return errs
}

func (c *orderCheck) verdict(want int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	if c.confirmed != want {
		return fmt.Errorf("bench: %d events confirmed in order, want %d", c.confirmed, want)
	}
	return nil
}
