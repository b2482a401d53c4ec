package relaydrivertest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// seed 000 §4.1 step 5: insert if absent; a row already present is neither
// counted nor an error, and is left as it was.
func testInsertIfAbsent(t *testing.T, b *bundle) {
	received := at(-time.Hour)
	res, err := b.ex.MessageInsertMany(b.ctx, []*relaydriver.MessageInsertParams{
		{Queue: "p", ID: 1, Key: "k1", Payload: []byte("one"), ReceivedAt: received, Now: b.now},
		{Queue: "p", ID: 2, Payload: []byte("two"), Now: b.now},
		{Queue: "p", ID: 3, Now: b.now},
	})
	require.NoError(t, err)
	require.Equal(t, 3, res.Inserted)
	require.Equal(t, []int64{1, 2, 3}, res.IDs)

	m := b.get("p", 1)
	require.Equal(t, "p", m.Queue)
	require.Equal(t, int64(1), m.ID)
	require.Equal(t, "k1", m.Key)
	require.Equal(t, relaytype.StatePending, m.State)
	require.Zero(t, m.Attempts)
	require.Equal(t, []byte("one"), m.Payload)
	require.Equal(t, relaytype.ClassNone, m.ErrorClass)
	require.Empty(t, m.LastError)
	require.Empty(t, m.IdentityKey)
	require.Empty(t, m.LeaseOwner)
	requireTime(t, received, m.ReceivedAt, "ReceivedAt")
	requireTime(t, b.now, m.EnqueuedAt, "EnqueuedAt")
	requireTime(t, b.now, m.UpdatedAt, "UpdatedAt")
	requireTime(t, time.Time{}, m.NextAttemptAt, "NextAttemptAt")
	requireTime(t, time.Time{}, m.AckNextAt, "AckNextAt")
	requireTime(t, time.Time{}, m.AckAt, "AckAt")
	requireTime(t, time.Time{}, m.AckAbandonedAt, "AckAbandonedAt")
	requireTime(t, time.Time{}, m.LeaseExpiresAt, "LeaseExpiresAt")
	requireTime(t, time.Time{}, b.get("p", 2).ReceivedAt, "ReceivedAt of a message without one")
	require.Empty(t, b.get("p", 3).Payload)

	// Re-reading an overlapping range: only id 4 is new; 2 keeps its payload
	// and enqueue time.
	b.now = at(time.Minute)
	res, err = b.ex.MessageInsertMany(b.ctx, []*relaydriver.MessageInsertParams{
		{Queue: "p", ID: 2, Payload: []byte("changed"), Now: b.now},
		{Queue: "p", ID: 3, Now: b.now},
		{Queue: "p", ID: 4, Now: b.now},
	})
	require.NoError(t, err)
	require.Equal(t, 1, res.Inserted)
	require.Equal(t, []int64{2, 3, 4}, res.IDs)
	m = b.get("p", 2)
	require.Equal(t, []byte("two"), m.Payload)
	requireTime(t, t0, m.EnqueuedAt, "EnqueuedAt of a re-inserted message")

	// The same id twice in one batch counts once.
	res, err = b.ex.MessageInsertMany(b.ctx, []*relaydriver.MessageInsertParams{
		{Queue: "p", ID: 5, Now: b.now}, {Queue: "p", ID: 5, Now: b.now},
	})
	require.NoError(t, err)
	require.Equal(t, 1, res.Inserted)

	res, err = b.ex.MessageInsertMany(b.ctx, nil)
	require.NoError(t, err)
	require.Zero(t, res.Inserted)
	require.Equal(t, []int64{1, 2, 3, 4, 5}, b.head("p"))
}

