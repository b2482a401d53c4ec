package relaysqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaytype"
)

// TestBusyIsTransient: while relay's writer holds the write lock, a foreign
// connection (another process, in effect) that does not wait gets SQLITE_BUSY
// at once; mapErr must classify it as ErrTransient. (Waiting on relay's own
// writer would take BusyTimeoutDefault.) It also verifies that modernc honours
// _txlock=immediate: Begin runs no statement, so only BEGIN IMMEDIATE can be
// holding the write lock the foreign connection is refused.
func TestBusyIsTransient(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "relay.db")
	d, err := Open(ctx, path)
	require.NoError(t, err)
	defer d.Close()
	tx, err := d.Begin(ctx) // BEGIN IMMEDIATE: holds the write lock
	require.NoError(t, err)
	defer tx.Rollback(ctx)

	foreign, err := sql.Open(DriverName, path+"?_busy_timeout=0&_txlock=immediate")
	require.NoError(t, err)
	defer foreign.Close()
	_, err = foreign.BeginTx(ctx, nil)
	require.Error(t, err)
	mapped := mapErr("begin", err)
	require.ErrorIs(t, mapped, relaytype.ErrTransient, "got %v", mapped)
	require.NotErrorIs(t, mapped, relaytype.ErrConflict)
}

func TestMapErr(t *testing.T) {
	t.Parallel()
	require.NoError(t, mapErr("x", nil))
	require.ErrorIs(t, mapErr("x", sql.ErrNoRows), relaytype.ErrNotFound)
	require.ErrorIs(t, mapErr("x", fmt.Errorf("wrapped: %w", sql.ErrNoRows)), relaytype.ErrNotFound)
	require.ErrorIs(t, mapErr("x", context.DeadlineExceeded), relaytype.ErrTransient)
	plain := errors.New("boom")
	got := mapErr("x", plain)
	require.ErrorIs(t, got, plain)
	require.NotErrorIs(t, got, relaytype.ErrTransient)
	require.NotErrorIs(t, mapErr("x", context.Canceled), relaytype.ErrTransient)
}

func TestQueriesParsed(t *testing.T) {
	t.Parallel()
	for _, n := range queryNames {
		require.NotEmpty(t, query(n), n)
	}
	q, err := identQuery(qSavepoint, "sp_1")
	require.NoError(t, err)
	require.Equal(t, "SAVEPOINT sp_1", q)
	_, err = identQuery(qSavepoint, "sp 1")
	require.Error(t, err)
}

func TestTimeConversion(t *testing.T) {
	t.Parallel()
	require.Nil(t, timeArg(time.Time{}))
	ts := time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 3600))
	v := timeArg(ts)
	require.Equal(t, ts.UnixMicro(), v)
	back := timeOf(sql.NullInt64{Int64: v.(int64), Valid: true})
	require.True(t, back.Equal(ts.Truncate(time.Microsecond)))
	require.Equal(t, time.UTC, back.Location())
	require.True(t, timeOf(sql.NullInt64{}).IsZero())
}
