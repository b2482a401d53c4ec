package relaydrivertest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Conformance of the transactional outbox (seed 000 §8.1, §8.3; docs/outbox.md).

var outboxCases = []struct {
	name string
	fn   func(t *testing.T, b *bundle)
}{
	{"OutboxSeqPerKey", testOutboxSeqPerKey},
	{"OutboxRollbackConsumesNoSeq", testOutboxRollbackConsumesNoSeq},
	{"OutboxDuplicateEventID", testOutboxDuplicateEventID},
	{"OutboxFetchOrderAndContiguity", testOutboxFetchOrder},
	{"OutboxFetchRotation", testOutboxFetchRotation},
	{"OutboxBackoffPausesOnlyItsKey", testOutboxBackoffPausesKey},
	{"OutboxMarkSent", testOutboxMarkSent},
	{"OutboxMarkSentDelete", testOutboxMarkSentDelete},
	{"OutboxFailAndDead", testOutboxFailAndDead},
	{"OutboxDeleteSent", testOutboxDeleteSent},
}

func init() { cases = append(cases, outboxCases...) }

// outboxSerial makes event ids unique; subtests run in parallel.
var outboxSerial atomic.Int64

// ev builds an event of target/key with a unique id.
func ev(b *bundle, target, key string, payload string) *relaydriver.OutboxAppendParams {
	return &relaydriver.OutboxAppendParams{Event: relaytype.Event{
		ID:     fmt.Sprintf("%s-%s-%d", target, key, outboxSerial.Add(1)),
		Target: target, Topic: "topic-" + target, Key: key, Type: relaydriver.OutboxUpsert,
		Payload: []byte(payload),
	}, Now: b.now}
}

func (b *bundle) outboxAppend(ps ...*relaydriver.OutboxAppendParams) []relaydriver.OutboxAppended {
	b.t.Helper()
	tx, err := b.d.Begin(b.ctx)
	require.NoError(b.t, err)
	defer tx.Rollback(b.ctx) //nolint:errcheck
	out, err := tx.OutboxAppend(b.ctx, ps)
	require.NoError(b.t, err)
	require.NoError(b.t, tx.Commit(b.ctx))
	return out
}

func (b *bundle) outboxFetch(target string, limit int) []*relaydriver.OutboxRecord {
	b.t.Helper()
	rs, err := b.ex.OutboxFetch(b.ctx, &relaydriver.OutboxFetchParams{Target: target, Limit: limit, Now: b.now})
	require.NoError(b.t, err)
	return rs
}

func (b *bundle) outboxAll(target string) map[string]*relaydriver.OutboxRecord {
	b.t.Helper()
	rs, err := b.ex.OutboxList(b.ctx, &relaydriver.OutboxListParams{Target: target, Limit: 1000})
	require.NoError(b.t, err)
	out := map[string]*relaydriver.OutboxRecord{}
	for _, r := range rs {
		out[fmt.Sprintf("%s/%d", r.Key, r.Seq)] = r
	}
	return out
}

// keySeqs renders records as key/seq strings, in order.
func keySeqs(rs []*relaydriver.OutboxRecord) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s/%d", r.Key, r.Seq))
	}
	return out
}

