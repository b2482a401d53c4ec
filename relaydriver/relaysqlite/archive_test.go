package relaysqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaydrivertest"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
	"github.com/relayhq/relay/relaymigrate"
)

// TestArchiveGuard runs relaydrivertest.ArchiveGuard on a fresh store.
func TestArchiveGuard(t *testing.T) {
	t.Parallel()
	relaydrivertest.ArchiveGuard(t, openArchiveStore(t), relaysqlite.ArchiveCandidatesForTest)
}

// openArchiveStore opens a migrated store in t.TempDir().
func openArchiveStore(t *testing.T) relaydriver.Driver {
	t.Helper()
	ctx := context.Background()
	d, err := relaysqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	_, err = relaymigrate.Up(ctx, d, relayclock.System{}, relaymigrate.EngineLineOf(d))
	require.NoError(t, err)
	return d
}
