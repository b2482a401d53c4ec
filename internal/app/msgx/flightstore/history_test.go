package flightstore_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/flightstore"
)

// historyFlights saves flights with the given OPERATION_DAYs, all updated at base.
func historyFlights(t *testing.T, b *bundle, days map[string]string) map[string]*flight.State {
	t.Helper()
	var states []*flight.State
	for flid, day := range days {
		s := typicalState(flid)
		s.OperationDay = day
		states = append(states, s)
	}
	require.NoError(t, flightstore.Save(b.ctx, b.pool, states))
	return byFLID(states...)
}

func docsOf(t *testing.T, states []*flight.State) map[string][]byte {
	t.Helper()
	docs := map[string][]byte{}
	for _, s := range states {
		doc, err := json.Marshal(map[string]any{"flid": s.FLID, "version": s.Version})
		require.NoError(t, err)
		docs[s.FLID] = doc
	}
	return docs
}

// Candidates: OPERATION_DAY before the day (without one: created before
// Undated), quiet since the time, any STATE, FLID order, at most limit; full
// states.
func TestHistoryCandidates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	saved := historyFlights(t, b, map[string]string{"A": "20260227", "C": "20260228", "B": "20260228", "D": "20260301", "N": ""})
	deleted := saved["C"].Clone()
	deleted.Status, deleted.Version = flight.Deleted, 2
	require.NoError(t, flightstore.Save(b.ctx, b.pool, []*flight.State{deleted}))

	got, err := flightstore.HistoryCandidates(b.ctx, b.pool, flightstore.HistoryCutoff{Day: "20260301", Quiet: base.Add(time.Microsecond)}, 10)
	require.NoError(t, err)
	require.Equal(t, []*flight.State{saved["A"], saved["B"], deleted}, got)

	got, err = flightstore.HistoryCandidates(b.ctx, b.pool, flightstore.HistoryCutoff{Day: "20260301", Quiet: base.Add(time.Microsecond)}, 2)
	require.NoError(t, err)
	require.Equal(t, []*flight.State{saved["A"], saved["B"]}, got)

	got, err = flightstore.HistoryCandidatesAfter(b.ctx, b.pool, flightstore.HistoryCutoff{Day: "20260301", Quiet: base.Add(time.Microsecond)}, "B", 2)
	require.NoError(t, err)
	require.Equal(t, []*flight.State{deleted}, got, "the next page starts after the last FLID of the previous one")

	got, err = flightstore.HistoryCandidates(b.ctx, b.pool, flightstore.HistoryCutoff{Day: "20260301", Quiet: base}, 10) // not quiet long enough
	require.NoError(t, err)
	require.Empty(t, got)

	_, err = flightstore.HistoryCandidates(b.ctx, b.pool, flightstore.HistoryCutoff{Day: "20260301", Quiet: base}, 0)
	require.Error(t, err)

	// A flight without an OPERATION_DAY (N, created at base) qualifies once it
	// was created before Undated, and only when quiet.
	cut := flightstore.HistoryCutoff{Day: "20260301", Undated: base, Quiet: base.Add(time.Microsecond)}
	got, err = flightstore.HistoryCandidates(b.ctx, b.pool, cut, 10)
	require.NoError(t, err)
	require.Equal(t, []*flight.State{saved["A"], saved["B"], deleted}, got, "created at Undated: not before it")
	cut.Undated = base.Add(time.Microsecond)
	got, err = flightstore.HistoryCandidates(b.ctx, b.pool, cut, 10)
	require.NoError(t, err)
	require.Equal(t, []*flight.State{saved["A"], saved["B"], deleted, saved["N"]}, got)
	cut.Quiet = base
	got, err = flightstore.HistoryCandidates(b.ctx, b.pool, cut, 10)
	require.NoError(t, err)
	require.Empty(t, got, "not quiet long enough")
}