// Seqs are 1, 2, 3 … per (target, key), in input order within a call, and
// independent across keys and targets. The stored row keeps every field.
func testOutboxSeqPerKey(t *testing.T, b *bundle) {
	first := ev(b, "t1", "a", "a1")
	first.Headers = map[string]string{"h": "v"}
	tomb := &relaydriver.OutboxAppendParams{Event: relaytype.Event{ID: "tomb-a", Target: "t1", Key: "a", Type: relaydriver.OutboxTombstone}, Now: b.now}
	got := b.outboxAppend(first, ev(b, "t1", "b", "b1"), ev(b, "t1", "a", "a2"), ev(b, "t2", "a", "x1"), tomb)
	seqs := []int64{}
	for _, g := range got {
		seqs = append(seqs, g.Seq)
		require.Positive(t, g.ID)
	}
	require.Equal(t, []int64{1, 1, 2, 1, 3}, seqs)
	b.now = at(time.Second)
	got = b.outboxAppend(ev(b, "t1", "a", "a4"), ev(b, "t1", "b", "b2"))
	require.Equal(t, int64(4), got[0].Seq)
	require.Equal(t, int64(2), got[1].Seq)

	all := b.outboxAll("t1")
	require.Len(t, all, 6)
	r := all["a/1"]
	require.Equal(t, first.ID, r.ID)
	require.Equal(t, "t1", r.Target)
	require.Equal(t, "topic-t1", r.Topic)
	require.Equal(t, relaydriver.OutboxUpsert, r.Type)
	require.Equal(t, map[string]string{"h": "v"}, r.Headers)
	require.Equal(t, []byte("a1"), r.Payload)
	require.Equal(t, relaydriver.OutboxPending, r.State)
	require.Zero(t, r.Attempts)
	require.Empty(t, r.LastError)
	requireTime(t, t0, r.CreatedAt, "CreatedAt")
	requireTime(t, time.Time{}, r.SentAt, "SentAt")
	requireTime(t, time.Time{}, r.NextAttemptAt, "NextAttemptAt")
	require.Nil(t, all["a/2"].Headers)
	r = all["a/3"]
	require.Equal(t, relaydriver.OutboxTombstone, r.Type)
	require.Nil(t, r.Payload, "a tombstone's payload is NULL")
	requireTime(t, at(time.Second), all["a/4"].CreatedAt, "CreatedAt")
	require.Len(t, b.outboxAll("t2"), 1)

	// A tombstone with a payload, an unknown type or a missing Now is refused.
	_, err := b.ex.OutboxAppend(b.ctx, []*relaydriver.OutboxAppendParams{{Event: relaytype.Event{ID: "x", Target: "t1", Key: "a", Type: relaydriver.OutboxTombstone, Payload: []byte("p")}, Now: b.now}})
	require.ErrorIs(t, err, relaytype.ErrInvalidEvent)
	_, err = b.ex.OutboxAppend(b.ctx, []*relaydriver.OutboxAppendParams{{Event: relaytype.Event{ID: "x", Target: "t1", Key: "a", Type: "DELETE"}, Now: b.now}})
	require.Error(t, err)
	_, err = b.ex.OutboxAppend(b.ctx, []*relaydriver.OutboxAppendParams{{Event: relaytype.Event{ID: "x", Target: "t1", Key: "a", Type: relaydriver.OutboxUpsert}}})
	require.Error(t, err)
	_, err = b.ex.OutboxAppend(b.ctx, []*relaydriver.OutboxAppendParams{{Event: relaytype.Event{ID: "x", Target: "t1", Key: "a", Type: relaydriver.OutboxUpsert, Seq: 7}, Now: b.now}})
	require.ErrorIs(t, err, relaytype.ErrInvalidEvent, "a Seq set by the caller is refused: the store assigns it")
}

// A rolled-back transaction consumes no number: the next commit gets the next
// seq without a gap (docs/outbox.md).
func testOutboxRollbackConsumesNoSeq(t *testing.T, b *bundle) {
	b.outboxAppend(ev(b, "t", "k", "1"))
	tx, err := b.d.Begin(b.ctx)
	require.NoError(t, err)
	got, err := tx.OutboxAppend(b.ctx, []*relaydriver.OutboxAppendParams{ev(b, "t", "k", "rolled back"), ev(b, "t", "new", "rolled back")})
	require.NoError(t, err)
	require.Equal(t, int64(2), got[0].Seq)
	require.NoError(t, tx.Rollback(b.ctx))

	got = b.outboxAppend(ev(b, "t", "k", "2"), ev(b, "t", "new", "1"))
	require.Equal(t, int64(2), got[0].Seq)
	require.Equal(t, int64(1), got[1].Seq)
	require.Equal(t, []string{"k/1", "k/2", "new/1"}, keySeqs(b.outboxFetch("t", 100)))
}

