package relaypgx

import (
	"context"
	"time"

	"github.com/relayhq/relay/relaydriver"
)

// ArchiveCandidateForTest is one archival candidate as selected earlier.
type ArchiveCandidateForTest struct {
	ID        int64
	State     string
	UpdatedAt time.Time
}

// ArchiveCandidatesForTest runs the guarded copy/shadow/uncopy step of
// MessageArchive on candidates selected earlier (possibly stale), in tx, so
// the guard can be tested against a row that changed after its selection.
func ArchiveCandidatesForTest(ctx context.Context, tx relaydriver.ExecutorTx, params *relaydriver.MessageArchiveParams,
	cands []ArchiveCandidateForTest) (int, error) {
	cs := make([]archiveCandidate, len(cands))
	for i, c := range cands {
		cs[i] = archiveCandidate{id: c.ID, state: c.State, updatedAt: ts(c.UpdatedAt)}
	}
	x := tx.(*txExecutor)
	return x.archiveCandidates(ctx, "archive "+params.Pipeline, params, cs)
}

// QueryForTest returns the SQL of the named engine or acknowledgement query.
func QueryForTest(name string) string {
	if q, ok := queries[name]; ok {
		return q
	}
	return ackQueries[name]
}
