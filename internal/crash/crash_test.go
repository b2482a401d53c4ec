package crash_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/crash"
	"github.com/relayhq/relay/internal/testdb"
)

// TestCrashHarness kills a real `relay serve` child 20 times — at random
// moments and at the engine's named fault points — while rows keep arriving,
// then reconciles every row: enqueued, applied exactly once, its event in Kafka
// in per-key order, its processing mark written back.
func TestCrashHarness(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "relay")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/relayhq/relay/cmd/relay").CombinedOutput()
	require.NoError(t, err, string(out))
	storeURL := testdb.PGSchema(t)
	store := testdb.PGDriverAt(t, storeURL)

	var log strings.Builder
	res, err := crash.Run(context.Background(), crash.Options{
		Binary: bin, StoreURL: storeURL, Store: store, Dir: t.TempDir(),
		Kills: 20, Rows: 3000, Seed: 11, FaultProbability: 0.03, Out: &log,
	})
	t.Log("\n" + log.String())
	require.NoError(t, err)
	require.Equal(t, 20, res.Kills)
	require.True(t, res.Report.OK(), "%v", res.Report.Failures)
	require.Equal(t, res.Report.Succeeded, res.Report.EventsDelivered)
	require.Equal(t, res.Report.SourceRows, res.AcksWritten)
	fmt.Fprintf(os.Stderr, "crash harness: %d kills (%d at fault points), %d rows reconciled\n", res.Kills, res.FaultKills, res.Report.SourceRows)
}
