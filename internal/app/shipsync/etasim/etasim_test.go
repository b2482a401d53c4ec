package etasim_test

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/etasim"
	"github.com/relayhq/relay/internal/testdb"
)

// TestETAAccuracy drains a simulated offline backlog over a throttled,
// noisy link with outages, allowed twelve hours a day, while new capture
// keeps arriving: the P50 the shore gives at 10 %, 50 % and 90 % of the
// drain is within 20 % of the time the drain then took.
func TestETAAccuracy(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	reg, clock, err := etasim.Setup(ctx, testdb.PGDriver(t), time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC), t.TempDir(), "ship-eta")
	require.NoError(t, err)
	res, err := etasim.Run(ctx, etasim.Options{Registry: reg, Clock: clock, Node: "ship-eta", Seed: 7})
	require.NoError(t, err)
	var table bytes.Buffer
	etasim.WriteTable(&table, res)
	t.Log("\n" + table.String())
	require.Len(t, res.Points, 3)
	require.Greater(t, res.Drained.Sub(res.Start), 24*time.Hour, "the drain spans several windows")
	require.Positive(t, res.Failed, "outages happened")
	for _, pt := range res.Points {
		require.LessOrEqual(t, math.Abs(pt.Error()), 0.20, fmt.Sprintf("at %.0f %%", pt.Fraction*100))
	}
}
