package relaydrivertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Conformance of the operator listing (relaydriver.AdminExecutor;
// docs/operations.md).

var adminCases = []struct {
	name string
	fn   func(t *testing.T, b *bundle)
}{
	{"AdminListFilters", testAdminListFilters},
	{"AdminListPagination", testAdminListPagination},
	{"AdminListAckAbandoned", testAdminListAckAbandoned},
	{"AdminMessageClasses", testAdminMessageClasses},
}

func init() { cases = append(cases, adminCases...) }

// list runs MessageList and returns the ids.
func (b *bundle) list(p *relaydriver.MessageListParams) []int64 {
	b.t.Helper()
	ms, err := b.ex.MessageList(b.ctx, p)
	require.NoError(b.t, err)
	for _, m := range ms {
		require.Nil(b.t, m.Payload, "operator listings never carry payloads (message %d)", m.ID)
	}
	return ids(ms)
}

// States and classes filter; an empty state filter lists every state but
// ARCHIVED, which is listed only when named; other queues never show.
func testAdminListFilters(t *testing.T, b *bundle) {
	_, err := b.ex.MessageInsertMany(b.ctx, []*relaydriver.MessageInsertParams{
		{Queue: "p", ID: 1, Payload: []byte("secret"), Now: b.now},
	})
	require.NoError(t, err)
	b.insert("p", 2, 3, 4, 5, 6, 7)
	b.insert("other", 1, 2)
	b.complete("p", 1, relaytype.StateDead, relaytype.ClassMalformed, "bad xml")
	b.complete("p", 2, relaytype.StateDead, relaytype.ClassExhausted, "timeout x5")
	b.complete("p", 3, relaytype.StateSucceeded, "", "")
	b.fail("p", 4, relaytype.ClassInfra, at(time.Minute))
	b.complete("p", 6, relaytype.StateDead, relaytype.ClassInfra, "db down")
	b.complete("p", 7, relaytype.StateDead, relaytype.ClassMalformed, "bad")
	_, err = b.ex.Exec(b.ctx, "UPDATE relay_message SET state = $1 WHERE queue = $2 AND id = $3",
		string(relaytype.StateArchived), "p", int64(7))
	require.NoError(t, err)
	b.complete("other", 1, relaytype.StateDead, relaytype.ClassMalformed, "x")

	require.Equal(t, []int64{1, 2, 3, 4, 5, 6}, b.list(&relaydriver.MessageListParams{Queue: "p"}), "ARCHIVED only when named")
	require.Equal(t, []int64{7}, b.list(&relaydriver.MessageListParams{Queue: "p",
		States: []relaytype.State{relaytype.StateArchived}}))
	dead := []relaytype.State{relaytype.StateDead}
	require.Equal(t, []int64{1, 2, 6}, b.list(&relaydriver.MessageListParams{Queue: "p", States: dead}))
	require.Equal(t, []int64{1}, b.list(&relaydriver.MessageListParams{Queue: "p", States: dead,
		Classes: []relaytype.ErrorClass{relaytype.ClassMalformed}}))
	require.Equal(t, []int64{4, 6}, b.list(&relaydriver.MessageListParams{Queue: "p",
		Classes: []relaytype.ErrorClass{relaytype.ClassInfra}}), "class filter across states")
	require.Equal(t, []int64{2, 4, 6}, b.list(&relaydriver.MessageListParams{Queue: "p",
		States:  []relaytype.State{relaytype.StateDead, relaytype.StateFailed},
		Classes: []relaytype.ErrorClass{relaytype.ClassInfra, relaytype.ClassExhausted}}))

	ms, err := b.ex.MessageList(b.ctx, &relaydriver.MessageListParams{Queue: "p", States: dead, Limit: 1})
	require.NoError(t, err)
	require.Len(t, ms, 1)
	m := ms[0]
	require.Equal(t, int64(1), m.ID)
	require.Equal(t, relaytype.StateDead, m.State)
	require.Equal(t, relaytype.ClassMalformed, m.ErrorClass)
	require.Equal(t, "bad xml", m.LastError)
	require.Nil(t, m.Payload, "the payload is never read")
	requireTime(t, b.now, m.UpdatedAt, "UpdatedAt")
	requireTime(t, b.now, m.EnqueuedAt, "EnqueuedAt")
}

// Keyset pagination: id order, AfterID, bounded Limit.
func testAdminListPagination(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4, 5, 6, 7)
	var got []int64
	after := int64(0)
	for {
		page := b.list(&relaydriver.MessageListParams{Queue: "p", AfterID: after, Limit: 3})
		require.LessOrEqual(t, len(page), 3)
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = page[len(page)-1]
	}
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7}, got)
	require.Equal(t, []int64{6, 7}, b.list(&relaydriver.MessageListParams{Queue: "p", AfterID: 5}))
	_, err := b.ex.MessageList(b.ctx, &relaydriver.MessageListParams{Queue: "p",
		Limit: relaydriver.MessageListLimitMax + 1})
	require.Error(t, err, "a page above MessageListLimitMax is refused")
}

