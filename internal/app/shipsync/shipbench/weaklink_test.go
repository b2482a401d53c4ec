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
	server := testdb.MariaDBServer()
	var progress bytes.Buffer
	res, err := shipbench.Run(t.Context(), shipbench.Options{PostgresURL: testdb.PGSchema(t), MariaDB: server,
		Dir: t.TempDir(), Relay: testbin.Relay(t), Events: 3000, Rows: 300, Critical: 5, Rate: 1 << 20,
		Latency: 20 * time.Millisecond, CutProbability: 0.2, Outage: 2 * time.Second, Seed: 5,
		Timeout: 3 * time.Minute, Progress: &progress})
	require.NoError(t, err, "progress:\n%s", progress.String())
	var out bytes.Buffer
	res.Write(&out)
	require.Equal(t, int64(3005), res.Applied, out.String())
	require.Equal(t, int64(300), res.Rows, out.String())
	require.Len(t, res.CriticalLatency, 5, out.String())
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
	server := testdb.MariaDBServer()
	var progress bytes.Buffer
	res, err := shipbench.Run(t.Context(), shipbench.Options{PostgresURL: testdb.PGSchema(t), MariaDB: server,
		Dir: t.TempDir(), Relay: testbin.Relay(t), Events: 2000, Rows: 200, Critical: 5, Rate: 16 << 10, // ≈ 4 s of upload: progress lines to look at
		Latency: 20 * time.Millisecond, CutProbability: 0.1, Outage: -1, Seed: 6, ApplyAfterUpload: true,
		Timeout: 3 * time.Minute, Progress: &progress})
	require.NoError(t, err, "progress:\n%s", progress.String())
	var out bytes.Buffer
	res.Write(&out)
	require.Equal(t, int64(2005), res.Applied, out.String())
	require.Equal(t, int64(200), res.Rows, out.String())
	before, _, found := strings.Cut(progress.String(), "every event received: the shore's applier starts")
	require.True(t, found, progress.String())
	lines := 0
	for _, l := range strings.Split(before, "\n") {
		if strings.Contains(l, " receipts; link ") {
			lines++
			require.Contains(t, l, ": 0/2005 receipts;", "a receipt before the applier started:\n%s", progress.String())
		}
	}
	require.Positive(t, lines, "no progress line during the upload:\n%s", progress.String())
}
