package relaydrivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// ArchiveCandidate is one archival candidate as a pass selected it earlier.
type ArchiveCandidate struct {
	ID        int64
	State     string
	UpdatedAt time.Time
}

// ArchiveCandidatesFunc runs a driver's guarded copy/shadow/uncopy step of
// MessageArchive on candidates selected earlier (possibly stale), in tx. A
// driver exports one from its tests only (export_test.go): the step is not
// part of the relaydriver contract.
type ArchiveCandidatesFunc func(ctx context.Context, tx relaydriver.ExecutorTx, params *relaydriver.MessageArchiveParams,
	cands []ArchiveCandidate) (int, error)

// ArchiveGuard tests that the shadow update re-checks the state (and
// updated_at) a candidate had when selected (seed 000 §9.3): a candidate
// selected as DEAD and replayed to PENDING before the write is skipped, and
// its history copy is removed in the same transaction; a candidate that
// still matches is archived. This is the race the store cannot show from
// outside one call, so it runs on the driver's own step (archive) and not in
// Exercise. d must be a fresh migrated store.
func ArchiveGuard(t *testing.T, d relaydriver.Driver, archive ArchiveCandidatesFunc) {
	t.Helper()
	ctx := context.Background()
	ex := d.GetExecutor()
	base := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	_, err := ex.MessageInsertMany(ctx, []*relaydriver.MessageInsertParams{
		{Queue: "p", ID: 1, Payload: []byte("a"), Now: base},
		{Queue: "p", ID: 2, Payload: []byte("b"), Now: base},
		{Queue: "p", ID: 3, Payload: []byte("c"), Now: base},
	})
	require.NoError(t, err)
	for _, id := range []int64{1, 2, 3} {
		require.NoError(t, ex.MessageComplete(ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: id,
			State: relaytype.StateDead, ErrorClass: relaytype.ClassInfra, LastError: "x", Now: base}))
	}
	// The candidates as a pass would have selected them.
	cands := []ArchiveCandidate{
		{ID: 1, State: "DEAD", UpdatedAt: base},
		{ID: 2, State: "DEAD", UpdatedAt: base},
		{ID: 3, State: "DEAD", UpdatedAt: base},
	}
	// Then, before the writes: 1 is replayed (PENDING); 3 is replayed and
	// dies again (DEAD, but not the row that was selected).
	now := base.Add(time.Hour)
	n, err := ex.MessageReplay(ctx, &relaydriver.MessageReplayParams{Queue: "p",
		Classes: []relaytype.ErrorClass{relaytype.ClassInfra}, IDs: []int64{1, 3}, Now: now})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.NoError(t, ex.MessageComplete(ctx, &relaydriver.MessageCompleteParams{Queue: "p", ID: 3,
		State: relaytype.StateDead, ErrorClass: relaytype.ClassInfra, LastError: "again", Now: now}))

	tx, err := d.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	archived, err := archive(ctx, tx,
		&relaydriver.MessageArchiveParams{Queue: "p", TerminalBefore: now, Now: now}, cands)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, 1, archived)

	states := map[int64]relaytype.State{}
	for _, id := range []int64{1, 2, 3} {
		m, err := ex.MessageGet(ctx, "p", id)
		require.NoError(t, err)
		states[id] = m.State
	}
	require.Equal(t, map[int64]relaytype.State{1: relaytype.StatePending, 2: relaytype.StateArchived, 3: relaytype.StateDead}, states)
	rows, err := ex.Query(ctx, "SELECT id FROM relay_message_history WHERE queue = $1 ORDER BY id", "p")
	require.NoError(t, err)
	defer rows.Close()
	var hist []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		hist = append(hist, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int64{2}, hist, "the refused rows left no history copy")
}