// A duplicate event id is ErrConflict and nothing of the call is applied: the
// key's sequence is not advanced (no gap).
func testOutboxDuplicateEventID(t *testing.T, b *bundle) {
	e1 := ev(b, "t", "k", "1")
	b.outboxAppend(e1)
	dup := *e1
	dup.Key = "other"
	_, err := b.ex.OutboxAppend(b.ctx, []*relaydriver.OutboxAppendParams{ev(b, "t", "k", "x"), &dup})
	require.ErrorIs(t, err, relaytype.ErrConflict)

	// In a transaction: the conflict is reported; the caller rolls back.
	tx, err := b.d.Begin(b.ctx)
	require.NoError(t, err)
	_, err = tx.OutboxAppend(b.ctx, []*relaydriver.OutboxAppendParams{ev(b, "t", "k", "x"), &dup})
	require.ErrorIs(t, err, relaytype.ErrConflict)
	require.NoError(t, tx.Rollback(b.ctx))

	// Two events with one id in one call.
	e2 := ev(b, "t", "z", "1")
	_, err = b.ex.OutboxAppend(b.ctx, []*relaydriver.OutboxAppendParams{e2, e2})
	require.ErrorIs(t, err, relaytype.ErrConflict)

	got := b.outboxAppend(ev(b, "t", "k", "2"), ev(b, "t", "z", "1"))
	require.Equal(t, int64(2), got[0].Seq, "the refused calls consumed no seq")
	require.Equal(t, int64(1), got[1].Seq)
	require.Equal(t, []string{"k/1", "k/2", "z/1"}, keySeqs(b.outboxFetch("t", 100)))
}

// Fetch (from the first key) returns (key, seq) order, only the target's
// PENDING events, and per key only the contiguous run from its smallest
// PENDING seq.
func testOutboxFetchOrder(t *testing.T, b *bundle) {
	got := b.outboxAppend(ev(b, "t", "b", ""), ev(b, "t", "a", ""), ev(b, "t", "b", ""), ev(b, "t", "a", ""),
		ev(b, "t", "a", ""), ev(b, "t", "c", ""), ev(b, "other", "a", ""))
	require.Equal(t, []string{"a/1", "a/2", "a/3", "b/1", "b/2", "c/1"}, keySeqs(b.outboxFetch("t", 100)))

	// a/2 is marked SENT out of order (the dispatcher never does this): a's
	// run stops before the hole; a/1 is still the head.
	n, err := b.ex.OutboxMarkSent(b.ctx, &relaydriver.OutboxMarkSentParams{IDs: []int64{got[3].ID}, Now: b.now})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []string{"a/1", "b/1", "b/2", "c/1"}, keySeqs(b.outboxFetch("t", 100)))

	// A DEAD head (b/1) releases its key: the next PENDING event becomes the head.
	_, err = b.ex.OutboxFail(b.ctx, &relaydriver.OutboxFailParams{ID: got[0].ID, Error: "x", MaxAttempts: 1, Now: b.now})
	require.NoError(t, err)
	require.Equal(t, []string{"a/1", "b/2", "c/1"}, keySeqs(b.outboxFetch("t", 100)))
	require.Empty(t, b.outboxFetch("nobody", 100))
}

// When the limit cuts, keys are served in rotation from AfterKey: the keys
// after it in key order, then the keys up to it (wrapping around), each key's
// part a prefix of its run, in serving order. SkipKeys are never returned.
func testOutboxFetchRotation(t *testing.T, b *bundle) {
	var ps []*relaydriver.OutboxAppendParams
	for range 5 {
		ps = append(ps, ev(b, "t", "a", ""))
	}
	ps = append(ps, ev(b, "t", "b", ""), ev(b, "t", "c", ""), ev(b, "t", "c", ""), ev(b, "t", "", ""))
	b.outboxAppend(ps...)
	fetch := func(limit int, after string, skip ...string) []string {
		t.Helper()
		rs, err := b.ex.OutboxFetch(b.ctx, &relaydriver.OutboxFetchParams{
			Target: "t", Limit: limit, Now: b.now, AfterKey: after, SkipKeys: skip})
		require.NoError(t, err)
		return keySeqs(rs)
	}
	require.Equal(t, []string{"a/1", "a/2", "a/3"}, fetch(3, ""))
	require.Equal(t, []string{"a/1", "a/2", "a/3", "a/4", "a/5", "b/1", "c/1"}, fetch(7, ""))
	require.Equal(t, []string{"b/1", "c/1", "c/2", "/1", "a/1"}, fetch(5, "a"), "wraps around after the last key")
	require.Equal(t, []string{"/1", "a/1", "a/2"}, fetch(3, "c"))
	require.Equal(t, []string{"a/1", "a/2", "a/3", "a/4", "a/5", "b/1", "c/1", "c/2", "/1"}, fetch(100, ""),
		"the empty key is served last from the start")
	require.Equal(t, []string{"c/1", "c/2", "/1"}, fetch(100, "b", "a", "b"))
	require.Equal(t, []string{"b/1"}, fetch(1, "a", "c"))
	require.Empty(t, fetch(100, "", "a", "b", "c", ""))
}

