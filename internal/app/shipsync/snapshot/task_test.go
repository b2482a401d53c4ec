package snapshot_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/snapshot"
)

// TestCovered walks a record's chain of changes v0 → v1 → v2 → v3 with the
// snapshot reading it at each link, and at none (absent), and requires
// exactly the changes after the snapshot's link to be replayed — also when
// every change is decided again after a restart.
func TestCovered(t *testing.T) {
	t.Parallel()
	type change struct {
		base, result string
		off          int64
	}
	chain := []change{{"v0", "v1", 10}, {"v1", "v2", 11}, {"v2", "v3", 15}}
	for _, c := range []struct {
		snap string
		want []bool // covered, per change
	}{
		{"v0", []bool{false, false, false}}, // read before every change
		{"v1", []bool{true, false, false}},
		{"v2", []bool{true, true, false}},
		{"v3", []bool{true, true, true}}, // read after every change
	} {
		from := int64(-1)
		var got []bool
		for _, ch := range chain {
			var cov bool
			cov, from = snapshot.Covered(c.snap, ch.base, ch.result, ch.off, from)
			got = append(got, cov)
		}
		require.Equal(t, c.want, got, "snapshot at %s", c.snap)
		// A restart reads the changes again with the stored apply-from.
		for i, ch := range chain {
			cov, again := snapshot.Covered(c.snap, ch.base, ch.result, ch.off, from)
			require.Equal(t, c.want[i], cov, "snapshot at %s, change %d read again", c.snap, i)
			require.Equal(t, from, again)
		}
	}
	// A record the snapshot did not hold (revision ""): deleted before it was
	// read — its update and delete are covered — then inserted again, which
	// replays.
	from := int64(-1)
	var cov bool
	cov, from = snapshot.Covered("", "v0", "v1", 3, from)
	require.True(t, cov)
	cov, from = snapshot.Covered("", "v1", "tomb", 4, from)
	require.True(t, cov)
	cov, from = snapshot.Covered("", "", "v9", 8, from)
	require.False(t, cov)
	require.Equal(t, int64(8), from)
}

// TestTaskPositions: the drain check, the lag and the state predicates.
func TestTaskPositions(t *testing.T) {
	t.Parallel()
	tk := snapshot.Task{Positions: []snapshot.Position{{Topic: "a", Partition: 0, Offset: 10}, {Topic: "a", Partition: 1, Offset: 0}}}
	p0, p1 := snapshot.Position{Topic: "a", Partition: 0}, snapshot.Position{Topic: "a", Partition: 1}
	require.False(t, tk.Drained(map[snapshot.Position]int64{p0: 9}))
	require.True(t, tk.Drained(map[snapshot.Position]int64{p0: 10}), "a partition pinned at 0 needs nothing")
	require.Equal(t, int64(5+3), tk.LagOf(map[snapshot.Position]int64{p0: 20, p1: 3}, map[snapshot.Position]int64{p0: 15}))
	require.Equal(t, int64(10), tk.LagOf(map[snapshot.Position]int64{p0: 20}, nil), "not before the pinned offset")
	off, ok := tk.Pinned("a", 0)
	require.True(t, ok)
	require.Equal(t, int64(10), off)
	_, ok = tk.Pinned("a", 2)
	require.False(t, ok)
	require.True(t, snapshot.Pending.Holding() && snapshot.Baseline.Holding())
	require.False(t, snapshot.CatchingUp.Holding() || snapshot.Completed.Holding())
	require.True(t, snapshot.Completed.Finished() && snapshot.Failed.Finished())
}
