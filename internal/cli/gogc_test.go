package cli_test

import (
	"os"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestServersSetTheirGCTarget: msgx run and the shipsync shore (and the
// benches that run them in process) collect at a target of 300 unless the
// environment sets GOGC, which is then left alone. Not parallel: the GC
// target is the process's.
func TestServersSetTheirGCTarget(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	t.Setenv("GOGC", "100") // restored after the test
	require.NoError(t, os.Unsetenv("GOGC"))
	for _, args := range [][]string{{"shipsync", "shore", "--no-such-flag"}, {"bench", "shipsync-ingress", "--no-such-flag"},
		{"msgx", "run", "--no-such-flag"}, {"sms", "all", "--no-such-flag"}, {"sms", "worker", "--no-such-flag"},
		{"sms", "api", "--no-such-flag"}, {"sms", "gateway", "--no-such-flag"}, {"sms", "load", "--no-such-flag"},
		{"sms", "demo", "--no-such-flag"}} {
		debug.SetGCPercent(100)
		_, err := run(t, args...)
		require.Error(t, err, args)
		require.Equal(t, 300, debug.SetGCPercent(100), "%v", args)
	}
	t.Setenv("GOGC", "150")
	_, err := run(t, "shipsync", "shore", "--no-such-flag")
	require.Error(t, err)
	require.Equal(t, 100, debug.SetGCPercent(100), "GOGC in the environment wins")
}
