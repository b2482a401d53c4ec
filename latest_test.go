package relay_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaytype"
)

// setupLatest is setupDispatch with a dispatcher of latest-state rows.
func setupLatest(t *testing.T, d relaydriver.Driver, cfg relay.DispatcherConfig) *dispatchBundle {
	t.Helper()
	cfg.Kind = relay.DispatchLatest
	return setupDispatch(t, d, cfg)
}

// upsert writes key's state at version through the engine API in a
// transaction of its own and returns whether it was accepted. An empty
// payload writes a tombstone.
func (b *dispatchBundle) upsert(key string, version int64, payload string) bool {
	b.t.Helper()
	tx, err := b.d.Begin(b.ctx)
	require.NoError(b.t, err)
	defer tx.Rollback(b.ctx) //nolint:errcheck
	ev := &relay.LatestEvent{Target: "kafka:msg", Topic: "schd", Key: key, Version: version,
		Headers: map[string]string{"h": "v"}, Payload: []byte(payload)}
	if payload == "" {
		ev.Type, ev.Payload = relaysink.Tombstone, nil
	}
	ok, err := relay.UpsertLatestTx(b.ctx, tx, ev)
	require.NoError(b.t, err)
	require.NoError(b.t, tx.Commit(b.ctx))
	return ok
}

func (b *dispatchBundle) latest(key string) *relaydriver.LatestRecord {
	b.t.Helper()
	r, err := b.d.GetExecutor().LatestGet(b.ctx, "kafka:msg", key)
	require.NoError(b.t, err)
	return r
}

// Only forward through the engine API: an older version is refused, an equal
// one accepted; a rolled-back write leaves nothing; the handler's Tx works and
// its rollback (Retry) discards the write.
func TestUpsertLatestTxOnlyForward(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setupLatest(t, s.open(t, true), relay.DispatcherConfig{})
		require.True(t, b.upsert("a", 5, "a5"))
		require.False(t, b.upsert("a", 4, "a4"), "older version refused")
		require.Equal(t, "a5", string(b.latest("a").Payload))
		require.True(t, b.upsert("a", 5, "a5bis"), "equal version accepted")
		require.Equal(t, "a5bis", string(b.latest("a").Payload))

		tx, err := b.d.Begin(b.ctx)
		require.NoError(t, err)
		ok, err := relay.UpsertLatestTx(b.ctx, tx, &relay.LatestEvent{Target: "kafka:msg", Key: "b", Version: 9, Payload: []byte("b9")})
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, tx.Rollback(b.ctx))
		_, err = b.d.GetExecutor().LatestGet(b.ctx, "kafka:msg", "b")
		require.ErrorIs(t, err, relaytype.ErrNotFound, "rolled back with its transaction")

		_, err = relay.UpsertLatestTx(b.ctx, fakeTx{}, &relay.LatestEvent{Target: "kafka:msg", Key: "x"})
		require.ErrorContains(t, err, "neither a handler's Tx nor a driver's transaction")
		tx, err = b.d.Begin(b.ctx)
		require.NoError(t, err)
		_, err = relay.UpsertLatestTx(b.ctx, tx, &relay.LatestEvent{Target: "kafka:msg", Key: "x", Type: relaysink.Tombstone, Payload: []byte("p")})
		require.Error(t, err, "a tombstone carries no payload")
		_, err = relay.UpsertLatestTx(b.ctx, tx, &relay.LatestEvent{Key: "x"})
		require.Error(t, err, "Target is required")
		require.NoError(t, tx.Rollback(b.ctx))
	})
}

// In a handler the write commits with the message's terminal state and is
// rolled back with a Retry; updated_at is the engine's clock.
func TestUpsertLatestTxInHandler(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var (
			mu    sync.Mutex
			fails = map[int64]bool{2: true}
		)
		b := setup(t, s, relay.Config{Handler: relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
			id := d.Message.ID
			if _, err := relay.UpsertLatestTx(ctx, tx, &relay.LatestEvent{Target: "kafka:schd", Key: "k" + itoa(id),
				Version: id, Payload: []byte(itoa(id))}); err != nil {
				return relay.Retry(relaytype.ClassInternal, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if fails[id] {
				fails[id] = false
				return relay.Retry(relaytype.ClassInfra, errors.New("try again"))
			}
			return relay.Succeeded()
		})})
		b.enqueue(1, 2)
		b.work()
		r, err := b.d.GetExecutor().LatestGet(b.ctx, "kafka:schd", "k1")
		require.NoError(t, err)
		require.True(t, t0.Equal(r.UpdatedAt), "updated_at from the engine's clock")
		_, err = b.d.GetExecutor().LatestGet(b.ctx, "kafka:schd", "k2")
		require.ErrorIs(t, err, relaytype.ErrNotFound, "rolled back with the Retry")
	})
}

