package flow_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/flow"
)

type item struct {
	lane string
	seq  int
	size int64
}

func newScheduler(t *testing.T, cfg flow.SchedulerConfig[item]) *flow.Scheduler[item] {
	t.Helper()
	s, err := flow.NewScheduler(cfg)
	require.NoError(t, err)
	return s
}

func TestSchedulerFIFOInLaneRoundRobinAcrossLanes(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, flow.SchedulerConfig[item]{BatchItems: 2})
	for i := range 5 {
		for _, l := range []string{"orders/0", "orders/1", "crew/0"} {
			s.Push(l, flow.Normal, item{lane: l, seq: i}, t0)
		}
	}
	require.Equal(t, 15, s.Len())
	seen := map[string][]int{}
	var order []string
	for {
		b, ok := s.Next(t0)
		if !ok {
			break
		}
		require.Equal(t, flow.Normal, b.Class)
		require.LessOrEqual(t, len(b.Items), 2)
		order = append(order, b.Lane)
		for _, it := range b.Items {
			require.Equal(t, b.Lane, it.lane, "a batch holds one lane")
			seen[b.Lane] = append(seen[b.Lane], it.seq)
		}
	}
	for _, l := range []string{"orders/0", "orders/1", "crew/0"} {
		require.Equal(t, []int{0, 1, 2, 3, 4}, seen[l], "FIFO in lane %s", l)
	}
	require.Equal(t, []string{
		"orders/0", "orders/1", "crew/0",
		"orders/0", "orders/1", "crew/0",
		"orders/0", "orders/1", "crew/0",
	}, order, "lanes take turns")
	require.Zero(t, s.Len())
}

func TestSchedulerCriticalOvertakesBulkBacklog(t *testing.T) {
	t.Parallel()
	for _, aged := range []bool{false, true} {
		t.Run(fmt.Sprintf("aged=%v", aged), func(t *testing.T) {
			t.Parallel()
			s := newScheduler(t, flow.SchedulerConfig[item]{BatchItems: 100})
			now := t0
			if aged {
				now = t0.Add(24 * time.Hour) // every BULK item is far past its max wait
			}
			for i := range 100_000 {
				l := fmt.Sprintf("bulk/%d", i%10)
				s.Push(l, flow.Bulk, item{lane: l, seq: i}, t0)
			}
			for range 3 {
				b, ok := s.Next(now)
				require.True(t, ok)
				require.Equal(t, flow.Bulk, b.Class)
			}
			s.Push("alarm/0", flow.Critical, item{lane: "alarm/0"}, now)
			waited := 0
			for {
				b, ok := s.Next(now)
				require.True(t, ok)
				if b.Class == flow.Critical {
					break
				}
				waited++
			}
			require.LessOrEqual(t, waited, 1, "CRITICAL goes within the next batch or two")
			require.Equal(t, 100_000-100*(3+waited), s.Len())
		})
	}
}

func TestSchedulerWeightsUnderSaturation(t *testing.T) {
	t.Parallel()
	for _, weights := range [][flow.NumClasses]int{{}, {5, 3, 1, 1}} {
		t.Run(fmt.Sprint(weights), func(t *testing.T) {
			t.Parallel()
			s := newScheduler(t, flow.SchedulerConfig[item]{Weights: weights, BatchItems: 1})
			const rounds = 3000
			for c := range flow.NumClasses {
				for i := range rounds {
					l := fmt.Sprintf("c%d/%d", c, i%3)
					s.Push(l, flow.Class(c), item{lane: l}, t0)
				}
			}
			var served [flow.NumClasses]int
			for range rounds {
				b, ok := s.Next(t0) // no ageing: nothing is older than a max wait
				require.True(t, ok)
				served[b.Class]++
			}
			eff := weights
			total := 0
			for c := range eff {
				if eff[c] == 0 {
					eff[c] = flow.WeightsDefault[c]
				}
				total += eff[c]
			}
			for c := range flow.NumClasses {
				want := float64(rounds) * float64(eff[c]) / float64(total)
				require.InEpsilon(t, want, served[c], 0.02, "class %s served %v", flow.Class(c), served)
			}
		})
	}
}