// An ID of 0 asks the store for an id: distinct, positive, in input order, and
// never reused by a later batch.
func testInsertAllocatesIDs(t *testing.T, b *bundle) {
	res, err := b.ex.MessageInsertMany(b.ctx, []*relaydriver.MessageInsertParams{
		{Queue: "p", Payload: []byte("a"), Now: b.now},
		{Queue: "p", Payload: []byte("b"), Now: b.now},
		{Queue: "p", Payload: []byte("c"), Now: b.now},
	})
	require.NoError(t, err)
	require.Equal(t, 3, res.Inserted)
	require.Len(t, res.IDs, 3)
	for i, id := range res.IDs {
		require.Positive(t, id)
		if i > 0 {
			require.Greater(t, id, res.IDs[i-1], "allocated ids follow input order")
		}
		require.Equal(t, []byte{"abc"[i]}, b.get("p", id).Payload)
	}

	res2, err := b.ex.MessageInsertMany(b.ctx, []*relaydriver.MessageInsertParams{{Queue: "p", Now: b.now}})
	require.NoError(t, err)
	require.Equal(t, 1, res2.Inserted)
	require.Greater(t, res2.IDs[0], res.IDs[2])
	require.Equal(t, append(res.IDs, res2.IDs[0]), b.head("p"))
}

// Ids are unique per queue; queues never see each other's rows.
func testQueuesIsolated(t *testing.T, b *bundle) {
	b.insert("p", 1)
	b.insert("q", 1)
	require.Equal(t, []int64{1}, b.head("q"))
	b.complete("p", 1, relaytype.StateSucceeded, "", "")
	require.Equal(t, relaytype.StatePending, b.get("q", 1).State)
	require.Empty(t, b.head("p"))
	require.Equal(t, []int64{1}, b.head("q"))

	ok, err := b.ex.MessageExists(b.ctx, "q")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.ex.MessageExists(b.ctx, "r")
	require.NoError(t, err)
	require.False(t, ok)
}

func testGetNotFound(t *testing.T, b *bundle) {
	b.insert("p", 1)
	_, err := b.ex.MessageGet(b.ctx, "p", 2)
	require.ErrorIs(t, err, relaytype.ErrNotFound)
	_, err = b.ex.MessageGet(b.ctx, "q", 1)
	require.ErrorIs(t, err, relaytype.ErrNotFound)
}

// seed 000 §1.1: the head is the smallest unfinished id, whatever the insert order.
func testHeadOrder(t *testing.T, b *bundle) {
	b.insert("p", 30, 10)
	b.insert("p", 20)
	require.Equal(t, []int64{10, 20, 30}, b.head("p"))

	ms, err := b.ex.MessageListUnfinished(b.ctx, &relaydriver.MessageListUnfinishedParams{Queue: "p", AfterID: 10, Limit: 10})
	require.NoError(t, err)
	require.Equal(t, []int64{20, 30}, ids(ms))

	ms, err = b.ex.MessageListUnfinished(b.ctx, &relaydriver.MessageListUnfinishedParams{Queue: "p", Limit: 2})
	require.NoError(t, err)
	require.Equal(t, []int64{10, 20}, ids(ms))
}

// seed 000 §3: FAILED is not terminal; it keeps the head.
func testHeadFailedHolds(t *testing.T, b *bundle) {
	b.insert("p", 1, 2)
	b.fail("p", 1, relaytype.ClassInfra, at(time.Hour))
	ms, err := b.ex.MessageListUnfinished(b.ctx, &relaydriver.MessageListUnfinishedParams{Queue: "p", Limit: 1})
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, int64(1), ms[0].ID)
	require.Equal(t, relaytype.StateFailed, ms[0].State)
}

// seed 000 §3: SUCCEEDED, SKIPPED and DEAD release the queue.
func testHeadTerminalReleases(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4)
	b.complete("p", 1, relaytype.StateSucceeded, "", "")
	b.complete("p", 2, relaytype.StateSkipped, "", "duplicate-of:9")
	b.complete("p", 3, relaytype.StateDead, relaytype.ClassMalformed, "bad xml")
	require.Equal(t, []int64{4}, b.head("p"))

	m := b.get("p", 2)
	require.Equal(t, relaytype.StateSkipped, m.State)
	require.Equal(t, "duplicate-of:9", m.LastError)
	m = b.get("p", 3)
	require.Equal(t, relaytype.StateDead, m.State)
	require.Equal(t, relaytype.ClassMalformed, m.ErrorClass)
	require.Equal(t, "bad xml", m.LastError)
	requireTime(t, b.now, m.UpdatedAt, "UpdatedAt")
}