// A head waiting for its backoff pauses only its own key; when due, the key's
// run is fetched again from that head.
func testOutboxBackoffPausesKey(t *testing.T, b *bundle) {
	got := b.outboxAppend(ev(b, "t", "a", ""), ev(b, "t", "a", ""), ev(b, "t", "b", ""))
	res, err := b.ex.OutboxFail(b.ctx, &relaydriver.OutboxFailParams{
		ID: got[0].ID, Error: "broker down", NextAttemptAt: at(time.Minute), MaxAttempts: 3, Now: b.now,
	})
	require.NoError(t, err)
	require.Equal(t, 1, res.Attempts)
	require.False(t, res.Dead)
	require.Equal(t, []string{"b/1"}, keySeqs(b.outboxFetch("t", 100)))
	b.now = at(time.Minute - time.Microsecond)
	require.Equal(t, []string{"b/1"}, keySeqs(b.outboxFetch("t", 100)))
	b.now = at(time.Minute)
	rs := b.outboxFetch("t", 100)
	require.Equal(t, []string{"a/1", "a/2", "b/1"}, keySeqs(rs))
	require.Equal(t, 1, rs[0].Attempts)
	require.Equal(t, "broker down", rs[0].LastError)
	requireTime(t, at(time.Minute), rs[0].NextAttemptAt, "NextAttemptAt")
}

// MarkSent sets SENT and sent_at together and touches only PENDING rows.
func testOutboxMarkSent(t *testing.T, b *bundle) {
	got := b.outboxAppend(ev(b, "t", "a", ""), ev(b, "t", "a", ""), ev(b, "t", "b", ""))
	_, err := b.ex.OutboxFail(b.ctx, &relaydriver.OutboxFailParams{ID: got[2].ID, Error: "bad", MaxAttempts: 1, Now: b.now})
	require.NoError(t, err) // b/1 is DEAD
	b.now = at(time.Second)
	n, err := b.ex.OutboxMarkSent(b.ctx, &relaydriver.OutboxMarkSentParams{IDs: []int64{got[0].ID, got[2].ID, 999999}, Now: b.now})
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the PENDING row changes")
	all := b.outboxAll("t")
	require.Equal(t, relaydriver.OutboxSent, all["a/1"].State)
	requireTime(t, at(time.Second), all["a/1"].SentAt, "SentAt")
	require.Equal(t, relaydriver.OutboxPending, all["a/2"].State)
	requireTime(t, time.Time{}, all["a/2"].SentAt, "SentAt of a PENDING row")
	require.Equal(t, relaydriver.OutboxDead, all["b/1"].State)
	requireTime(t, time.Time{}, all["b/1"].SentAt, "SentAt of a DEAD row")

	// Again: already SENT, nothing changes, sent_at is kept.
	b.now = at(time.Minute)
	n, err = b.ex.OutboxMarkSent(b.ctx, &relaydriver.OutboxMarkSentParams{IDs: []int64{got[0].ID}, Now: b.now})
	require.NoError(t, err)
	require.Zero(t, n)
	requireTime(t, at(time.Second), b.outboxAll("t")["a/1"].SentAt, "SentAt kept")
	n, err = b.ex.OutboxMarkSent(b.ctx, &relaydriver.OutboxMarkSentParams{Now: b.now})
	require.NoError(t, err)
	require.Zero(t, n)
	st, err := b.ex.OutboxStats(b.ctx, "t")
	require.NoError(t, err)
	require.Equal(t, [3]int64{1, 1, 1}, [3]int64{st.Pending, st.Sent, st.Dead}, "pending, sent, dead")
	requireTime(t, t0, st.OldestPendingAt, "OldestPendingAt: created_at of the PENDING a/2")
	st, err = b.ex.OutboxStats(b.ctx, "no-such-target")
	require.NoError(t, err)
	require.Equal(t, relaydriver.OutboxStats{}, *st, "nothing PENDING: zero counts, zero OldestPendingAt")

	// Async marks the same way (only durability may differ); inside a
	// transaction it follows the transaction.
	tx, err := b.d.Begin(b.ctx)
	require.NoError(t, err)
	n, err = tx.OutboxMarkSent(b.ctx, &relaydriver.OutboxMarkSentParams{IDs: []int64{got[1].ID}, Now: b.now, Async: true})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, tx.Rollback(b.ctx))
	require.Equal(t, relaydriver.OutboxPending, b.outboxAll("t")["a/2"].State, "rolled back with its transaction")
	n, err = b.ex.OutboxMarkSent(b.ctx, &relaydriver.OutboxMarkSentParams{IDs: []int64{got[0].ID, got[1].ID}, Now: b.now, Async: true})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	all = b.outboxAll("t")
	require.Equal(t, relaydriver.OutboxSent, all["a/2"].State)
	requireTime(t, at(time.Minute), all["a/2"].SentAt, "SentAt")
}

