package relaydrivertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// seed 000 §9.1: replay moves only whitelisted classes of FAILED/DEAD messages
// back to PENDING, resets attempts, next attempt, error and acknowledgement
// facts, and never the identity.
func testReplay(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4, 5)
	for id, identity := range map[int64]string{1: "I1", 2: "I2", 3: "I3"} {
		_, err := b.ex.MessageBindIdentity(b.ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: id, Identity: identity})
		require.NoError(t, err)
	}
	b.fail("p", 1, relaytype.ClassInfra, at(time.Hour))
	b.fail("p", 1, relaytype.ClassInfra, at(time.Hour))
	require.NoError(t, b.ex.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{
		Queue: "p", ID: 2, State: relaytype.StateDead, ErrorClass: relaytype.ClassMalformed, LastError: "bad xml", AckIntent: true, Now: b.now,
	}))
	b.fail("p", 3, relaytype.ClassCodec, at(time.Hour))
	require.NoError(t, b.ex.MessageExhaust(b.ctx, &relaydriver.MessageExhaustParams{Queue: "p", ID: 3, MaxAttempts: 1, AckIntent: true, Now: b.now}))
	b.complete("p", 4, relaytype.StateSucceeded, "", "")
	b.complete("p", 5, relaytype.StateDead, relaytype.ClassProtocol, "half package")

	b.now = at(time.Minute)
	n, err := b.ex.MessageReplay(b.ctx, &relaydriver.MessageReplayParams{
		Queue: "p", Classes: []relaytype.ErrorClass{relaytype.ClassMalformed, relaytype.ClassExhausted}, Now: b.now,
	})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for id, identity := range map[int64]string{2: "I2", 3: "I3"} {
		m := b.get("p", id)
		require.Equal(t, relaytype.StatePending, m.State, "message %d", id)
		require.Zero(t, m.Attempts)
		require.Equal(t, relaytype.ClassNone, m.ErrorClass)
		require.Empty(t, m.LastError)
		require.Equal(t, identity, m.IdentityKey, "replay keeps the identity")
		requireTime(t, time.Time{}, m.NextAttemptAt, "NextAttemptAt")
		requireTime(t, time.Time{}, m.AckNextAt, "AckNextAt")
		requireTime(t, b.now, m.UpdatedAt, "UpdatedAt")
	}
	m := b.get("p", 1)
	require.Equal(t, relaytype.StateFailed, m.State, "INFRA was not whitelisted")
	require.Equal(t, 2, m.Attempts)
	require.Equal(t, relaytype.StateSucceeded, b.get("p", 4).State)
	require.Equal(t, relaytype.StateDead, b.get("p", 5).State)
	require.Equal(t, []int64{1, 2, 3}, b.head("p"))

	// A replayed message's identity still binds to itself.
	res, err := b.ex.MessageBindIdentity(b.ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: 2, Identity: "I2"})
	require.NoError(t, err)
	require.Equal(t, int64(2), res.OwnerID)

	n, err = b.ex.MessageReplay(b.ctx, &relaydriver.MessageReplayParams{
		Queue: "p", Classes: []relaytype.ErrorClass{relaytype.ClassMalformed, relaytype.ClassExhausted}, Now: b.now,
	})
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to replay")
}

// IDs limits a replay to the listed messages.
func testReplayIDs(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3)
	for _, id := range []int64{1, 2, 3} {
		b.complete("p", id, relaytype.StateDead, relaytype.ClassProtocol, "rejected")
	}
	n, err := b.ex.MessageReplay(b.ctx, &relaydriver.MessageReplayParams{
		Queue: "p", Classes: []relaytype.ErrorClass{relaytype.ClassProtocol}, IDs: []int64{1, 3, 99}, Now: b.now,
	})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []int64{1, 3}, b.head("p"))
	require.Equal(t, relaytype.StateDead, b.get("p", 2).State)
}