// TestSchedulerAgedBulkUnderPermanentCriticalLoad: CRITICAL is never empty;
// BULK gets its weight's share (1/9) until its oldest item passes MaxWait,
// then an equal share with CRITICAL, and its lane keeps being served.
func TestSchedulerAgedBulkUnderPermanentCriticalLoad(t *testing.T) {
	t.Parallel()
	const maxWait = 10 * time.Minute
	s := newScheduler(t, flow.SchedulerConfig[item]{
		BatchItems: 1,
		MaxWait:    [flow.NumClasses]time.Duration{flow.Bulk: maxWait},
	})
	for i := range 5000 {
		s.Push("archive/0", flow.Bulk, item{lane: "archive/0", seq: i}, t0)
	}
	now := t0
	next := 0
	var before, after, gap, longestGap int
	var agedSeen bool
	for step := range 2 * 1800 {
		s.Push("alarm/0", flow.Critical, item{lane: "alarm/0"}, now) // permanent load
		b, ok := s.Next(now)
		require.True(t, ok)
		if b.Class == flow.Bulk {
			require.Equal(t, next, b.Items[0].seq, "FIFO in the aged lane")
			next++
			agedSeen = agedSeen || b.Aged
			if step < 600 {
				before++
			} else {
				after++
			}
			gap = 0
		} else {
			gap++
			longestGap = max(longestGap, gap)
		}
		now = now.Add(time.Second)
	}
	require.True(t, agedSeen)
	require.InDelta(t, 600.0/9, before, 3, "weight share before ageing")
	require.InDelta(t, 3000.0/2, after, 3, "equal share once aged")
	require.LessOrEqual(t, longestGap, 8, "BULK is never left out longer than one WRR cycle")
}

func TestSchedulerEligibility(t *testing.T) {
	t.Parallel()
	paused := map[string]bool{"bulk/0": true}
	s := newScheduler(t, flow.SchedulerConfig[item]{
		BatchItems:   1,
		EligibleFunc: func(lane string, _ flow.Class, _ time.Time) bool { return !paused[lane] },
	})
	s.Push("bulk/0", flow.Bulk, item{seq: 1}, t0)
	s.Push("bulk/1", flow.Bulk, item{seq: 2}, t0)
	b, ok := s.Next(t0)
	require.True(t, ok)
	require.Equal(t, "bulk/1", b.Lane)
	_, ok = s.Next(t0)
	require.False(t, ok, "the paused lane is not served")
	require.Equal(t, 1, s.Len(), "but keeps its items")

	// A class shut out for a while comes back with no credit saved up: a
	// fresh CRITICAL item still goes first.
	for range 50 {
		s.Push("normal/0", flow.Normal, item{}, t0)
	}
	for range 10 {
		_, ok = s.Next(t0)
		require.True(t, ok)
	}
	paused["bulk/0"] = false
	s.Push("alarm/0", flow.Critical, item{}, t0)
	b, ok = s.Next(t0)
	require.True(t, ok)
	require.Equal(t, flow.Critical, b.Class)
}

func TestSchedulerBatchBytesAndStats(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, flow.SchedulerConfig[item]{
		BatchBytes: 1000,
		SizeFunc:   func(it item) int64 { return it.size },
	})
	s.Push("a", flow.High, item{seq: 0, size: 5000}, t0.Add(time.Second)) // bigger than a batch
	s.Push("a", flow.High, item{seq: 1, size: 400}, t0.Add(2*time.Second))
	s.Push("a", flow.High, item{seq: 2, size: 400}, t0.Add(3*time.Second))
	s.Push("a", flow.High, item{seq: 3, size: 400}, t0.Add(4*time.Second))
	s.Push("b", flow.High, item{seq: 4, size: 10}, t0)
	st := s.Stats()
	require.Equal(t, flow.ClassStats{Items: 5, Bytes: 6210, Lanes: 2, Oldest: t0}, st[flow.High])
	require.Equal(t, flow.ClassStats{}, st[flow.Bulk])

	b, _ := s.Next(t0)
	require.Equal(t, []item{{seq: 0, size: 5000}}, b.Items, "an oversize item goes alone")
	require.Equal(t, int64(5000), b.Bytes)
	b, _ = s.Next(t0)
	require.Equal(t, "b", b.Lane)
	b, _ = s.Next(t0)
	require.Len(t, b.Items, 2)
	require.Equal(t, int64(800), b.Bytes)
	st = s.Stats()
	require.Equal(t, flow.ClassStats{Items: 1, Bytes: 400, Lanes: 1, Oldest: t0.Add(4 * time.Second)}, st[flow.High])
}

