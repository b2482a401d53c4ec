package cli_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/cli"
)

// TestBenchCmpp runs `relay bench cmpp` against a `relay sms supplier`
// (in-process here; the command starts its own as a child process when
// --supplier is not given) and checks that it prints one row per version
// and pool size with positive rates, min ≤ median ≤ max.
func TestBenchCmpp(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var supOut lockedBuffer
	go func() {
		_ = cli.Run(runCtx, []string{"sms", "supplier", "--listen", "127.0.0.1:0", "--account", "900001:b3nch",
			"--max-conns", "2", "--keepalive", "-1s", "--stats-every", "0"}, &supOut, &supOut)
	}()
	listening := regexp.MustCompile(`listening on (127\.0\.0\.1:\d+)`)
	var addr string
	require.Eventually(t, func() bool {
		if m := listening.FindStringSubmatch(supOut.String()); m != nil {
			addr = m[1]
		}
		return addr != ""
	}, 20*time.Second, 5*time.Millisecond, "output: %s", supOut.String())

	out, err := run(t, "bench", "cmpp", "--supplier", addr, "--account", "900001:b3nch", "--n", "400",
		"--rounds", "2", "--conns", "1,2", "--versions", "2.0,3.0", "--gateway-commands", "300", "--gateway-conns", "2")
	require.NoError(t, err, out)
	row := regexp.MustCompile(`(?m)^(2\.0|3\.0)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)$`)
	rows := row.FindAllStringSubmatch(out, -1)
	require.Len(t, rows, 4, out)
	for _, r := range rows {
		lo, _ := strconv.Atoi(r[3])
		mid, _ := strconv.Atoi(r[4])
		hi, _ := strconv.Atoi(r[5])
		require.Positive(t, lo, r[0])
		require.LessOrEqual(t, lo, mid, r[0])
		require.LessOrEqual(t, mid, hi, r[0])
	}
	// The end-to-end row: a backlog of 300 commands through a gateway, Redis
	// and PostgreSQL (each round checks that all 300 were accepted).
	require.Contains(t, out, "gateway end to end")
	gw := regexp.MustCompile(`(?m)^2\s+(\d+)\s+(\d+)\s+(\d+)$`).FindStringSubmatch(out[strings.Index(out, "gateway end to end"):])
	require.NotNil(t, gw, out)
	lo, _ := strconv.Atoi(gw[1])
	require.Positive(t, lo)
	require.NotContains(t, out, "b3nch")

	_, err = run(t, "bench", "cmpp", "--supplier", addr)
	require.ErrorContains(t, err, "--account")
	_, err = run(t, "bench", "cmpp", "--versions", "4.0")
	require.True(t, err != nil && strings.Contains(err.Error(), "neither 2.0 nor 3.0"), "%v", err)
}
