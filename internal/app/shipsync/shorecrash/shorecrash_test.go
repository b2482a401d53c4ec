package shorecrash

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testbin"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver/relaypgx"
)

// TestWorkloadModel: the plan is fixed by the seed, every record starts
// with an insert, each stream is numbered from 1 without a gap, and the
// three kinds of outcome all occur.
func TestWorkloadModel(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	a := newWorkload(50, 6, 2, "t", rand.New(rand.NewPCG(1, 2)), now)
	b := newWorkload(50, 6, 2, "t", rand.New(rand.NewPCG(1, 2)), now)
	require.Equal(t, 300, a.total)
	kinds := map[string]int{}
	first := map[int64]bool{}
	for part, evs := range a.streams {
		for i, p := range evs {
			require.Equal(t, uint64(i+1), p.ev.SourceSequence, part)
			require.Equal(t, b.streams[part][i].ev.EventId, p.ev.EventId, "same seed, same plan")
			id := p.ev.PrimaryKey[0].GetIntValue()
			if !first[id] {
				first[id] = true
				require.Equal(t, "OPERATION_INSERT", p.ev.Operation.String())
			}
			kinds[p.expect]++
		}
	}
	require.Len(t, first, 50)
	require.Positive(t, kinds[expectApplied])
	require.Positive(t, kinds[expectConflict])
	require.Positive(t, kinds[expectRejected])
}

// TestReconcileFindsDamage: a clean run with no kills reconciles; the same
// run with a row changed on the target and a receipt deleted does not.
func TestReconcileFindsDamage(t *testing.T) {
	t.Parallel()
	bin := testbin.Relay(t)
	run := func(tamper func(context.Context, *relaypgx.Driver, *sql.DB) error) *Result {
		o := Options{Binary: bin, PostgresURL: testdb.PGSchema(t), MariaDB: mariaServer(t), Dir: t.TempDir(),
			Records: 20, Steps: 4, Seed: 3, noKills: true, tamper: tamper}
		res, err := Run(t.Context(), o)
		require.NoError(t, err)
		return res
	}
	clean := run(nil)
	require.True(t, clean.OK(), "%v", clean.Problems)
	require.Equal(t, 9, clean.Checks)

	bad := run(func(ctx context.Context, d *relaypgx.Driver, target *sql.DB) error {
		if _, err := target.ExecContext(ctx, "UPDATE item SET note = 'tampered' ORDER BY id LIMIT 1"); err != nil {
			return err
		}
		_, err := d.Pool().Exec(ctx, "DELETE FROM sync_event_receipt WHERE receipt_id = (SELECT min(receipt_id) FROM sync_event_receipt)")
		return err
	})
	require.False(t, bad.OK())
	all := strings.Join(bad.Problems, "\n")
	require.Contains(t, all, "target rows: record")
	require.Contains(t, all, "wrote 2 times")
	require.Contains(t, all, "receipt rows:")
}

// mariaServer is the MariaDB server the tests use.
func mariaServer(t *testing.T) string {
	t.Helper()
	return testdb.MariaDBServer()
}
