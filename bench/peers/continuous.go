package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaytype"
)

// Continuous load: a producer inserts at a fixed offered rate for a fixed
// time, in one insert per tick, while the system under test drains. Every
// message carries its insert time (taken just before the insert call); the
// handler/worker records now − that time as the message's end-to-end latency.
// Sustained throughput is n / (last handler entry − first insert). The run then
// waits for every message to be done and verifies exactly-once as the
// burn-downs do.

// contTick is the producer's insert period.
const contTick = 10 * time.Millisecond

// contResult is one verified continuous run.
type contResult struct {
	N        int
	Offered  float64 // msgs/s
	Elapsed  time.Duration
	P50, P99 time.Duration
}

func (r contResult) rate() float64 { return float64(r.N) / r.Elapsed.Seconds() }

// latencies records per-message latency (the last handler entry wins) and the
// latest handler entry time.
type latencies struct {
	ns   []atomic.Int64 // index seq-1
	last atomic.Int64   // Unix ns of the latest handler entry
}

func newLatencies(n int) *latencies { return &latencies{ns: make([]atomic.Int64, n)} }

func (l *latencies) observe(seq, insertedNs int64) {
	now := time.Now().UnixNano()
	if seq >= 1 && seq <= int64(len(l.ns)) {
		l.ns[seq-1].Store(now - insertedNs)
	}
	for {
		old := l.last.Load()
		if now <= old || l.last.CompareAndSwap(old, now) {
			return
		}
	}
}

// summary returns p50 and p99 over every message (a message never observed
// fails the run later, in verification).
func (l *latencies) summary() (p50, p99 time.Duration) {
	xs := make([]int64, len(l.ns))
	for i := range l.ns {
		xs[i] = l.ns[i].Load()
	}
	slices.Sort(xs)
	at := func(q float64) time.Duration { return time.Duration(xs[min(len(xs)-1, int(q*float64(len(xs))))]) }
	return at(0.50), at(0.99)
}

// produce calls insert(lo, hi, nowNs) once per tick so that by elapsed time t
// rate·t messages were offered, n in all. It returns the time of the first
// insert.
func produce(ctx context.Context, n int, rate float64, insert func(lo, hi, nowNs int64) error) (time.Time, error) {
	start := time.Now()
	tick := time.NewTicker(contTick)
	defer tick.Stop()
	next := int64(1)
	for next <= int64(n) {
		due := min(int64(n), int64(time.Since(start).Seconds()*rate)+1)
		if due >= next {
			if err := insert(next, due+1, time.Now().UnixNano()); err != nil {
				return start, err
			}
			next = due + 1
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return start, ctx.Err()
		}
	}
	return start, nil
}

// drainTimeout bounds the wait for the backlog after the producer stops.
const drainTimeout = 2 * time.Minute

// payloadOf encodes an insert time as relay's message payload.
func payloadOf(ns int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(ns)) }

// runRelayContinuous is one continuous run of a started relay engine.
func runRelayContinuous(ctx context.Context, base string, n int, rate float64, keys int, s relaySetting) (res contResult, err error) {
	// Workers' transactions, the claim, and the producer's Enqueue.
	st, err := openRelay(ctx, base, s.Workers+3, keys)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, st.close()) }()
	lat := newLatencies(n)
	h := relayHandler(keys, func(m *relaytype.Message) {
		if len(m.Payload) == 8 {
			lat.observe(m.ID, int64(binary.BigEndian.Uint64(m.Payload)))
		}
	})
	e, err := relay.NewEngine(st.d, relayConfig(keys, s, h))
	if err != nil {
		return res, err
	}
	if err := e.Start(ctx); err != nil {
		return res, err
	}
	stopped := false
	defer func() {
		if !stopped {
			err = errors.Join(err, e.Stop(context.WithoutCancel(ctx)))
		}
	}()
	start, err := produce(ctx, n, rate, func(lo, hi, nowNs int64) error {
		_, err := e.Enqueue(ctx, enqueueParams(lo, hi, keys, func(int64) []byte { return payloadOf(nowNs) })...)
		return err
	})
	if err != nil {
		return res, err
	}
	// Wait for the backlog: poll the store's succeeded count.
	deadline := time.Now().Add(drainTimeout)
	for {
		st, err := e.Stats(ctx)
		if err != nil {
			return res, err
		}
		if st.Backlog() == 0 {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("relay: backlog %d after %s", st.Backlog(), drainTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopped = true
	if err := e.Stop(ctx); err != nil {
		return res, err
	}
	res = contResult{N: n, Offered: rate, Elapsed: time.Unix(0, lat.last.Load()).Sub(start)}
	res.P50, res.P99 = lat.summary()
	return res, verifyRelay(ctx, e, st.d, n, keys)
}

// runRiverContinuous is one continuous run of a started River client.
func runRiverContinuous(ctx context.Context, base string, n int, rate float64, maxWorkers int) (res contResult, err error) {
	lat := newLatencies(n)
	r, err := openRiver(ctx, base, n, maxWorkers, false, func(a noopArgs) { lat.observe(a.Seq, a.T) })
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, r.close()) }()
	if err := r.client.Start(ctx); err != nil {
		return res, err
	}
	stopped := false
	defer func() {
		if !stopped {
			err = errors.Join(err, r.client.Stop(context.WithoutCancel(ctx)))
		}
	}()
	start, err := produce(ctx, n, rate, func(lo, hi, nowNs int64) error { return r.insert(ctx, lo, hi, nowNs) })
	if err != nil {
		return res, err
	}
	if err := r.await(ctx, n, drainTimeout); err != nil {
		return res, err
	}
	stopped = true
	if err := r.client.Stop(ctx); err != nil {
		return res, err
	}
	res = contResult{N: n, Offered: rate, Elapsed: time.Unix(0, lat.last.Load()).Sub(start)}
	res.P50, res.P99 = lat.summary()
	return res, r.verify(ctx, n)
}
