package relaydrivertest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Unordered claims: up to Limit ready rows in id order, leased to the owner; a
// leased row is not claimed again until its lease expires; terminal rows never.
func testClaimUnordered(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4, 5, 6)
	b.complete("p", 6, relaytype.StateSucceeded, "", "")

	require.Equal(t, []int64{1, 2, 3}, b.claim("p", false, 3, "w1", time.Minute))
	m := b.get("p", 2)
	require.Equal(t, "w1", m.LeaseOwner)
	requireTime(t, b.now.Add(time.Minute), m.LeaseExpiresAt, "LeaseExpiresAt")
	require.Equal(t, relaytype.StatePending, m.State, "a claim only takes a lease")

	require.Equal(t, []int64{4, 5}, b.claim("p", false, 10, "w2", time.Minute))
	require.Empty(t, b.claim("p", false, 10, "w3", time.Minute))

	// Leases expire: at their expiry the rows are ready again.
	b.now = at(time.Minute)
	require.Equal(t, []int64{1, 2, 3, 4, 5}, b.claim("p", false, 10, "w3", time.Minute))
}

// A FAILED message waits for its next attempt time; a PENDING one does not.
func testClaimFailedNotDue(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3)
	b.fail("p", 1, relaytype.ClassInfra, at(10*time.Minute))
	b.fail("p", 2, relaytype.ClassInfra, time.Time{}) // zero: retry at once
	require.Equal(t, []int64{2, 3}, b.claim("p", false, 10, "w1", time.Hour))

	b.now = at(10 * time.Minute)
	require.Equal(t, []int64{1}, b.claim("p", false, 10, "w2", time.Hour))
}

// Two claimers running at once never get the same message, and between them
// they get every message.
func testClaimConcurrent(t *testing.T, b *bundle) {
	const n = 60
	all := make([]int64, n)
	for i := range all {
		all[i] = int64(i + 1)
	}
	b.insert("p", all...)

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		seen = map[int64]string{}
		dups []int64
		errs []error
	)
	for _, owner := range []string{"w1", "w2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each round takes at least one new message, so more rounds than
			// messages means rows are claimed again.
			for round := 0; round <= n; round++ {
				ms, err := b.ex.MessageClaim(b.ctx, &relaydriver.MessageClaimParams{
					Queue: "p", Limit: 7, Owner: owner, LeaseUntil: b.now.Add(time.Hour), Now: b.now,
				})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				for _, m := range ms {
					if _, ok := seen[m.ID]; ok {
						dups = append(dups, m.ID)
					}
					seen[m.ID] = owner
				}
				mu.Unlock()
				if err != nil || len(ms) == 0 {
					return
				}
			}
			mu.Lock()
			errs = append(errs, fmt.Errorf("%s: claims never ran dry", owner))
			mu.Unlock()
		}()
	}
	wg.Wait()
	require.Empty(t, errs)
	require.Empty(t, dups, "messages claimed twice")
	require.Len(t, seen, n)
	for id, owner := range seen {
		require.Equal(t, owner, b.get("p", id).LeaseOwner, "message %d", id)
	}
	require.Empty(t, b.claim("p", false, 100, "w3", time.Hour))
}

// seed 004 §10.4: per key, only each key's head is claimed; a key whose head is
// leased or failing waits, other keys go on.
func testClaimPerKeyHeads(t *testing.T, b *bundle) {
	for _, m := range []struct {
		key string
		id  int64
	}{{"a", 1}, {"b", 2}, {"a", 3}, {"b", 4}, {"a", 5}, {"c", 6}} {
		b.insertKeyed("p", m.key, m.id)
	}
	require.Equal(t, []int64{1}, b.claim("p", true, 1, "w1", time.Hour), "Limit takes the smallest heads")
	require.Equal(t, []int64{2, 6}, b.claim("p", true, 10, "w1", time.Hour))
	require.Empty(t, b.claim("p", true, 10, "w2", time.Hour), "every key is leased")

	require.NoError(t, b.ex.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 1, State: relaytype.StateSucceeded, LeaseOwner: "w1", Now: b.now}))
	require.Equal(t, []int64{3}, b.claim("p", true, 10, "w2", time.Hour))

	// A failing head pauses only its key: 4 waits behind 2.
	_, err := b.ex.MessageFail(b.ctx, &relaydriver.MessageFailParams{Queue: "p", ID: 2, ErrorClass: relaytype.ClassInfra, NextAttemptAt: at(10 * time.Minute), LeaseOwner: "w1", Now: b.now})
	require.NoError(t, err)
	require.NoError(t, b.ex.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 3, State: relaytype.StateSucceeded, LeaseOwner: "w2", Now: b.now}))
	require.Equal(t, []int64{5}, b.claim("p", true, 10, "w2", time.Hour))

	b.now = at(10 * time.Minute)
	require.Equal(t, []int64{2}, b.claim("p", true, 10, "w3", time.Hour), "the failed head is due; 4 still waits")
}

// A smaller id can commit after a larger id of the same key was claimed: while
// that lease is live, the key stays blocked even though the late message is
// now the key's smallest unfinished id.
func testClaimPerKeyLateSmallerID(t *testing.T, b *bundle) {
	b.insertKeyed("p", "k", 10)
	require.Equal(t, []int64{10}, b.claim("p", true, 10, "w1", time.Hour))

	b.insertKeyed("p", "k", 5)
	b.insertKeyed("p", "j", 7)
	require.Equal(t, []int64{7}, b.claim("p", true, 10, "w2", time.Hour), "key k is blocked by the lease on 10")

	require.NoError(t, b.ex.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 10, State: relaytype.StateSucceeded, LeaseOwner: "w1", Now: b.now}))
	require.Equal(t, []int64{5}, b.claim("p", true, 10, "w2", time.Hour))
}

