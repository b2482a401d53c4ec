package shipbench_test

import (
	"bytes"
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
