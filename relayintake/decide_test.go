package relayintake

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaysource"
)

func rowsOf(ids ...int64) []relaysource.Row {
	out := make([]relaysource.Row, len(ids))
	for i, id := range ids {
		out[i] = relaysource.Row{ID: id}
	}
	return out
}

// decide is the hole rule as a pure function; each case is one rule.
func TestDecide(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2024, 3, 1, 8, 0, 0, 0, time.UTC)
	const delay = time.Minute
	for name, tc := range map[string]struct {
		w         int64
		holeSince time.Time
		ids       []int64
		now       time.Time
		settled   bool
		want      decision
	}{
		"empty batch, no hole": {w: 5, ids: nil, now: t0,
			want: decision{watermark: 5}},
		"empty batch clears a stale hole timer": {w: 5, holeSince: t0, ids: nil, now: t0.Add(time.Hour),
			want: decision{watermark: 5}},
		"contiguous run": {w: 5, ids: []int64{6, 7, 8}, now: t0,
			want: decision{watermark: 8, enqueue: 3}},
		"contiguous run passes an old hole: timer cleared": {w: 5, holeSince: t0, ids: []int64{6, 7}, now: t0.Add(time.Second),
			want: decision{watermark: 7, enqueue: 2}},
		"first row is not W+1: hole at W+1, first observed now": {w: 5, ids: []int64{7, 8}, now: t0,
			want: decision{watermark: 5, holeSince: t0, holeFirst: 6, holeLast: 6}},
		"rows before a hole are enqueued, rows after are not": {w: 0, ids: []int64{1, 2, 5, 6}, now: t0,
			want: decision{watermark: 2, enqueue: 2, holeSince: t0, holeFirst: 3, holeLast: 4}},
		"young hole keeps its first observation": {w: 5, holeSince: t0, ids: []int64{7}, now: t0.Add(delay - time.Nanosecond),
			want: decision{watermark: 5, holeSince: t0, holeFirst: 6, holeLast: 6}},
		"aged hole is released up to the first row after it": {w: 5, holeSince: t0, ids: []int64{9, 10, 12}, now: t0.Add(delay),
			want: decision{watermark: 8, holeFirst: 6, holeLast: 8, released: true, firstSeen: t0}},
		"new hole after an old one filled is timed afresh": {w: 5, holeSince: t0, ids: []int64{6, 7, 9}, now: t0.Add(2 * delay),
			want: decision{watermark: 7, enqueue: 2, holeSince: t0.Add(2 * delay), holeFirst: 8, holeLast: 8}},
		"settled hole is released young, up to the first row after it": {w: 5, holeSince: t0, ids: []int64{8, 9}, now: t0.Add(time.Second),
			settled: true, want: decision{watermark: 7, holeFirst: 6, holeLast: 7, released: true, firstSeen: t0, settled: true}},
		"settled and aged: released by age": {w: 5, holeSince: t0, ids: []int64{8}, now: t0.Add(delay), settled: true,
			want: decision{watermark: 7, holeFirst: 6, holeLast: 7, released: true, firstSeen: t0}},
		"settled without a hole changes nothing": {w: 5, ids: []int64{6, 7}, now: t0, settled: true,
			want: decision{watermark: 7, enqueue: 2}},
		"clock behind holeSince does not release": {w: 5, holeSince: t0, ids: []int64{7}, now: t0.Add(-time.Hour),
			want: decision{watermark: 5, holeSince: t0, holeFirst: 6, holeLast: 6}},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, decide(tc.w, tc.holeSince, rowsOf(tc.ids...), tc.now, delay, tc.settled))
		})
	}
}

// For any batch: W never decreases, every enqueued row is at most the new W and
// contiguous from the old W+1, a release never passes an existing row, and at
// most one hole is resolved.
func TestDecideProperties(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2024, 3, 1, 8, 0, 0, 0, time.UTC)
	const delay = time.Minute
	for range 20000 {
		w := r.Int64N(100)
		var holeSince time.Time
		if r.IntN(2) == 0 {
			holeSince = t0.Add(-time.Duration(r.Int64N(int64(2 * delay))))
		}
		var ids []int64
		next := w + 1
		for range r.IntN(8) {
			next += r.Int64N(3) // 0: contiguous, else a gap
			ids = append(ids, next)
			next++
		}
		d := decide(w, holeSince, rowsOf(ids...), t0, delay, false)
		require.GreaterOrEqual(t, d.watermark, w)
		for i := range d.enqueue {
			require.Equal(t, w+int64(i)+1, ids[i])
		}
		if d.enqueue < len(ids) {
			require.Less(t, d.watermark, ids[d.enqueue], "never passes an existing row")
			if d.released {
				require.Zero(t, d.enqueue, "a young hole cannot be released in the round that first sees it")
				require.Equal(t, ids[0]-1, d.watermark)
				require.True(t, d.holeSince.IsZero())
			} else {
				require.Equal(t, w+int64(d.enqueue), d.watermark)
				require.False(t, d.holeSince.IsZero())
			}
		} else {
			require.False(t, d.released)
			require.True(t, d.holeSince.IsZero())
			require.Equal(t, w+int64(len(ids)), d.watermark)
		}
	}
}
