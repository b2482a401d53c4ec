package shipdemo_test

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/testdb"
)

// TestDemo runs the whole uplink — ship database, trigger capture, CDC
// topics, ship client, shore, shore database — and requires every
// reconciliation check to pass: the two databases identical row by row,
// one event per change, every event APPLIED once on both sides, every
// partition's checkpoint at the end of its topic.
func TestDemo(t *testing.T) {
	server := testdb.MariaDBServer()
	var out, logs bytes.Buffer
	res, err := shipdemo.Run(t.Context(), shipdemo.Options{PostgresURL: testdb.PGSchema(t), MariaDB: server,
		Dir: t.TempDir(), Rows: 150, Updates: 200, Deletes: 30, Writers: 3, Seed: 3, Progress: &out,
		ProgressEvery: 200 * time.Millisecond, Timeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.NoError(t, err)
	var checks bytes.Buffer
	res.Write(&checks)
	require.True(t, res.OK(), "reconciliation:\n%s\nprogress:\n%s", checks.String(), out.String())
	require.Len(t, res.Checks, 6)
	// 300 inserts, then up to 200 updates and 30 deletes (a change of a
	// row already deleted changes nothing).
	require.GreaterOrEqual(t, res.Events, 300+150)
	require.LessOrEqual(t, res.Events, 300+200+30)
	require.Equal(t, int64(res.Events), res.Stats.Received, "%+v", res.Stats)
	require.Zero(t, res.Stats.UploadFailures, "%+v\nlogs:\n%s", res.Stats, logs.String())
	// Once the first heartbeat answer says the shore takes 1.1, batches go
	// column by column; the reconciliation above holds for them too.
	require.Positive(t, res.Batches[shore.FormColumns], "%v", res.Batches)
	t.Logf("batches by form: %v", res.Batches)
}
