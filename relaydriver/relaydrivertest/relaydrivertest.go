package relaydrivertest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// t0 is the suite's base time. It carries microseconds, the precision both
// stores keep, so a lost fraction shows up as a failure.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)

// Exercise runs the conformance suite. newDriver must return a fresh store with
// the engine migration line applied (relaymigrate.Up with
// relaymigrate.EngineLineOf) and arrange its cleanup with t.Cleanup; it is
// called once per subtest, and subtests run in parallel.
func Exercise(t *testing.T, newDriver func(t *testing.T) relaydriver.Driver) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := newDriver(t)
			b := &bundle{t: t, ctx: t.Context(), d: d, ex: d.GetExecutor(), now: t0}
			c.fn(t, b)
		})
	}
}

// cases is every rule of the driver contract, one per subtest.
var cases = []struct {
	name string
	fn   func(t *testing.T, b *bundle)
}{
	{"InsertIfAbsent", testInsertIfAbsent},
	{"InsertAllocatesIDs", testInsertAllocatesIDs},
	{"QueuesIsolated", testQueuesIsolated},
	{"GetNotFound", testGetNotFound},
	{"HeadOrder", testHeadOrder},
	{"HeadFailedHolds", testHeadFailedHolds},
	{"HeadTerminalReleases", testHeadTerminalReleases},
	{"ArchivedExcluded", testArchivedExcluded},
	{"BindIdentity", testBindIdentity},
	{"BindIdentityInTx", testBindIdentityInTx},
	{"CompleteGuards", testCompleteGuards},
	{"CompleteLeaseGuard", testCompleteLeaseGuard},
	{"AckIntent", testAckIntent},
	{"CompleteMany", testCompleteMany},
	{"CompleteManyInTx", testCompleteManyInTx},
	{"CompleteManyGuards", testCompleteManyGuards},
	{"CompleteDelete", testCompleteDelete},
	{"FailCountsAttempts", testFailCountsAttempts},
	{"CompleteCountsAttempt", testCompleteCountsAttempt},
	{"Exhaust", testExhaust},
	{"ClaimUnordered", testClaimUnordered},
	{"ClaimFailedNotDue", testClaimFailedNotDue},
	{"ClaimConcurrentNoDoubleClaim", testClaimConcurrent},
	{"ClaimPerKeyHeads", testClaimPerKeyHeads},
	{"ClaimPerKeyLateSmallerID", testClaimPerKeyLateSmallerID},
	{"LeaseRenew", testLeaseRenew},
	{"LeaseRelease", testLeaseRelease},
	{"Replay", testReplay},
	{"ReplayIDs", testReplayIDs},
	{"Stats", testStats},
	{"CursorSave", testCursorSave},
	{"CursorSeed", testCursorSeed},
	{"CursorSeedRefusedWithMessages", testCursorSeedRefusedWithMessages},
	{"Holes", testHoles},
	{"HolesLate", testHolesLate},
	{"Migrations", testMigrations},
	{"TxRollbackDiscards", testTxRollback},
	{"TxSavepoint", testTxSavepoint},
	{"Lock", testLock},
	{"RawQuerier", testRawQuerier},
	{"RefusesInvalidInput", testRefusesInvalidInput},
}

// bundle is one subtest's store and clock.
type bundle struct {
	t   *testing.T
	ctx context.Context
	d   relaydriver.Driver
	ex  relaydriver.Executor
	now time.Time
}

// at returns t0 + d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// insert inserts messages with the given ids and key "" at b.now.
func (b *bundle) insert(queue string, ids ...int64) {
	b.t.Helper()
	ps := make([]*relaydriver.MessageInsertParams, len(ids))
	for i, id := range ids {
		ps[i] = &relaydriver.MessageInsertParams{Queue: queue, ID: id, Now: b.now}
	}
	_, err := b.ex.MessageInsertMany(b.ctx, ps)
	require.NoError(b.t, err)
}

// insertKeyed inserts one message with a key at b.now.
func (b *bundle) insertKeyed(queue, key string, id int64) {
	b.t.Helper()
	_, err := b.ex.MessageInsertMany(b.ctx, []*relaydriver.MessageInsertParams{{Queue: queue, ID: id, Key: key, Now: b.now}})
	require.NoError(b.t, err)
}

func (b *bundle) get(queue string, id int64) *relaytype.Message {
	b.t.Helper()
	m, err := b.ex.MessageGet(b.ctx, queue, id)
	require.NoError(b.t, err)
	return m
}

func (b *bundle) complete(queue string, id int64, state relaytype.State, class relaytype.ErrorClass, lastErr string) {
	b.t.Helper()
	require.NoError(b.t, b.ex.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{
		Queue: queue, ID: id, State: state, ErrorClass: class, LastError: lastErr, Now: b.now,
	}))
}

func (b *bundle) fail(queue string, id int64, class relaytype.ErrorClass, next time.Time) int {
	b.t.Helper()
	n, err := b.ex.MessageFail(b.ctx, &relaydriver.MessageFailParams{
		Queue: queue, ID: id, ErrorClass: class, LastError: "boom", NextAttemptAt: next, Now: b.now,
	})
	require.NoError(b.t, err)
	return n
}

// head returns the ids of the unfinished messages, head first.
func (b *bundle) head(queue string) []int64 {
	b.t.Helper()
	ms, err := b.ex.MessageListUnfinished(b.ctx, &relaydriver.MessageListUnfinishedParams{Queue: queue, Limit: 1000})
	require.NoError(b.t, err)
	return ids(ms)
}

// claim leases messages for owner until b.now+lease and returns their ids.
func (b *bundle) claim(queue string, perKey bool, limit int, owner string, lease time.Duration) []int64 {
	b.t.Helper()
	ms, err := b.ex.MessageClaim(b.ctx, &relaydriver.MessageClaimParams{
		Queue: queue, PerKey: perKey, Limit: limit, Owner: owner, LeaseUntil: b.now.Add(lease), Now: b.now,
	})
	require.NoError(b.t, err)
	got := ids(ms)
	require.True(b.t, slices.IsSorted(got), "claim must return ascending ids, got %v", got)
	for _, m := range ms {
		require.Equal(b.t, owner, m.LeaseOwner, "claimed message %d", m.ID)
		requireTime(b.t, b.now.Add(lease), m.LeaseExpiresAt, "claimed LeaseExpiresAt")
	}
	return got
}

func ids(ms []*relaytype.Message) []int64 {
	out := []int64{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// requireTime checks that got is the same instant as want, in UTC; a zero want
// requires a zero (NULL) got.
func requireTime(t *testing.T, want, got time.Time, field string) {
	t.Helper()
	if want.IsZero() {
		require.True(t, got.IsZero(), "%s: want zero (NULL), got %v", field, got)
		return
	}
	require.True(t, want.Equal(got), "%s: want %v, got %v", field, want, got)
	require.Equal(t, time.UTC, got.Location(), "%s: want UTC", field)
}