// Stats count per state; backlog is PENDING+FAILED; the oldest unfinished
// enqueue time ignores terminal rows.
func testStats(t *testing.T, b *bundle) {
	st, err := b.ex.MessageStats(b.ctx, "p")
	require.NoError(t, err)
	require.Zero(t, st.Backlog())
	require.Zero(t, st.MaxID)
	requireTime(t, time.Time{}, st.OldestUnfinishedEnqueuedAt, "OldestUnfinishedEnqueuedAt of an empty queue")

	for i, id := range []int64{1, 2, 3, 4, 5} {
		b.now = at(time.Duration(i) * time.Second)
		b.insert("p", id)
	}
	b.insert("q", 100)
	b.complete("p", 1, relaytype.StateSucceeded, "", "")
	b.fail("p", 2, relaytype.ClassInfra, time.Time{})
	b.complete("p", 4, relaytype.StateDead, relaytype.ClassMalformed, "")
	b.complete("p", 5, relaytype.StateSkipped, "", "ignored:LDM")

	st, err = b.ex.MessageStats(b.ctx, "p")
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Counts[relaytype.StatePending])
	require.Equal(t, int64(1), st.Counts[relaytype.StateFailed])
	require.Equal(t, int64(1), st.Counts[relaytype.StateSucceeded])
	require.Equal(t, int64(1), st.Counts[relaytype.StateDead])
	require.Equal(t, int64(1), st.Counts[relaytype.StateSkipped])
	require.Zero(t, st.Counts[relaytype.StateArchived])
	require.Equal(t, int64(2), st.Backlog())
	require.Equal(t, int64(5), st.MaxID)
	requireTime(t, at(time.Second), st.OldestUnfinishedEnqueuedAt, "OldestUnfinishedEnqueuedAt")
}

// seed 000 §4.1: the cursor holds (W, holeSince); saving never touches the
// seeding facts.
func testCursorSave(t *testing.T, b *bundle) {
	_, err := b.ex.CursorGet(b.ctx, "p")
	require.ErrorIs(t, err, relaytype.ErrNotFound)

	require.NoError(t, b.ex.CursorSave(b.ctx, &relaydriver.CursorSaveParams{Queue: "p", Watermark: 10, Now: b.now}))
	c, err := b.ex.CursorGet(b.ctx, "p")
	require.NoError(t, err)
	require.Equal(t, "p", c.Queue)
	require.Equal(t, int64(10), c.Watermark)
	requireTime(t, time.Time{}, c.HoleSince, "HoleSince")
	requireTime(t, time.Time{}, c.SeededAt, "SeededAt")
	require.Empty(t, c.SeedMode)
	requireTime(t, b.now, c.UpdatedAt, "UpdatedAt")

	holeSince := at(time.Second)
	b.now = at(2 * time.Second)
	require.NoError(t, b.ex.CursorSave(b.ctx, &relaydriver.CursorSaveParams{Queue: "p", Watermark: 12, HoleSince: holeSince, Now: b.now}))
	c, err = b.ex.CursorGet(b.ctx, "p")
	require.NoError(t, err)
	require.Equal(t, int64(12), c.Watermark)
	requireTime(t, holeSince, c.HoleSince, "HoleSince")
	requireTime(t, b.now, c.UpdatedAt, "UpdatedAt")

	// Clearing the hole.
	require.NoError(t, b.ex.CursorSave(b.ctx, &relaydriver.CursorSaveParams{Queue: "p", Watermark: 14, Now: b.now}))
	c, err = b.ex.CursorGet(b.ctx, "p")
	require.NoError(t, err)
	requireTime(t, time.Time{}, c.HoleSince, "HoleSince after release")

	// seed 000 §4.3: an instance that already has a watermark refuses seeding.
	err = b.ex.CursorSeed(b.ctx, &relaydriver.CursorSeedParams{Queue: "p", Watermark: 100, Mode: "max", Now: b.now})
	require.ErrorIs(t, err, relaytype.ErrSeedRefused)
	c, err = b.ex.CursorGet(b.ctx, "p")
	require.NoError(t, err)
	require.Equal(t, int64(14), c.Watermark)

	_, err = b.ex.CursorGet(b.ctx, "q")
	require.ErrorIs(t, err, relaytype.ErrNotFound)
}

