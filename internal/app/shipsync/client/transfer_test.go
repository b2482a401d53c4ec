package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestTransferMeter(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	m := NewTransferMeter(t0)
	// An old backlog read from the topic is not incoming; a new capture is.
	m.Captured(t0.Add(-time.Hour), 500)
	m.Captured(t0.Add(time.Second), 300)
	// A failed attempt: physical bytes only, no active time, no ratio.
	m.Sent(t0, t0.Add(4*time.Second), 1000, 4000, false, 0, 10)
	// Two answered sends: 8 of 10 events received on their first send.
	m.Sent(t0.Add(5*time.Second), t0.Add(7*time.Second), 1000, 4000, true, 8, 10)
	m.Sent(t0.Add(8*time.Second), t0.Add(9*time.Second), 500, 1000, true, 5, 5)
	iv, ratio, measured := m.Take(t0.Add(10 * time.Second))
	require.InDelta(t, 10, iv.ElapsedSeconds, 1e-9)
	require.InDelta(t, 3, iv.ActiveSeconds, 1e-9)
	require.EqualValues(t, 800+500, iv.EffectiveBytes)
	require.EqualValues(t, 2500, iv.PhysicalBytes)
	require.EqualValues(t, 300, iv.IncomingRawBytes)
	require.True(t, measured)
	require.InDelta(t, 0.2*0.5+0.8*0.25, ratio, 1e-9) // EMA: 0.25 then 0.5 at α 0.2

	// A heartbeat that was not delivered is carried by the next one.
	m.Sent(t0.Add(11*time.Second), t0.Add(12*time.Second), 100, 400, true, 1, 1)
	m.GiveBack(iv)
	iv2, _, _ := m.Take(t0.Add(20 * time.Second))
	require.InDelta(t, 20, iv2.ElapsedSeconds, 1e-9)
	require.InDelta(t, 4, iv2.ActiveSeconds, 1e-9)
	require.EqualValues(t, 1400, iv2.EffectiveBytes)
	require.EqualValues(t, 2600, iv2.PhysicalBytes)

	// Before any answered batch the ratio is the default, not measured.
	_, r0, ok := NewTransferMeter(t0).Take(t0)
	require.False(t, ok)
	require.Positive(t, r0)
}

// TestTransferMeterLongSend: a send that outlasts heartbeats gives each
// stretch its own part of the active time.
func TestTransferMeterLongSend(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	m := NewTransferMeter(t0)
	m.Begin(t0.Add(30 * time.Second))
	iv, _, _ := m.Take(t0.Add(time.Minute))
	require.InDelta(t, 30, iv.ActiveSeconds, 1e-9)
	iv, _, _ = m.Take(t0.Add(2 * time.Minute))
	require.InDelta(t, 60, iv.ActiveSeconds, 1e-9)
	m.Sent(t0.Add(30*time.Second), t0.Add(150*time.Second), 9000, 30000, true, 10, 10)
	iv, _, _ = m.Take(t0.Add(3 * time.Minute))
	require.InDelta(t, 30, iv.ActiveSeconds, 1e-9, "only the part since the last heartbeat")
	require.EqualValues(t, 9000, iv.EffectiveBytes)
	iv, _, _ = m.Take(t0.Add(4 * time.Minute))
	require.Zero(t, iv.ActiveSeconds, "nothing in flight")
}

// TestUnreadBacklog: the records past the read positions, from the
// broker's end offsets, sized at the mean of the events read so far.
func TestUnreadBacklog(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t.a"))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	kc, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	for i := range 30 {
		r := &kgo.Record{Topic: "t.a", Partition: int32(i % 2), Value: []byte("x")}
		require.NoError(t, kc.ProduceSync(t.Context(), r).FirstErr())
	}
	c := &Client{kc: kc, tr: newTracker()}
	events, raw, err := c.unread(t.Context())
	require.NoError(t, err)
	require.Zero(t, events, "no partition read yet: nothing known")
	require.Zero(t, raw)
	c.tr.parts[TP{"t.a", 0}] = &partition{wm: Watermark{ReadNext: 5}}
	c.tr.parts[TP{"t.a", 1}] = &partition{wm: Watermark{ReadNext: 15}} // all read
	c.readNew.Store(20)
	c.readRaw.Store(20 * 300)
	events, raw, err = c.unread(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, 10, events, "partition 0 has 15 records, 5 read")
	require.EqualValues(t, 3000, raw)
}
