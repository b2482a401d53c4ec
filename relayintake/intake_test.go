package relayintake_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaysource"
	"github.com/relayhq/relay/relaytype"
)

// W advances over contiguous ids and every row up to it
// is enqueued with its key, payload and received-at; an idle round writes nothing.
func TestContiguousAdvance(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store)
		b.seed(relayintake.SeedZero)
		b.insert(1, 2, 3, 4, 5)

		res := b.round()
		require.Equal(t, 5, res.Read)
		require.Equal(t, 5, res.Enqueued)
		require.Equal(t, int64(0), res.PreviousWatermark)
		require.Equal(t, int64(5), res.Watermark)
		require.Zero(t, res.HoleAt)
		require.False(t, res.More, "batch not full")
		require.Equal(t, int64(0), res.Lag)
		require.Equal(t, span(1, 5), b.messageIDs())
		c := b.cursor()
		require.Equal(t, int64(5), c.Watermark)
		require.True(t, c.HoleSince.IsZero())

		m, err := b.store.GetExecutor().MessageGet(b.ctx, queue, 2)
		require.NoError(t, err)
		require.Equal(t, relaytype.StatePending, m.State)
		require.Equal(t, "FL2", m.Key)
		require.Equal(t, payloadOf(2), m.Payload)
		requireTime(t, t0.Add(-2*time.Second), m.ReceivedAt, "received-at copied from the source")
		requireTime(t, t0, m.EnqueuedAt, "enqueued-at from the injected clock")

		// An idle round neither enqueues nor writes the cursor.
		b.clock.Advance(time.Hour)
		res = b.round()
		require.Equal(t, 0, res.Read)
		require.Equal(t, int64(5), res.Watermark)
		requireTime(t, c.UpdatedAt, b.cursor().UpdatedAt, "idle round must not write")
	})
}

// A round reads at most BatchSize rows; a full batch
// reports More and the lag counts what is left.
func TestBatchBound(t *testing.T) {
	t.Parallel()
	b := setup(t, sqliteStore, func(c *relayintake.Config) { c.BatchSize = 3 })
	b.seed(relayintake.SeedZero)
	b.insert(span(1, 7)...)

	res := b.round()
	require.Equal(t, 3, res.Read)
	require.Equal(t, int64(3), res.Watermark)
	require.True(t, res.More)
	require.Equal(t, int64(4), res.Lag, "source max 7 − W 3")
	require.Equal(t, span(1, 3), b.messageIDs())

	res = b.round()
	require.Equal(t, int64(6), res.Watermark)
	require.True(t, res.More)

	res = b.round()
	require.Equal(t, 1, res.Read)
	require.Equal(t, int64(7), res.Watermark)
	require.False(t, res.More)
	require.Equal(t, span(1, 7), b.messageIDs())
}

// While a hole is younger than the max commit delay, W
// stops before it and nothing after it is enqueued.
func TestYoungHoleBlocks(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store)
		b.seed(relayintake.SeedZero)
		b.insert(1, 2, 4, 5)

		res := b.round()
		require.Equal(t, int64(2), res.Watermark)
		require.Equal(t, 2, res.Enqueued)
		require.Equal(t, int64(3), res.HoleAt)
		requireTime(t, t0, res.HoleSince)
		require.False(t, res.More)
		requireTime(t, t0, b.cursor().HoleSince, "holeSince persisted")
		require.Equal(t, []int64{1, 2}, b.messageIDs())

		b.clock.Advance(delay - time.Nanosecond)
		res = b.round()
		require.Equal(t, int64(2), res.Watermark)
		require.Equal(t, 0, res.Enqueued)
		requireTime(t, t0, res.HoleSince, "timed from the first observation")
		requireTime(t, t0, b.cursor().HoleSince)
		require.Equal(t, []int64{1, 2}, b.messageIDs(), "rows after a young hole are never enqueued")
		_, err := b.store.GetExecutor().MessageGet(b.ctx, queue, 4)
		require.ErrorIs(t, err, relaytype.ErrNotFound)
		require.Empty(t, b.holes())

		// The late row commits in time: everything is enqueued in order, timer cleared.
		b.insert(3)
		res = b.round()
		require.Equal(t, int64(5), res.Watermark)
		require.Equal(t, 3, res.Enqueued)
		require.Zero(t, res.HoleAt)
		require.True(t, b.cursor().HoleSince.IsZero())
		require.Equal(t, span(1, 5), b.messageIDs())
		require.Empty(t, b.holes())
		require.Equal(t, 0.0, metricValue(t, b, "relay_permanent_holes_total"))
	})
}

