package flightstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/flightstore"
)

// SCHD_SNAP_LOG appends and is purged by (SCOPE_END, RECV_AT): only rows both
// received before the time and covering no day from the time's day on.
func TestSnapLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	add := func(id int64, scopeEnd string, recv time.Time) {
		require.NoError(t, flightstore.AppendSnapLog(b.ctx, b.pool, &flightstore.SnapLogEntry{
			MsgID: id, Kind: "SCHD-DNLD", Identity: "AODB|1", Records: 3, Applied: 2, Outcome: "APPLIED",
			ScopeStart: "20260201", ScopeEnd: scopeEnd, RecvAt: recv,
		}))
	}
	old := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	add(1, "20260202", old)
	add(2, "20260210", old.Add(time.Hour))
	add(3, "20260401", old) // received long ago about a day not over yet
	add(4, "20260202", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	require.NoError(t, flightstore.AppendSnapLog(b.ctx, b.pool, &flightstore.SnapLogEntry{MsgID: 5, Kind: "SCHD-RESP", Outcome: "DEAD", RecvAt: old}))
	require.Error(t, flightstore.AppendSnapLog(b.ctx, b.pool, &flightstore.SnapLogEntry{MsgID: 6, Kind: "SCHD-RESP", Outcome: "DEAD"}))
	require.Error(t, flightstore.AppendSnapLog(b.ctx, b.pool, &flightstore.SnapLogEntry{MsgID: 6, Kind: "SCHD-RESP", Outcome: "DEAD", RecvAt: old, ScopeEnd: "2026-02-01"}))

	var (
		identity, start  string
		records, applied int
		recv             time.Time
	)
	require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT identity, scope_start, records, applied, recv_at FROM schd_snap_log WHERE msg_id = 1").
		Scan(&identity, &start, &records, &applied, &recv))
	require.Equal(t, "AODB|1", identity)
	require.Equal(t, "20260201", start)
	require.Equal(t, 3, records)
	require.Equal(t, 2, applied)
	require.True(t, recv.Equal(old))

	cut := time.Date(2026, 2, 20, 0, 0, 0, 0, time.UTC)
	n, err := flightstore.PurgeSnapLog(b.ctx, b.pool, cut, 2)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	n, err = flightstore.PurgeSnapLog(b.ctx, b.pool, cut, 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 2, b.count(t, "SELECT count(*) FROM schd_snap_log WHERE msg_id IN (3, 4)"))
	require.Equal(t, 2, b.count(t, "SELECT count(*) FROM schd_snap_log"))
	_, err = flightstore.PurgeSnapLog(b.ctx, b.pool, cut, 0)
	require.Error(t, err)
}