// Several upserts of a key before a round are delivered once, as the last
// state: ID target/key/generation, Seq = version, in one Publish.
func TestLatestDispatcherSendsLatestOnly(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setupLatest(t, s.open(t, true), relay.DispatcherConfig{})
		b.upsert("a", 1, "a1")
		b.upsert("a", 2, "a2")
		b.upsert("b", 7, "b7")
		b.upsert("a", 3, "a3")
		b.upsert("a", 2, "late")
		require.Equal(t, 2, b.work())
		require.Equal(t, 1, b.sink.callCount(), "one Publish per batch")
		require.Equal(t, map[string][]string{"a": {"3:a3"}, "b": {"7:b7"}}, b.sink.byKey())
		a := b.latest("a")
		require.Equal(t, relaydriver.OutboxSent, a.State)
		require.True(t, t0.Equal(a.SentAt))
		ev := b.sink.calls[0][0]
		require.Equal(t, "kafka:msg/a/"+itoa(a.Generation), ev.ID)
		require.Equal(t, "schd", ev.Topic)
		require.Equal(t, relaysink.Upsert, ev.Type)
		require.Equal(t, map[string]string{"h": "v"}, ev.Headers)
		require.Zero(t, b.work(), "nothing left")
		require.Equal(t, 2.0, b.metric("relay_outbox_events_total", "sent"))
		require.Equal(t, 0.0, b.metric("relay_outbox_pending", ""))
	})
}

// Conditional marking: a newer version written while the sink publishes is
// not marked by that round and is delivered by the next one.
func TestLatestDispatcherRewriteDuringPublish(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setupLatest(t, s.open(t, true), relay.DispatcherConfig{})
		b.upsert("a", 1, "a1")
		b.upsert("b", 1, "b1")
		var once sync.Once
		b.sink.onPublish = func([]relaysink.Event) {
			once.Do(func() { require.True(t, b.upsert("a", 2, "a2")) })
		}
		require.Equal(t, 3, b.work())
		require.Equal(t, 2, b.sink.callCount())
		require.Len(t, b.sink.calls[1], 1, "only the rewritten key goes again")
		require.Equal(t, map[string][]string{"a": {"1:a1", "2:a2"}, "b": {"1:b1"}}, b.sink.byKey())
		a := b.latest("a")
		require.Equal(t, relaydriver.OutboxSent, a.State)
		require.Equal(t, int64(2), a.Version)
		require.Equal(t, "kafka:msg/a/"+itoa(a.Generation), b.sink.calls[1][0].ID)
		require.NotEqual(t, b.sink.calls[0][0].ID, b.sink.calls[1][0].ID, "a new generation is a new event id")
	})
}

// A failing row retries with backoff and turns DEAD at MaxAttempts; a new
// generation of the key makes it PENDING again and it is delivered.
func TestLatestDispatcherDeadThenNewGeneration(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setupLatest(t, s.open(t, true), relay.DispatcherConfig{MaxAttempts: 2, Backoff: []time.Duration{time.Second}})
		b.upsert("a", 1, "a1")
		b.upsert("b", 1, "b1")
		b.sink.setFail(func(ev relaysink.Event) error {
			if ev.Key == "a" {
				return errors.New("rejected")
			}
			return nil
		})
		require.Equal(t, 2, b.work())
		require.Zero(t, b.work(), "a waits for its backoff")
		b.clock.Advance(time.Second)
		require.Equal(t, 1, b.work())
		a := b.latest("a")
		require.Equal(t, relaydriver.OutboxDead, a.State)
		require.Equal(t, 2, a.Attempts)
		require.Equal(t, "rejected", a.LastError)
		require.Equal(t, 1.0, b.metric("relay_outbox_events_total", "dead"))
		require.Equal(t, 1.0, b.metric("relay_outbox_events_total", "retry"))

		b.sink.setFail(nil)
		require.Zero(t, b.work(), "DEAD stays")
		require.True(t, b.upsert("a", 2, "a2"))
		a = b.latest("a")
		require.Equal(t, relaydriver.OutboxPending, a.State)
		require.Zero(t, a.Attempts)
		require.Empty(t, a.LastError)
		require.Equal(t, 1, b.work())
		require.Equal(t, []string{"2:a2"}, b.sink.byKey()["a"])
		require.Equal(t, relaydriver.OutboxSent, b.latest("a").State)
	})
}

// A tombstone is delivered with a nil payload and type Tombstone.
func TestLatestDispatcherTombstone(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setupLatest(t, s.open(t, true), relay.DispatcherConfig{})
		b.upsert("a", 1, "a1")
		require.Equal(t, 1, b.work())
		require.True(t, b.upsert("a", 2, ""))
		require.Equal(t, 1, b.work())
		ev := b.sink.calls[1][0]
		require.Equal(t, relaysink.Tombstone, ev.Type)
		require.Nil(t, ev.Payload)
		require.Equal(t, int64(2), ev.Seq)
		require.Equal(t, relaydriver.OutboxSent, b.latest("a").State)
	})
}

// Kind is validated.
func TestDispatcherKindValidated(t *testing.T) {
	t.Parallel()
	_, err := relay.NewDispatcher(openSQLite(t, false), &recSink{}, relay.DispatcherConfig{Target: "t", Kind: "bogus"})
	require.ErrorContains(t, err, "DispatcherConfig.Kind")
}
