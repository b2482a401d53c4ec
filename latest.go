package relay

import (
	"context"
	"fmt"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaysink"
)

// DispatchKind says what a Dispatcher delivers (DispatcherConfig.Kind).
type DispatchKind string

const (
	// DispatchEvents delivers the outbox's events (AppendEventsTx) in per-key
	// commit order (seed 000 §8.1). The default.
	DispatchEvents DispatchKind = "events"
	// DispatchLatest delivers the target's latest-state rows (UpsertLatestTx):
	// only each key's latest state, confirmed only if it was not rewritten
	// meanwhile (seed 000 §8.2, §12.4).
	DispatchLatest DispatchKind = "latest"
)

// LatestEvent is a key's latest full state (seed 000 §8.2): the outbox keeps
// one row per (Target, Key), written only forward by Version, and a Dispatcher
// with Kind DispatchLatest delivers the latest state of each key — intermediate
// versions written between two rounds are never delivered.
type LatestEvent struct {
	// Target names the Dispatcher (Kind DispatchLatest) that delivers the row.
	// Required.
	Target string
	// Topic is the destination inside the sink.
	Topic string
	// Key is the row's key and the partition key (e.g. the FLID).
	Key string
	// Version is the state's version (STATE_VERSION): the write is accepted only
	// when Version ≥ the stored version; an equal version replaces the state.
	Version int64
	// Type is relaysink.Upsert (the default when empty) or relaysink.Tombstone
	// (delivered with a nil payload: the key's state is removed).
	Type relaysink.EventType
	// Headers are delivered with the state.
	Headers map[string]string
	// Payload is the full state; must be nil for a Tombstone.
	Payload []byte
}

// UpsertLatestTx writes ev as its key's latest state inside tx, so it commits
// or rolls back with the caller's own writes (seed 000 §8.2, §5.3). tx is the
// relay.Tx a Handler receives or a transaction the caller began, as for
// AppendEventsTx.
//
// It reports whether the state was accepted: only when ev.Version ≥ the
// stored version (only forward), so a late older state never overwrites a
// newer one. An accepted write takes a new write generation and makes the row
// PENDING again with its attempts and error cleared — a DEAD row of the key
// is replaced by the new state (seed 000 §8.3). The updated-at time is the
// engine's clock for a handler's Tx and the system clock for a transaction
// the caller began.
func UpsertLatestTx(ctx context.Context, tx Tx, ev *LatestEvent) (accepted bool, err error) {
	ex, params, err := latestParams("UpsertLatestTx", tx, []*LatestEvent{ev})
	if err != nil {
		return false, err
	}
	res, err := ex.LatestUpsert(ctx, params[0])
	if err != nil {
		return false, fmt.Errorf("relay: UpsertLatestTx %s/%s: %w", ev.Target, ev.Key, err)
	}
	return res.Accepted, nil
}

// UpsertLatestManyTx is UpsertLatestTx for several keys in one store
// statement (on PostgreSQL; SQLite loops in tx), e.g. every flight a batch of
// messages changed: each event follows UpsertLatestTx's rules for its own key
// — accepted only when its Version ≥ the stored version, an accepted write
// takes a new generation and resets the row to PENDING with its attempts and
// error cleared. It reports, per event in input order, whether it was
// accepted.
//
// Each (Target, Key) may appear at most once: the caller keeps only each
// key's last state (the earlier ones would be overwritten in the same
// transaction anyway), and a repeated key is an error, before anything is
// written. After a store error the caller must roll tx back (on PostgreSQL tx
// is aborted anyway). An empty evs writes nothing and returns an empty slice.
func UpsertLatestManyTx(ctx context.Context, tx Tx, evs []*LatestEvent) ([]bool, error) {
	ex, params, err := latestParams("UpsertLatestManyTx", tx, evs)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(evs))
	if len(evs) == 0 {
		return out, nil
	}
	res, err := ex.LatestUpsertMany(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("relay: UpsertLatestManyTx of %d states: %w", len(evs), err)
	}
	if len(res) != len(evs) {
		return nil, fmt.Errorf("relay: UpsertLatestManyTx of %d states: the store answered for %d", len(evs), len(res))
	}
	for i, r := range res {
		out[i] = r.Accepted
	}
	return out, nil
}

// latestParams resolves tx and validates evs for op, returning the store
// parameters stamped with tx's clock. A repeated (Target, Key) is an error.
func latestParams(op string, tx Tx, evs []*LatestEvent) (relaydriver.ExecutorTx, []*relaydriver.LatestUpsertParams, error) {
	ex, clock, err := resolveTx(op, tx)
	if err != nil {
		return nil, nil, err
	}
	now := clock.Now()
	params := make([]*relaydriver.LatestUpsertParams, len(evs))
	type targetKey struct{ target, key string }
	seen := make(map[targetKey]int, len(evs))
	for i, ev := range evs {
		what := op
		if len(evs) > 1 {
			what = fmt.Sprintf("%s: event %d", op, i)
		}
		if ev == nil {
			return nil, nil, fmt.Errorf("relay: %s: nil event", what)
		}
		typ := ev.Type
		if typ == "" {
			typ = relaysink.Upsert
		}
		switch {
		case ev.Target == "":
			return nil, nil, fmt.Errorf("relay: %s: Target is empty", what)
		case typ != relaysink.Upsert && typ != relaysink.Tombstone:
			return nil, nil, fmt.Errorf("relay: %s: Type %q is neither %s nor %s", what, typ, relaysink.Upsert, relaysink.Tombstone)
		case typ == relaysink.Tombstone && ev.Payload != nil:
			return nil, nil, fmt.Errorf("relay: %s: a %s carries no payload", what, relaysink.Tombstone)
		}
		k := targetKey{ev.Target, ev.Key}
		if j, dup := seen[k]; dup {
			return nil, nil, fmt.Errorf("relay: %s: events %d and %d both write %s/%s; pass each key's latest state once",
				op, j, i, ev.Target, ev.Key)
		}
		seen[k] = i
		params[i] = &relaydriver.LatestUpsertParams{
			Target: ev.Target, Topic: ev.Topic, Key: ev.Key, Version: ev.Version, Type: typ,
			Headers: ev.Headers, Payload: ev.Payload, Now: now,
		}
	}
	return ex, params, nil
}
