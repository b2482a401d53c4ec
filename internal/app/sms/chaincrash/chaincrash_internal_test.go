package chaincrash

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/supervise"
)

// TestAtSpreadsEvents: one moment in the middle half of each equal slot,
// in order, all inside the window.
func TestAtSpreadsEvents(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	const window = 10 * time.Second
	got := at(5, window, r)
	require.Len(t, got, 5)
	require.True(t, slices.IsSorted(got))
	for i, d := range got {
		slot := window / 5
		require.GreaterOrEqual(t, d, time.Duration(i)*slot+slot/4, "event %d", i)
		require.Less(t, d, time.Duration(i)*slot+3*slot/4, "event %d", i)
	}
	require.Empty(t, at(0, window, r))
}

// TestLongShare: exactly ⌊n × share⌋ of the first n requests are long.
func TestLongShare(t *testing.T) {
	t.Parallel()
	s := &sender{longShare: 0.1}
	long := 0
	for i := range 2000 {
		if s.isLong(i) {
			long++
		}
	}
	require.Equal(t, 200, long)
	require.False(t, (&sender{}).isLong(3))
}

// TestRoleArgs: every role keeps its instance name across lives, the API
// only accepts, the gateway reads its channels from the database, and the
// short timings keep the gateway's order (SubmitTimeout < StaleClaim <
// MinIdle).
func TestRoleArgs(t *testing.T) {
	t.Parallel()
	n := newNames("t")
	for _, name := range Roles {
		args := roleArgs(name, "postgres://x", "127.0.0.1:6379", "127.0.0.1:9", n, webhookArgs{url: "http://h", secretFile: "f"})
		require.Equal(t, "sms", args[0])
		switch name {
		case RoleAPI:
			require.Subset(t, args, []string{"api", "--no-stage", "--api-addr", "127.0.0.1:9"})
		case RoleGateway:
			require.Subset(t, args, []string{"gateway", "--channels-from-db", "--consumer", "chaos-gateway", n.commands})
		default:
			require.Subset(t, args, []string{name, "--instance-id", "chaos-" + name, n.commands, n.results, n.reports})
		}
	}
	require.Less(t, submitTimeout, staleClaim)
	require.Less(t, staleClaim, minIdle)
	require.Less(t, minIdle, resultDeadline)
}

// TestArmSpec: a role is armed at each of its points; the API has none.
func TestArmSpec(t *testing.T) {
	t.Parallel()
	r := supervise.NewRole(RolePublisher, "relay", nil, nil, RolePoints[RolePublisher], 1, func(string, ...any) {})
	require.Equal(t, "dispatch.after-confirm=0.25", r.ArmSpec(0.25))
	require.Empty(t, supervise.NewRole(RoleAPI, "relay", nil, nil, RolePoints[RoleAPI], 1, nil).ArmSpec(0.5))
}
