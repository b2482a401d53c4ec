package shore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/testdb"
)

// TestWindowRowsReconcile reads both sides of a window reconcile from real
// MariaDB tables (a composite key, DATETIME business times, NULLs,
// revisions) and plans it: the row that entered the window and the one
// changed are upserted, the old one kept, the NULL one an exception.
func TestWindowRowsReconcile(t *testing.T) {
	t.Parallel()
	db := testdb.MariaDB(t)
	ctx := t.Context()
	for _, q := range []string{
		"CREATE TABLE leg (voyage int, seq int, at datetime(6), _sync_revision char(36), PRIMARY KEY (voyage, seq))",
		"CREATE TABLE shore_leg (voyage int, seq int, leg_at datetime(6), _sync_revision char(36), PRIMARY KEY (voyage, seq))",
		"INSERT INTO leg VALUES (1, 1, '2026-11-30 10:00:00', 'r11'), (1, 2, '2026-10-01 00:00:00', 'r12'), " +
			"(2, 1, NULL, 'r21'), (2, 2, '2026-11-29 08:30:00.5', 'r22b'), (3, 1, '2026-11-20 00:00:00', 'r31')",
		"INSERT INTO shore_leg VALUES (1, 1, '2026-11-30 10:00:00', 'r11'), (1, 2, '2026-10-01 00:00:00', 'r12'), " +
			"(2, 2, '2026-11-29 08:30:00.5', 'r22a')",
	} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	src, err := shore.WindowRows(ctx, db, shore.WindowTable{Table: "leg", Key: []string{"voyage", "seq"}, TimeColumn: "at",
		Revisioned: true})
	require.NoError(t, err)
	require.Len(t, src, 5)
	require.Equal(t, `["1","1"]`, src[0].Key)
	require.True(t, src[0].BusinessAt.Equal(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)))
	dst, err := shore.WindowRows(ctx, db, shore.WindowTable{Table: "shore_leg", Key: []string{"voyage", "seq"},
		TimeColumn: "leg_at", Revisioned: true})
	require.NoError(t, err)
	_, err = shore.WindowRows(ctx, db, shore.WindowTable{Table: "leg; DROP TABLE leg", Key: []string{"voyage"}, TimeColumn: "at"})
	require.ErrorContains(t, err, "not a plain identifier")

	rules, err := normalize.LoadRules(strings.NewReader(`{"rules": [{"id": "leg", "version": 1, "direction": "UPLINK",
		"database": "ship", "table": "leg", "key_columns": ["voyage", "seq"], "business_time_column": "at",
		"dataset_window": "30d"}]}`))
	require.NoError(t, err)
	p, err := normalize.WindowReconcile{Rule: rules.Rules()[0], TrustedNow: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC),
		Source: src, Target: dst}.Plan()
	require.NoError(t, err)
	require.Equal(t, []string{`["2","2"]`, `["3","1"]`}, p.Upsert)
	require.Equal(t, []string{`["1","2"]`}, p.Keep)
	require.Len(t, p.Exceptions, 1)
	require.Equal(t, `["2","1"]`, p.Exceptions[0].Key)
	require.Equal(t, 3, p.InWindow)
	require.False(t, p.Reconciled())
}
