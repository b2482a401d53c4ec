package relaydrivertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Conformance of latest-state outbox rows (seed 000 §8.2; docs/outbox.md).

var latestCases = []struct {
	name string
	fn   func(t *testing.T, b *bundle)
}{
	{"LatestOnlyForward", testLatestOnlyForward},
	{"LatestGenerationPerAcceptedUpsert", testLatestGeneration},
	{"LatestUpsertInTx", testLatestUpsertInTx},
	{"LatestConditionalMarkSent", testLatestConditionalMark},
	{"LatestFailDeadAndReset", testLatestFailDeadReset},
	{"LatestTombstone", testLatestTombstone},
	{"LatestFetchDueBounded", testLatestFetchDueBounded},
	{"LatestUpsertManyMixed", testLatestUpsertManyMixed},
	{"LatestUpsertManyResetsDelivery", testLatestUpsertManyReset},
	{"LatestUpsertManyTombstones", testLatestUpsertManyTombstones},
	{"LatestUpsertManyDuplicateKeyRejected", testLatestUpsertManyDuplicateKey},
	{"LatestUpsertManyInTx", testLatestUpsertManyInTx},
}

func init() { cases = append(cases, latestCases...) }

// latestUpsert writes key's state at version (autocommit) and returns the outcome.
func (b *bundle) latestUpsert(target, key string, version int64, payload string) *relaydriver.LatestUpserted {
	b.t.Helper()
	res, err := b.ex.LatestUpsert(b.ctx, &relaydriver.LatestUpsertParams{
		Target: target, Topic: "topic-" + target, Key: key, Version: version, Type: relaydriver.OutboxUpsert,
		Headers: map[string]string{"v": "x"}, Payload: []byte(payload), Now: b.now,
	})
	require.NoError(b.t, err)
	return res
}

func (b *bundle) latestGet(target, key string) *relaydriver.LatestRecord {
	b.t.Helper()
	r, err := b.ex.LatestGet(b.ctx, target, key)
	require.NoError(b.t, err)
	return r
}

func (b *bundle) latestFetch(target string, limit int, now time.Time) []string {
	b.t.Helper()
	rs, err := b.ex.LatestFetch(b.ctx, &relaydriver.LatestFetchParams{Target: target, Limit: limit, Now: now})
	require.NoError(b.t, err)
	out := []string{}
	for _, r := range rs {
		out = append(out, r.Key)
	}
	return out
}

// Only forward: an older version is refused and changes nothing; an equal
// version is accepted and replaces the state.
func testLatestOnlyForward(t *testing.T, b *bundle) {
	require.True(t, b.latestUpsert("t", "a", 5, "v5").Accepted)
	refused := b.latestUpsert("t", "a", 4, "v4")
	require.False(t, refused.Accepted)
	require.Zero(t, refused.Generation)
	r := b.latestGet("t", "a")
	require.Equal(t, int64(5), r.Version)
	require.Equal(t, "v5", string(r.Payload))

	require.True(t, b.latestUpsert("t", "a", 5, "v5bis").Accepted, "an equal version is accepted")
	require.Equal(t, "v5bis", string(b.latestGet("t", "a").Payload))
	require.True(t, b.latestUpsert("t", "a", 9, "v9").Accepted)
	r = b.latestGet("t", "a")
	require.Equal(t, int64(9), r.Version)
	require.Equal(t, "v9", string(r.Payload))
	require.Equal(t, "topic-t", r.Topic)
	require.Equal(t, map[string]string{"v": "x"}, r.Headers)
	require.Equal(t, relaydriver.OutboxPending, r.State)
	require.True(t, b.now.Equal(r.UpdatedAt))

	_, err := b.ex.LatestGet(b.ctx, "t", "missing")
	require.ErrorIs(t, err, relaytype.ErrNotFound)
}

