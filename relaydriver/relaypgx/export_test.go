package relaypgx

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
		cs[i] = archiveCandidate{id: c.ID, state: c.State, updatedAt: ts(c.UpdatedAt)}
	}
	x := tx.(*txExecutor)
	return x.archiveCandidates(ctx, "archive "+params.Queue, params, cs)
}

// QueryForTest returns the SQL of the named engine or acknowledgement query.
func QueryForTest(name string) string {
	if q, ok := queries[name]; ok {
		return q
	}
	return ackQueries[name]
}