// holeSince is persisted, so a restarted intake keeps the
// timing instead of starting the wait again.
func TestHoleSinceSurvivesRestart(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store)
		b.seed(relayintake.SeedZero)
		b.insert(2, 3)
		require.Equal(t, int64(1), b.round().HoleAt)

		b.clock.Advance(delay / 2)
		restarted := b.newIntake(b.store, b.src)
		res, err := restarted.RunOnce(b.ctx)
		require.NoError(t, err)
		requireTime(t, t0, res.HoleSince, "the restart keeps the first observation")
		require.Zero(t, res.ReleasedFirst)

		b.clock.Advance(delay / 2)
		res, err = restarted.RunOnce(b.ctx)
		require.NoError(t, err)
		require.Equal(t, int64(1), res.ReleasedFirst, "released one full delay after the first observation, not after the restart")
		holes := b.holes()
		require.Len(t, holes, 1)
		requireTime(t, t0, holes[0].FirstSeenAt)
		requireTime(t, t0.Add(delay), holes[0].ReleasedAt)
	})
}

// An aged hole is released, logged and counted; the
// release skips only the hole itself and never an existing row.
func TestReleaseSkipsOnlyTheHole(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store)
		b.seed(relayintake.SeedZero)
		b.insert(1, 2, 5, 6)
		require.Equal(t, int64(3), b.round().HoleAt)

		b.clock.Advance(delay)
		res := b.round()
		require.Equal(t, int64(3), res.ReleasedFirst)
		require.Equal(t, int64(4), res.ReleasedLast)
		require.Equal(t, int64(4), res.Watermark, "W = first row after the hole − 1: row 5 is not skipped")
		require.Equal(t, 0, res.Enqueued)
		require.Zero(t, res.HoleAt)
		require.True(t, res.More, "the rows after the hole can be enqueued at once")
		c := b.cursor()
		require.Equal(t, int64(4), c.Watermark)
		require.True(t, c.HoleSince.IsZero(), "holeSince cleared on release")

		require.Equal(t, []int64{3, 4}, b.holeIDs())
		for _, h := range b.holes() {
			requireTime(t, t0, h.FirstSeenAt)
			requireTime(t, t0.Add(delay), h.ReleasedAt)
		}
		require.Equal(t, 2.0, metricValue(t, b, "relay_permanent_holes_total"))
		require.Contains(t, b.logs.String(), "permanent hole released")

		res = b.round()
		require.Equal(t, int64(6), res.Watermark)
		require.Equal(t, 2, res.Enqueued)
		require.Equal(t, []int64{1, 2, 5, 6}, b.messageIDs())
		// Nothing lost: every id up to W is a message or a logged hole.
		require.ElementsMatch(t, span(1, 6), append(b.messageIDs(), b.holeIDs()...))
	})
}

// Each round resolves at most one hole, and a second hole
// is timed from its own first observation.
func TestTwoHolesOnePerRound(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store)
		b.seed(relayintake.SeedZero)
		b.insert(2, 3, 5, 6) // holes at 1 and 4
		res := b.round()
		require.Equal(t, int64(1), res.HoleAt)
		require.Equal(t, int64(0), res.Watermark)

		b.clock.Advance(delay)
		res = b.round()
		require.Equal(t, int64(1), res.ReleasedFirst)
		require.Equal(t, int64(1), res.ReleasedLast)
		require.Equal(t, int64(1), res.Watermark, "hole 4 is not touched in the same round")
		require.Empty(t, b.messageIDs())

		res = b.round()
		require.Equal(t, int64(3), res.Watermark)
		require.Equal(t, []int64{2, 3}, b.messageIDs())
		require.Equal(t, int64(4), res.HoleAt)
		requireTime(t, t0.Add(delay), res.HoleSince, "the second hole is timed from its own first observation")

		b.clock.Advance(delay - time.Nanosecond)
		res = b.round()
		require.Zero(t, res.ReleasedFirst, "the second hole waits its own full delay")
		require.Equal(t, int64(3), res.Watermark)

		b.clock.Advance(time.Nanosecond)
		res = b.round()
		require.Equal(t, int64(4), res.ReleasedFirst)
		res = b.round()
		require.Equal(t, int64(6), res.Watermark)
		require.Equal(t, []int64{2, 3, 5, 6}, b.messageIDs())
		require.Equal(t, []int64{1, 4}, b.holeIDs())
		require.Equal(t, 2.0, metricValue(t, b, "relay_permanent_holes_total"))
	})
}