// seed 000 §4.3: seeding stores the watermark with SeededAt and the mode; a
// second seeding is refused; a later save keeps the seeding facts.
func testCursorSeed(t *testing.T, b *bundle) {
	require.NoError(t, b.ex.CursorSeed(b.ctx, &relaydriver.CursorSeedParams{Queue: "p", Watermark: 100, Mode: "max", Now: b.now}))
	c, err := b.ex.CursorGet(b.ctx, "p")
	require.NoError(t, err)
	require.Equal(t, int64(100), c.Watermark)
	require.Equal(t, "max", c.SeedMode)
	requireTime(t, b.now, c.SeededAt, "SeededAt")
	requireTime(t, b.now, c.UpdatedAt, "UpdatedAt")
	requireTime(t, time.Time{}, c.HoleSince, "HoleSince")

	err = b.ex.CursorSeed(b.ctx, &relaydriver.CursorSeedParams{Queue: "p", Watermark: 0, Mode: "zero", Now: at(time.Second)})
	require.ErrorIs(t, err, relaytype.ErrSeedRefused)

	require.NoError(t, b.ex.CursorSave(b.ctx, &relaydriver.CursorSaveParams{Queue: "p", Watermark: 105, HoleSince: at(time.Minute), Now: at(time.Hour)}))
	c, err = b.ex.CursorGet(b.ctx, "p")
	require.NoError(t, err)
	require.Equal(t, int64(105), c.Watermark)
	require.Equal(t, "max", c.SeedMode)
	requireTime(t, t0, c.SeededAt, "SeededAt after a save")
	requireTime(t, at(time.Hour), c.UpdatedAt, "UpdatedAt after a save")

	require.NoError(t, b.ex.CursorSeed(b.ctx, &relaydriver.CursorSeedParams{Queue: "q", Watermark: 0, Mode: "zero", Now: b.now}), "queues seed independently")
}

// seed 000 §4.3: an instance with processing records refuses seeding even
// without a cursor row.
func testCursorSeedRefusedWithMessages(t *testing.T, b *bundle) {
	b.insert("p", 42)
	err := b.ex.CursorSeed(b.ctx, &relaydriver.CursorSeedParams{Queue: "p", Watermark: 100, Mode: "max", Now: b.now})
	require.ErrorIs(t, err, relaytype.ErrSeedRefused)
	_, err = b.ex.CursorGet(b.ctx, "p")
	require.ErrorIs(t, err, relaytype.ErrNotFound, "a refused seed writes nothing")
}

// seed 000 §4.1 step 4: permanent holes are logged once, listed in id order.
func testHoles(t *testing.T, b *bundle) {
	hs, err := b.ex.HoleList(b.ctx, "p")
	require.NoError(t, err)
	require.Empty(t, hs)

	require.NoError(t, b.ex.HoleInsert(b.ctx, &relaytype.Hole{Queue: "p", ID: 7, FirstSeenAt: t0, ReleasedAt: at(time.Minute)}))
	require.NoError(t, b.ex.HoleInsert(b.ctx, &relaytype.Hole{Queue: "p", ID: 5, FirstSeenAt: t0, ReleasedAt: at(2 * time.Minute)}))
	require.NoError(t, b.ex.HoleInsert(b.ctx, &relaytype.Hole{Queue: "p", ID: 7, FirstSeenAt: at(time.Hour), ReleasedAt: at(2 * time.Hour)}), "idempotent")
	require.NoError(t, b.ex.HoleInsert(b.ctx, &relaytype.Hole{Queue: "q", ID: 1, FirstSeenAt: t0, ReleasedAt: t0}))

	hs, err = b.ex.HoleList(b.ctx, "p")
	require.NoError(t, err)
	require.Len(t, hs, 2)
	require.Equal(t, int64(5), hs[0].ID)
	require.Equal(t, int64(7), hs[1].ID)
	require.Equal(t, "p", hs[1].Queue)
	requireTime(t, t0, hs[1].FirstSeenAt, "FirstSeenAt of the first insert")
	requireTime(t, at(time.Minute), hs[1].ReleasedAt, "ReleasedAt of the first insert")
	require.True(t, hs[1].FoundAt.IsZero(), "a new hole is not found")
	require.True(t, hs[1].IngestedAt.IsZero())
	require.Zero(t, hs[1].IngestedID)
}

