package cli_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/kafkaread"
	"github.com/relayhq/relay/internal/testdb"
)

// TestShipsyncCaptureCommand: install, run until the changes are on Kafka,
// prune, uninstall — all through `relay shipsync capture`.
func TestShipsyncCaptureCommand(t *testing.T) {
	t.Parallel()
	db, dsn := testdb.MariaDBWithDSN(t)
	ctx := t.Context()
	_, err := db.ExecContext(ctx, "CREATE TABLE crew (id INT PRIMARY KEY, name VARCHAR(32) NOT NULL, "+apply.SyncColumns+")")
	require.NoError(t, err)
	var dbName string
	require.NoError(t, db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&dbName))
	run := func(ctx context.Context, args ...string) (string, error) {
		var out lockedBuffer
		err := cli.Run(ctx, append([]string{"shipsync", "capture"}, args...), &out, &out)
		return out.String(), err
	}

	out, err := run(ctx, "install", "--db", dsn, "--node-id", "ship-1", "--tables", "crew")
	require.NoError(t, err, out)
	require.Contains(t, out, dbName+".crew: 6 columns, key (id), triggers installed")
	_, err = run(ctx, "install", "--db", dsn, "--node-id", "ship-1", "--tables", "nosuch")
	require.ErrorContains(t, err, "table nosuch: does not exist")

	_, err = db.ExecContext(ctx, "INSERT INTO crew (id, name) VALUES (1, 'Ada'), (2, 'Grace')")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, "DELETE FROM crew WHERE id = 2")
	require.NoError(t, err)

	topic := "sync.cdc.ship1." + dbName + ".crew"
	out, err = run(ctx, "topics", "--db", dsn, "--logical", "ship1")
	require.NoError(t, err, out)
	require.Equal(t, topic+"\n", out)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	state := filepath.Join(t.TempDir(), "capture.db")
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := run(runCtx, "run", "--db", dsn, "--state", state, "--logical", "ship1",
			"--brokers", strings.Join(cluster.ListenAddrs(), ","), "--log-level", "warn")
		done <- err
	}()
	var recs []kafkaread.Record
	require.Eventually(t, func() bool {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		recs, err = kafkaread.All(rctx, cluster.ListenAddrs(), topic)
		return err == nil && len(recs) == 4
	}, 30*time.Second, 50*time.Millisecond, "c, c, d, tombstone")
	stop()
	require.NoError(t, <-done)

	// Stopped while starting up (its context already ended): a clean stop.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = run(cancelled, "run", "--db", dsn, "--state", state, "--logical", "ship1",
		"--brokers", strings.Join(cluster.ListenAddrs(), ","), "--log-level", "warn")
	require.NoError(t, err)

	dec, err := cdc.New(cdc.Config{})
	require.NoError(t, err)
	var got []string
	for _, r := range recs {
		ev, err := dec.Decode(cdc.Message{Topic: topic, Key: []byte(r.Key), Value: r.Value})
		require.NoError(t, err)
		got = append(got, ev.Op.String())
	}
	require.Equal(t, []string{"c", "c", "d", "tombstone"}, got)

	out, err = run(ctx, "prune", "--db", dsn, "--state", state)
	require.NoError(t, err, out)
	require.Contains(t, out, "3 changelog rows deleted")
	out, err = run(ctx, "uninstall", "--db", dsn)
	require.NoError(t, err, out)
	require.Contains(t, out, "triggers dropped on 1 tables (crew); changelog kept")
}
