package faultpoint_test

import (
	"bytes"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/faultpoint"
)

// TestKilledAt: a child that wrote a fault point's line and died of SIGKILL
// names the point; one killed without the line names none; one that exited
// was not killed.
func TestKilledAt(t *testing.T) {
	t.Parallel()
	run := func(script string) (*exec.Cmd, string) {
		var errOut bytes.Buffer
		cmd := exec.Command("sh", "-c", script)
		cmd.Stderr = &errOut
		_ = cmd.Run()
		return cmd, errOut.String()
	}
	cmd, out := run(`echo "faultpoint: sms.complete.before-commit: SIGKILL" >&2; kill -9 $$`)
	require.True(t, faultpoint.KilledBySIGKILL(cmd.ProcessState))
	require.Equal(t, "sms.complete.before-commit", faultpoint.KilledAt(cmd.ProcessState, out))

	cmd, out = run(`echo "some other line" >&2; kill -9 $$`)
	require.True(t, faultpoint.KilledBySIGKILL(cmd.ProcessState))
	require.Empty(t, faultpoint.KilledAt(cmd.ProcessState, out))

	cmd, out = run(`echo "faultpoint: x: SIGKILL" >&2; exit 3`)
	require.False(t, faultpoint.KilledBySIGKILL(cmd.ProcessState))
	require.Empty(t, faultpoint.KilledAt(cmd.ProcessState, out))
	require.False(t, faultpoint.KilledBySIGKILL(nil))
}