// AckAbandoned lists only abandoned, unacknowledged rows.
func testAdminListAckAbandoned(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4)
	for _, id := range []int64{1, 2, 3, 4} {
		b.finish("p", id, relaytype.StateSucceeded)
	}
	b.ackAbandon("p", 2, relaydriver.AckReasonMissingRow)
	b.ackAbandon("p", 4, relaydriver.AckReasonTransientDeadline)
	require.Equal(t, 1, b.ackDone("p", 3))
	require.Equal(t, []int64{2, 4}, b.list(&relaydriver.MessageListParams{Queue: "p", AckAbandoned: true}))
	n, err := b.ex.AckReopen(b.ctx, &relaydriver.AckReopenParams{Queue: "p", IDs: []int64{2}, Now: b.now})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []int64{4}, b.list(&relaydriver.MessageListParams{Queue: "p", AckAbandoned: true}))
}

// MessageClasses reads the distinct classes of the FAILED/DEAD messages among
// many ids in one call (relay admin replay --ids): other states, other queues
// and unknown ids add nothing; the result is sorted bytewise; the id bound
// holds.
func testAdminMessageClasses(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4, 5, 6, 7)
	b.insert("other", 8)
	b.complete("p", 1, relaytype.StateDead, relaytype.ClassTimeout, "slow")
	b.complete("p", 2, relaytype.StateDead, relaytype.ClassCodec, "bad")
	b.fail("p", 3, relaytype.ClassInfra, at(time.Minute))
	b.complete("p", 4, relaytype.StateDead, relaytype.ClassTimeout, "slow again")
	b.complete("p", 5, relaytype.StateSkipped, "", "ignored")
	b.complete("other", 8, relaytype.StateDead, relaytype.ClassMalformed, "x")
	classes := func(ids ...int64) []relaytype.ErrorClass {
		t.Helper()
		cs, err := b.ex.MessageClasses(b.ctx, &relaydriver.MessageClassesParams{Queue: "p", IDs: ids})
		require.NoError(t, err)
		return cs
	}
	require.Equal(t, []relaytype.ErrorClass{relaytype.ClassCodec, relaytype.ClassInfra, relaytype.ClassTimeout},
		classes(1, 2, 3, 4, 5, 6, 8, 999))
	require.Equal(t, []relaytype.ErrorClass{relaytype.ClassTimeout}, classes(4, 1, 4))
	require.Empty(t, classes(5, 6, 7, 8), "SKIPPED, PENDING and another queue's id have no class to replay")
	require.Empty(t, classes())

	many := make([]int64, relaydriver.MessageClassesIDsMax)
	for i := range many {
		many[i] = int64(i + 1)
	}
	require.Len(t, classes(many...), 3, "MessageClassesIDsMax ids in one call")
	_, err := b.ex.MessageClasses(b.ctx, &relaydriver.MessageClassesParams{Queue: "p", IDs: append(many, 0)})
	require.Error(t, err, "above MessageClassesIDsMax")
}