// seed 000 §9.3: an ARCHIVED shadow row never holds the head, is never claimed,
// replayed or counted as backlog, and keeps deduplicating its identity.
// Archival itself is a later feature; the row is made with a standard UPDATE
// both dialects accept.
func testArchivedExcluded(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3)
	_, err := b.ex.MessageBindIdentity(b.ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: 1, Identity: "I1"})
	require.NoError(t, err)
	b.complete("p", 1, relaytype.StateDead, relaytype.ClassMalformed, "bad")
	n, err := b.ex.Exec(b.ctx, "UPDATE relay_message SET state = $1 WHERE queue = $2 AND id = $3",
		string(relaytype.StateArchived), "p", int64(1))
	require.NoError(t, err)
	require.Equal(t, int64(1), n)

	require.Equal(t, []int64{2, 3}, b.head("p"))
	st, err := b.ex.MessageStats(b.ctx, "p")
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Counts[relaytype.StateArchived])
	require.Zero(t, st.Counts[relaytype.StateDead])
	require.Equal(t, int64(2), st.Backlog())

	res, err := b.ex.MessageBindIdentity(b.ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: 2, Identity: "I1"})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.OwnerID, "the archived row keeps its identity")

	require.Equal(t, []int64{2, 3}, b.claim("p", false, 10, "w", time.Minute))
	replayed, err := b.ex.MessageReplay(b.ctx, &relaydriver.MessageReplayParams{Queue: "p", Classes: relaytype.KnownClasses, Now: b.now})
	require.NoError(t, err)
	require.Zero(t, replayed)
	require.Equal(t, relaytype.StateArchived, b.get("p", 1).State)

	err = b.ex.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 1, State: relaytype.StateSucceeded, Now: b.now})
	require.ErrorIs(t, err, relaytype.ErrConflict)
}

// seed 000 §2: the identity is bound once; a self rebind is idempotent; an
// identity owned by another message reports that owner; a bound message keeps
// its identity.
func testBindIdentity(t *testing.T, b *bundle) {
	b.insert("p", 1, 2)
	bind := func(id int64, identity string) *relaydriver.MessageBindIdentityResult {
		t.Helper()
		res, err := b.ex.MessageBindIdentity(b.ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: id, Identity: identity})
		require.NoError(t, err)
		return res
	}
	require.Equal(t, &relaydriver.MessageBindIdentityResult{OwnerID: 1, Identity: "A"}, bind(1, "A"))
	require.Equal(t, "A", b.get("p", 1).IdentityKey)
	require.Equal(t, &relaydriver.MessageBindIdentityResult{OwnerID: 1, Identity: "A"}, bind(1, "A"), "self rebind")

	require.Equal(t, &relaydriver.MessageBindIdentityResult{OwnerID: 1, Identity: "A"}, bind(2, "A"), "duplicate")
	require.Empty(t, b.get("p", 2).IdentityKey, "a duplicate stays unbound")

	require.Equal(t, &relaydriver.MessageBindIdentityResult{OwnerID: 1, Identity: "A"}, bind(1, "B"), "a bound message keeps its identity")
	require.Equal(t, "A", b.get("p", 1).IdentityKey)

	require.Equal(t, &relaydriver.MessageBindIdentityResult{OwnerID: 2, Identity: "B"}, bind(2, "B"))

	// Identities are unique per queue only.
	b.insert("q", 7)
	res, err := b.ex.MessageBindIdentity(b.ctx, &relaydriver.MessageBindIdentityParams{Queue: "q", ID: 7, Identity: "A"})
	require.NoError(t, err)
	require.Equal(t, int64(7), res.OwnerID)

	_, err = b.ex.MessageBindIdentity(b.ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: 99, Identity: "Z"})
	require.ErrorIs(t, err, relaytype.ErrNotFound)
}

