package relaysqlite

import (
	"context"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaydrivertest"
)

// ArchiveCandidatesForTest runs the guarded copy/shadow/uncopy step of
// MessageArchive on candidates selected earlier (possibly stale), in tx, so
// the guard can be tested against a row that changed after its selection
// (relaydrivertest.ArchiveGuard).
func ArchiveCandidatesForTest(ctx context.Context, tx relaydriver.ExecutorTx, params *relaydriver.MessageArchiveParams,
	cands []relaydrivertest.ArchiveCandidate) (int, error) {
	cs := make([]archiveCandidate, len(cands))
	for i, c := range cands {
		cs[i] = archiveCandidate{id: c.ID, state: c.State, updatedAt: c.UpdatedAt.UnixMicro()}
	}
	return archiveCandidates(ctx, tx.(*txExecutor).tx, params, cs)
}
