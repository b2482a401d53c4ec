package relay_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaytype"
)

// TestProducerOnlyEngine: an engine without a Handler is made by New and
// enqueues, replays and reports stats; Start and Work refuse with
// ErrNoHandler. An engine with a handler on the same store processes what
// it enqueued.
func TestProducerOnlyEngine(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		d := s.open(t, true)
		producer := setupOn(t, d, relay.Config{})
		ctx := producer.ctx

		err := producer.engine.Start(ctx)
		require.ErrorIs(t, err, relay.ErrNoHandler)
		require.EqualError(t, err, `relay: Start queue "p": Config.Handler is nil; this engine only enqueues`)
		require.NoError(t, producer.engine.Stop(ctx), "never started")
		n, err := producer.engine.Work(ctx)
		require.ErrorIs(t, err, relay.ErrNoHandler)
		require.Contains(t, err.Error(), `relay: Work queue "p"`)
		require.Zero(t, n)

		res, err := producer.engine.Enqueue(ctx,
			&relay.EnqueueParams{Identity: "A", Payload: []byte("a")},
			&relay.EnqueueParams{Identity: "A"},
			&relay.EnqueueParams{Payload: []byte("b")},
		)
		require.NoError(t, err)
		require.Equal(t, []bool{false, true, false}, duplicates(res))
		tx, err := d.Begin(ctx)
		require.NoError(t, err)
		inTx, err := producer.engine.EnqueueTx(ctx, tx, &relay.EnqueueParams{Payload: []byte("c")})
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		st, err := producer.engine.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(3), st.Backlog())
		replayed, err := producer.engine.Replay(ctx, &relay.ReplayParams{Classes: []relaytype.ErrorClass{relaytype.ClassInfra}})
		require.NoError(t, err)
		require.Zero(t, replayed)
		require.Equal(t, relaytype.StatePending, producer.state(res[0].ID), "Work processed nothing")

		var c calls
		consumer := setupOn(t, d, relay.Config{Handler: relay.HandlerFunc(func(_ context.Context, _ relay.Tx, dl *relay.Delivery) relay.Result {
			c.add(dl.Message.ID)
			return relay.Succeeded()
		})})
		require.Equal(t, 3, consumer.work())
		require.Equal(t, []int64{res[0].ID, res[2].ID, inTx[0].ID}, c.get())
		st, err = producer.engine.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(3), st.Counts[relaytype.StateSucceeded])
	})
}