// A duplicate found inside a transaction must leave the transaction usable.
func testBindIdentityInTx(t *testing.T, b *bundle) {
	b.insert("p", 1, 2)
	_, err := b.ex.MessageBindIdentity(b.ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: 1, Identity: "A"})
	require.NoError(t, err)

	tx, err := b.d.Begin(b.ctx)
	require.NoError(t, err)
	defer tx.Rollback(b.ctx) //nolint:errcheck
	res, err := tx.MessageBindIdentity(b.ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: 2, Identity: "A"})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.OwnerID)
	require.NoError(t, tx.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{
		Queue: "p", ID: 2, State: relaytype.StateSkipped, LastError: "duplicate-of:1", Now: b.now,
	}))
	_, err = tx.MessageInsertMany(b.ctx, []*relaydriver.MessageInsertParams{{Queue: "p", ID: 3, Now: b.now}})
	require.NoError(t, err)
	res, err = tx.MessageBindIdentity(b.ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: 3, Identity: "C"})
	require.NoError(t, err)
	require.Equal(t, int64(3), res.OwnerID)
	require.NoError(t, tx.Commit(b.ctx))

	require.Equal(t, relaytype.StateSkipped, b.get("p", 2).State)
	require.Equal(t, "C", b.get("p", 3).IdentityKey)
}

// Complete and Fail only move PENDING/FAILED messages.
func testCompleteGuards(t *testing.T, b *bundle) {
	b.insert("p", 1, 2)
	b.complete("p", 1, relaytype.StateSucceeded, "", "")
	err := b.ex.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 1, State: relaytype.StateDead, ErrorClass: relaytype.ClassMalformed, Now: b.now})
	require.ErrorIs(t, err, relaytype.ErrConflict)
	_, err = b.ex.MessageFail(b.ctx, &relaydriver.MessageFailParams{Queue: "p", ID: 1, ErrorClass: relaytype.ClassInfra, Now: b.now})
	require.ErrorIs(t, err, relaytype.ErrConflict)
	m := b.get("p", 1)
	require.Equal(t, relaytype.StateSucceeded, m.State)
	require.Zero(t, m.Attempts)

	// A FAILED message can still finish.
	b.fail("p", 2, relaytype.ClassInfra, at(time.Minute))
	b.complete("p", 2, relaytype.StateSucceeded, "", "")
	require.Equal(t, relaytype.StateSucceeded, b.get("p", 2).State)
}

// With LeaseOwner set, only the lease holder may finish or fail a message, and
// finishing clears the lease.
func testCompleteLeaseGuard(t *testing.T, b *bundle) {
	b.insert("p", 1, 2)
	require.Equal(t, []int64{1, 2}, b.claim("p", false, 10, "w1", time.Minute))

	err := b.ex.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 1, State: relaytype.StateSucceeded, LeaseOwner: "w2", Now: b.now})
	require.ErrorIs(t, err, relaytype.ErrConflict)
	_, err = b.ex.MessageFail(b.ctx, &relaydriver.MessageFailParams{Queue: "p", ID: 2, ErrorClass: relaytype.ClassInfra, LeaseOwner: "w2", Now: b.now})
	require.ErrorIs(t, err, relaytype.ErrConflict)
	require.Equal(t, relaytype.StatePending, b.get("p", 1).State)
	require.Zero(t, b.get("p", 2).Attempts)

	require.NoError(t, b.ex.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 1, State: relaytype.StateSucceeded, LeaseOwner: "w1", Now: b.now}))
	m := b.get("p", 1)
	require.Equal(t, relaytype.StateSucceeded, m.State)
	require.Empty(t, m.LeaseOwner)
	requireTime(t, time.Time{}, m.LeaseExpiresAt, "LeaseExpiresAt after complete")

	n, err := b.ex.MessageFail(b.ctx, &relaydriver.MessageFailParams{Queue: "p", ID: 2, ErrorClass: relaytype.ClassInfra, LeaseOwner: "w1", Now: b.now})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	m = b.get("p", 2)
	require.Empty(t, m.LeaseOwner)
	requireTime(t, time.Time{}, m.LeaseExpiresAt, "LeaseExpiresAt after fail")
}