// A new hole after an old one was filled does not inherit the old
// wait.
func TestNewHoleAfterFilledHoleTimedAfresh(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store)
		b.seed(relayintake.SeedZero)
		b.insert(1, 3) // hole at 2
		res := b.round()
		require.Equal(t, int64(2), res.HoleAt)
		requireTime(t, t0, res.HoleSince)

		b.clock.Advance(delay - 10*time.Second)
		b.insert(2, 5) // hole 2 filled late; a new hole at 4
		res = b.round()
		require.Equal(t, int64(3), res.Watermark)
		require.Equal(t, int64(4), res.HoleAt)
		t1 := t0.Add(delay - 10*time.Second)
		requireTime(t, t1, res.HoleSince)
		requireTime(t, t1, b.cursor().HoleSince)

		b.clock.Advance(10 * time.Second) // the old hole's age would now be ≥ delay
		res = b.round()
		require.Zero(t, res.ReleasedFirst, "the new hole is young")
		require.Equal(t, int64(3), res.Watermark)

		b.clock.Set(t1.Add(delay))
		require.Equal(t, int64(4), b.round().ReleasedFirst)
	})
}

// An unreadable source never moves W nor its hole timer,
// even when the hole would have aged out meanwhile.
func TestUnreadableSourceNeverMovesW(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store)
		b.seed(relayintake.SeedZero)
		b.insert(1, 3)
		b.round()
		before := b.cursor()
		require.Equal(t, int64(1), before.Watermark)

		_, err := b.foreign.Exec(`ALTER TABLE CMINMSGS RENAME TO CMINMSGS_AWAY`)
		require.NoError(t, err)
		b.clock.Advance(2 * delay)
		res, err := b.in.RunOnce(b.ctx)
		require.Error(t, err)
		require.Nil(t, res)
		require.ErrorContains(t, err, "watermark unchanged")
		after := b.cursor()
		require.Equal(t, before.Watermark, after.Watermark)
		requireTime(t, before.HoleSince, after.HoleSince)
		requireTime(t, before.UpdatedAt, after.UpdatedAt, "nothing written")
		require.Empty(t, b.holes(), "an unreadable source releases no hole")
		require.Equal(t, 1.0, metricValue(t, b, "relay_intake_errors_total"))

		// Readable again: the aged hole is released now.
		_, err = b.foreign.Exec(`ALTER TABLE CMINMSGS_AWAY RENAME TO CMINMSGS`)
		require.NoError(t, err)
		require.Equal(t, int64(2), b.round().ReleasedFirst)

		// A closed source database is an error too, never "no rows".
		require.NoError(t, b.foreign.Close())
		_, err = b.in.RunOnce(b.ctx)
		require.Error(t, err)
		require.Equal(t, int64(2), b.cursor().Watermark)
	})
}

// Rows already enqueued (another writer
// enqueued above W) are skipped by insert-if-absent without error, and W
// still advances over them.
func TestInsertIfAbsent(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store)
		b.seed(relayintake.SeedZero)
		compat, err := b.store.GetExecutor().MessageInsertMany(b.ctx, []*relaydriver.MessageInsertParams{
			{Queue: queue, ID: 2, Payload: []byte("from compat"), Now: t0},
			{Queue: queue, ID: 7, Payload: []byte("from compat"), Now: t0},
		})
		require.NoError(t, err)
		require.Equal(t, 2, compat.Inserted)

		b.insert(span(1, 5)...)
		res := b.round()
		require.Equal(t, int64(5), res.Watermark)
		require.Equal(t, 4, res.Enqueued, "the row already present is not counted")
		m, err := b.store.GetExecutor().MessageGet(b.ctx, queue, 2)
		require.NoError(t, err)
		require.Equal(t, []byte("from compat"), m.Payload, "the existing message is untouched")

		b.insert(6, 7)
		res = b.round()
		require.Equal(t, int64(7), res.Watermark)
		require.Equal(t, 1, res.Enqueued)
		require.Equal(t, span(1, 7), b.messageIDs())
		require.Equal(t, 5.0, metricValue(t, b, "relay_intake_rows_total"))
	})
}