// MarkSent with Delete removes the confirmed rows still PENDING and only
// those (SENT and DEAD rows stay); the key's seq continues after them and its
// next event is its new head. Async and a caller's transaction behave as for
// marks.
func testOutboxMarkSentDelete(t *testing.T, b *bundle) {
	got := b.outboxAppend(ev(b, "t", "a", ""), ev(b, "t", "a", ""), ev(b, "t", "a", ""), ev(b, "t", "b", ""))
	_, err := b.ex.OutboxFail(b.ctx, &relaydriver.OutboxFailParams{ID: got[3].ID, Error: "bad", MaxAttempts: 1, Now: b.now})
	require.NoError(t, err) // b/1 is DEAD
	n, err := b.ex.OutboxMarkSent(b.ctx, &relaydriver.OutboxMarkSentParams{IDs: []int64{got[0].ID}, Now: b.now})
	require.NoError(t, err)
	require.Equal(t, 1, n) // a/1 is SENT

	n, err = b.ex.OutboxMarkSent(b.ctx, &relaydriver.OutboxMarkSentParams{
		IDs: []int64{got[0].ID, got[1].ID, got[3].ID, 999999}, Now: b.now, Delete: true})
	require.NoError(t, err)
	require.Equal(t, 1, n, "only the PENDING row goes")
	all := b.outboxAll("t")
	require.Len(t, all, 3)
	require.NotContains(t, all, "a/2")
	require.Equal(t, relaydriver.OutboxSent, all["a/1"].State)
	require.Equal(t, relaydriver.OutboxPending, all["a/3"].State)
	require.Equal(t, relaydriver.OutboxDead, all["b/1"].State)
	require.Equal(t, []string{"a/3"}, keySeqs(b.outboxFetch("t", 100)), "the key continues at its next event")

	// In a transaction the delete follows it; Async outside one deletes too.
	tx, err := b.d.Begin(b.ctx)
	require.NoError(t, err)
	n, err = tx.OutboxMarkSent(b.ctx, &relaydriver.OutboxMarkSentParams{IDs: []int64{got[2].ID}, Now: b.now, Async: true, Delete: true})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, tx.Rollback(b.ctx))
	require.Contains(t, b.outboxAll("t"), "a/3", "rolled back with its transaction")
	n, err = b.ex.OutboxMarkSent(b.ctx, &relaydriver.OutboxMarkSentParams{IDs: []int64{got[2].ID}, Now: b.now, Async: true, Delete: true})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NotContains(t, b.outboxAll("t"), "a/3")
	n, err = b.ex.OutboxMarkSent(b.ctx, &relaydriver.OutboxMarkSentParams{IDs: []int64{got[2].ID}, Now: b.now, Delete: true})
	require.NoError(t, err)
	require.Zero(t, n, "gone already")

	more := b.outboxAppend(ev(b, "t", "a", ""))
	require.Equal(t, int64(4), more[0].Seq, "a key's seq never restarts")
	st, err := b.ex.OutboxStats(b.ctx, "t")
	require.NoError(t, err)
	require.Equal(t, [3]int64{1, 1, 1}, [3]int64{st.Pending, st.Sent, st.Dead}, "pending, sent, dead")
}