// seed 000 §5.2 step 7: the terminal state and the acknowledgement intent are
// one UPDATE: AckNextAt = Now with AckIntent, NULL without.
func testAckIntent(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3)
	b.now = at(time.Second)
	require.NoError(t, b.ex.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 1, State: relaytype.StateSucceeded, AckIntent: true, Now: b.now}))
	m := b.get("p", 1)
	requireTime(t, b.now, m.AckNextAt, "AckNextAt with intent")
	requireTime(t, b.now, m.UpdatedAt, "UpdatedAt")
	requireTime(t, time.Time{}, m.AckAt, "AckAt")

	b.complete("p", 2, relaytype.StateSkipped, "", "ignored:LDM")
	requireTime(t, time.Time{}, b.get("p", 2).AckNextAt, "AckNextAt without intent")

	b.fail("p", 3, relaytype.ClassInfra, time.Time{})
	b.now = at(2 * time.Second)
	require.NoError(t, b.ex.MessageExhaust(b.ctx, &relaydriver.MessageExhaustParams{Queue: "p", ID: 3, MaxAttempts: 1, AckIntent: true, Now: b.now}))
	requireTime(t, b.now, b.get("p", 3).AckNextAt, "AckNextAt of an exhausted message")
}

// MessageCompleteMany finishes each row as MessageComplete would: its own
// state, class, reason and acknowledgement intent, FAILED rows included, and
// the lease cleared.
func testCompleteMany(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4)
	b.fail("p", 2, relaytype.ClassInfra, at(time.Minute))
	require.Equal(t, []int64{1, 3}, b.claim("p", false, 2, "w1", time.Minute), "2 is FAILED and not due")
	b.now = at(time.Second)
	require.NoError(t, b.ex.MessageCompleteMany(b.ctx, []*relaydriver.MessageCompleteParams{
		{Queue: "p", ID: 1, State: relaytype.StateSucceeded, AckIntent: true, Now: b.now},
		{Queue: "p", ID: 2, State: relaytype.StateSkipped, LastError: "ignored:LDM", Now: b.now.Add(time.Millisecond)},
		{Queue: "p", ID: 3, State: relaytype.StateSucceeded, LeaseOwner: "w1", AckIntent: true, Now: b.now},
	}))
	m := b.get("p", 1)
	require.Equal(t, relaytype.StateSucceeded, m.State)
	requireTime(t, b.now, m.AckNextAt, "AckNextAt with intent")
	requireTime(t, b.now, m.UpdatedAt, "UpdatedAt")
	m = b.get("p", 2)
	require.Equal(t, relaytype.StateSkipped, m.State)
	require.Equal(t, "ignored:LDM", m.LastError)
	require.Equal(t, 1, m.Attempts)
	requireTime(t, time.Time{}, m.AckNextAt, "AckNextAt without intent")
	requireTime(t, b.now.Add(time.Millisecond), m.UpdatedAt, "UpdatedAt is per row")
	m = b.get("p", 3)
	require.Equal(t, relaytype.StateSucceeded, m.State)
	require.Empty(t, m.LeaseOwner)
	requireTime(t, time.Time{}, m.LeaseExpiresAt, "LeaseExpiresAt after complete")
	require.Equal(t, []int64{4}, b.head("p"))
	require.NoError(t, b.ex.MessageCompleteMany(b.ctx, nil))
}

// Inside a transaction MessageCompleteMany commits or rolls back with it.
func testCompleteManyInTx(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3)
	params := []*relaydriver.MessageCompleteParams{
		{Queue: "p", ID: 1, State: relaytype.StateSucceeded, Now: b.now},
		{Queue: "p", ID: 2, State: relaytype.StateSucceeded, Now: b.now},
	}
	tx, err := b.d.Begin(b.ctx)
	require.NoError(t, err)
	require.NoError(t, tx.MessageCompleteMany(b.ctx, params))
	require.NoError(t, tx.Rollback(b.ctx))
	require.Equal(t, []int64{1, 2, 3}, b.head("p"))

	tx, err = b.d.Begin(b.ctx)
	require.NoError(t, err)
	require.NoError(t, tx.MessageCompleteMany(b.ctx, params))
	require.NoError(t, tx.Commit(b.ctx))
	require.Equal(t, []int64{3}, b.head("p"))
}

