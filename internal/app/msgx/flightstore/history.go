package flightstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay/internal/app/msgx/flight"
)

// HistoryCutoff says which flights are old enough to leave the current state
// (seed 000 §9.3, §12.5).
type HistoryCutoff struct {
	// Day: a flight whose OPERATION_DAY (YYYYMMDD) is before Day qualifies.
	Day string
	// Undated: a flight without an OPERATION_DAY (a FLOP can create one
	// without SODT, and OPERATION_DAY is derived only from SODT) qualifies
	// when it was created before Undated; the zero time keeps such flights.
	Undated time.Time
	// Quiet: in either case only when it has not changed since (UPDATED_AT <
	// Quiet).
	Quiet time.Time
}

// HistoryCandidates returns, FLID ascending and at most limit (> 0), the full
// states of the flights cut qualifies, in any STATE. Deciding whether a
// candidate is final (terminal evidence, a tombstone still owed,
// master/shared cascades) is the caller's. Two round trips (the FLIDs, then
// Load). ctx governs both.
func HistoryCandidates(ctx context.Context, q Querier, cut HistoryCutoff, limit int) ([]*flight.State, error) {
	return HistoryCandidatesAfter(ctx, q, cut, "", limit)
}

// HistoryCandidatesAfter is HistoryCandidates for the candidates whose FLID
// sorts after after: a caller pages with the last FLID of the previous page,
// so candidates it had to leave in place never hide the ones behind them.
func HistoryCandidatesAfter(ctx context.Context, q Querier, cut HistoryCutoff, after string, limit int) ([]*flight.State, error) {
	op := fmt.Sprintf("history candidates before day %s", cut.Day)
	if limit <= 0 {
		return nil, fmt.Errorf("flightstore: %s: limit %d must be positive", op, limit)
	}
	rows, err := q.Query(ctx, stmts.historyCandidates, cut.Day, ts(cut.Quiet), limit, after, ts(cut.Undated))
	if err != nil {
		return nil, mapErr(op, err)
	}
	flids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapErr(op, err)
	}
	if len(flids) == 0 {
		return nil, nil
	}
	return loadOrdered(ctx, q, flids)
}

// ArchiveAndDelete moves flights to FLIGHT_SCHD_HST (seed 000 §9.3, D1): for
// each state it re-checks that the stored STATE_VERSION still equals
// state.Version (locking the row), inserts a history row with docs[FLID] (a
// JSON document of the full state, stored as JSONB, ARCHIVED_AT = now), and
// deletes the current row (the details cascade). It returns the FLIDs
// archived, ascending; a flight whose version moved, or that is gone, is
// skipped and stays.
//
// All of it is one statement: if a history insert fails (a document that is
// not JSON, …) the error is returned and no row is deleted; the caller rolls
// back. Call it in the caller's transaction holding PIPELINE_LOCK (INV-18),
// after registering any tombstone the flights still owe. A state without a
// document, a nil state or a FLID given twice is an error before any I/O.
func ArchiveAndDelete(ctx context.Context, q Querier, states []*flight.State, docs map[string][]byte, now time.Time) ([]string, error) {
	if len(states) == 0 {
		return nil, nil
	}
	flids := make([]string, len(states))
	versions := make([]int64, len(states))
	docTexts := make([]string, len(states))
	seen := make(map[string]struct{}, len(states))
	for i, s := range states {
		if s == nil || s.FLID == "" {
			return nil, fmt.Errorf("flightstore: archive: state %d is nil or has no FLID", i)
		}
		if _, dup := seen[s.FLID]; dup {
			return nil, fmt.Errorf("flightstore: archive FLID %s: given twice", s.FLID)
		}
		seen[s.FLID] = struct{}{}
		doc, ok := docs[s.FLID]
		if !ok || len(doc) == 0 {
			return nil, fmt.Errorf("flightstore: archive FLID %s: no history document", s.FLID)
		}
		flids[i], versions[i], docTexts[i] = s.FLID, s.Version, string(doc)
	}
	op := flidOp("archive", flids)
	rows, err := q.Query(ctx, stmts.historyArchiveDelete, flids, versions, docTexts, now)
	if err != nil {
		return nil, mapErr(op, err)
	}
	archived, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapErr(op, err)
	}
	slices.Sort(archived)
	return archived, nil
}

// PurgeHistory deletes at most limit (> 0) FLIGHT_SCHD_HST rows archived
// before archivedBefore, oldest first, and returns how many it deleted
// (G-FLIGHT-HIST-RETENTION). Call it repeatedly until it returns less than
// limit.
func PurgeHistory(ctx context.Context, q Querier, archivedBefore time.Time, limit int) (int, error) {
	return purge(ctx, q, "purge flight history", stmts.historyPurge, limit, archivedBefore, limit)
}

// purge runs a bounded DELETE and returns the rows it deleted.
func purge(ctx context.Context, q Querier, op, stmt string, limit int, args ...any) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("flightstore: %s: limit %d must be positive", op, limit)
	}
	tag, err := q.Exec(ctx, stmt, args...)
	if err != nil {
		return 0, mapErr(op, err)
	}
	return int(tag.RowsAffected()), nil
}