// Fail counts attempts and sets the next attempt; at MaxAttempts the event is
// DEAD with its error kept (the DLQ), and no longer fails or sends.
func testOutboxFailAndDead(t *testing.T, b *bundle) {
	got := b.outboxAppend(ev(b, "t", "a", ""))
	id := got[0].ID
	for i := 1; i <= 2; i++ {
		res, err := b.ex.OutboxFail(b.ctx, &relaydriver.OutboxFailParams{
			ID: id, Error: fmt.Sprintf("err %d", i), NextAttemptAt: at(time.Duration(i) * time.Minute), MaxAttempts: 3, Now: b.now,
		})
		require.NoError(t, err)
		require.Equal(t, relaydriver.OutboxFailed{Attempts: i}, *res)
		r := b.outboxAll("t")["a/1"]
		require.Equal(t, relaydriver.OutboxPending, r.State)
		require.Equal(t, i, r.Attempts)
		require.Equal(t, fmt.Sprintf("err %d", i), r.LastError)
		requireTime(t, at(time.Duration(i)*time.Minute), r.NextAttemptAt, "NextAttemptAt")
	}
	b.now = at(time.Hour)
	res, err := b.ex.OutboxFail(b.ctx, &relaydriver.OutboxFailParams{
		ID: id, Error: "err 3", NextAttemptAt: at(2 * time.Hour), MaxAttempts: 3, Now: b.now,
	})
	require.NoError(t, err)
	require.Equal(t, relaydriver.OutboxFailed{Attempts: 3, Dead: true}, *res)
	r := b.outboxAll("t")["a/1"]
	require.Equal(t, relaydriver.OutboxDead, r.State)
	require.Equal(t, 3, r.Attempts)
	require.Equal(t, "err 3", r.LastError)
	requireTime(t, at(time.Hour), r.UpdatedAt, "UpdatedAt")
	require.Empty(t, b.outboxFetch("t", 100))

	_, err = b.ex.OutboxFail(b.ctx, &relaydriver.OutboxFailParams{ID: id, Error: "again", MaxAttempts: 3, Now: b.now})
	require.ErrorIs(t, err, relaytype.ErrConflict)
	_, err = b.ex.OutboxFail(b.ctx, &relaydriver.OutboxFailParams{ID: 999999, Error: "x", MaxAttempts: 3, Now: b.now})
	require.ErrorIs(t, err, relaytype.ErrNotFound)
	dead, err := b.ex.OutboxList(b.ctx, &relaydriver.OutboxListParams{Target: "t", State: relaydriver.OutboxDead})
	require.NoError(t, err)
	require.Len(t, dead, 1)
}

// Retention deletes only SENT rows sent before the cutoff, up to the limit;
// PENDING and DEAD rows stay, and a key's seq never restarts.
func testOutboxDeleteSent(t *testing.T, b *bundle) {
	got := b.outboxAppend(ev(b, "t", "a", ""), ev(b, "t", "a", ""), ev(b, "t", "a", ""), ev(b, "t", "b", ""),
		ev(b, "t", "c", ""), ev(b, "u", "a", ""))
	mark := func(now time.Time, ids ...int64) {
		_, err := b.ex.OutboxMarkSent(b.ctx, &relaydriver.OutboxMarkSentParams{IDs: ids, Now: now})
		require.NoError(t, err)
	}
	mark(at(time.Hour), got[0].ID, got[5].ID)
	mark(at(2*time.Hour), got[1].ID)
	mark(at(3*time.Hour), got[2].ID)
	_, err := b.ex.OutboxFail(b.ctx, &relaydriver.OutboxFailParams{ID: got[3].ID, Error: "x", MaxAttempts: 1, Now: b.now})
	require.NoError(t, err) // b/1 DEAD; c/1 PENDING

	n, err := b.ex.OutboxDeleteSent(b.ctx, "t", at(2*time.Hour), 100)
	require.NoError(t, err)
	require.Equal(t, 1, n, "only a/1 was sent before the cutoff")
	n, err = b.ex.OutboxDeleteSent(b.ctx, "t", at(10*time.Hour), 1)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the limit holds")
	n, err = b.ex.OutboxDeleteSent(b.ctx, "t", at(10*time.Hour), 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	all := b.outboxAll("t")
	require.Len(t, all, 2)
	require.Equal(t, relaydriver.OutboxDead, all["b/1"].State)
	require.Equal(t, relaydriver.OutboxPending, all["c/1"].State)
	require.Len(t, b.outboxAll("u"), 1, "other targets untouched")

	next := b.outboxAppend(ev(b, "t", "a", ""))
	require.Equal(t, int64(4), next[0].Seq, "the key's sequence survives retention")
}
