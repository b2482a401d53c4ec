package relayintake_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaysource"
	"github.com/relayhq/relay/relaytype"
)

// A row that commits after its hole was released is found once (hole marked,
// metric, one WARN log without payload), never enqueued by the intake, and
// enqueued only by an explicit IngestLate, once.
func TestLateRowFoundThenIngested(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store, func(c *relayintake.Config) { c.LateCheckInterval = time.Minute })
		b.seed(relayintake.SeedZero)
		b.insert(1, 2, 5, 6)
		b.round()
		b.clock.Advance(delay)
		require.Equal(t, int64(3), b.round().ReleasedFirst)
		b.round()
		require.Equal(t, []int64{1, 2, 5, 6}, b.messageIDs())

		b.insert(4) // commits after its hole was released: a late row
		res := b.round()
		require.Zero(t, res.LateFound, "checked at most once per LateCheckInterval")
		b.clock.Advance(time.Minute)
		res = b.round()
		require.Equal(t, 1, res.LateFound)
		require.Equal(t, 1.0, metricValue(t, b, "relay_intake_late_rows_total"))
		require.Equal(t, []int64{1, 2, 5, 6}, b.messageIDs(), "never enqueued automatically")

		b.clock.Advance(time.Minute)
		require.Zero(t, b.round().LateFound, "found once")
		require.Equal(t, 1.0, metricValue(t, b, "relay_intake_late_rows_total"))
		require.Equal(t, 1, strings.Count(b.logs.String(), "late row found"), "logged once")
		require.NotContains(t, b.logs.String(), "SECRET-PAYLOAD")

		late, err := b.in.LateRows(b.ctx)
		require.NoError(t, err)
		require.Len(t, late, 1)
		require.Equal(t, int64(4), late[0].ID)
		requireTime(t, t0.Add(delay), late[0].ReleasedAt)
		requireTime(t, t0.Add(delay+time.Minute), late[0].FoundAt)
		require.True(t, late[0].IngestedAt.IsZero())
		st, err := b.in.Stats(b.ctx)
		require.NoError(t, err)
		require.Equal(t, 2, st.PermanentHoles)
		require.Equal(t, 1, st.LateRows)
		require.Equal(t, 1, st.LateRowsNotIngested)

		got, err := b.in.IngestLate(b.ctx, []int64{4, 3, 5})
		require.NoError(t, err)
		require.Equal(t, []relayintake.IngestLateResult{
			{ID: 4, Outcome: relayintake.IngestOutcomeIngested, MessageID: 4},
			{ID: 3, Outcome: relayintake.IngestOutcomeNotLate},
			{ID: 5, Outcome: relayintake.IngestOutcomeNotLate},
		}, got)
		require.Equal(t, []int64{1, 2, 4, 5, 6}, b.messageIDs())
		m, err := b.store.GetExecutor().MessageGet(b.ctx, queue, 4)
		require.NoError(t, err)
		require.Equal(t, relaytype.StatePending, m.State)
		require.Equal(t, payloadOf(4), m.Payload)

		got, err = b.in.IngestLate(b.ctx, []int64{4})
		require.NoError(t, err)
		require.Equal(t, []relayintake.IngestLateResult{{ID: 4, Outcome: relayintake.IngestOutcomeAlready, MessageID: 4}}, got)
		require.Equal(t, []int64{1, 2, 4, 5, 6}, b.messageIDs(), "a second ingest enqueues nothing")
		st, err = b.in.Stats(b.ctx)
		require.NoError(t, err)
		require.Equal(t, 1, st.LateRows)
		require.Zero(t, st.LateRowsNotIngested)
	})
}

// Holes released longer ago than LateCheckWindow are not checked; a negative
// window turns the check off.
func TestLateCheckWindow(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store, func(c *relayintake.Config) { c.LateCheckWindow = time.Hour })
		b.seed(relayintake.SeedZero)
		b.insert(1, 3)
		b.round()
		b.clock.Advance(delay)
		b.round()
		b.clock.Advance(2 * time.Hour)
		b.insert(2)
		require.Zero(t, b.round().LateFound, "released before the window")

		off := setup(t, store, func(c *relayintake.Config) { c.LateCheckWindow = -1 })
		off.seed(relayintake.SeedZero)
		off.insert(1, 3)
		off.round()
		off.clock.Advance(delay)
		off.round()
		off.insert(2)
		off.clock.Advance(time.Hour)
		require.Zero(t, off.round().LateFound, "check off")
	})
}

// A check looks at no more than LateCheckLimit hole ids, reading the source
// once per run of consecutive ids; a source that fails during the check fails
// neither the round nor the intake, and the check runs again later.
func TestLateCheckBoundedAndFailureTolerant(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, store storeFactory) {
		b := setup(t, store, func(c *relayintake.Config) { c.LateCheckLimit = 2 })
		b.seed(relayintake.SeedZero)
		b.insert(1, 4, 6) // holes 2..3 and 5
		b.round()
		b.clock.Advance(delay)
		require.Equal(t, int64(2), b.round().ReleasedFirst)
		b.round()
		b.clock.Advance(delay)
		require.Equal(t, int64(5), b.round().ReleasedFirst)
		b.round()
		b.insert(2, 3, 5)

		var reads []int64 // the after of every source read by the checks
		failCheck := true
		src := &funcSource{readAfter: func(ctx context.Context, after int64, limit int) ([]relaysource.Row, error) {
			if after < 6 { // below W = 6: a late-row check's read
				if failCheck {
					return nil, errors.New("source down")
				}
				reads = append(reads, after)
			}
			return b.src.ReadAfter(ctx, after, limit)
		}}
		in := b.newIntake(b.store, src)
		errorsBefore := metricValue(t, b, "relay_intake_errors_total")
		res, err := in.RunOnce(b.ctx)
		require.NoError(t, err, "a failed check does not fail the round")
		require.Zero(t, res.LateFound)
		require.Equal(t, errorsBefore+1, metricValue(t, b, "relay_intake_errors_total"))
		require.Contains(t, b.logs.String(), "late-row check failed")
		failCheck = false

		b.clock.Advance(time.Hour)
		res, err = in.RunOnce(b.ctx)
		require.NoError(t, err)
		require.Equal(t, 2, res.LateFound, "ids 2 and 3: the limit")
		require.Equal(t, []int64{1}, reads, "one read for the run 2..3")
		b.clock.Advance(time.Hour)
		res, err = in.RunOnce(b.ctx)
		require.NoError(t, err)
		require.Equal(t, 1, res.LateFound, "then id 5")
		require.Equal(t, 3.0, metricValue(t, b, "relay_intake_late_rows_total"))
	})
}
