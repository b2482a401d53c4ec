package fleet_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/fleet"
)

// TestProblems: each failed check is named, and Write says FAILED; a run
// whose checks hold has none.
func TestProblems(t *testing.T) {
	t.Parallel()
	good := func() *fleet.Result {
		return &fleet.Result{Nodes: 2, EventsPerNode: 3, Events: 6, InboxRows: 6, Results: map[string]int64{"EVENT_RESULT_APPLIED": 6},
			PGPeak: 5, Pool: 4, Budget: 6, InFlightPeak: 3, InFlightLimit: 3, TargetRows: 6,
			CatchUp: []time.Duration{time.Second, 3 * time.Second}}
	}
	var out bytes.Buffer
	good().Write(&out)
	require.Empty(t, good().Problems())
	require.Contains(t, out.String(), "nothing lost, nothing duplicated, connections within budget")
	require.Equal(t, time.Second, good().Quantile(0.1))
	require.Equal(t, 3*time.Second, good().Quantile(1))

	for name, c := range map[string]struct {
		bad  func(*fleet.Result)
		want string
	}{
		"missing":       {func(r *fleet.Result) { r.InboxRows, r.Missing = 5, 1 }, "1 missing"},
		"duplicate":     {func(r *fleet.Result) { r.InboxRows, r.Unexpected = 7, 1 }, "1 not of the backlogs"},
		"not terminal":  {func(r *fleet.Result) { r.NotTerminal = 2 }, "2 events without a terminal result"},
		"receipt twice": {func(r *fleet.Result) { r.DupReceipts = 1 }, "1 received twice"},
		"early retry":   {func(r *fleet.Result) { r.Early = 3 }, "3 retries sent before their Retry-After"},
		"connections":   {func(r *fleet.Result) { r.PGPeak = 7 }, "7 connections of the shore, over its budget of 6"},
		"in flight":     {func(r *fleet.Result) { r.InFlightPeak = 4 }, "4 requests in flight at the shore, over its limit of 3"},
	} {
		r := good()
		c.bad(r)
		require.Len(t, r.Problems(), 1, name)
		require.Contains(t, r.Problems()[0], c.want, name)
		out.Reset()
		r.Write(&out)
		require.Contains(t, out.String(), "FAILED:", name)
	}
}
