package relaydrivertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Conformance of the archival of terminal processing rows (seed 000 §9.3
// "处理终态归档"; relaydriver.ArchiveExecutor).

var archiveCases = []struct {
	name string
	fn   func(t *testing.T, b *bundle)
}{
	{"ArchiveOnlySettledTerminalBeforeThreshold", testArchiveCandidates},
	{"ArchiveHistoryHoldsFullRow", testArchiveHistory},
	{"ArchiveShadowKeepsIdentity", testArchiveShadow},
	{"ArchiveReplayedRowNotArchived", testArchiveReplayed},
	{"ArchiveLimitAndTx", testArchiveLimitAndTx},
}

func init() { cases = append(cases, archiveCases...) }

// archive archives queue's rows terminal before `before`, at b.now.
func (b *bundle) archive(queue string, before time.Time, limit int) int {
	b.t.Helper()
	n, err := b.ex.MessageArchive(b.ctx, &relaydriver.MessageArchiveParams{
		Queue: queue, TerminalBefore: before, Limit: limit, Now: b.now,
	})
	require.NoError(b.t, err)
	return n
}

// historyRow is the part of a relay_message_history row the suite checks
// (times are left out: their column types differ between dialects).
type historyRow struct {
	id         int64
	key, state string
	attempts   int
	class      string
	lastError  string
	identity   string
	payload    string
}

// history returns queue's history rows in id order.
func (b *bundle) history(queue string) []historyRow {
	b.t.Helper()
	rows, err := b.ex.Query(b.ctx, `SELECT id, "key", state, attempts, error_class, last_error,
		COALESCE(identity_key, ''), payload FROM relay_message_history WHERE queue = $1 ORDER BY id`, queue)
	require.NoError(b.t, err)
	defer rows.Close()
	out := []historyRow{}
	for rows.Next() {
		var (
			h       historyRow
			payload []byte
		)
		require.NoError(b.t, rows.Scan(&h.id, &h.key, &h.state, &h.attempts, &h.class, &h.lastError, &h.identity, &payload))
		h.payload = string(payload)
		out = append(out, h)
	}
	require.NoError(b.t, rows.Err())
	return out
}

func historyIDs(hs []historyRow) []int64 {
	out := []int64{}
	for _, h := range hs {
		out = append(out, h.id)
	}
	return out
}

// Only terminal rows whose acknowledgement is settled (acknowledged, or never
// owed) and whose updated_at is before the threshold (strict <) are
// archived; an abandoned, unreconciled row is not (abandoned ≠ acknowledged),
// a reconciled one is; other queues are untouched.
func testArchiveCandidates(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4, 5, 6, 7, 8, 9)
	b.insert("other", 1)
	b.now = at(time.Second)
	b.complete("p", 1, relaytype.StateSucceeded, "", "") // no intent ever recorded
	b.finish("p", 2, relaytype.StateSkipped)
	require.Equal(t, 1, b.ackDone("p", 2)) // acknowledged
	b.finish("p", 3, relaytype.StateDead)  // owes an acknowledgement
	b.finish("p", 4, relaytype.StateSucceeded)
	b.ackAbandon("p", 4, relaydriver.AckReasonMissingRow) // abandoned, not reconciled
	b.fail("p", 6, relaytype.ClassInfra, at(time.Minute)) // 5 PENDING, 6 FAILED
	b.finish("p", 8, relaytype.StateDead)
	b.ackAbandon("p", 8, relaydriver.AckReasonTransientDeadline)
	_, err := b.ex.AckReopen(b.ctx, &relaydriver.AckReopenParams{Queue: "p", IDs: []int64{8}, Now: b.now})
	require.NoError(t, err)
	require.Equal(t, 1, b.ackDone("p", 8)) // abandoned, then reconciled
	b.complete("p", 9, relaytype.StateSkipped, "", "ignored:X")
	b.complete("other", 1, relaytype.StateSucceeded, "", "")
	b.now = at(10 * time.Second)
	b.complete("p", 7, relaytype.StateSucceeded, "", "") // terminal exactly at the threshold

	b.now = at(time.Hour)
	require.Zero(t, b.archive("p", at(time.Second), 100), "terminal exactly at the threshold is not before it")
	require.Equal(t, 4, b.archive("p", at(10*time.Second), 100))
	require.Equal(t, []int64{1, 2, 8, 9}, historyIDs(b.history("p")))
	want := map[int64]relaytype.State{
		1: relaytype.StateArchived, 2: relaytype.StateArchived, 3: relaytype.StateDead, 4: relaytype.StateSucceeded,
		5: relaytype.StatePending, 6: relaytype.StateFailed, 7: relaytype.StateSucceeded, 8: relaytype.StateArchived,
		9: relaytype.StateArchived,
	}
	for id, s := range want {
		require.Equal(t, s, b.get("p", id).State, "message %d", id)
	}
	require.Equal(t, relaytype.StateSucceeded, b.get("other", 1).State)
	require.Empty(t, b.history("other"))
	require.Zero(t, b.archive("p", at(10*time.Second), 100), "a second pass finds nothing")

	require.Equal(t, 1, b.archive("p", at(11*time.Second), 100), "7 once past the threshold")
	require.Equal(t, relaytype.StateArchived, b.get("p", 7).State)
}

