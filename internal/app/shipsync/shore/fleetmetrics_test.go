package shore_test

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

// gather returns every sample of reg as "name{l=v,…}" → value.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			var ls []string
			for _, l := range m.Label {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[mf.GetName()+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}

// TestFleetMetrics: the fleet gauges follow the heartbeats, conflicts and
// node states, with rules and states as the only labels, and the database
// is read at most once per Every.
func TestFleetMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	for _, id := range []string{"ship-1", "ship-2", "ship-3"} {
		b.addNode(t, id)
	}
	require.NoError(t, b.reg.Revoke(ctx, "ship-3", op))
	// ship-1 drains at 500 B/s; ship-2 reports new capture faster than it
	// sends (cannot predict).
	for range 15 {
		b.clock.Advance(time.Minute)
		require.NoError(t, b.reg.Heartbeat(ctx, "ship-1", &pb.Heartbeat{NodeId: "ship-1", CompressionRatio: 0.5,
			CompressionRatioMeasured: true, Backlog: []*pb.BacklogSummary{{RuleId: "voyage-log", Events: 100, RawBytes: 600_000,
				OldestCapturedAt: timestamppb.New(t0)}},
			Interval: &pb.TransferInterval{ElapsedSeconds: 60, ActiveSeconds: 60, EffectiveBytes: 30_000}}))
		require.NoError(t, b.reg.Heartbeat(ctx, "ship-2", &pb.Heartbeat{NodeId: "ship-2", CompressionRatio: 0.5,
			CompressionRatioMeasured: true, Backlog: []*pb.BacklogSummary{{RuleId: "voyage-log", Events: 10, RawBytes: 1000},
				{RuleId: "engine", Events: 5, RawBytes: 500}},
			Interval: &pb.TransferInterval{ElapsedSeconds: 60, ActiveSeconds: 30, EffectiveBytes: 3_000, IncomingRawBytes: 60_000}}))
	}
	_, err := b.d.Pool().Exec(ctx, `INSERT INTO sync_conflict_case (conflict_id, rule_id, rule_version, pk_hash, pk_text,
		active_conflict_key, state, created_at, updated_at) VALUES (gen_random_uuid(), 'voyage-log', 1, 'k', 'k', 'x',
		'PENDING_MANUAL', $1, $1)`, t0)
	require.NoError(t, err)

	fm := shore.NewFleetMetrics(b.reg)
	reg := prometheus.NewRegistry()
	reg.MustRegister(fm)
	got := gather(t, reg)
	require.Equal(t, 2.0, got["relay_shipsync_connected_nodes{}"])
	require.Equal(t, 2.0, got["relay_shipsync_nodes{state=active}"])
	require.Equal(t, 1.0, got["relay_shipsync_nodes{state=revoked}"])
	require.Equal(t, 110.0, got["relay_shipsync_queue_events{rule=voyage-log,state=}"])
	require.Equal(t, 601_000.0, got["relay_shipsync_queue_bytes{rule=voyage-log,state=}"])
	require.Equal(t, 5.0, got["relay_shipsync_queue_events{rule=engine,state=}"])
	require.Equal(t, 15*60.0, got["relay_shipsync_oldest_waiting_seconds{rule=voyage-log}"])
	require.InDelta(t, 500+100, got["relay_shipsync_effective_throughput_bytes_per_second{}"], 1e-6)
	require.Equal(t, 1.0, got["relay_shipsync_conflicts{rule=voyage-log,state=PENDING_MANUAL}"])
	require.Equal(t, 600.0, got["relay_shipsync_eta_seconds{confidence=ok}"], "300,000 bytes at 500 B/s")
	require.Equal(t, 1.0, got["relay_shipsync_eta_unpredictable_nodes{}"])
	for k := range got {
		require.NotContains(t, k, "ship-", "no node id as a label")
	}

	// Within Every the figures are served from the last read.
	b.clock.Advance(10 * time.Second)
	require.NoError(t, b.reg.Revoke(ctx, "ship-2", op))
	require.Equal(t, 2.0, gather(t, reg)["relay_shipsync_connected_nodes{}"])
	b.clock.Advance(30 * time.Second)
	require.Equal(t, 1.0, gather(t, reg)["relay_shipsync_connected_nodes{}"])
}