// Lease renewal: one call extends every lease the owner still holds (an
// expired one nobody took included) and reports the others as lost —
// finished, leased to another owner, unknown, or of another queue.
func testLeaseRenew(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4, 5)
	b.insert("q", 1)
	require.Equal(t, []int64{1, 2, 3}, b.claim("p", false, 3, "w1", time.Minute))
	require.Equal(t, []int64{4}, b.claim("p", false, 1, "w2", time.Minute))
	require.Equal(t, []int64{1}, b.claim("q", false, 1, "w1", time.Minute))
	require.NoError(t, b.ex.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 3,
		State: relaytype.StateSucceeded, LeaseOwner: "w1", Now: b.now}))

	renew := func(ids ...int64) []int64 {
		t.Helper()
		res, err := b.ex.MessageLeaseRenew(b.ctx, &relaydriver.MessageLeaseRenewParams{
			Queue: "p", Owner: "w1", IDs: ids, LeaseUntil: b.now.Add(time.Minute)})
		require.NoError(t, err)
		require.True(t, slices.IsSorted(res.Lost), "Lost must be ascending, got %v", res.Lost)
		return append([]int64{}, res.Lost...)
	}
	b.now = at(30 * time.Second)
	require.Equal(t, []int64{3, 4, 99}, renew(4, 3, 2, 1, 99), "3 finished, 4 is w2's, 99 unknown")
	requireTime(t, at(90*time.Second), b.get("p", 1).LeaseExpiresAt, "renewed LeaseExpiresAt")
	requireTime(t, at(90*time.Second), b.get("p", 2).LeaseExpiresAt, "renewed LeaseExpiresAt")
	require.Equal(t, "w2", b.get("p", 4).LeaseOwner, "another owner's lease is not taken")
	requireTime(t, at(time.Minute), b.get("p", 4).LeaseExpiresAt, "another owner's lease is not extended")
	requireTime(t, at(time.Minute), b.get("q", 1).LeaseExpiresAt, "another queue is not touched")
	require.Equal(t, relaytype.StatePending, b.get("p", 1).State, "a renewal only moves the lease")

	// Renewed leases hold off other claimers past the original expiry.
	b.now = at(80 * time.Second)
	require.Equal(t, []int64{4, 5}, b.claim("p", false, 10, "w3", time.Minute), "1, 2 renewed; 4 expired")

	// An expired lease that nobody took is still the owner's.
	b.now = at(100 * time.Second)
	require.Empty(t, renew(1))
	requireTime(t, at(160*time.Second), b.get("p", 1).LeaseExpiresAt, "renewed after expiry")
	require.Equal(t, []int64{2}, b.claim("p", false, 10, "w4", time.Minute), "1 renewed, 2 expired")
	require.Equal(t, []int64{2}, renew(2), "taken over")
	require.Empty(t, renew(), "no ids: no-op")
}

// Lease release: every lease of the owner on unfinished messages of the
// queue is cleared and the messages are claimable at once, before expiry;
// other owners, queues and finished messages are untouched.
func testLeaseRelease(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4, 5)
	b.insert("q", 1)
	require.Equal(t, []int64{1, 2, 3}, b.claim("p", false, 3, "w1", time.Hour))
	require.Equal(t, []int64{4}, b.claim("p", false, 1, "w2", time.Hour))
	require.Equal(t, []int64{1}, b.claim("q", false, 1, "w1", time.Hour))
	require.NoError(t, b.ex.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 1,
		State: relaytype.StateSucceeded, LeaseOwner: "w1", Now: b.now}))
	_, err := b.ex.MessageFail(b.ctx, &relaydriver.MessageFailParams{Queue: "p", ID: 2,
		ErrorClass: relaytype.ClassInfra, LeaseOwner: "w1", Now: b.now})
	require.NoError(t, err)
	// 2 is FAILED and due at once; lease it to w1 again.
	require.Equal(t, []int64{2, 5}, b.claim("p", false, 10, "w1", time.Hour))

	n, err := b.ex.MessageLeaseRelease(b.ctx, &relaydriver.MessageLeaseReleaseParams{Queue: "p", Owner: "w1"})
	require.NoError(t, err)
	require.Equal(t, 3, n, "2, 3 and 5")
	for _, id := range []int64{2, 3, 5} {
		m := b.get("p", id)
		require.Empty(t, m.LeaseOwner, "message %d", id)
		requireTime(t, time.Time{}, m.LeaseExpiresAt, "released LeaseExpiresAt")
	}
	require.Equal(t, "w2", b.get("p", 4).LeaseOwner)
	require.Equal(t, "w1", b.get("q", 1).LeaseOwner)
	require.Equal(t, relaytype.StateSucceeded, b.get("p", 1).State)
	require.Equal(t, []int64{2, 3, 5}, b.claim("p", false, 10, "w3", time.Hour), "claimable before the old expiry")

	n, err = b.ex.MessageLeaseRelease(b.ctx, &relaydriver.MessageLeaseReleaseParams{Queue: "p", Owner: "w1"})
	require.NoError(t, err)
	require.Zero(t, n)
}