// One refused row (finished, leased to another owner, missing, or the same
// message twice) refuses the call: ErrConflict (ErrNotFound for a missing
// message) naming the refused id, and nothing of it is applied on
// GetExecutor; in a transaction the caller rolls back and nothing commits.
func testCompleteManyGuards(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4, 5)
	b.complete("p", 3, relaytype.StateSucceeded, "", "")
	require.Equal(t, []int64{1, 2, 4, 5}, b.claim("p", false, 10, "w1", time.Minute))
	ok := func(id int64) *relaydriver.MessageCompleteParams {
		return &relaydriver.MessageCompleteParams{Queue: "p", ID: id, State: relaytype.StateSucceeded, AckIntent: true, Now: b.now}
	}
	leased := func(id int64, owner string) *relaydriver.MessageCompleteParams {
		p := ok(id)
		p.LeaseOwner = owner
		return p
	}
	refusals := []struct {
		name   string
		params []*relaydriver.MessageCompleteParams
		id     string
		want   error
	}{
		{"finished", []*relaydriver.MessageCompleteParams{ok(1), ok(2), ok(3), ok(4)}, "p/3", relaytype.ErrConflict},
		{"lease", []*relaydriver.MessageCompleteParams{leased(1, "w1"), leased(2, "w2"), ok(4)}, "p/2", relaytype.ErrConflict},
		{"twice", []*relaydriver.MessageCompleteParams{ok(1), ok(2), ok(1)}, "p/1", relaytype.ErrConflict},
		{"missing", []*relaydriver.MessageCompleteParams{ok(1), ok(9)}, "p/9", relaytype.ErrNotFound},
	}
	for _, r := range refusals {
		err := b.ex.MessageCompleteMany(b.ctx, r.params)
		require.ErrorIs(t, err, r.want, r.name)
		require.Contains(t, err.Error(), r.id, "%s: the error names the refused message", r.name)
		require.Equal(t, []int64{1, 2, 4, 5}, b.head("p"), "%s: nothing applied", r.name)

		tx, err := b.d.Begin(b.ctx)
		require.NoError(t, err)
		err = tx.MessageCompleteMany(b.ctx, r.params)
		require.ErrorIs(t, err, r.want, "%s in a transaction", r.name)
		require.NoError(t, tx.Rollback(b.ctx))
		require.Equal(t, []int64{1, 2, 4, 5}, b.head("p"), "%s: nothing committed", r.name)
	}
	for _, id := range []int64{1, 2, 4, 5} {
		m := b.get("p", id)
		require.Equal(t, "w1", m.LeaseOwner)
		requireTime(t, time.Time{}, m.AckNextAt, "AckNextAt after refusals")
	}
	require.NoError(t, b.ex.MessageCompleteMany(b.ctx, []*relaydriver.MessageCompleteParams{leased(1, "w1"), ok(2), leased(4, "w1"), ok(5)}))
	require.Empty(t, b.head("p"))
}