// Inserts, hole log and cursor save are one transaction —
// any failure inside it leaves no message, no hole and the old cursor.
func TestOneTransaction(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store)
		fd := &faultDriver{Driver: b.store}
		in := b.newIntake(fd, b.src)
		b.seed(relayintake.SeedZero)
		b.insert(1, 2, 3)

		fd.failCursorSave = true
		_, err := in.RunOnce(b.ctx)
		require.ErrorIs(t, err, errInjected)
		require.Empty(t, b.messageIDs(), "no insert survives a failed cursor save")
		require.Equal(t, int64(0), b.cursor().Watermark)

		fd.failCursorSave, fd.failInsert = false, true
		_, err = in.RunOnce(b.ctx)
		require.ErrorIs(t, err, errInjected)
		require.Equal(t, int64(0), b.cursor().Watermark)

		fd.failInsert = false
		require.Equal(t, int64(3), must(in.RunOnce(b.ctx)).Watermark)

		// A hole release whose log row fails moves nothing.
		b.insert(5)
		require.Equal(t, int64(4), must(in.RunOnce(b.ctx)).HoleAt)
		b.clock.Advance(delay)
		fd.failHole = true
		_, err = in.RunOnce(b.ctx)
		require.ErrorIs(t, err, errInjected)
		c := b.cursor()
		require.Equal(t, int64(3), c.Watermark)
		requireTime(t, t0, c.HoleSince)
		require.Empty(t, b.holes())

		// The same failure at cursor save rolls the hole log back too.
		fd.failHole, fd.failCursorSave = false, true
		_, err = in.RunOnce(b.ctx)
		require.ErrorIs(t, err, errInjected)
		require.Empty(t, b.holes())
		require.Equal(t, int64(3), b.cursor().Watermark)

		fd.failCursorSave = false
		require.Equal(t, int64(4), must(in.RunOnce(b.ctx)).ReleasedFirst)
		require.Equal(t, []int64{4}, b.holeIDs())
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// No cursor means no intake; seeding is never implied.
func TestNotSeeded(t *testing.T) {
	t.Parallel()
	b := setup(t, sqliteStore)
	b.insert(1, 2)
	_, err := b.in.RunOnce(b.ctx)
	require.ErrorIs(t, err, relayintake.ErrNotSeeded)
	require.ErrorContains(t, err, queue)
	require.ErrorIs(t, b.in.Run(b.ctx), relayintake.ErrNotSeeded, "Run stops: seeding is the operator's decision")
	_, err = b.store.GetExecutor().CursorGet(b.ctx, queue)
	require.ErrorIs(t, err, relaytype.ErrNotFound, "no cursor is created implicitly")
	require.Empty(t, b.messageIDs())
}

// The four cutover modes.
func TestSeedModes(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		for _, tc := range []struct {
			mode     string
			want     int64
			recorded string
			enqueued []int64 // after one round
			holeAt   int64
		}{
			{mode: "min", want: 4, recorded: "min", enqueued: span(5, 9)},
			{mode: "zero", want: 0, recorded: "zero", enqueued: []int64{}, holeAt: 1},
			{mode: "max", want: 9, recorded: "max", enqueued: []int64{}},
			{mode: "7", want: 7, recorded: "id", enqueued: []int64{8, 9}},
		} {
			t.Run(tc.mode, func(t *testing.T) {
				b := setup(t, store)
				b.insert(span(5, 9)...)
				b.clock.Advance(time.Hour)
				w, err := b.in.Seed(b.ctx, tc.mode)
				require.NoError(t, err)
				require.Equal(t, tc.want, w)
				c := b.cursor()
				require.Equal(t, tc.want, c.Watermark)
				require.Equal(t, tc.recorded, c.SeedMode)
				requireTime(t, t0.Add(time.Hour), c.SeededAt)
				require.True(t, c.HoleSince.IsZero())
				require.Equal(t, float64(tc.want), metricValue(t, b, "relay_watermark"))

				res := b.round()
				require.Equal(t, tc.enqueued, b.messageIDs())
				require.Equal(t, tc.holeAt, res.HoleAt, "zero treats the missing 1..4 as a hole")

				// Re-seeding is refused once a watermark exists.
				_, err = b.in.Seed(b.ctx, "min")
				require.ErrorIs(t, err, relaytype.ErrSeedRefused)
				require.Equal(t, res.Watermark, b.cursor().Watermark)
			})
		}
	})
}

