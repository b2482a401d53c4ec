package client

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// TestBacklogCadence: the backlog groups are read on the first heartbeat,
// then again only once the last reading is fifty times older than it
// took; a clock that went back reads at once.
func TestBacklogCadence(t *testing.T) {
	var b backlogCadence
	require.True(t, b.due(0), "never read")
	groups := []*pb.BacklogSummary{{RuleId: "tank", Events: 7}}
	b.record(10*time.Second, 10*time.Second+200*time.Millisecond, groups)
	require.Equal(t, groups, b.lastGroup)
	require.False(t, b.due(12*time.Second), "2 s after a 200 ms reading")
	require.False(t, b.due(19*time.Second+999*time.Millisecond))
	require.True(t, b.due(20*time.Second), "50 × 200 ms after the reading started")
	require.True(t, b.due(9*time.Second), "the clock went back")

	// A cheap reading is repeated on every heartbeat.
	b.record(30*time.Second, 30*time.Second+time.Millisecond, nil)
	require.True(t, b.due(30*time.Second+50*time.Millisecond))
	require.False(t, b.due(30*time.Second+49*time.Millisecond))
}
