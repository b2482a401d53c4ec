package cli_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/testlog"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
)

type lockedBuffer = testlog.Buffer

// TestServeMariaDBSource runs `relay serve` over a real MariaDB mailbox table
// (AUTO_INCREMENT ids, DATETIME(3) received-at, one NULL) into a PostgreSQL
// store: every row is applied once, received-at is carried, and cancelling the
// context stops the service cleanly.
func TestServeMariaDBSource(t *testing.T) {
	t.Parallel()
	src, dsn := testdb.MariaDBWithDSN(t)
	_, err := src.Exec(`CREATE TABLE source_messages (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
		payload MEDIUMTEXT NULL, received_at DATETIME(3) NULL) ENGINE=InnoDB`)
	require.NoError(t, err)
	const n = 120
	for i := 1; i <= n; i++ {
		var at any = time.Date(2026, 3, 1, 10, 0, 0, i*1e6, time.UTC)
		if i == 7 {
			at = nil
		}
		_, err := src.Exec(`INSERT INTO source_messages (payload, received_at) VALUES (?, ?)`,
			fmt.Sprintf("FLOP-UPDT|S/%d|K%d|2", i, i%4), at)
		require.NoError(t, err)
	}
	storeURL := testdb.PGSchema(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- cli.Run(ctx, []string{"serve", "--store", storeURL, "--queue", "mx", "--source-driver", "mysql",
			"--source-dsn", dsn, "--seed", "min", "--poll", "20ms", "--log-level", "info"}, &out, &out)
	}()

	store, err := relaypgx.Open(context.Background(), storeURL)
	require.NoError(t, err)
	defer store.Close()
	require.Eventually(t, func() bool {
		st, err := store.GetExecutor().MessageStats(context.Background(), "mx")
		return err == nil && st.Counts[relaytype.StateSucceeded] == n
	}, 60*time.Second, 20*time.Millisecond, "all rows applied; output:\n%s", out.String())

	m, err := store.GetExecutor().MessageGet(context.Background(), "mx", 5)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 3, 1, 10, 0, 0, 5e6, time.UTC), m.ReceivedAt, "received-at copied from the mailbox")
	m, err = store.GetExecutor().MessageGet(context.Background(), "mx", 7)
	require.NoError(t, err)
	require.True(t, m.ReceivedAt.IsZero(), "NULL received-at stays NULL")
	var applied int64
	require.NoError(t, store.GetExecutor().QueryRow(context.Background(),
		`SELECT COALESCE(SUM(total), 0) FROM demo_projection WHERE queue = $1`, "mx").Scan(&applied))
	require.Equal(t, int64(2*n), applied)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "serve stops cleanly when its context ends")
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30s")
	}
}
