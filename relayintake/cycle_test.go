package relayintake_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaytype"
)

// countingDriver counts the cursor reads made through the store, outside and
// inside transactions.
type countingDriver struct {
	relaydriver.Driver
	reads atomic.Int64
}

func (d *countingDriver) GetExecutor() relaydriver.Executor {
	return &countingExec{Executor: d.Driver.GetExecutor(), d: d}
}

func (d *countingDriver) Begin(ctx context.Context) (relaydriver.ExecutorTx, error) {
	tx, err := d.Driver.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &countingTx{ExecutorTx: tx, d: d}, nil
}

type countingExec struct {
	relaydriver.Executor
	d *countingDriver
}

func (x *countingExec) CursorGet(ctx context.Context, p string) (*relaytype.Cursor, error) {
	x.d.reads.Add(1)
	return x.Executor.CursorGet(ctx, p)
}

type countingTx struct {
	relaydriver.ExecutorTx
	d *countingDriver
}

func (x *countingTx) CursorGet(ctx context.Context, p string) (*relaytype.Cursor, error) {
	x.d.reads.Add(1)
	return x.ExecutorTx.CursorGet(ctx, p)
}

// A round reads the cursor at most once: the Intake starts from what it last
// read or saved and checks it once inside the saving transaction. A round that
// changes nothing reads none; after a failed round the cursor is read afresh.
func TestCursorReadOncePerRound(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store, func(c *relayintake.Config) { c.BatchSize = 2 })
		b.seed(relayintake.SeedZero)
		cd := &countingDriver{Driver: b.store}
		in := b.newIntake(cd, b.src)
		b.insert(1, 2, 3, 4, 6)

		reads := func(round func()) int64 {
			before := cd.reads.Load()
			round()
			return cd.reads.Load() - before
		}
		run := func() *relayintake.RoundResult {
			res, err := in.RunOnce(b.ctx)
			require.NoError(t, err)
			return res
		}
		var res *relayintake.RoundResult
		require.Equal(t, int64(2), reads(func() { res = run() }), "the first round reads the cursor, then checks it in its transaction")
		require.Equal(t, int64(2), res.Watermark)
		require.Equal(t, int64(1), reads(func() { res = run() }), "3, 4 enqueued: one read, in the transaction")
		require.Equal(t, int64(4), res.Watermark)
		require.Equal(t, int64(1), reads(func() { res = run() }), "the hole at 5 is timed: one read")
		require.Equal(t, int64(5), res.HoleAt)
		require.Equal(t, int64(0), reads(func() { res = run() }), "nothing changed: no read")
		require.Equal(t, int64(5), res.HoleAt)

		// Another writer moves the cursor: the next saving round sees it in its
		// transaction, saves nothing, and the round after reads afresh.
		require.NoError(t, b.store.GetExecutor().CursorSave(b.ctx, &relaydriver.CursorSaveParams{
			Queue: queue, Watermark: 5, Now: t0}))
		b.clock.Advance(delay)
		_, err := in.RunOnce(b.ctx)
		require.ErrorIs(t, err, relayintake.ErrCursorMoved)
		require.Equal(t, int64(5), b.cursor().Watermark)
		require.Equal(t, int64(2), reads(func() { res = run() }), "after a failed round the cursor is read afresh")
		require.Equal(t, int64(6), res.Watermark)
		require.Equal(t, []int64{1, 2, 3, 4, 6}, b.messageIDs())
	})
}

// Notify is called once after each round that committed, never after one that
// wrote nothing or failed.
func TestNotifyAfterCommit(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	b := setup(t, sqliteStore, func(c *relayintake.Config) { c.Notify = func() { n.Add(1) } })
	b.seed(relayintake.SeedZero)

	b.round()
	require.Zero(t, n.Load(), "an empty source: nothing committed")
	b.insert(1, 2)
	b.round()
	require.Equal(t, int64(1), n.Load())
	b.round()
	require.Equal(t, int64(1), n.Load(), "an idle round commits nothing")

	fd := &faultDriver{Driver: b.store, failInsert: true}
	in, err := relayintake.New(fd, b.src, b.cfg)
	require.NoError(t, err)
	b.insert(3)
	_, err = in.RunOnce(b.ctx)
	require.ErrorIs(t, err, errInjected)
	require.Equal(t, int64(1), n.Load(), "a rolled-back round notifies nobody")
}

// An intake wired to the engine's Notify wakes it: an engine whose clock never
// moves (its poll would never come) processes a row the intake enqueued.
func TestIntakeWakesEngine(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store)
		done := make(chan int64, 10)
		e, err := relay.NewEngine(b.store, relay.Config{Queue: queue, Mode: relay.ModeFIFO, Watermarked: true,
			PollInterval: time.Hour, Clock: b.clock, Logger: b.cfg.Logger,
			Handler: relay.HandlerFunc(func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
				done <- d.Message.ID
				return relay.Succeeded()
			})})
		require.NoError(t, err)
		b.cfg.Notify = e.Notify
		in := b.newIntake(b.store, b.src)
		_, err = in.Seed(b.ctx, relayintake.SeedZero)
		require.NoError(t, err)
		require.NoError(t, e.Start(b.ctx))
		t.Cleanup(func() { require.NoError(t, e.Stop(context.Background())) })
		// The engine's first round found nothing; it now waits on the fake clock,
		// which this test never advances.
		require.Eventually(t, func() bool { return b.clock.Waiters() > 0 }, 10*time.Second, time.Millisecond)

		b.insert(1)
		res, err := in.RunOnce(b.ctx)
		require.NoError(t, err)
		require.Equal(t, 1, res.Enqueued)
		select {
		case id := <-done:
			require.Equal(t, int64(1), id)
		case <-time.After(10 * time.Second):
			t.Fatal("the engine did not process the enqueued row: the intake did not wake it")
		}
	})
}

// Stats reports the cursor, the age of the hole being waited for and the
// permanent holes, as rounds move them.
func TestIntakeStats(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store)
		st, err := b.in.Stats(b.ctx)
		require.NoError(t, err)
		require.Nil(t, st.Cursor, "not seeded yet")
		b.seed(relayintake.SeedZero)
		b.insert(1, 3)
		b.round()
		st, err = b.in.Stats(b.ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), st.Cursor.Watermark)
		require.Zero(t, st.PermanentHoles)
		b.clock.Advance(delay / 2)
		st, err = b.in.Stats(b.ctx)
		require.NoError(t, err)
		require.Equal(t, delay/2, st.HoleAge, "the hole at 2 is being waited for")
		b.clock.Advance(delay)
		b.round() // releases the hole: W = 2
		b.round() // then takes 3
		st, err = b.in.Stats(b.ctx)
		require.NoError(t, err)
		require.Equal(t, int64(3), st.Cursor.Watermark)
		require.Equal(t, 1, st.PermanentHoles)
		require.Zero(t, st.HoleAge)
	})
}