// MessageCompleteParams.Delete finishes a SUCCEEDED message by removing
// its row, under the same guard as the UPDATE (unfinished, leased to the
// owner given), alone and in MessageCompleteMany next to ordinary
// completions, where one refusal still refuses the whole call. A deleted
// message is gone: not found, not a head, its key's next message is, and its
// id may be inserted again. Delete is refused for any other state and with
// an acknowledgement intent or a counted attempt.
func testCompleteDelete(t *testing.T, b *bundle) {
	for id := int64(1); id <= 6; id++ {
		b.insertKeyed("p", fmt.Sprintf("k%d", id), id)
	}
	b.insertKeyed("p", "k1", 7) // behind 1 on its key
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, b.claim("p", true, 10, "w1", time.Minute))
	del := func(id int64, owner string) *relaydriver.MessageCompleteParams {
		return &relaydriver.MessageCompleteParams{Queue: "p", ID: id, State: relaytype.StateSucceeded, LeaseOwner: owner,
			Delete: true, Now: b.now}
	}

	// Refused inputs.
	for _, p := range []*relaydriver.MessageCompleteParams{
		{Queue: "p", ID: 1, State: relaytype.StateSkipped, Delete: true, Now: b.now},
		{Queue: "p", ID: 1, State: relaytype.StateDead, Delete: true, Now: b.now},
		{Queue: "p", ID: 1, State: relaytype.StateSucceeded, AckIntent: true, Delete: true, Now: b.now},
		{Queue: "p", ID: 1, State: relaytype.StateSucceeded, CountAttempt: true, Delete: true, Now: b.now},
	} {
		err := b.ex.MessageComplete(b.ctx, p)
		require.Error(t, err, "%+v", p)
		require.NotErrorIs(t, err, relaytype.ErrConflict)
		require.Error(t, b.ex.MessageCompleteMany(b.ctx, []*relaydriver.MessageCompleteParams{p}), "%+v", p)
	}

	// The guard: another owner's lease, a finished message.
	require.ErrorIs(t, b.ex.MessageComplete(b.ctx, del(1, "w2")), relaytype.ErrConflict)
	require.NoError(t, b.ex.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 3,
		State: relaytype.StateSkipped, LeaseOwner: "w1", Now: b.now}))
	require.ErrorIs(t, b.ex.MessageComplete(b.ctx, del(3, "w1")), relaytype.ErrConflict)
	require.Equal(t, relaytype.StateSkipped, b.get("p", 3).State)

	// Alone: the row goes; its key's next message is the key's head now.
	require.NoError(t, b.ex.MessageComplete(b.ctx, del(1, "w1")))
	_, err := b.ex.MessageGet(b.ctx, "p", 1)
	require.ErrorIs(t, err, relaytype.ErrNotFound)
	require.ErrorIs(t, b.ex.MessageComplete(b.ctx, del(1, "w1")), relaytype.ErrNotFound)
	require.Equal(t, []int64{2, 4, 5, 6, 7}, b.head("p"))
	require.Equal(t, []int64{7}, b.claim("p", true, 10, "w1", time.Minute))

	// In a batch with an ordinary completion: nothing before the commit,
	// nothing of a refused batch.
	batch := []*relaydriver.MessageCompleteParams{del(2, "w1"),
		{Queue: "p", ID: 4, State: relaytype.StateSucceeded, LeaseOwner: "w1", Now: b.now}, del(5, "w1")}
	tx, err := b.d.Begin(b.ctx)
	require.NoError(t, err)
	require.NoError(t, tx.MessageCompleteMany(b.ctx, batch))
	require.NoError(t, tx.Rollback(b.ctx))
	require.Equal(t, []int64{2, 4, 5, 6, 7}, b.head("p"))
	err = b.ex.MessageCompleteMany(b.ctx, append(slices.Clone(batch), del(6, "w2")))
	require.ErrorIs(t, err, relaytype.ErrConflict)
	require.Contains(t, err.Error(), "p/6")
	require.Equal(t, []int64{2, 4, 5, 6, 7}, b.head("p"), "nothing of a refused batch")
	err = b.ex.MessageCompleteMany(b.ctx, []*relaydriver.MessageCompleteParams{del(6, "w1"), del(6, "w1")})
	// The same message twice: refused (ErrNotFound where the store's check
	// sees the first input's delete, ErrConflict where it does not).
	require.True(t, errors.Is(err, relaytype.ErrConflict) || errors.Is(err, relaytype.ErrNotFound), "the same message twice: %v", err)
	require.Equal(t, []int64{2, 4, 5, 6, 7}, b.head("p"))
	tx, err = b.d.Begin(b.ctx)
	require.NoError(t, err)
	require.NoError(t, tx.MessageCompleteMany(b.ctx, batch))
	require.NoError(t, tx.Commit(b.ctx))
	require.Equal(t, []int64{6, 7}, b.head("p"))
	for _, id := range []int64{2, 5} {
		_, err := b.ex.MessageGet(b.ctx, "p", id)
		require.ErrorIs(t, err, relaytype.ErrNotFound, "message %d", id)
	}
	require.Equal(t, relaytype.StateSucceeded, b.get("p", 4).State)

	// A deleted id is free: inserting it again is a new message.
	res, err := b.ex.MessageInsertMany(b.ctx, []*relaydriver.MessageInsertParams{{Queue: "p", ID: 1, Key: "k1", Now: b.now}})
	require.NoError(t, err)
	require.Equal(t, 1, res.Inserted)
}

