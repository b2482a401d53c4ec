package relay_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
)

// ownTx is a transaction the caller began with its driver's own API, and
// the same transaction as the engine's type (WrapTx).
type ownTx struct {
	wrapped          relay.Tx
	exec             func(sql string) error
	commit, rollback func() error
}

func beginOwn(t *testing.T, ctx context.Context, d relaydriver.Driver) ownTx {
	t.Helper()
	switch d := d.(type) {
	case *relaypgx.Driver:
		ptx, err := d.Pool().Begin(ctx)
		require.NoError(t, err)
		return ownTx{wrapped: d.WrapTx(ptx),
			exec:     func(sql string) error { _, err := ptx.Exec(ctx, sql); return err },
			commit:   func() error { return ptx.Commit(ctx) },
			rollback: func() error { return ptx.Rollback(ctx) }}
	case *relaysqlite.Driver:
		stx, err := d.DB().BeginTx(ctx, nil)
		require.NoError(t, err)
		return ownTx{wrapped: d.WrapTx(stx),
			exec:     func(sql string) error { _, err := stx.ExecContext(ctx, sql); return err },
			commit:   stx.Commit,
			rollback: stx.Rollback}
	}
	t.Fatalf("unknown driver %T", d)
	return ownTx{}
}

// TestEnqueueInTheCallersOwnTransaction: a transaction the caller began with
// pgx or database/sql carries its own write, a message and an outbox event;
// a rollback leaves none of the three, a commit all of them.
func TestEnqueueInTheCallersOwnTransaction(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		d := s.open(t, true)
		b := setupOn(t, d, relay.Config{})
		ctx := b.ctx
		_, err := d.GetExecutor().Exec(ctx, "CREATE TABLE own_row (id INTEGER PRIMARY KEY)")
		require.NoError(t, err)
		countOwn := func() int {
			var n int
			require.NoError(t, d.GetExecutor().QueryRow(ctx, "SELECT count(*) FROM own_row").Scan(&n))
			return n
		}
		write := func(tx ownTx, id string) {
			require.NoError(t, tx.exec("INSERT INTO own_row (id) VALUES ("+id+")"))
			res, err := b.engine.EnqueueTx(ctx, tx.wrapped, &relay.EnqueueParams{Identity: "order-" + id})
			require.NoError(t, err)
			require.False(t, res[0].Duplicate)
			ev, err := relay.AppendEventsTx(ctx, tx.wrapped, &relay.OutboxEvent{ID: "ev-" + id, Target: "t", Key: "k"})
			require.NoError(t, err)
			require.Len(t, ev, 1)
		}

		tx := beginOwn(t, ctx, d)
		write(tx, "1")
		require.NoError(t, tx.rollback())
		st, err := b.engine.Stats(ctx)
		require.NoError(t, err)
		require.Zero(t, st.Backlog())
		require.Zero(t, countOwn())
		ob, err := d.GetExecutor().OutboxStats(ctx, "t")
		require.NoError(t, err)
		require.Zero(t, ob.Pending)

		tx = beginOwn(t, ctx, d)
		write(tx, "2")
		require.NoError(t, tx.commit())
		st, err = b.engine.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), st.Backlog())
		require.Equal(t, 1, countOwn())
		ob, err = d.GetExecutor().OutboxStats(ctx, "t")
		require.NoError(t, err)
		require.Equal(t, int64(1), ob.Pending)
	})
}

// fakeTx implements relay.Tx without being any driver's transaction.
type fakeTx struct{ relaydriver.Querier }

func (fakeTx) Unwrap() any { return nil }

// TestTypedTransactionAccess: a handler reaches its driver's own transaction
// through the driver's typed accessor; another driver's accessor and a Tx the
// engine did not make are refused with clear errors.
func TestTypedTransactionAccess(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		d := s.open(t, true)
		var pgErr, sqliteErr error
		var typed any
		b := setupOn(t, d, relay.Config{Handler: relay.HandlerFunc(func(_ context.Context, tx relay.Tx, _ *relay.Delivery) relay.Result {
			var ptxErr, stxErr error
			if ptx, err := relaypgx.PgxTx(tx); err == nil {
				typed = ptx
			} else {
				ptxErr = err
			}
			if stx, err := relaysqlite.SQLTx(tx); err == nil {
				typed = stx
			} else {
				stxErr = err
			}
			pgErr, sqliteErr = ptxErr, stxErr
			return relay.Succeeded()
		})})
		_, err := b.engine.Enqueue(b.ctx, &relay.EnqueueParams{})
		require.NoError(t, err)
		require.Equal(t, 1, b.work())
		require.NotNil(t, typed)
		switch s.name {
		case "postgres":
			require.NoError(t, pgErr)
			require.True(t, errors.Is(sqliteErr, relaysqlite.ErrNotSQLite), "%v", sqliteErr)
		case "sqlite":
			require.NoError(t, sqliteErr)
			require.True(t, errors.Is(pgErr, relaypgx.ErrNotPgx), "%v", pgErr)
		}

		_, err = b.engine.EnqueueTx(b.ctx, fakeTx{}, &relay.EnqueueParams{})
		require.ErrorContains(t, err, "neither a handler's Tx nor a driver's transaction")
		_, err = relay.AppendEventsTx(b.ctx, nil, &relay.OutboxEvent{ID: "x", Target: "t"})
		require.ErrorContains(t, err, "nil transaction")
	})
}
