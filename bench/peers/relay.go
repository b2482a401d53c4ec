package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// relaySetting is relay's concurrency for ModeUnordered and ModePerKey.
type relaySetting struct{ Workers, BatchSize, TxBatch int }

func (s relaySetting) String() string {
	return fmt.Sprintf("Workers=%d BatchSize=%d TxBatch=%d", s.Workers, s.BatchSize, s.TxBatch)
}

// relayStore is one run's relay store on a fresh schema, migrated, with the
// effect table (and the per-key table when keys > 0).
type relayStore struct {
	d     *relaypgx.Driver
	close func() error
}

func openRelay(ctx context.Context, base string, poolMax, keys int) (_ *relayStore, err error) {
	dsn, _, drop, err := freshSchema(ctx, base, poolMax)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, drop())
		}
	}()
	d, err := relaypgx.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if _, err := relaymigrate.Up(ctx, d, relayclock.System{}, relaymigrate.EngineLineOf(d)); err != nil {
		return nil, errors.Join(fmt.Errorf("relay: migrate: %w", err), d.Close())
	}
	if err := createEffects(ctx, d, keys); err != nil {
		return nil, errors.Join(err, d.Close())
	}
	return &relayStore{d: d, close: func() error { return errors.Join(d.Close(), drop()) }}, nil
}

func createEffects(ctx context.Context, d *relaypgx.Driver, keys int) error {
	if _, err := d.Pool().Exec(ctx, effectDDL); err != nil {
		return err
	}
	if keys > 0 {
		if _, err := d.Pool().Exec(ctx, keyDDL); err != nil {
			return err
		}
		if _, err := d.Pool().Exec(ctx, keyFill, keys); err != nil {
			return err
		}
	}
	return nil
}

// relayHandler writes the message's effect in the engine's transaction: plain
// (keys == 0) or as the next step of its key (keys > 0), which fails — DEAD,
// no effect — when the key's previous message was not applied just before it;
// keys == noEffect writes nothing (orientation runs). observe, when set, is
// called with the message first.
func relayHandler(keys int, observe func(*relaytype.Message)) relay.Handler {
	return relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, del *relay.Delivery) relay.Result {
		m := del.Message
		if observe != nil {
			observe(m)
		}
		if keys == noEffect {
			return relay.Succeeded()
		}
		if keys == 0 {
			if _, err := tx.Exec(ctx, effectInsert, m.ID); err != nil {
				return relay.Retry(relaytype.ClassInfra, err)
			}
			return relay.Succeeded()
		}
		n, err := tx.Exec(ctx, orderedStep, m.ID, keyOf(m.ID, keys), prevOf(m.ID, keys))
		if err != nil {
			return relay.Retry(relaytype.ClassInfra, err)
		}
		if n != 1 {
			return relay.Dead(relaytype.ClassInternal, fmt.Errorf("message %d of key %d applied out of order", m.ID, keyOf(m.ID, keys)))
		}
		return relay.Succeeded()
	})
}

// noEffect as keys makes a run's jobs true no-ops: no effect row, verified by
// the job states alone (the orientation runs).
const noEffect = -1

// relayConfig is the engine configuration of a run.
func relayConfig(keys int, s relaySetting, h relay.Handler) relay.Config {
	mode := relay.ModeUnordered
	if keys > 0 {
		mode = relay.ModePerKey
	}
	return relay.Config{Queue: "peers", Mode: mode, Handler: h,
		Workers: s.Workers, BatchSize: s.BatchSize, TxBatch: s.TxBatch, Clock: relayclock.System{},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
}

// enqueueParams returns messages lo..hi-1 (seq = id), keyed when keys > 0,
// with payload.
func enqueueParams(lo, hi int64, keys int, payload func(seq int64) []byte) []*relay.EnqueueParams {
	params := make([]*relay.EnqueueParams, 0, hi-lo)
	for seq := lo; seq < hi; seq++ {
		p := &relay.EnqueueParams{ID: seq, Payload: []byte("{}")}
		if keys > 0 {
			p.Key = fmt.Sprint(keyOf(seq, keys))
		}
		if payload != nil {
			p.Payload = payload(seq)
		}
		params = append(params, p)
	}
	return params
}

// runRelayBurn is one burn-down of relay on a fresh schema: enqueue n messages
// (ids 1..n, keyed when keys > 0) in chunks of 1,000, then Work until all are
// processed, then verify.
func runRelayBurn(ctx context.Context, base string, n, keys int, s relaySetting) (res result, err error) {
	// Each worker holds a connection for its transaction; the claim needs one more.
	st, err := openRelay(ctx, base, s.Workers+2, keys)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, st.close()) }()
	e, err := relay.NewEngine(st.d, relayConfig(keys, s, relayHandler(keys, nil)))
	if err != nil {
		return res, err
	}

	const chunk = 1000
	start := time.Now()
	for i := int64(1); i <= int64(n); i += chunk {
		if _, err := e.Enqueue(ctx, enqueueParams(i, min(i+chunk, int64(n)+1), keys, nil)...); err != nil {
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
	return res, verifyRelay(ctx, e, st.d, n, keys)
}

// verifyRelay checks that all n messages SUCCEEDED, each with exactly one
// effect, and with keys > 0 that every key applied its messages in order.
func verifyRelay(ctx context.Context, e *relay.Engine, d *relaypgx.Driver, n, keys int) error {
	st, err := e.Stats(ctx)
	if err != nil {
		return err
	}
	var other int64
	for state, c := range st.Counts {
		if state != relaytype.StateSucceeded {
			other += c
		}
	}
	if got := st.Counts[relaytype.StateSucceeded]; got != int64(n) || other != 0 {
		return fmt.Errorf("relay: %d SUCCEEDED and %d in other states for %d messages", got, other, n)
	}
	if keys == noEffect {
		return nil
	}
	if err := checkEffects(ctx, d.Pool(), n); err != nil {
		return err
	}
	if keys > 0 {
		return checkKeys(ctx, d.Pool(), n, keys)
	}
	return nil
}
