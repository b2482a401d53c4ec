package cli_test

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testbin"
	"github.com/relayhq/relay/internal/testdb"
)

// TestSmsChainCrash runs a small `relay sms chaos`: a built relay binary as
// every role of the send chain (api, worker, publisher, gateway, callback),
// the machine's Redis and PostgreSQL (it fails when either is absent), 2,000
// signed requests at 200/s while the roles are killed with SIGKILL in turn,
// three times each, every other restart armed at the role's fault points (how many armed
// lives die at a point is chance: the log shows it),
// and suppliers drop their connections four times; then a clean life of
// every role, a drain, a clean stop and a reconciliation that must pass.
// Redis is not restarted: other tests use it.
func TestSmsChainCrash(t *testing.T) {
	t.Parallel()
	bin := testbin.Relay(t)
	got, err := run(t, "sms", "chaos", "--binary", bin, "-n", "2000", "--tps", "200", "--kills", "15", "--drops", "4",
		"--fault-probability", "0.3", "--seed", "5", "--postgres", testdb.PGURL())
	t.Log("\n" + got)
	require.NoError(t, err)
	require.Contains(t, got, "requests:  2000 messages (200 long)")
	// 15 planned kills, and one more for each role whose last chaos life
	// was armed and is replaced by a clean one; a planned kill that finds
	// its life dead already (at a fault point) is counted as that death.
	kills, deaths := chaosKills(t, got)
	require.GreaterOrEqual(t, kills+deaths, 15)
	require.Positive(t, kills)
	require.Contains(t, got, "suppliers: 4 drops")
	require.Contains(t, got, "messages:  2000 (")
	require.Contains(t, got, "webhooks:  2000 messages notified")
	require.Contains(t, got, "reconcile: ok (6 checks)")
	require.NotContains(t, got, "PROBLEM")
	// The health check saw the roles' sessions while they ran (their
	// pools are named under the harness's application_name), not only the
	// harness's one or two.
	live := regexp.MustCompile(`db-health while every role ran: sessions of application_name relay-chaos-\w+: (\d+) connections`).
		FindStringSubmatch(got)
	require.NotNil(t, live, "the live health line")
	n, err := strconv.Atoi(live[1])
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, 5, "a session of each role at least")
}

func TestSmsChaosFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-n", "0"},
		{"--tps", "0"},
		{"--kills", "-1"},
		{"--drops", "-2"},
		{"--long-share", "2"},
		{"extra"},
	} {
		_, err := run(t, append([]string{"sms", "chaos", "--binary", "relay-not-started"}, args...)...)
		require.Error(t, err, "%v", args)
	}
}

// chaosKills reads the "kills:" line of a chaos run: the SIGKILLs the
// harness sent and the deaths at fault points.
func chaosKills(t *testing.T, got string) (kills, deaths int) {
	t.Helper()
	m := regexp.MustCompile(`kills: +(\d+) SIGKILLs, (\d+) deaths at fault points`).FindStringSubmatch(got)
	require.NotNil(t, m, got)
	kills, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	deaths, err = strconv.Atoi(m[2])
	require.NoError(t, err)
	return kills, deaths
}
