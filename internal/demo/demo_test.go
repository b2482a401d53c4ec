package demo_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/demo"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
)

func TestDemoReconciles(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) relaydriver.Driver{
		"sqlite": func(t *testing.T) relaydriver.Driver {
			d, err := relaysqlite.Open(context.Background(), filepath.Join(t.TempDir(), "relay.db"))
			require.NoError(t, err)
			t.Cleanup(func() { d.Close() })
			return d
		},
		"postgres": func(t *testing.T) relaydriver.Driver { return testdb.PGDriver(t) },
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := open(t)
			dir := t.TempDir()
			var out bytes.Buffer
			rep, err := demo.Run(context.Background(), demo.Options{
				Store: d, Queue: "demo-test", Dir: dir,
				Plan:           demo.PlanOptions{N: 1500, Keys: 10, Seed: 7, Holes: 10},
				MaxCommitDelay: 200 * time.Millisecond, LateAfter: 50 * time.Millisecond, Chunk: 100,
				Timeout: 2 * time.Minute, Kafka: true,
			}, &out)
			require.NoError(t, err, out.String())
			require.True(t, rep.OK())
			require.Contains(t, out.String(), "RESULT: reconciled")
			require.Positive(t, rep.PermanentHoles, "the plan has permanent holes; they must be released and logged")
			require.Equal(t, rep.SourceRows, rep.Enqueued)
			require.Equal(t, rep.Enqueued, rep.Succeeded+rep.Duplicates+rep.Ignored+rep.Dead)
			require.Equal(t, rep.Succeeded, rep.EventsDelivered, "one change event per applied message reached Kafka")

			// The reconciliation is not a rubber stamp: break the projection and it fails.
			_, err = d.GetExecutor().Exec(context.Background(),
				`UPDATE demo_projection SET messages = messages + 1 WHERE queue = $1 AND key = $2`, "demo-test", "K003")
			require.NoError(t, err)
			src, err := demo.OpenSource(context.Background(), filepath.Join(dir, "source.db"))
			require.NoError(t, err)
			defer src.Close()
			rep2, err := demo.Reconcile(context.Background(), d, src, "demo-test", demo.NewPlan(demo.PlanOptions{N: 1500, Keys: 10, Seed: 7, Holes: 10}))
			require.NoError(t, err)
			require.False(t, rep2.OK())
			require.Len(t, rep2.Failures, 1)
			require.Contains(t, rep2.Failures[0], "key K003 applied")
		})
	}
}
