package apply_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

// TestStopReleasesLeases: an applier stopped while its batch is stuck (the
// target row is locked by another transaction) releases the event's lease
// when it stops, and another applier applies the event at once. The clock
// is never advanced, so the takeover cannot be a lease expiry.
func TestStopReleasesLeases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	var s stream
	b.receive(t, s.ev(1, ins, 1, "", rev(1), str("one")))
	b.work(t)
	require.Equal(t, applied, b.receipt(t, 1))

	// Another transaction holds the row: the next write to it waits.
	blocker, err := b.mdb.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = blocker.Rollback() }()
	var id int64
	require.NoError(t, blocker.QueryRowContext(ctx, "SELECT id FROM voyage WHERE id = 1 FOR UPDATE").Scan(&id))

	b.receive(t, s.ev(2, upd, 1, rev(1), rev(2), str("one-b")))
	require.NoError(t, b.applier.Start(ctx))
	leased := func(owner string) int {
		return b.count(t, "SELECT count(*) FROM relay_message WHERE queue = $1 AND lease_owner = $2",
			shore.ApplyQueue, owner)
	}
	require.Eventually(t, func() bool { return leased("test-applier") == 1 }, 10*time.Second, 10*time.Millisecond)

	// The stop's grace ends while the write still waits: the handler is
	// cancelled and the lease released rather than left to expire.
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, b.applier.Stop(sctx), context.DeadlineExceeded)
	require.Zero(t, leased("test-applier"))
	require.NoError(t, blocker.Rollback())

	other, err := apply.New(apply.Config{Driver: b.d, Target: b.target, Clock: b.clock, InstanceID: "other-applier"})
	require.NoError(t, err)
	n, err := other.Engine().Work(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, applied, b.receipt(t, 2))
	r, ok := b.row(t, 1)
	require.True(t, ok)
	require.Equal(t, row{Note: "one-b", Revision: rev(2), EventID: uuidN(2)}, r)
	require.Equal(t, t0, b.clock.Now(), "the clock never moved: no lease expired")
}

// TestStopAfterDrainReleasesNothing: a stop whose batches all finish in
// time leaves no lease behind and has nothing to release.
func TestStopAfterDrainReleasesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var s stream
	b.receive(t, s.ev(1, ins, 1, "", rev(1), str("one")))
	require.NoError(t, b.applier.Start(t.Context()))
	b.applier.Notify()
	require.Eventually(t, func() bool {
		return b.count(t, "SELECT count(*) FROM sync_event_receipt") == 1
	}, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, b.applier.Stop(t.Context()))
	n, err := b.applier.ReleaseLeases(t.Context())
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, applied, b.receipt(t, 1))
}