// A released hole whose row commits late: listed for the check while not
// found and inside the window, found once, ingested once and only when found.
func testHolesLate(t *testing.T, b *bundle) {
	for _, id := range []int64{3, 5, 7, 9} {
		require.NoError(t, b.ex.HoleInsert(b.ctx, &relaytype.Hole{Queue: "p", ID: id, FirstSeenAt: t0, ReleasedAt: at(time.Duration(id) * time.Minute)}))
	}
	require.NoError(t, b.ex.HoleInsert(b.ctx, &relaytype.Hole{Queue: "q", ID: 5, FirstSeenAt: t0, ReleasedAt: t0}))

	ids := func(hs []*relaytype.Hole) []int64 {
		out := []int64{}
		for _, h := range hs {
			out = append(out, h.ID)
		}
		return out
	}
	hs, err := b.ex.HoleListUnfound(b.ctx, "p", at(5*time.Minute), 10)
	require.NoError(t, err)
	require.Equal(t, []int64{5, 7, 9}, ids(hs), "released at or after the window start")
	hs, err = b.ex.HoleListUnfound(b.ctx, "p", t0, 2)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 5}, ids(hs), "limit, in id order")
	_, err = b.ex.HoleListUnfound(b.ctx, "p", t0, 0)
	require.Error(t, err, "limit must be positive")

	ok, err := b.ex.HoleMarkIngested(b.ctx, "p", 5, 100, at(time.Hour))
	require.NoError(t, err)
	require.False(t, ok, "a hole not found cannot be ingested")

	ok, err = b.ex.HoleMarkFound(b.ctx, "p", 5, at(20*time.Minute))
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.ex.HoleMarkFound(b.ctx, "p", 5, at(30*time.Minute))
	require.NoError(t, err)
	require.False(t, ok, "found once")
	ok, err = b.ex.HoleMarkFound(b.ctx, "p", 4, at(30*time.Minute))
	require.NoError(t, err)
	require.False(t, ok, "no such hole")

	hs, err = b.ex.HoleListUnfound(b.ctx, "p", t0, 10)
	require.NoError(t, err)
	require.Equal(t, []int64{3, 7, 9}, ids(hs), "a found hole is no longer checked")
	hs, err = b.ex.HoleListFound(b.ctx, "p")
	require.NoError(t, err)
	require.Len(t, hs, 1)
	require.Equal(t, int64(5), hs[0].ID)
	requireTime(t, at(20*time.Minute), hs[0].FoundAt, "FoundAt of the first finding")
	requireTime(t, at(5*time.Minute), hs[0].ReleasedAt, "ReleasedAt")
	require.True(t, hs[0].IngestedAt.IsZero())
	hs, err = b.ex.HoleListFound(b.ctx, "q")
	require.NoError(t, err)
	require.Empty(t, hs, "queues are separate")

	ok, err = b.ex.HoleMarkIngested(b.ctx, "p", 5, 100, at(time.Hour))
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.ex.HoleMarkIngested(b.ctx, "p", 5, 101, at(2*time.Hour))
	require.NoError(t, err)
	require.False(t, ok, "ingested once")
	hs, err = b.ex.HoleList(b.ctx, "p")
	require.NoError(t, err)
	require.Len(t, hs, 4)
	require.Equal(t, int64(100), hs[1].IngestedID)
	requireTime(t, at(time.Hour), hs[1].IngestedAt, "IngestedAt of the first ingest")
}