// The history holds the full row as it was (payload, key, error, identity,
// terminal state); the shadow keeps id + identity and nothing else of note.
func testArchiveHistory(t *testing.T, b *bundle) {
	_, err := b.ex.MessageInsertMany(b.ctx, []*relaydriver.MessageInsertParams{
		{Queue: "p", ID: 1, Key: "k1", Payload: []byte("payload-1"), ReceivedAt: t0, Now: b.now},
	})
	require.NoError(t, err)
	_, err = b.ex.MessageBindIdentity(b.ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: 1, Identity: "I1"})
	require.NoError(t, err)
	b.fail("p", 1, relaytype.ClassInfra, at(time.Second))
	b.complete("p", 1, relaytype.StateDead, relaytype.ClassMalformed, "bad input")

	b.now = at(time.Hour)
	require.Equal(t, 1, b.archive("p", b.now, 10))
	require.Equal(t, []historyRow{{id: 1, key: "k1", state: "DEAD", attempts: 1, class: "MALFORMED",
		lastError: "bad input", identity: "I1", payload: "payload-1"}}, b.history("p"))

	m := b.get("p", 1)
	require.Equal(t, relaytype.StateArchived, m.State)
	require.Equal(t, int64(1), m.ID)
	require.Equal(t, "I1", m.IdentityKey)
	require.Nil(t, m.Payload)
	require.Empty(t, m.LastError)
	require.Empty(t, string(m.ErrorClass))
	require.Empty(t, m.Key)
	requireTime(t, b.now, m.UpdatedAt, "shadow UpdatedAt")
	requireTime(t, t0, m.EnqueuedAt, "shadow EnqueuedAt")
}

// The shadow keeps deduplicating (INV-9): a new message with the archived
// identity reports the shadow as owner. ARCHIVED is never a head, never
// claimed, never backlog, never scanned for acknowledgement, never replayed.
func testArchiveShadow(t *testing.T, b *bundle) {
	b.insert("p", 1, 2)
	_, err := b.ex.MessageBindIdentity(b.ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: 1, Identity: "I1"})
	require.NoError(t, err)
	b.complete("p", 1, relaytype.StateDead, relaytype.ClassInfra, "x") // no ack intent: settled
	b.now = at(time.Hour)
	require.Equal(t, 1, b.archive("p", b.now, 10))

	b.insert("p", 3)
	res, err := b.ex.MessageBindIdentity(b.ctx, &relaydriver.MessageBindIdentityParams{Queue: "p", ID: 3, Identity: "I1"})
	require.NoError(t, err)
	require.Equal(t, int64(1), res.OwnerID, "the shadow still owns the identity")

	require.Equal(t, []int64{2, 3}, b.head("p"))
	st, err := b.ex.MessageStats(b.ctx, "p")
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Counts[relaytype.StateArchived])
	require.Equal(t, int64(2), st.Backlog())
	require.Empty(t, b.ackScan("p", at(100*ackR), 100))
	require.Equal(t, []int64{2, 3}, b.claim("p", false, 10, "w", time.Minute))
	n, err := b.ex.MessageReplay(b.ctx, &relaydriver.MessageReplayParams{Queue: "p", Classes: relaytype.KnownClasses, Now: b.now})
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, relaytype.StateArchived, b.get("p", 1).State)
}

// A DEAD row replayed back to PENDING before the pass is not archived and
// leaves nothing in the history; the guarded update re-checks the selected
// state (the in-statement race itself is covered by the drivers' own tests).
func testArchiveReplayed(t *testing.T, b *bundle) {
	b.insert("p", 1, 2)
	b.complete("p", 1, relaytype.StateDead, relaytype.ClassInfra, "x")
	b.complete("p", 2, relaytype.StateDead, relaytype.ClassInfra, "y")
	b.now = at(time.Hour)
	n, err := b.ex.MessageReplay(b.ctx, &relaydriver.MessageReplayParams{Queue: "p",
		Classes: []relaytype.ErrorClass{relaytype.ClassInfra}, IDs: []int64{1}, Now: b.now})
	require.NoError(t, err)
	require.Equal(t, 1, n)

	require.Equal(t, 1, b.archive("p", b.now.Add(time.Second), 10))
	require.Equal(t, relaytype.StatePending, b.get("p", 1).State)
	require.Equal(t, relaytype.StateArchived, b.get("p", 2).State)
	require.Equal(t, []int64{2}, historyIDs(b.history("p")))
}

// Limit bounds one call (oldest updated_at first); in a transaction the pass
// commits or rolls back with it, history and shadows together.
func testArchiveLimitAndTx(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4, 5)
	for i, id := range []int64{5, 4, 3, 2, 1} {
		b.now = at(time.Duration(i+1) * time.Second)
		b.complete("p", id, relaytype.StateSucceeded, "", "")
	}
	b.now = at(time.Hour)
	require.Equal(t, 2, b.archive("p", b.now, 2))
	require.Equal(t, []int64{4, 5}, historyIDs(b.history("p")), "oldest terminal first")

	tx, err := b.d.Begin(b.ctx)
	require.NoError(t, err)
	n, err := tx.MessageArchive(b.ctx, &relaydriver.MessageArchiveParams{Queue: "p", TerminalBefore: b.now, Now: b.now})
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.NoError(t, tx.Rollback(b.ctx))
	require.Equal(t, []int64{4, 5}, historyIDs(b.history("p")), "rolled back")
	require.Equal(t, relaytype.StateSucceeded, b.get("p", 1).State)

	require.Equal(t, 3, b.archive("p", b.now, 0))
	require.Equal(t, []int64{1, 2, 3, 4, 5}, historyIDs(b.history("p")))

	_, err = b.ex.MessageArchive(b.ctx, &relaydriver.MessageArchiveParams{Queue: "p", Now: b.now})
	require.Error(t, err, "TerminalBefore is required")
}
