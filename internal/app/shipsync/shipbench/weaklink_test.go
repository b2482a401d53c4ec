package shipbench_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/shipbench"
	"github.com/relayhq/relay/internal/testbin"
	"github.com/relayhq/relay/internal/testdb"
)

// TestWeaklinkSmall runs the weak-link benchmark on a small backlog and a
// faster link: the client process drains every event through the proxy,
// with cut connections and an outage, and each one is applied once.
func TestWeaklinkSmall(t *testing.T) {
	res, out, _ := runSmall(t, shipbench.Options{Events: 3000, Rows: 300, Critical: 5, Rate: 1 << 20,
		CutProbability: 0.2, Outage: 2 * time.Second, Seed: 5})
	require.Len(t, res.CriticalLatency, 5, out)
	require.Positive(t, res.BytesUp)
	require.Positive(t, res.RSSPeak)
	require.Positive(t, res.Received)
	require.LessOrEqual(t, res.Received, res.Drain)
	// The ship held every result only after the shore had them all, and
	// the answers it pulled for them came down the link.
	require.LessOrEqual(t, res.Drain, res.ShipDone)
	require.GreaterOrEqual(t, res.ShipBytesDown, res.BytesDown)
	require.Greater(t, res.ShipBytesDown, int64(16*3005), "at least 16 bytes of id per result came down")
}

// TestWeaklinkApplyAfterUpload: with the shore's applier held back, nothing
// is applied while the upload runs, then everything is, once.
func TestWeaklinkApplyAfterUpload(t *testing.T) {
	// ≈ 4 s of upload on this link: progress lines to look at.
	res, out, progress := runSmall(t, shipbench.Options{Events: 2000, Rows: 200, Critical: 5, Rate: 16 << 10,
		CutProbability: 0.1, Outage: -1, Seed: 6, ApplyAfterUpload: true})
	// The client's heartbeats reached the shore while its uploads (six at
	// once, each waiting for the slow link) ran: their upload time is the
	// union of the uploads' times, not the sum, which the shore refuses as
	// longer than the stretch.
	require.Positive(t, res.ActiveHeartbeats, out)
	require.Zero(t, res.HeartbeatsRefused, out)
	before, _, found := strings.Cut(progress, "every event received: the shore's applier starts")
	require.True(t, found, progress)
	lines := 0
	for _, l := range strings.Split(before, "\n") {
		if strings.Contains(l, " receipts; link ") {
			lines++
			require.Contains(t, l, ": 0/2005 receipts;", "a receipt before the applier started:\n%s", progress)
		}
	}
	require.Positive(t, lines, "no progress line during the upload:\n%s", progress)
}

// runSmall runs the benchmark with o on the test's servers, a fast local
// link (20 ms each way) and a 3-minute bound, and requires every event
// applied once, every row present. It returns the result, its printed
// figures and the progress lines.
func runSmall(t *testing.T, o shipbench.Options) (*shipbench.Result, string, string) {
	t.Helper()
	var progress bytes.Buffer
	o.PostgresURL, o.MariaDB, o.Dir, o.Relay = testdb.PGSchema(t), testdb.MariaDBServer(), t.TempDir(), testbin.Relay(t)
	o.Latency, o.Timeout, o.Progress = 20*time.Millisecond, 3*time.Minute, &progress
	res, err := shipbench.Run(t.Context(), o)
	require.NoError(t, err, "progress:\n%s", progress.String())
	var out bytes.Buffer
	res.Write(&out)
	require.Equal(t, int64(o.Events+o.Critical), res.Applied, out.String())
	require.Equal(t, int64(o.Rows), res.Rows, out.String())
	return res, out.String(), progress.String()
}
