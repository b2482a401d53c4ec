package relaysqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaydrivertest"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
	"github.com/relayhq/relay/relaymigrate"
)

// TestConformance runs the store conformance suite on SQLite: every subtest
// gets its own database file in t.TempDir(), migrated to the engine line.
func TestConformance(t *testing.T) {
	relaydrivertest.Exercise(t, func(t *testing.T) relaydriver.Driver {
		ctx := t.Context()
		d, err := relaysqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, d.Close()) })
		_, err = relaymigrate.Up(ctx, d, relayclock.System{}, relaymigrate.EngineLineOf(d))
		require.NoError(t, err)
		return d
	})
}