func TestSeedEmptySourceAndRefusals(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		for _, mode := range []string{"min", "max"} {
			b := setup(t, store)
			require.Equal(t, int64(0), b.seed(mode), "an empty source seeds W=0")
			require.Equal(t, mode, b.cursor().SeedMode)
		}

		// An upgraded instance (messages but no cursor) is never seeded.
		b := setup(t, store)
		_, err := b.store.GetExecutor().MessageInsertMany(b.ctx, []*relaydriver.MessageInsertParams{{Queue: queue, ID: 3, Now: t0}})
		require.NoError(t, err)
		_, err = b.in.Seed(b.ctx, "zero")
		require.ErrorIs(t, err, relaytype.ErrSeedRefused)
		_, err = b.store.GetExecutor().CursorGet(b.ctx, queue)
		require.ErrorIs(t, err, relaytype.ErrNotFound)

		// Bad modes are refused before anything is stored.
		b = setup(t, store)
		for _, mode := range []string{"", "MIN", "-1", "1.5", "abc", "max "} {
			_, err := b.in.Seed(b.ctx, mode)
			require.ErrorContains(t, err, "not min, zero, max", "mode %q", mode)
		}
		_, err = b.store.GetExecutor().CursorGet(b.ctx, queue)
		require.ErrorIs(t, err, relaytype.ErrNotFound)

		// An unreadable source cannot seed min/max.
		_, err = b.foreign.Exec(`DROP TABLE CMINMSGS`)
		require.NoError(t, err)
		_, err = b.in.Seed(b.ctx, "max")
		require.Error(t, err)
		_, err = b.store.GetExecutor().CursorGet(b.ctx, queue)
		require.ErrorIs(t, err, relaytype.ErrNotFound)
	})
}

// A source that breaks its contract (ids not ascending, not above W, too many
// rows) is an error that leaves W unchanged: W never decreases.
func TestSourceContractViolations(t *testing.T) {
	t.Parallel()
	b := setup(t, sqliteStore, func(c *relayintake.Config) { c.BatchSize = 3 })
	b.seed("10")
	for name, ids := range map[string][]int64{
		"at or below W": {9, 11},
		"equal to W":    {10},
		"descending":    {12, 11},
		"duplicate":     {11, 11},
		"over limit":    {11, 12, 13, 14},
	} {
		src := &funcSource{readAfter: func(context.Context, int64, int) ([]relaysource.Row, error) {
			rows := make([]relaysource.Row, len(ids))
			for i, id := range ids {
				rows[i].ID = id
			}
			return rows, nil
		}}
		_, err := b.newIntake(b.store, src).RunOnce(b.ctx)
		require.Error(t, err, name)
		require.Equal(t, int64(10), b.cursor().Watermark, name)
		require.Empty(t, b.messageIDs(), name)
	}
}

// When another writer moves the cursor during a round, the round
// saves nothing rather than overwrite it (which could move W back).
func TestCursorMovedDuringRound(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store)
		b.seed(relayintake.SeedZero)
		b.insert(1, 2, 3, 4)
		other := b.store.GetExecutor()
		src := &funcSource{readAfter: func(ctx context.Context, after int64, limit int) ([]relaysource.Row, error) {
			rows, err := b.src.ReadAfter(ctx, after, limit)
			// Another (forbidden) instance saves W=4 while this round reads.
			require.NoError(t, other.CursorSave(ctx, &relaydriver.CursorSaveParams{Queue: queue, Watermark: 4, Now: t0}))
			return rows, err
		}}
		_, err := b.newIntake(b.store, src).RunOnce(b.ctx)
		require.ErrorIs(t, err, relayintake.ErrCursorMoved)
		require.Equal(t, int64(4), b.cursor().Watermark, "the other writer's W is not overwritten by a smaller one")
		require.Empty(t, b.messageIDs())
	})
}