// seed 000 §9.1: one increment per failure, and the last failure's facts.
func testFailCountsAttempts(t *testing.T, b *bundle) {
	b.insert("p", 1)
	for i, class := range []relaytype.ErrorClass{relaytype.ClassInfra, relaytype.ClassCodec, relaytype.ClassTimeout} {
		b.now = at(time.Duration(i+1) * time.Minute)
		next := b.now.Add(30 * time.Second)
		n, err := b.ex.MessageFail(b.ctx, &relaydriver.MessageFailParams{
			Queue: "p", ID: 1, ErrorClass: class, LastError: "failure " + string(class), NextAttemptAt: next, Now: b.now,
		})
		require.NoError(t, err)
		require.Equal(t, i+1, n)
		m := b.get("p", 1)
		require.Equal(t, relaytype.StateFailed, m.State)
		require.Equal(t, i+1, m.Attempts)
		require.Equal(t, class, m.ErrorClass)
		require.Equal(t, "failure "+string(class), m.LastError)
		requireTime(t, next, m.NextAttemptAt, "NextAttemptAt")
		requireTime(t, b.now, m.UpdatedAt, "UpdatedAt")
		requireTime(t, t0, m.EnqueuedAt, "EnqueuedAt")
	}
}

// A terminal state that ends a failed attempt (DEAD at once for a class never
// retried) counts it with CountAttempt, on MessageComplete and
// MessageCompleteMany alike; without it Attempts is unchanged.
func testCompleteCountsAttempt(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4)
	b.fail("p", 2, relaytype.ClassInfra, b.now)
	require.NoError(t, b.ex.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{
		Queue: "p", ID: 1, State: relaytype.StateDead, ErrorClass: relaytype.ClassMalformed, CountAttempt: true, Now: b.now}))
	require.NoError(t, b.ex.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{
		Queue: "p", ID: 2, State: relaytype.StateDead, ErrorClass: relaytype.ClassProtocol, CountAttempt: true, Now: b.now}))
	require.NoError(t, b.ex.MessageCompleteMany(b.ctx, []*relaydriver.MessageCompleteParams{
		{Queue: "p", ID: 3, State: relaytype.StateDead, ErrorClass: relaytype.ClassProtocol, CountAttempt: true, Now: b.now},
		{Queue: "p", ID: 4, State: relaytype.StateSucceeded, Now: b.now},
	}))
	for id, want := range map[int64]int{1: 1, 2: 2, 3: 1, 4: 0} {
		m := b.get("p", id)
		require.Equal(t, want, m.Attempts, "message %d", id)
	}
	require.Equal(t, relaytype.StateDead, b.get("p", 2).State)
}

// seed 000 §3, §5.1 step 3: only a FAILED message at its limit becomes
// DEAD(EXHAUSTED); the class is overwritten and LastError keeps the cause.
func testExhaust(t *testing.T, b *bundle) {
	b.insert("p", 1, 2)
	exhaust := func(id int64, max int) error {
		return b.ex.MessageExhaust(b.ctx, &relaydriver.MessageExhaustParams{Queue: "p", ID: id, MaxAttempts: max, Now: b.now})
	}
	require.ErrorIs(t, exhaust(2, 0), relaytype.ErrConflict, "PENDING is never exhausted")

	b.fail("p", 1, relaytype.ClassInfra, time.Time{})
	b.fail("p", 1, relaytype.ClassInfra, time.Time{})
	require.ErrorIs(t, exhaust(1, 3), relaytype.ErrConflict, "below the limit")
	require.Equal(t, relaytype.StateFailed, b.get("p", 1).State)

	_, err := b.ex.MessageFail(b.ctx, &relaydriver.MessageFailParams{Queue: "p", ID: 1, ErrorClass: relaytype.ClassCodec, LastError: "root cause", Now: b.now})
	require.NoError(t, err)
	b.now = at(time.Minute)
	require.NoError(t, exhaust(1, 3))
	m := b.get("p", 1)
	require.Equal(t, relaytype.StateDead, m.State)
	require.Equal(t, relaytype.ClassExhausted, m.ErrorClass)
	require.Equal(t, "root cause", m.LastError)
	require.Equal(t, 3, m.Attempts)
	requireTime(t, b.now, m.UpdatedAt, "UpdatedAt")
	requireTime(t, time.Time{}, m.AckNextAt, "AckNextAt without intent")
	require.ErrorIs(t, exhaust(1, 3), relaytype.ErrConflict, "already DEAD")
	require.Equal(t, []int64{2}, b.head("p"))
}