func TestSchedulerConfigAndClasses(t *testing.T) {
	t.Parallel()
	_, err := flow.NewScheduler(flow.SchedulerConfig[item]{Weights: [flow.NumClasses]int{flow.Normal: -1}})
	require.ErrorContains(t, err, "Weights[NORMAL] is negative")
	_, err = flow.NewScheduler(flow.SchedulerConfig[item]{BatchBytes: -1})
	require.ErrorContains(t, err, "BatchBytes")

	for c := range flow.NumClasses {
		got, err := flow.ParseClass(flow.Class(c).String())
		require.NoError(t, err)
		require.Equal(t, flow.Class(c), got)
	}
	got, err := flow.ParseClass("bulk")
	require.NoError(t, err)
	require.Equal(t, flow.Bulk, got)
	_, err = flow.ParseClass("URGENT")
	require.ErrorContains(t, err, `"URGENT"`)
	require.Equal(t, "Class(9)", flow.Class(9).String())

	s := newScheduler(t, flow.SchedulerConfig[item]{})
	require.Panics(t, func() { s.Push("x", flow.Class(4), item{}, t0) })

	// An AgedWeight above CRITICAL's is capped: an aged BULK class never
	// gets more than CRITICAL.
	s = newScheduler(t, flow.SchedulerConfig[item]{AgedWeight: 100, BatchItems: 1})
	for range 100 {
		s.Push("bulk/0", flow.Bulk, item{}, t0)
		s.Push("alarm/0", flow.Critical, item{}, t0)
	}
	var served [flow.NumClasses]int
	for range 100 {
		b, _ := s.Next(t0.Add(24 * time.Hour))
		require.True(t, b.Class == flow.Critical || b.Aged)
		served[b.Class]++
	}
	require.Equal(t, 50, served[flow.Critical])
}

func TestSchedulerRequeueKeepsLaneOrder(t *testing.T) {
	t.Parallel()
	s := newScheduler(t, flow.SchedulerConfig[item]{BatchItems: 3, SizeFunc: func(i item) int64 { return i.size }})
	for i := range 5 {
		s.Push("crew/0", flow.High, item{lane: "crew/0", seq: i, size: 10}, t0)
	}
	b, ok := s.Next(t0)
	require.True(t, ok)
	require.Len(t, b.Items, 3)
	s.Push("crew/0", flow.High, item{lane: "crew/0", seq: 5, size: 10}, t0)
	// The upload failed for the last two of the batch: they go back first.
	s.Requeue("crew/0", flow.High, b.Items[1:], t0)
	require.Equal(t, 5, s.Len())
	require.Equal(t, int64(50), s.Stats()[flow.High].Bytes)
	var seqs []int
	for {
		b, ok := s.Next(t0)
		if !ok {
			break
		}
		for _, it := range b.Items {
			seqs = append(seqs, it.seq)
		}
	}
	require.Equal(t, []int{1, 2, 3, 4, 5}, seqs)
	// A lane emptied by Next comes back with Requeue.
	s.Requeue("crew/0", flow.High, []item{{seq: 9}}, t0)
	b, ok = s.Next(t0)
	require.True(t, ok)
	require.Equal(t, 9, b.Items[0].seq)
}
