package capture_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/capture"
)

// TestInstallRefuses: a table install cannot capture is refused before
// anything is created, with an error naming table and column.
func TestInstallRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := scratchDB(t, mariaServer())
	for _, q := range []string{
		"CREATE TABLE nosync (id INT PRIMARY KEY, v TEXT)",
		"CREATE TABLE nopk (id INT, v TEXT, " + apply.SyncColumns + ")",
		"CREATE TABLE partial (id INT PRIMARY KEY, _sync_revision CHAR(36) NOT NULL, _sync_origin VARCHAR(64) NOT NULL)",
		"CREATE TABLE wrongtype (id INT PRIMARY KEY, _sync_revision VARCHAR(36) NOT NULL, _sync_origin VARCHAR(64) NOT NULL, " +
			"_sync_event_id CHAR(36) NULL, _sync_updated_at DATETIME(6) NOT NULL)",
		"CREATE TABLE nullable (id INT PRIMARY KEY, _sync_revision CHAR(36) NULL, _sync_origin VARCHAR(64) NOT NULL, " +
			"_sync_event_id CHAR(36) NULL, _sync_updated_at DATETIME(6) NOT NULL)",
		"CREATE TABLE geo (id INT PRIMARY KEY, p POINT NULL, " + apply.SyncColumns + ")",
		"CREATE TABLE good (id INT PRIMARY KEY, " + apply.SyncColumns + ")",
	} {
		_, err := db.ExecContext(ctx, q)
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		table, column, problem string
	}{
		{"nosync", "_sync_revision", "platform column missing (want _sync_revision CHAR(36) NOT NULL)"},
		{"nopk", "", "has no primary key"},
		{"partial", "_sync_event_id", "platform column missing"},
		{"wrongtype", "_sync_revision", "has type varchar(36)"},
		{"nullable", "_sync_revision", "nullable=true"},
		{"geo", "p", "type point is not supported"},
		{"absent", "", "does not exist"},
		{"_sync_changelog", "", "not a capturable table name"},
	} {
		// The good table first: nothing of it may be installed either.
		_, err := capture.Install(ctx, db, capture.InstallConfig{NodeID: node, Tables: []string{"good", tc.table}})
		var te *capture.TableError
		require.True(t, errors.As(err, &te), "%s: %v", tc.table, err)
		require.Equal(t, tc.table, te.Table)
		require.Equal(t, tc.column, te.Column, tc.table)
		require.Contains(t, te.Problem, tc.problem, tc.table)
		require.Contains(t, err.Error(), tc.table)
	}
	var n int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TRIGGERS "+
		"WHERE TRIGGER_SCHEMA = DATABASE()").Scan(&n))
	require.Zero(t, n, "a refused install changes nothing")
	_, err := capture.Install(ctx, db, capture.InstallConfig{NodeID: "bad node'", Tables: []string{"good"}})
	require.ErrorContains(t, err, "NodeID")
	_, err = capture.Install(ctx, db, capture.InstallConfig{NodeID: node, Tables: []string{"good"}})
	require.NoError(t, err)
}

// fatalTB records a Fatalf instead of failing the test, and refuses to be
// skipped: it proves a helper fails rather than skips.
type fatalTB struct {
	testing.TB
	mu      sync.Mutex
	fatal   string
	skipped bool
	cleanup []func()
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fatalTB) Fatal(args ...any)                 { f.Fatalf("%s", fmt.Sprint(args...)) }
func (f *fatalTB) Skip(...any)                       { f.skipped = true; runtime.Goexit() }
func (f *fatalTB) Skipf(string, ...any)              { f.skipped = true; runtime.Goexit() }
func (f *fatalTB) SkipNow()                          { f.skipped = true; runtime.Goexit() }
func (f *fatalTB) Cleanup(fn func())                 { f.cleanup = append(f.cleanup, fn) }
func (f *fatalTB) Errorf(format string, args ...any) { f.Fatalf(format, args...) }

// TestUnreachableServerFails: with no MariaDB the tests fail, never skip.
func TestUnreachableServerFails(t *testing.T) {
	t.Parallel()
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		scratchDB(tb, "root@tcp(127.0.0.1:1)/?timeout=2s")
	}()
	<-done
	for _, fn := range tb.cleanup {
		fn()
	}
	require.False(t, tb.skipped)
	require.Contains(t, tb.fatal, "capture tests need MariaDB")
}