// Every accepted upsert takes a new, larger generation, across keys too; the
// row carries the last one.
func testLatestGeneration(t *testing.T, b *bundle) {
	g1 := b.latestUpsert("t", "a", 1, "").Generation
	g2 := b.latestUpsert("t", "a", 1, "").Generation
	g3 := b.latestUpsert("t", "b", 1, "").Generation
	g4 := b.latestUpsert("t", "a", 2, "").Generation
	require.Positive(t, g1)
	require.Greater(t, g2, g1)
	require.Greater(t, g3, g2)
	require.Greater(t, g4, g3)
	require.Equal(t, g4, b.latestGet("t", "a").Generation)
	require.Equal(t, g3, b.latestGet("t", "b").Generation)
	require.False(t, b.latestUpsert("t", "a", 1, "").Accepted)
	require.Equal(t, g4, b.latestGet("t", "a").Generation, "a refused upsert keeps the generation")
}

// In a transaction the upsert commits or rolls back with it.
func testLatestUpsertInTx(t *testing.T, b *bundle) {
	tx, err := b.d.Begin(b.ctx)
	require.NoError(t, err)
	res, err := tx.LatestUpsert(b.ctx, &relaydriver.LatestUpsertParams{Target: "t", Key: "a", Version: 3,
		Type: relaydriver.OutboxUpsert, Payload: []byte("x"), Now: b.now})
	require.NoError(t, err)
	require.True(t, res.Accepted)
	require.NoError(t, tx.Rollback(b.ctx))
	_, err = b.ex.LatestGet(b.ctx, "t", "a")
	require.ErrorIs(t, err, relaytype.ErrNotFound)
	require.True(t, b.latestUpsert("t", "a", 1, "").Accepted, "the rolled-back version 3 left nothing behind")
}

