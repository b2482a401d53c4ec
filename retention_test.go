package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// retentionRows appends events a/1..a/n of target in one transaction and
// returns their row ids.
func retentionRows(t *testing.T, d relaydriver.Driver, target string, n int) []int64 {
	t.Helper()
	ps := make([]*relaydriver.OutboxAppendParams, n)
	for i := range ps {
		ps[i] = &relaydriver.OutboxAppendParams{Event: relaytype.Event{ID: target + "-" + itoa(int64(i)), Target: target, Key: "a",
			Type: relaydriver.OutboxUpsert, Payload: []byte("p")}, Now: t0}
	}
	tx, err := d.Begin(t.Context())
	require.NoError(t, err)
	defer tx.Rollback(t.Context()) //nolint:errcheck
	got, err := tx.OutboxAppend(t.Context(), ps)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(t.Context()))
	ids := make([]int64, n)
	for i, g := range got {
		ids[i] = g.ID
	}
	return ids
}

func outboxStates(t *testing.T, d relaydriver.Driver, target string) map[string]int {
	t.Helper()
	rs, err := d.GetExecutor().OutboxList(t.Context(), &relaydriver.OutboxListParams{Target: target, Limit: 1000})
	require.NoError(t, err)
	out := map[string]int{}
	for _, r := range rs {
		out[r.State]++
	}
	return out
}

// Retention deletes SENT events only after SentRetention from sent_at, in
// bounded batches; DEAD (the DLQ) and PENDING rows are never deleted, and
// targets not configured are untouched.
func TestRetentionDeletesSentAfterRetention(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		d := s.open(t, true)
		ctx := t.Context()
		clock := relayclock.NewFake(t0)
		reg := prometheus.NewRegistry()
		ex := d.GetExecutor()

		ids := retentionRows(t, d, "kafka:msg", 7)
		other := retentionRows(t, d, "kafka:other", 1)
		_, err := ex.OutboxMarkSent(ctx, &relaydriver.OutboxMarkSentParams{IDs: ids[:5], Now: t0})
		require.NoError(t, err)
		_, err = ex.OutboxMarkSent(ctx, &relaydriver.OutboxMarkSentParams{IDs: other, Now: t0})
		require.NoError(t, err)
		_, err = ex.OutboxFail(ctx, &relaydriver.OutboxFailParams{ID: ids[5], Error: "x", MaxAttempts: 1, Now: t0})
		require.NoError(t, err) // ids[5] DEAD, ids[6] PENDING

		r, err := relay.NewRetention(d, relay.RetentionConfig{Targets: []string{"kafka:msg"}, BatchLimit: 2,
			Clock: clock, Registerer: reg})
		require.NoError(t, err)
		counter := func() float64 { return retentionDeleted(t, reg, "kafka:msg") }

		n, err := r.Work(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "nothing before the retention")
		clock.Advance(relay.SentRetentionDefault)
		n, err = r.Work(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "sent exactly SentRetention ago is kept")
		require.Equal(t, map[string]int{"SENT": 5, "DEAD": 1, "PENDING": 1}, outboxStates(t, d, "kafka:msg"))

		clock.Advance(time.Microsecond)
		n, err = r.Work(ctx)
		require.NoError(t, err)
		require.Equal(t, 5, n, "all SENT rows, in batches of 2")
		require.Equal(t, map[string]int{"DEAD": 1, "PENDING": 1}, outboxStates(t, d, "kafka:msg"))
		require.Equal(t, map[string]int{"SENT": 1}, outboxStates(t, d, "kafka:other"), "not a configured target")
		require.Equal(t, 5.0, counter())
		require.Equal(t, relay.MaintenanceStats{Passes: 3, Done: 5, LastPassAt: clock.Now(), LastDone: 5}, r.Stats())

		clock.Advance(365 * 24 * time.Hour)
		n, err = r.Work(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "DEAD and PENDING are never deleted")
		require.Equal(t, map[string]int{"DEAD": 1, "PENDING": 1}, outboxStates(t, d, "kafka:msg"))

		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err = r.Work(cctx)
		require.Error(t, err)
		st := r.Stats()
		require.Equal(t, int64(5), st.Passes)
		require.Equal(t, int64(1), st.Failed, "a pass that ended in an error is counted")
		require.ErrorIs(t, st.LastError, context.Canceled)
		require.Equal(t, int64(5), st.Done)
	})
}

// retentionDeleted reads relay_outbox_retention_deleted_total{target} from reg.
func retentionDeleted(t *testing.T, reg *prometheus.Registry, target string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "relay_outbox_retention_deleted_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "target" && l.GetValue() == target {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("relay_outbox_retention_deleted_total{target=%q} not found", target)
	return 0
}

// A started job runs a pass at once and then every Every on its clock; Stop
// ends it.
func TestRetentionStartStop(t *testing.T) {
	t.Parallel()
	d := openSQLite(t, true)
	ctx := t.Context()
	clock := relayclock.NewFake(t0)
	ids := retentionRows(t, d, "kafka:msg", 2)
	_, err := d.GetExecutor().OutboxMarkSent(ctx, &relaydriver.OutboxMarkSentParams{IDs: ids[:1], Now: t0})
	require.NoError(t, err)
	r, err := relay.NewRetention(d, relay.RetentionConfig{Targets: []string{"kafka:msg"}, SentRetention: time.Hour,
		Every: time.Minute, Clock: clock})
	require.NoError(t, err)
	require.NoError(t, r.Start(ctx))
	require.Error(t, r.Start(ctx), "starts once")
	clock.Advance(2 * time.Hour)
	require.Eventually(t, func() bool {
		clock.Advance(time.Minute) // wakes the job whenever it waits
		return outboxStates(t, d, "kafka:msg")["SENT"] == 0
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, r.Stop(ctx))
	require.NoError(t, r.Stop(ctx), "twice is harmless")
	require.Equal(t, map[string]int{"PENDING": 1}, outboxStates(t, d, "kafka:msg"))

	bare, err := relay.NewRetention(openSQLite(t, false), relay.RetentionConfig{Targets: []string{"t"}})
	require.NoError(t, err)
	require.Error(t, bare.Start(ctx), "an outdated schema is refused")
	_, err = relay.NewRetention(d, relay.RetentionConfig{})
	require.ErrorContains(t, err, "RetentionConfig.Targets")
	_, err = relay.NewRetention(d, relay.RetentionConfig{Targets: []string{"t"}, BatchLimit: -1})
	require.ErrorContains(t, err, "RetentionConfig.BatchLimit")
}
