package cli_test

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
)

// The whole-chain tests do not run in parallel with each other: each opens
// a process's worth of pools on the shared server.

// TestSmsDemo runs `relay sms demo` as a newcomer would (a smaller N):
// every message is decided, the reconciliation passes on every check, and
// some numbers were retried through another channel (the supplier reports
// a share of failures).
func TestSmsDemo(t *testing.T) {
	var out, errOut bytes.Buffer
	err := cli.Run(t.Context(), []string{"sms", "demo", "-n", "400", "--fail-share", "0.1", "--postgres", testdb.PGURL()},
		&out, &errOut)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	s := out.String()
	require.Contains(t, s, "messages:   400 (400 completed, 0 refused)")
	require.Contains(t, s, "reconcile: ok (6 checks)")
	require.Contains(t, s, "webhooks:   400 messages notified")
	m := regexp.MustCompile(`(\d+) of them retries`).FindStringSubmatch(s)
	require.NotNil(t, m, s)
	retries, _ := strconv.Atoi(m[1])
	require.Positive(t, retries, "a tenth of the reports fail: some numbers are retried")
	require.Contains(t, errOut.String(), "sent 400/400")
}

// TestSmsLoad runs two short tiers of `relay sms load`: each is drained
// and reconciled, and its line shows what was offered and measured.
func TestSmsLoad(t *testing.T) {
	var out, errOut bytes.Buffer
	err := cli.Run(t.Context(), []string{"sms", "load", "--tiers", "10,40", "--tier-seconds", "2s", "--pools", "4,4,2,3,4",
		"--postgres", testdb.PGURL()},
		&out, &errOut)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	lines := regexp.MustCompile(`(?m)^\s+(\d+)\s+(\d+)\s+(\d+)\s+.*\s(ok|FAILED)$`).FindAllStringSubmatch(out.String(), -1)
	require.Len(t, lines, 2, out.String())
	for i, want := range []int{20, 80} {
		require.Equal(t, strconv.Itoa([]int{10, 40}[i]), lines[i][1])
		require.Equal(t, strconv.Itoa(want), lines[i][2], "sent: rate × 2 s")
		require.Equal(t, "ok", lines[i][4])
	}
	// Every tier's CPU line names the chain's roles by their sessions (the
	// PostgreSQL server of the tests runs on this machine).
	cpu := regexp.MustCompile(`(?m)^\s+CPU µs per message: this process (\d+); PostgreSQL (\d+) \(([a-z0-9 ,]+)\); Redis \d+$`).
		FindAllStringSubmatch(out.String(), -1)
	require.Len(t, cpu, 2, out.String())
	for _, c := range cpu {
		for _, role := range []string{"api", "stage", "publisher", "gateway", "callback"} {
			require.Regexp(t, `(^|, )`+role+` \d+`, c[3])
		}
		require.NotEqual(t, "0", c[1])
		require.NotEqual(t, "0", c[2])
	}
}