// MarkSent confirms only the generation read: a row rewritten between fetch
// and mark keeps its newer generation PENDING and is fetched again.
func testLatestConditionalMark(t *testing.T, b *bundle) {
	b.latestUpsert("t", "a", 1, "a1")
	b.latestUpsert("t", "b", 1, "b1")
	rs, err := b.ex.LatestFetch(b.ctx, &relaydriver.LatestFetchParams{Target: "t", Now: b.now})
	require.NoError(t, err)
	require.Len(t, rs, 2)
	newer := b.latestUpsert("t", "a", 2, "a2") // written while the batch is in flight
	refs := []relaydriver.LatestRef{{Key: rs[0].Key, Generation: rs[0].Generation}, {Key: rs[1].Key, Generation: rs[1].Generation}}
	n, err := b.ex.LatestMarkSent(b.ctx, &relaydriver.LatestMarkSentParams{Target: "t", Rows: refs, Now: at(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, 1, n, "only b is still at the generation read")
	a, bb := b.latestGet("t", "a"), b.latestGet("t", "b")
	require.Equal(t, relaydriver.OutboxPending, a.State)
	require.Equal(t, newer.Generation, a.Generation)
	require.True(t, a.SentAt.IsZero())
	require.Equal(t, relaydriver.OutboxSent, bb.State)
	require.True(t, at(time.Minute).Equal(bb.SentAt))
	require.Equal(t, []string{"a"}, b.latestFetch("t", 0, b.now))

	n, err = b.ex.LatestMarkSent(b.ctx, &relaydriver.LatestMarkSentParams{Target: "t", Rows: refs, Now: at(time.Minute)})
	require.NoError(t, err)
	require.Zero(t, n, "marking again changes nothing")
	n, err = b.ex.LatestMarkSent(b.ctx, &relaydriver.LatestMarkSentParams{Target: "u", Now: b.now})
	require.NoError(t, err)
	require.Zero(t, n, "no rows is a no-op")
}

// Fail adds attempts with backoff and turns DEAD at the limit, guarded by the
// generation; a new generation revives a DEAD row (PENDING, attempts and error
// cleared).
func testLatestFailDeadReset(t *testing.T, b *bundle) {
	g := b.latestUpsert("t", "a", 1, "a1").Generation
	fail := func(gen int64) (*relaydriver.OutboxFailed, error) {
		return b.ex.LatestFail(b.ctx, &relaydriver.LatestFailParams{Target: "t", Key: "a", Generation: gen,
			Error: "boom", NextAttemptAt: at(time.Minute), MaxAttempts: 2, Now: b.now})
	}
	res, err := fail(g)
	require.NoError(t, err)
	require.Equal(t, &relaydriver.OutboxFailed{Attempts: 1}, res)
	r := b.latestGet("t", "a")
	require.Equal(t, relaydriver.OutboxPending, r.State)
	require.True(t, at(time.Minute).Equal(r.NextAttemptAt))
	require.Empty(t, b.latestFetch("t", 0, b.now), "waiting for the backoff")
	require.Equal(t, []string{"a"}, b.latestFetch("t", 0, at(time.Minute)))

	_, err = fail(g + 1000)
	require.ErrorIs(t, err, relaytype.ErrConflict, "another generation is refused")
	_, err = b.ex.LatestFail(b.ctx, &relaydriver.LatestFailParams{Target: "t", Key: "zz", Generation: g, MaxAttempts: 2, Now: b.now})
	require.ErrorIs(t, err, relaytype.ErrNotFound)

	res, err = fail(g)
	require.NoError(t, err)
	require.Equal(t, &relaydriver.OutboxFailed{Attempts: 2, Dead: true}, res)
	r = b.latestGet("t", "a")
	require.Equal(t, relaydriver.OutboxDead, r.State)
	require.Equal(t, "boom", r.LastError)
	require.Empty(t, b.latestFetch("t", 0, at(time.Hour)))
	_, err = fail(g)
	require.ErrorIs(t, err, relaytype.ErrConflict, "a DEAD row is not failed again")

	require.False(t, b.latestUpsert("t", "a", 0, "old").Accepted, "an older version does not revive it")
	require.Equal(t, relaydriver.OutboxDead, b.latestGet("t", "a").State)
	g2 := b.latestUpsert("t", "a", 1, "a1bis").Generation
	r = b.latestGet("t", "a")
	require.Equal(t, relaydriver.OutboxPending, r.State)
	require.Equal(t, g2, r.Generation)
	require.Zero(t, r.Attempts)
	require.Empty(t, r.LastError)
	require.True(t, r.NextAttemptAt.IsZero())
	require.Equal(t, []string{"a"}, b.latestFetch("t", 0, b.now))
}

// A tombstone replaces the state with a NULL payload; a tombstone with a
// payload is refused; a later version may recreate the key.
func testLatestTombstone(t *testing.T, b *bundle) {
	b.latestUpsert("t", "a", 1, "a1")
	_, err := b.ex.LatestUpsert(b.ctx, &relaydriver.LatestUpsertParams{Target: "t", Key: "a", Version: 2,
		Type: relaydriver.OutboxTombstone, Payload: []byte("x"), Now: b.now})
	require.Error(t, err)
	res, err := b.ex.LatestUpsert(b.ctx, &relaydriver.LatestUpsertParams{Target: "t", Key: "a", Version: 2,
		Type: relaydriver.OutboxTombstone, Now: b.now})
	require.NoError(t, err)
	require.True(t, res.Accepted)
	r := b.latestGet("t", "a")
	require.Equal(t, relaydriver.OutboxTombstone, r.Type)
	require.Nil(t, r.Payload)
	require.Equal(t, relaydriver.OutboxPending, r.State)
	require.False(t, b.latestUpsert("t", "a", 1, "late").Accepted, "a late older state does not resurrect the key")
	require.True(t, b.latestUpsert("t", "a", 3, "a3").Accepted)
	require.Equal(t, relaydriver.OutboxUpsert, b.latestGet("t", "a").Type)
}

// Fetch returns only due PENDING rows of its target, in key order, bounded;
// stats count per state.
func testLatestFetchDueBounded(t *testing.T, b *bundle) {
	for _, k := range []string{"d", "b", "e", "a", "c"} {
		b.latestUpsert("t", k, 1, k)
	}
	b.latestUpsert("u", "a", 1, "other target")
	require.Equal(t, []string{"a", "b", "c"}, b.latestFetch("t", 3, b.now))
	require.Equal(t, []string{"a", "b", "c", "d", "e"}, b.latestFetch("t", 0, b.now))

	c := b.latestGet("t", "c")
	_, err := b.ex.LatestFail(b.ctx, &relaydriver.LatestFailParams{Target: "t", Key: "c", Generation: c.Generation,
		Error: "x", NextAttemptAt: at(time.Minute), MaxAttempts: 5, Now: b.now})
	require.NoError(t, err)
	a := b.latestGet("t", "a")
	_, err = b.ex.LatestMarkSent(b.ctx, &relaydriver.LatestMarkSentParams{Target: "t",
		Rows: []relaydriver.LatestRef{{Key: "a", Generation: a.Generation}}, Now: b.now})
	require.NoError(t, err)
	require.Equal(t, []string{"b", "d"}, b.latestFetch("t", 2, b.now), "sent and backing-off rows are skipped")
	require.Equal(t, []string{"b", "c", "d", "e"}, b.latestFetch("t", 0, at(time.Minute)))

	b.now = at(time.Hour)
	b.latestUpsert("t", "f", 1, "f")
	st, err := b.ex.LatestStats(b.ctx, "t")
	require.NoError(t, err)
	require.Equal(t, [3]int64{5, 1, 0}, [3]int64{st.Pending, st.Sent, st.Dead}, "pending, sent, dead")
	requireTime(t, t0, st.OldestPendingAt, "OldestPendingAt: the smallest updated_at of a PENDING row")
}

// latestState is one state for LatestUpsertMany at b.now (payload "" is nil).
func (b *bundle) latestState(target, key string, version int64, payload string) *relaydriver.LatestUpsertParams {
	p := &relaydriver.LatestUpsertParams{
		Target: target, Topic: "topic-" + target, Key: key, Version: version, Type: relaydriver.OutboxUpsert,
		Headers: map[string]string{"k": key}, Now: b.now,
	}
	if payload != "" {
		p.Payload = []byte(payload)
	}
	return p
}

// latestUpsertMany writes states in one call (autocommit).
func (b *bundle) latestUpsertMany(states ...*relaydriver.LatestUpsertParams) []*relaydriver.LatestUpserted {
	b.t.Helper()
	res, err := b.ex.LatestUpsertMany(b.ctx, states)
	require.NoError(b.t, err)
	require.Len(b.t, res, len(states))
	return res
}

// Each key of one call follows the only-forward rule on its own: refused keys
// change nothing and report generation 0, accepted ones take distinct new
// generations; the outcome is in input order, across targets too.
func testLatestUpsertManyMixed(t *testing.T, b *bundle) {
	b.latestUpsert("t", "a", 5, "a5")
	gb := b.latestUpsert("t", "b", 5, "b5").Generation
	ga := b.latestGet("t", "a").Generation

	res := b.latestUpsertMany(
		b.latestState("t", "b", 5, "b5bis"), // equal version: accepted
		b.latestState("t", "a", 4, "a4"),    // older: refused
		b.latestState("t", "c", 1, "c1"),    // new key
		b.latestState("u", "a", 1, "ua1"),   // same key, another target
	)
	require.Equal(t, []bool{true, false, true, true}, []bool{res[0].Accepted, res[1].Accepted, res[2].Accepted, res[3].Accepted})
	require.Zero(t, res[1].Generation)
	seen := map[int64]bool{}
	for _, i := range []int{0, 2, 3} {
		require.Greater(t, res[i].Generation, gb, "state %d takes a new generation", i)
		require.False(t, seen[res[i].Generation], "generations are distinct")
		seen[res[i].Generation] = true
	}

	a := b.latestGet("t", "a")
	require.Equal(t, int64(5), a.Version)
	require.Equal(t, "a5", string(a.Payload))
	require.Equal(t, ga, a.Generation, "a refused state keeps the row")
	bb := b.latestGet("t", "b")
	require.Equal(t, "b5bis", string(bb.Payload))
	require.Equal(t, res[0].Generation, bb.Generation)
	require.Equal(t, map[string]string{"k": "b"}, bb.Headers)
	c := b.latestGet("t", "c")
	require.Equal(t, int64(1), c.Version)
	require.Equal(t, "topic-t", c.Topic)
	require.Equal(t, res[2].Generation, c.Generation)
	require.Equal(t, relaydriver.OutboxUpsert, c.Type)
	require.True(t, b.now.Equal(c.UpdatedAt))
	require.Equal(t, "ua1", string(b.latestGet("u", "a").Payload))
	require.Equal(t, []string{"a", "b", "c"}, b.latestFetch("t", 0, b.now))

	// Exactly LatestUpsert's outcome, key by key, against the same rows.
	many := b.latestUpsertMany(b.latestState("t", "a", 6, "a6"), b.latestState("t", "b", 1, "b1"))
	require.True(t, many[0].Accepted)
	require.False(t, many[1].Accepted)
	require.False(t, b.latestUpsert("t", "a", 5, "").Accepted)

	require.Empty(t, b.latestUpsertMany(), "no states is a no-op")
}

// An accepted state resets delivery: a DEAD or SENT row becomes PENDING with
// attempts, error, next attempt and sent time cleared; a refused state leaves
// a DEAD row DEAD.
func testLatestUpsertManyReset(t *testing.T, b *bundle) {
	gd := b.latestUpsert("t", "dead", 1, "d1").Generation
	_, err := b.ex.LatestFail(b.ctx, &relaydriver.LatestFailParams{Target: "t", Key: "dead", Generation: gd,
		Error: "boom", MaxAttempts: 1, Now: b.now})
	require.NoError(t, err)
	gf := b.latestUpsert("t", "failed", 1, "f1").Generation
	_, err = b.ex.LatestFail(b.ctx, &relaydriver.LatestFailParams{Target: "t", Key: "failed", Generation: gf,
		Error: "boom", NextAttemptAt: at(time.Hour), MaxAttempts: 5, Now: b.now})
	require.NoError(t, err)
	gs := b.latestUpsert("t", "sent", 1, "s1").Generation
	n, err := b.ex.LatestMarkSent(b.ctx, &relaydriver.LatestMarkSentParams{Target: "t",
		Rows: []relaydriver.LatestRef{{Key: "sent", Generation: gs}}, Now: b.now})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	gk := b.latestUpsert("t", "kept", 3, "k3").Generation
	_, err = b.ex.LatestFail(b.ctx, &relaydriver.LatestFailParams{Target: "t", Key: "kept", Generation: gk,
		Error: "boom", MaxAttempts: 1, Now: b.now})
	require.NoError(t, err)

	b.now = at(time.Minute)
	res := b.latestUpsertMany(
		b.latestState("t", "dead", 2, "d2"), b.latestState("t", "failed", 1, "f1bis"),
		b.latestState("t", "sent", 2, "s2"), b.latestState("t", "kept", 2, "k2"))
	require.True(t, res[0].Accepted && res[1].Accepted && res[2].Accepted)
	require.False(t, res[3].Accepted)
	for i, key := range []string{"dead", "failed", "sent"} {
		r := b.latestGet("t", key)
		require.Equal(t, relaydriver.OutboxPending, r.State, key)
		require.Equal(t, res[i].Generation, r.Generation, key)
		require.Zero(t, r.Attempts, key)
		require.Empty(t, r.LastError, key)
		require.True(t, r.NextAttemptAt.IsZero(), key)
		require.True(t, r.SentAt.IsZero(), key)
		require.True(t, b.now.Equal(r.UpdatedAt), key)
	}
	k := b.latestGet("t", "kept")
	require.Equal(t, relaydriver.OutboxDead, k.State, "an older state does not revive a DEAD row")
	require.Equal(t, gk, k.Generation)
	require.Equal(t, "boom", k.LastError)
	require.Equal(t, []string{"dead", "failed", "sent"}, b.latestFetch("t", 0, b.now))
}

// Tombstones in a batch: written with a NULL payload, a later older state does
// not resurrect the key, a tombstone with a payload fails the whole call.
func testLatestUpsertManyTombstones(t *testing.T, b *bundle) {
	b.latestUpsert("t", "a", 1, "a1")
	tomb := func(key string, version int64) *relaydriver.LatestUpsertParams {
		p := b.latestState("t", key, version, "")
		p.Type = relaydriver.OutboxTombstone
		return p
	}
	res := b.latestUpsertMany(tomb("a", 2), tomb("b", 1), b.latestState("t", "c", 1, "c1"))
	require.True(t, res[0].Accepted && res[1].Accepted && res[2].Accepted)
	for _, key := range []string{"a", "b"} {
		r := b.latestGet("t", key)
		require.Equal(t, relaydriver.OutboxTombstone, r.Type, key)
		require.Nil(t, r.Payload, key)
		require.Equal(t, relaydriver.OutboxPending, r.State, key)
	}
	res = b.latestUpsertMany(b.latestState("t", "a", 1, "late"), b.latestState("t", "b", 2, "b2"))
	require.False(t, res[0].Accepted, "a late older state does not resurrect the key")
	require.True(t, res[1].Accepted)
	require.Equal(t, relaydriver.OutboxTombstone, b.latestGet("t", "a").Type)
	require.Equal(t, relaydriver.OutboxUpsert, b.latestGet("t", "b").Type)

	bad := tomb("c", 5)
	bad.Payload = []byte("x")
	_, err := b.ex.LatestUpsertMany(b.ctx, []*relaydriver.LatestUpsertParams{b.latestState("t", "d", 1, "d1"), bad})
	require.Error(t, err)
	_, err = b.ex.LatestGet(b.ctx, "t", "d")
	require.ErrorIs(t, err, relaytype.ErrNotFound, "nothing of a refused call is written")
	require.Equal(t, int64(1), b.latestGet("t", "c").Version)
}

// The same (target, key) twice in one call is an error naming the key, and
// nothing of the call is written.
func testLatestUpsertManyDuplicateKey(t *testing.T, b *bundle) {
	b.latestUpsert("t", "a", 1, "a1")
	_, err := b.ex.LatestUpsertMany(b.ctx, []*relaydriver.LatestUpsertParams{
		b.latestState("t", "b", 1, "b1"), b.latestState("t", "a", 2, "a2"), b.latestState("t", "a", 3, "a3"),
	})
	require.Error(t, err)
	require.Contains(t, err.Error(), "t/a")
	require.Equal(t, "a1", string(b.latestGet("t", "a").Payload))
	_, err = b.ex.LatestGet(b.ctx, "t", "b")
	require.ErrorIs(t, err, relaytype.ErrNotFound)

	_, err = b.ex.LatestUpsertMany(b.ctx, []*relaydriver.LatestUpsertParams{b.latestState("t", "b", 1, "b1"), nil})
	require.Error(t, err, "a nil state")
	_, err = b.ex.LatestGet(b.ctx, "t", "b")
	require.ErrorIs(t, err, relaytype.ErrNotFound)
}

// In a transaction the states commit or roll back with it.
func testLatestUpsertManyInTx(t *testing.T, b *bundle) {
	b.latestUpsert("t", "a", 1, "a1")
	for _, commit := range []bool{false, true} {
		tx, err := b.d.Begin(b.ctx)
		require.NoError(t, err)
		res, err := tx.LatestUpsertMany(b.ctx, []*relaydriver.LatestUpsertParams{
			b.latestState("t", "a", 2, "a2"), b.latestState("t", "b", 1, "b1"),
		})
		require.NoError(t, err)
		require.True(t, res[0].Accepted && res[1].Accepted)
		if !commit {
			require.NoError(t, tx.Rollback(b.ctx))
			require.Equal(t, "a1", string(b.latestGet("t", "a").Payload))
			_, err = b.ex.LatestGet(b.ctx, "t", "b")
			require.ErrorIs(t, err, relaytype.ErrNotFound)
			continue
		}
		require.NoError(t, tx.Commit(b.ctx))
		require.Equal(t, "a2", string(b.latestGet("t", "a").Payload))
		require.Equal(t, res[1].Generation, b.latestGet("t", "b").Generation)
	}
}
