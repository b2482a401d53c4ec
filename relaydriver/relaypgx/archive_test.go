package relaypgx_test

import (
	"testing"

	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver/relaydrivertest"
	"github.com/relayhq/relay/relaydriver/relaypgx"
)

// TestArchiveGuard runs relaydrivertest.ArchiveGuard on a fresh schema.
func TestArchiveGuard(t *testing.T) {
	t.Parallel()
	relaydrivertest.ArchiveGuard(t, testdb.PGDriver(t), relaypgx.ArchiveCandidatesForTest)
}
