package shore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

// TestBacklogFromHeartbeats: the heartbeats' backlog, samples, ratio and
// window make the node's ETA, with its inputs.
func TestBacklogFromHeartbeats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.addNode(t, "ship-1")

	nb, err := b.reg.Backlog(ctx, "ship-1")
	require.NoError(t, err)
	require.True(t, nb.LastHeartbeat.IsZero())
	require.Zero(t, nb.RawBytes)
	require.True(t, nb.ETA.Predictable, "nothing left: done now")
	_, err = b.reg.Backlog(ctx, "nobody")
	require.ErrorIs(t, err, shore.ErrUnknownNode)

	backlog := []*pb.BacklogSummary{
		{RuleId: "voyage-log", Events: 1000, RawBytes: 1_000_000, OldestCapturedAt: timestamppb.New(t0.Add(-72 * time.Hour))},
		{RuleId: "engine", Events: 100, RawBytes: 200_000},
	}
	// Twenty minutes of heartbeats, each a minute fully active at 500 B/s.
	for range 20 {
		b.clock.Advance(time.Minute)
		require.NoError(t, b.reg.Heartbeat(ctx, "ship-1", &pb.Heartbeat{NodeId: "ship-1", Backlog: backlog,
			CompressionRatio: 0.25, CompressionRatioMeasured: true, UploadRateLimit: 2000,
			Interval: &pb.TransferInterval{ElapsedSeconds: 60, ActiveSeconds: 60, EffectiveBytes: 30_000, PhysicalBytes: 36_000}}))
	}
	nb, err = b.reg.Backlog(ctx, "ship-1")
	require.NoError(t, err)
	now := b.clock.Now()
	require.Equal(t, now, nb.LastHeartbeat.UTC())
	require.Len(t, nb.Rules, 2)
	require.Equal(t, "engine", nb.Rules[0].RuleID)
	require.EqualValues(t, 1100, nb.Events)
	require.EqualValues(t, 1_200_000, nb.RawBytes)
	require.Equal(t, t0.Add(-72*time.Hour), nb.Rules[1].OldestCaptured.UTC())
	e := nb.ETA
	require.True(t, e.Predictable, e.Reason)
	require.False(t, e.LowConfidence, e.Why)
	require.EqualValues(t, 300_000, e.RemainingBytes)
	require.InDelta(t, 500, e.Effective, 1e-6)
	require.InDelta(t, 600, e.Physical, 1e-6)
	require.Equal(t, 20*time.Minute, e.Active, "the 30-minute window holds all twenty")
	require.EqualValues(t, 2000, e.RateLimit)
	require.Equal(t, now.Add(600*time.Second), e.P50.UTC(), "300,000 bytes at 500 B/s")

	// A backlog still in the topic, past what the node has read, counts
	// too: 200,000 raw bytes more are 50,000 compressed, 100 s at 500 B/s.
	b.clock.Advance(time.Second)
	require.NoError(t, b.reg.Heartbeat(ctx, "ship-1", &pb.Heartbeat{NodeId: "ship-1", Backlog: backlog,
		CompressionRatio: 0.25, CompressionRatioMeasured: true, UnreadEvents: 200, UnreadRawBytes: 200_000}))
	nb, err = b.reg.Backlog(ctx, "ship-1")
	require.NoError(t, err)
	require.EqualValues(t, 200, nb.UnreadEvents)
	require.EqualValues(t, 350_000, nb.ETA.RemainingBytes)
	require.Equal(t, b.clock.Now().Add(700*time.Second), nb.ETA.P50.UTC())

	// New capture faster than the drain: no prediction, and why.
	b.clock.Advance(time.Minute)
	require.NoError(t, b.reg.Heartbeat(ctx, "ship-1", &pb.Heartbeat{NodeId: "ship-1", Backlog: backlog,
		CompressionRatio: 0.25, CompressionRatioMeasured: true,
		Interval: &pb.TransferInterval{ElapsedSeconds: 60, ActiveSeconds: 60, EffectiveBytes: 30_000, IncomingRawBytes: 3_000_000}}))
	nb, err = b.reg.Backlog(ctx, "ship-1")
	require.NoError(t, err)
	require.False(t, nb.ETA.Predictable)
	require.Contains(t, nb.ETA.Reason, "not shrinking")

	// Impossible figures are refused with the field, and nothing is kept.
	for _, hb := range []*pb.Heartbeat{
		{Interval: &pb.TransferInterval{ElapsedSeconds: 10, ActiveSeconds: 60}},
		{CompressionRatio: -1},
		{TransferWindow: "Mon-Fri 25:00-26:00", TransferWindowZone: "UTC"},
		{TransferWindow: "22:00-06:00", TransferWindowZone: "Nowhere/City"},
		{Backlog: []*pb.BacklogSummary{{RuleId: ""}}},
	} {
		hb.NodeId = "ship-1"
		err := b.reg.Heartbeat(ctx, "ship-1", hb)
		require.ErrorIs(t, err, shore.ErrBadHeartbeat)
	}
	again, err := b.reg.Backlog(ctx, "ship-1")
	require.NoError(t, err)
	require.Equal(t, nb.LastHeartbeat, again.LastHeartbeat)
	require.EqualValues(t, 1_200_000, again.RawBytes)

	// A closed window: the remaining time starts when it opens. The fake
	// clock is then at 12:53 UTC (the burst of new capture has left the
	// 30-minute window); the window opens at 22:00.
	b.clock.Advance(31 * time.Minute)
	require.NoError(t, b.reg.Heartbeat(ctx, "ship-1", &pb.Heartbeat{NodeId: "ship-1", Backlog: backlog,
		CompressionRatio: 0.25, CompressionRatioMeasured: true, TransferWindow: "22:00-06:00", TransferWindowZone: "UTC",
		Interval: &pb.TransferInterval{ElapsedSeconds: 60, ActiveSeconds: 60, EffectiveBytes: 30_000}}))
	nb, err = b.reg.Backlog(ctx, "ship-1")
	require.NoError(t, err)
	require.Equal(t, "22:00-06:00", nb.ETA.Window)
	require.True(t, nb.ETA.Predictable, nb.ETA.Reason)
	require.False(t, nb.ETA.LowConfidence, "the throughput window is 30 minutes of active time: the earlier samples count")
	require.Equal(t, 22*time.Minute, nb.ETA.Active)
	open := time.Date(2026, 12, 1, 22, 0, 0, 0, time.UTC)
	require.True(t, nb.ETA.P50.After(open), "finishes after the window opens: %v", nb.ETA.P50)
	require.True(t, nb.ETA.P50.Before(open.Add(time.Hour)), "%v", nb.ETA.P50)

	// Grouped by direction, rule, priority and state: only uplink events
	// still to send count in the remaining bytes (RECEIVED ones wait for
	// their result, BLOCKED ones for an operator); a group sent twice is
	// merged; the state's disk size is kept.
	b.clock.Advance(time.Minute)
	ts := timestamppb.New(t0)
	require.NoError(t, b.reg.Heartbeat(ctx, "ship-1", &pb.Heartbeat{NodeId: "ship-1", CompressionRatio: 0.25,
		CompressionRatioMeasured: true, StateDiskBytes: 1 << 20, Backlog: []*pb.BacklogSummary{
			{Direction: "up", RuleId: "voyage-log", Priority: 5, State: "READY", Events: 10, RawBytes: 40_000,
				OldestCapturedAt: ts, NewestCapturedAt: ts, OldestBusinessAt: ts, NewestBusinessAt: ts},
			{Direction: "up", RuleId: "voyage-log", Priority: 5, State: "READY", Events: 5, RawBytes: 20_000},
			{Direction: "up", RuleId: "voyage-log", Priority: 5, State: "RECEIVED", Events: 100, RawBytes: 400_000},
			{Direction: "up", RuleId: "voyage-log", Priority: 5, State: "BLOCKED", Events: 1, RawBytes: 4_000},
			{Direction: "down", RuleId: "voyage-log", Priority: 5, State: "READY", Events: 3, RawBytes: 3_000},
		}}))
	nb, err = b.reg.Backlog(ctx, "ship-1")
	require.NoError(t, err)
	require.Len(t, nb.Rules, 4, "the two READY groups merged")
	require.EqualValues(t, 1<<20, nb.DiskBytes)
	require.EqualValues(t, 119, nb.Events)
	require.Equal(t, "up", nb.Rules[0].Direction)
	require.Equal(t, "BLOCKED", nb.Rules[0].State)
	ready := nb.Rules[1]
	require.Equal(t, "READY", ready.State)
	require.EqualValues(t, 15, ready.Events)
	require.Equal(t, t0, ready.OldestBusiness.UTC())
	require.EqualValues(t, 15_000, nb.ETA.RemainingBytes, "60,000 raw to send × 0.25")
}
