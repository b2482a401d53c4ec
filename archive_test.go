package relay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// historyIDs returns the ids of queue's rows in relay_message_history.
func historyIDs(t *testing.T, d relaydriver.Driver, queue string) []int64 {
	t.Helper()
	rows, err := d.GetExecutor().Query(t.Context(), "SELECT id FROM relay_message_history WHERE queue = $1 ORDER BY id", queue)
	require.NoError(t, err)
	defer rows.Close()
	out := []int64{}
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(t, rows.Err())
	return out
}

// The archiver moves settled terminal rows only once After has passed since
// their terminal state (seed 000 §9.3); a replayed row is not archived; the
// ARCHIVED shadow still deduplicates: a new message with an archived identity
// is SKIPPED duplicate-of:<archived id> through the Engine.
func TestArchiverArchivesAfterThreshold(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setup(t, s, relay.Config{Handler: decoding{handle: func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
			if d.Decoded.Kind == "BAD" {
				return relay.Dead(relaytype.ClassInfra, errors.New("broken"))
			}
			return relay.Succeeded()
		}}})
		ctx := t.Context()
		reg := prometheus.NewRegistry()
		b.enqueuePayloads(map[int64]string{1: "X|OK", 2: "Y|OK", 3: "Z|BAD"})
		require.Equal(t, 3, b.work())
		require.Equal(t, relaytype.StateDead, b.state(3))

		a, err := relay.NewArchiver(b.d, relay.ArchiverConfig{Queue: "p", Clock: b.clock, Registerer: reg})
		require.NoError(t, err)
		require.Zero(t, archivedTotal(t, reg), "exported at zero")

		n, err := a.Work(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "nothing before the threshold")
		b.clock.Advance(relay.ArchiveAfterDefault)
		n, err = a.Work(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "terminal exactly After ago is kept")

		// An operator replays 3 before the pass: it is PENDING again and stays.
		replayed, err := b.engine.Replay(ctx, &relay.ReplayParams{Classes: []relaytype.ErrorClass{relaytype.ClassInfra}, IDs: []int64{3}})
		require.NoError(t, err)
		require.Equal(t, 1, replayed)
		b.clock.Advance(time.Microsecond)
		n, err = a.Work(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.Equal(t, []int64{1, 2}, historyIDs(t, b.d, "p"))
		require.Equal(t, relaytype.StatePending, b.state(3), "the replayed row is not archived")
		m1 := b.get(1)
		require.Equal(t, relaytype.StateArchived, m1.State)
		require.Equal(t, "X", m1.IdentityKey)
		require.Nil(t, m1.Payload)
		require.Equal(t, 2.0, archivedTotal(t, reg))
		require.Equal(t, relay.MaintenanceStats{Passes: 3, Done: 2, LastPassAt: b.clock.Now(), LastDone: 2}, a.Stats())

		// A duplicate of an archived identity is still a duplicate.
		b.enqueuePayloads(map[int64]string{4: "X|OK"})
		require.Equal(t, 2, b.work()) // 3 (dead again) and 4
		m4 := b.get(4)
		require.Equal(t, relaytype.StateSkipped, m4.State)
		require.Equal(t, "duplicate-of:1", m4.LastError)
		st, err := b.d.GetExecutor().MessageStats(ctx, "p")
		require.NoError(t, err)
		require.Zero(t, st.Backlog())
		require.Equal(t, int64(2), st.Counts[relaytype.StateArchived])
	})
}

// archivedTotal reads relay_archived_total{queue="p"} from reg.
func archivedTotal(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "relay_archived_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" && l.GetValue() == "p" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatal(`relay_archived_total{queue="p"} not found`)
	return 0
}

// Rows that owe an acknowledgement are archived only once it is settled; a
// started archiver runs a pass at once and then every Every on its clock.
func TestArchiverStartStop(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setup(t, s, relay.Config{AckIntent: true, Handler: relay.HandlerFunc(func(context.Context, relay.Tx, *relay.Delivery) relay.Result {
			return relay.Succeeded()
		})})
		ctx := t.Context()
		b.enqueue(1, 2)
		require.Equal(t, 2, b.work())
		ex := b.d.GetExecutor()
		_, err := ex.AckDone(ctx, &relaydriver.AckDoneParams{Queue: "p", IDs: []int64{1}, Now: b.clock.Now()})
		require.NoError(t, err)
		require.NoError(t, ex.AckAbandon(ctx, &relaydriver.AckAbandonParams{Queue: "p", ID: 2,
			Reason: relaydriver.AckReasonMissingRow, Now: b.clock.Now()}))

		a, err := relay.NewArchiver(b.d, relay.ArchiverConfig{Queue: "p", After: time.Hour, Every: time.Minute, Clock: b.clock})
		require.NoError(t, err)
		require.NoError(t, a.Start(ctx))
		require.Error(t, a.Start(ctx), "starts once")
		b.clock.Advance(2 * time.Hour)
		require.Eventually(t, func() bool {
			b.clock.Advance(time.Minute) // wakes the job whenever it waits
			return b.state(1) == relaytype.StateArchived
		}, 10*time.Second, time.Millisecond)
		require.NoError(t, a.Stop(ctx))
		require.NoError(t, a.Stop(ctx), "twice is harmless")
		require.Equal(t, relaytype.StateSucceeded, b.state(2), "abandoned, not reconciled: never archived")
		require.Equal(t, []int64{1}, historyIDs(t, b.d, "p"))

		bare, err := relay.NewArchiver(s.open(t, false), relay.ArchiverConfig{Queue: "p"})
		require.NoError(t, err)
		require.Error(t, bare.Start(ctx), "an outdated schema is refused")
		_, err = relay.NewArchiver(b.d, relay.ArchiverConfig{})
		require.ErrorContains(t, err, "ArchiverConfig.Queue")
		_, err = relay.NewArchiver(b.d, relay.ArchiverConfig{Queue: "p", Limit: -1})
		require.ErrorContains(t, err, "ArchiverConfig.Limit")
	})
}