// ArchiveAndDelete archives and deletes (details cascading) the flights whose
// version is unchanged and skips one whose version moved after it was chosen.
func TestArchiveAndDeleteSkipsMovedVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	historyFlights(t, b, map[string]string{"A": "20260227", "B": "20260227", "C": "20260227"})
	cands, err := flightstore.HistoryCandidates(b.ctx, b.pool, flightstore.HistoryCutoff{Day: "20260301", Quiet: base.Add(time.Second)}, 10)
	require.NoError(t, err)
	require.Len(t, cands, 3)

	// B changes between the choice and the archival.
	moved := cands[1].Clone()
	moved.Version++
	moved.UpdatedAt = base.Add(time.Hour)
	require.NoError(t, flightstore.Save(b.ctx, b.pool, []*flight.State{moved}))

	archivedAt := base.Add(48 * time.Hour)
	b.inTx(t, func(tx pgx.Tx) {
		require.NoError(t, flightstore.LockPipeline(b.ctx, tx))
		got, err := flightstore.ArchiveAndDelete(b.ctx, tx, cands, docsOf(t, cands), archivedAt)
		require.NoError(t, err)
		require.Equal(t, []string{"A", "C"}, got)
	})

	left, err := flightstore.LoadAll(b.ctx, b.pool)
	require.NoError(t, err)
	require.Equal(t, []*flight.State{moved}, left)
	for _, table := range []string{"flight_gate", "flight_ckic", "flight_stnd", "flight_chut", "flight_dely", "flight_srvt", "flight_route_point"} {
		require.Zero(t, b.count(t, fmt.Sprintf("SELECT count(*) FROM %s WHERE flid IN ('A', 'C')", table)), table)
		require.NotZero(t, b.count(t, fmt.Sprintf("SELECT count(*) FROM %s WHERE flid = 'B'", table)), table)
	}
	rows, err := b.pool.Query(b.ctx, `SELECT flid, state, state_version, operation_day, archived_at, doc->>'flid'
		FROM flight_schd_hst ORDER BY flid`)
	require.NoError(t, err)
	type hst struct {
		FLID, State string
		Version     int64
		Day         string
		At          time.Time
		DocFLID     string
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[hst])
	require.NoError(t, err)
	for i := range got {
		got[i].At = got[i].At.UTC()
	}
	require.Equal(t, []hst{
		{"A", "ACTIVE", 1, "20260227", archivedAt, "A"},
		{"C", "ACTIVE", 1, "20260227", archivedAt, "C"},
	}, got)

	// Archiving the same candidates again finds nothing to do.
	b.inTx(t, func(tx pgx.Tx) {
		got, err := flightstore.ArchiveAndDelete(b.ctx, tx, cands, docsOf(t, cands), archivedAt)
		require.NoError(t, err)
		require.Empty(t, got)
	})
}

// A failing history insert returns the error and deletes nothing (D1: zero
// rows when the history write fails), inside a transaction and outside one.
func TestArchiveAndDeleteFailureDeletesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	saved := historyFlights(t, b, map[string]string{"A": "20260227", "B": "20260227"})
	cands, err := flightstore.HistoryCandidates(b.ctx, b.pool, flightstore.HistoryCutoff{Day: "20260301", Quiet: base.Add(time.Second)}, 10)
	require.NoError(t, err)
	docs := docsOf(t, cands)
	docs["B"] = []byte(`{"flid": "B", truncated`) // the history insert of B fails

	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	require.NoError(t, flightstore.LockPipeline(b.ctx, tx))
	archived, err := flightstore.ArchiveAndDelete(b.ctx, tx, cands, docs, base)
	require.ErrorContains(t, err, "flightstore: archive FLID A (and 1 more)")
	require.Nil(t, archived)
	require.NoError(t, tx.Rollback(b.ctx))

	archived, err = flightstore.ArchiveAndDelete(b.ctx, b.pool, cands, docs, base) // no transaction: one statement
	require.Error(t, err)
	require.Nil(t, archived)

	all, err := flightstore.LoadAll(b.ctx, b.pool)
	require.NoError(t, err)
	require.Equal(t, []*flight.State{saved["A"], saved["B"]}, all)
	require.Zero(t, b.count(t, "SELECT count(*) FROM flight_schd_hst"))

	// Caller mistakes are refused before any I/O.
	delete(docs, "B")
	_, err = flightstore.ArchiveAndDelete(b.ctx, b.pool, cands, docs, base)
	require.ErrorContains(t, err, "no history document")
	_, err = flightstore.ArchiveAndDelete(b.ctx, b.pool, []*flight.State{cands[0], cands[0]}, docsOf(t, cands), base)
	require.ErrorContains(t, err, "given twice")
	require.Equal(t, 2, b.count(t, "SELECT count(*) FROM flight_schd"))
}

// PurgeHistory deletes rows archived before the time, oldest first, at most limit.
func TestPurgeHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	historyFlights(t, b, map[string]string{"A": "20260227", "B": "20260227", "C": "20260227"})
	cands, err := flightstore.HistoryCandidates(b.ctx, b.pool, flightstore.HistoryCutoff{Day: "20260301", Quiet: base.Add(time.Second)}, 10)
	require.NoError(t, err)
	for i, s := range cands {
		b.inTx(t, func(tx pgx.Tx) {
			_, err := flightstore.ArchiveAndDelete(b.ctx, tx, []*flight.State{s}, docsOf(t, cands), base.Add(time.Duration(i)*time.Hour))
			require.NoError(t, err)
		})
	}
	n, err := flightstore.PurgeHistory(b.ctx, b.pool, base.Add(2*time.Hour), 1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = flightstore.PurgeHistory(b.ctx, b.pool, base.Add(2*time.Hour), 10)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var left string
	require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT string_agg(flid, ',') FROM flight_schd_hst").Scan(&left))
	require.Equal(t, "C", left)
	_, err = flightstore.PurgeHistory(b.ctx, b.pool, base, 0)
	require.Error(t, err)
}
