package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaypgx"
	"github.com/relayhq/relay/relaytype"
)

// relaySetting is relay's concurrency for ModeUnordered.
type relaySetting struct{ Workers, BatchSize int }

func (s relaySetting) String() string {
	return fmt.Sprintf("Workers=%d BatchSize=%d", s.Workers, s.BatchSize)
}

// runRelay is one burn-down of relay's unordered mode on a fresh schema:
// enqueue n messages in chunks of 1,000, then Work until all are processed by a
// handler that writes one effect row in the engine's transaction, then verify.
func runRelay(ctx context.Context, base string, n int, s relaySetting) (res result, err error) {
	// Each worker holds a connection for its message's transaction; the claim
	// needs one more.
	dsn, drop, err := freshSchema(ctx, base, s.Workers+2)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, drop()) }()
	d, err := relaypgx.Open(ctx, dsn)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, d.Close()) }()
	clock := relayclock.System{}
	if _, err := relaymigrate.Up(ctx, d, clock, relaymigrate.EngineLineOf(d)); err != nil {
		return res, fmt.Errorf("relay: migrate: %w", err)
	}
	if _, err := d.Pool().Exec(ctx, effectDDL); err != nil {
		return res, err
	}
	handler := relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, del *relay.Delivery) relay.Result {
		if _, err := tx.Exec(ctx, effectInsert, del.Message.ID); err != nil {
			return relay.Retry(relaytype.ClassInfra, err)
		}
		return relay.Succeeded()
	})
	e, err := relay.New(d, relay.Config{Pipeline: "peers", Mode: relay.ModeUnordered, Handler: handler,
		Workers: s.Workers, BatchSize: s.BatchSize, Clock: clock})
	if err != nil {
		return res, err
	}

	const chunk = 1000
	start := time.Now()
	for i := 0; i < n; i += chunk {
		params := make([]*relay.EnqueueParams, 0, chunk)
		for j := i; j < min(i+chunk, n); j++ {
			params = append(params, &relay.EnqueueParams{ID: int64(j + 1), Payload: []byte("{}")})
		}
		if _, err := e.Enqueue(ctx, params...); err != nil {
			return res, err
		}
	}
	res.Insert = time.Since(start)

	start = time.Now()
	done := 0
	for done < n {
		k, err := e.Work(ctx)
		if err != nil {
			return res, err
		}
		if k == 0 {
			return res, fmt.Errorf("relay: engine stopped after %d of %d messages", done, n)
		}
		done += k
	}
	res.Process = time.Since(start)
	res.N = n

	st, err := e.Stats(ctx)
	if err != nil {
		return res, err
	}
	var other int64
	for state, c := range st.Counts {
		if state != relaytype.StateSucceeded {
			other += c
		}
	}
	if got := st.Counts[relaytype.StateSucceeded]; got != int64(n) || other != 0 {
		return res, fmt.Errorf("relay: %d SUCCEEDED and %d in other states for %d messages", got, other, n)
	}
	return res, checkEffects(ctx, d.Pool(), n)
}
