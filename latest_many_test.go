package relay_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaytype"
)

// upsertMany writes evs through UpsertLatestManyTx in a transaction of its own
// and returns which were accepted.
func (b *dispatchBundle) upsertMany(evs ...*relay.LatestEvent) []bool {
	b.t.Helper()
	tx, err := b.d.Begin(b.ctx)
	require.NoError(b.t, err)
	defer tx.Rollback(b.ctx) //nolint:errcheck
	ok, err := relay.UpsertLatestManyTx(b.ctx, tx, evs)
	require.NoError(b.t, err)
	require.NoError(b.t, tx.Commit(b.ctx))
	return ok
}

func latestEv(key string, version int64, payload string) *relay.LatestEvent {
	ev := &relay.LatestEvent{Target: "kafka:msg", Topic: "schd", Key: key, Version: version, Payload: []byte(payload)}
	if payload == "" {
		ev.Type, ev.Payload = relaysink.Tombstone, nil
	}
	return ev
}

// UpsertLatestManyTx applies UpsertLatestTx's rule to each key in one call:
// only forward, a tombstone removes the state, a repeated key or a bad event
// is refused before anything is written, and the dispatcher delivers each
// key's latest state once.
func TestUpsertLatestManyTx(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setupLatest(t, s.open(t, true), relay.DispatcherConfig{})
		require.Equal(t, []bool{true, true}, b.upsertMany(latestEv("a", 5, "a5"), latestEv("b", 1, "b1")))
		require.Equal(t, []bool{false, true, true, true},
			b.upsertMany(latestEv("a", 4, "a4"), latestEv("b", 1, "b1bis"), latestEv("c", 1, ""), latestEv("d", 7, "d7")))
		require.Equal(t, "a5", string(b.latest("a").Payload), "an older version is refused")
		require.Equal(t, "b1bis", string(b.latest("b").Payload), "an equal version is accepted")
		require.Equal(t, relaydriver.OutboxTombstone, b.latest("c").Type)
		require.Empty(t, b.upsertMany(), "no events writes nothing")

		tx, err := b.d.Begin(b.ctx)
		require.NoError(t, err)
		defer tx.Rollback(b.ctx) //nolint:errcheck
		_, err = relay.UpsertLatestManyTx(b.ctx, tx, []*relay.LatestEvent{latestEv("e", 1, "e1"), latestEv("a", 9, "a9"), latestEv("a", 10, "a10")})
		require.ErrorContains(t, err, "kafka:msg/a")
		bad := latestEv("e", 1, "")
		bad.Payload = []byte("x")
		_, err = relay.UpsertLatestManyTx(b.ctx, tx, []*relay.LatestEvent{latestEv("f", 1, "f1"), bad})
		require.ErrorContains(t, err, "carries no payload")
		_, err = relay.UpsertLatestManyTx(b.ctx, tx, []*relay.LatestEvent{nil})
		require.Error(t, err)
		// A bare executor (no transaction) does not compile as a relay.Tx; a
		// Tx the engine did not make is refused at run time.
		_, err = relay.UpsertLatestManyTx(b.ctx, fakeTx{}, []*relay.LatestEvent{latestEv("e", 1, "e1")})
		require.ErrorContains(t, err, "neither a handler's Tx nor a driver's transaction")
		ok, err := relay.UpsertLatestManyTx(b.ctx, tx, []*relay.LatestEvent{latestEv("g", 1, "g1")})
		require.NoError(t, err, "the refused calls wrote nothing and left the transaction usable")
		require.Equal(t, []bool{true}, ok)
		require.NoError(t, tx.Commit(b.ctx))
		for _, k := range []string{"e", "f"} {
			_, err = b.d.GetExecutor().LatestGet(b.ctx, "kafka:msg", k)
			require.ErrorIs(t, err, relaytype.ErrNotFound, k)
		}
		require.Equal(t, int64(5), b.latest("a").Version)

		require.Equal(t, 5, b.work())
		require.Equal(t, map[string][]string{"a": {"5:a5"}, "b": {"1:b1bis"}, "c": {"1:"}, "d": {"7:d7"}, "g": {"1:g1"}}, b.sink.byKey())
	})
}

// In a handler the states commit with the message's terminal state, stamped
// with the engine's clock, and roll back with a Retry.
func TestUpsertLatestManyTxInHandler(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var c calls
		b := setup(t, s, relay.Config{Handler: relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
			id := d.Message.ID
			if _, err := relay.UpsertLatestManyTx(ctx, tx, []*relay.LatestEvent{
				{Target: "kafka:schd", Key: "k" + itoa(id), Version: id, Payload: []byte(itoa(id))},
				{Target: "kafka:schd", Key: "shared", Version: id, Payload: []byte(itoa(id))},
			}); err != nil {
				return relay.Retry(relaytype.ClassInternal, err)
			}
			if id == 2 && c.add(id) == 1 {
				return relay.Retry(relaytype.ClassInfra, context.DeadlineExceeded)
			}
			return relay.Succeeded()
		})})
		b.enqueue(1, 2)
		b.work()
		ex := b.d.GetExecutor()
		r, err := ex.LatestGet(b.ctx, "kafka:schd", "k1")
		require.NoError(t, err)
		require.True(t, t0.Equal(r.UpdatedAt), "updated_at from the engine's clock")
		_, err = ex.LatestGet(b.ctx, "kafka:schd", "k2")
		require.ErrorIs(t, err, relaytype.ErrNotFound, "rolled back with the Retry")
		r, err = ex.LatestGet(b.ctx, "kafka:schd", "shared")
		require.NoError(t, err)
		require.Equal(t, int64(1), r.Version)
	})
}