// The watermark gauges and counters, and the lag both as a metric and in the
// result.
func TestMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t, sqliteStore, func(c *relayintake.Config) { c.BatchSize = 2 })
	b.seed(relayintake.SeedZero)
	b.insert(1, 2, 3, 5)

	res := b.round() // full batch: lag from the source bounds
	require.Equal(t, int64(3), res.Lag)
	require.Equal(t, 3.0, metricValue(t, b, "relay_watermark_lag"))
	require.Equal(t, 2.0, metricValue(t, b, "relay_watermark"))
	require.Equal(t, 2.0, metricValue(t, b, "relay_intake_rows_total"))

	res = b.round() // reads 3, 5: hole at 4
	require.Equal(t, int64(2), res.Lag)
	require.Equal(t, 3.0, metricValue(t, b, "relay_watermark"))
	require.Equal(t, 2.0, metricValue(t, b, "relay_watermark_lag"))
	require.Equal(t, 3.0, metricValue(t, b, "relay_intake_rows_total"))

	b.clock.Advance(delay)
	b.round()
	require.Equal(t, 1.0, metricValue(t, b, "relay_permanent_holes_total"))
	require.Equal(t, 4.0, metricValue(t, b, "relay_watermark"))
	require.Equal(t, 1.0, metricValue(t, b, "relay_watermark_lag"))
	b.round()
	require.Equal(t, 0.0, metricValue(t, b, "relay_watermark_lag"))
	require.Equal(t, 0.0, metricValue(t, b, "relay_intake_errors_total"))

	// A second queue and a restarted intake share the registry.
	cfg := b.cfg
	cfg.Queue = "other"
	_, err := relayintake.New(b.store, b.src, cfg)
	require.NoError(t, err)
	b.newIntake(b.store, b.src)
	require.Equal(t, 2, seriesCount(t, b, "relay_watermark"))

	// Only the queue label: no ids, no payloads.
	families, err := b.reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			require.Len(t, m.GetLabel(), 1, f.GetName())
			require.Equal(t, "queue", m.GetLabel()[0].GetName())
		}
	}

	// Without a registerer nothing is registered and nothing fails.
	cfg.Registerer = nil
	in, err := relayintake.New(b.store, b.src, cfg)
	require.NoError(t, err)
	_, err = in.RunOnce(b.ctx)
	require.ErrorIs(t, err, relayintake.ErrNotSeeded)
}

// metricValue reads the bundle queue's series of a gauge or counter.
func metricValue(t *testing.T, b *bundle, name string) float64 {
	t.Helper()
	families, err := b.reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() != queue {
				continue
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("metric %s{queue=%q} not found", name, queue)
	return 0
}

// seriesCount counts the series of a metric family.
func seriesCount(t *testing.T, b *bundle, name string) int {
	t.Helper()
	families, err := b.reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return len(f.GetMetric())
		}
	}
	return 0
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, sqliteStore)
	for field, mutate := range map[string]func(*relayintake.Config){
		"Queue":          func(c *relayintake.Config) { c.Queue = "" },
		"BatchSize":      func(c *relayintake.Config) { c.BatchSize = -1 },
		"MaxCommitDelay": func(c *relayintake.Config) { c.MaxCommitDelay = -time.Second },
		"PollInterval":   func(c *relayintake.Config) { c.PollInterval = -time.Second },
	} {
		cfg := b.cfg
		mutate(&cfg)
		_, err := relayintake.New(b.store, b.src, cfg)
		require.ErrorContains(t, err, field)
	}
	_, err := relayintake.New(nil, b.src, b.cfg)
	require.Error(t, err)
	_, err = relayintake.New(b.store, nil, b.cfg)
	require.Error(t, err)
	// Defaults fill every zero field.
	_, err = must(relayintake.New(b.store, b.src, relayintake.Config{Queue: "p"})).RunOnce(b.ctx)
	require.True(t, errors.Is(err, relayintake.ErrNotSeeded))
}
