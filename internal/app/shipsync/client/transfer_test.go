package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
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

// TestTransferMeterOverlappingSends: the client runs several uploads at
// once; time in which any of them is under way counts once, so active time
// never exceeds the stretch (the shore refuses a heartbeat that says it
// does).
func TestTransferMeterOverlappingSends(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	m := NewTransferMeter(t0)
	// Six uploads busy for the whole stretch, each answered after 3 s and
	// sending again at once; events in the order of time.
	type ev struct {
		at    float64
		start time.Time
		end   bool
	}
	var evs []ev
	for u := range 6 {
		for s := 0.0; s+3 <= 9; s += 3 {
			st := s + float64(u)*0.1
			evs = append(evs, ev{st, at(st), false}, ev{st + 3, at(st), true})
		}
	}
	slices.SortStableFunc(evs, func(a, b ev) int { return cmp.Compare(a.at, b.at) })
	for _, e := range evs {
		if e.end {
			m.Sent(e.start, at(e.at), 100, 400, true, 1, 1)
		} else {
			m.Begin(e.start)
		}
	}
	iv, _, _ := m.Take(at(10))
	require.InDelta(t, 10, iv.ElapsedSeconds, 1e-9)
	require.InDelta(t, 9.5, iv.ActiveSeconds, 1e-9) // 0 … 9.5, once

	// Overlaps with an attempt still under way at the heartbeat: [10, 13]
	// and [11, 12] answered, [12.5, …) in flight at 15 → 10 … 15.
	m.Begin(at(10))
	m.Begin(at(11))
	m.Sent(at(11), at(12), 100, 400, true, 1, 1)
	m.Begin(at(12.5))
	m.Sent(at(10), at(13), 100, 400, true, 1, 1)
	iv, _, _ = m.Take(at(15))
	require.InDelta(t, 5, iv.ActiveSeconds, 1e-9)
	// Its remaining part goes with the next stretch; a gap is not active.
	m.Sent(at(12.5), at(16), 100, 400, true, 1, 1)
	m.Begin(at(18))
	m.Sent(at(18), at(19), 100, 400, true, 1, 1)
	iv, _, _ = m.Take(at(20))
	require.InDelta(t, 2, iv.ActiveSeconds, 1e-9)
	require.Empty(t, m.spans)
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

// TestRefusedHeartbeat: a heartbeat the shore refused is not carried into
// the next (it would be refused again, for ever); one that did not arrive
// or was turned away for load is.
func TestRefusedHeartbeat(t *testing.T) {
	t.Parallel()
	require.True(t, refused(&RequestError{Status: 400, Code: pb.ErrorCode_ERROR_CODE_MALFORMED_BODY}))
	require.True(t, refused(fmt.Errorf("wrapped: %w", &RequestError{Status: 403})))
	require.False(t, refused(&RequestError{Status: 429, Retryable: true}))
	require.False(t, refused(&RequestError{Status: 503, Retryable: true}))
	require.False(t, refused(&RequestError{Status: 0, Err: errors.New("connection reset")}))
	require.False(t, refused(context.DeadlineExceeded))
}

// TestFetchLongPollIsShort: the consumer's fetches ask the broker to hold
// them at most FetchMaxWait, so a partition resumed while one is
// outstanding is read within that (the broker's default is 5 s, during
// which a drained link stood idle).
func TestFetchLongPollIsShort(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t.a"))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	var mu sync.Mutex
	var waits []int32
	cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		mu.Lock()
		waits = append(waits, req.(*kmsg.FetchRequest).MaxWaitMillis)
		mu.Unlock()
		return nil, nil, false
	})
	c := &Client{cfg: Config{Brokers: cluster.ListenAddrs(), Group: "g", TopicPrefix: "t."}}
	kc, err := kgo.NewClient(c.consumerOpts()...)
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	kc.PollRecords(ctx, 1) // nothing to read: fetches long-poll until ctx ends
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, waits, "no fetch reached the broker")
	for _, w := range waits {
		require.LessOrEqual(t, w, int32(FetchMaxWait.Milliseconds()))
	}
}
