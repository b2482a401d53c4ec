package cli_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testbin"
	"github.com/relayhq/relay/internal/testdb"
)

// TestSmsCrash runs a small `relay sms crash` (a built relay binary as the
// children, the machine's Redis and PostgreSQL; it fails when either is
// absent): three gateway lives killed, a last one draining, and a clean
// reconciliation printed.
func TestSmsCrash(t *testing.T) {
	t.Parallel()
	bin := testbin.Relay(t)
	got, err := run(t, "sms", "crash", "--binary", bin, "--commands", "300", "--duplicates", "6", "--kills", "2",
		"--fault-lives", "0", "--seed", "3", "--postgres", testdb.PGURL())
	require.NoError(t, err, got)
	require.Contains(t, got, "commands:  300 submitIds + 6 duplicate entries = 306 entries")
	require.Contains(t, got, "kills:     2 at random moments, 0 at fault points")
	require.Contains(t, got, "lives:     3 gateway processes")
	require.Contains(t, got, "queue:     0 pending, 0 undelivered")
	require.Contains(t, got, "ok: every submitId")
}

func TestSmsCrashFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--commands", "0"},
		{"--kills", "-1"},
		{"--duplicates", "-2"},
		{"extra"},
	} {
		_, err := run(t, append([]string{"sms", "crash", "--binary", "relay-not-started"}, args...)...)
		require.Error(t, err, "%v", args)
	}
}
