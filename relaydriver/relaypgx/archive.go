package relaypgx

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaydriver"
)

// Archival of terminal processing rows (seed 000 §9.3): the store side of
// relaydriver.ArchiveExecutor. Its SQL lives in archive.sql.

// archiveSQL holds the archival statements; see archive.sql.
//
//go:embed archive.sql
var archiveSQL string

// Query names in archive.sql, checked at init.
const (
	qArchiveSelect = "ArchiveSelect"
	qArchiveCopy   = "ArchiveCopy"
	qArchiveShadow = "ArchiveShadow"
	qArchiveUncopy = "ArchiveUncopy"
)

// archiveQueries maps an archival query name to its SQL.
var archiveQueries = sqlfile.MustParse("relaypgx: archive.sql", archiveSQL,
	qArchiveSelect, qArchiveCopy, qArchiveShadow, qArchiveUncopy)

var _ relaydriver.ArchiveExecutor = (*executor)(nil)

// archiveCandidate is one selected row: its id and the state and updated_at
// it had when selected, which the guarded writes re-check.
type archiveCandidate struct {
	id        int64
	state     string
	updatedAt pgtype.Timestamptz
}

// MessageArchive selects, copies and shadows up to Limit settled terminal
// rows in one transaction (the caller's or its own).
func (e *executor) MessageArchive(ctx context.Context, params *relaydriver.MessageArchiveParams) (int, error) {
	op := "archive " + params.Queue
	if err := params.Check(); err != nil {
		return 0, fmt.Errorf("relaypgx: archive %q: %w", params.Queue, err)
	}
	limit := relaydriver.LimitOr(params.Limit, LimitDefault)
	run := func(x *executor) (int, error) {
		r, err := x.db.Query(ctx, archiveQueries[qArchiveSelect], params.Queue, ts(params.TerminalBefore), limit)
		if err != nil {
			return 0, mapErr(op, err)
		}
		var (
			cands []archiveCandidate
			c     archiveCandidate
		)
		_, err = pgx.ForEachRow(r, []any{&c.id, &c.state, &c.updatedAt}, func() error {
			cands = append(cands, c)
			return nil
		})
		if err != nil {
			return 0, mapErr(op, err)
		}
		return x.archiveCandidates(ctx, op, params, cands)
	}
	if e.inTx {
		return run(e)
	}
	tx, err := e.db.Begin(ctx)
	if err != nil {
		return 0, mapErr(op+": begin", err)
	}
	n, err := run(&executor{db: tx, inTx: true})
	if err != nil {
		if rbErr := tx.Rollback(ctx); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) {
			return 0, errors.Join(err, mapErr(op+": rollback", rbErr))
		}
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, mapErr(op+": commit", err)
	}
	return n, nil
}

// archiveCandidates copies the candidates into the history, turns their main
// rows into shadows under the guard of the selected state, and removes the
// copies of the rows the guard refused. It must run in a transaction.
func (e *executor) archiveCandidates(ctx context.Context, op string, params *relaydriver.MessageArchiveParams,
	cands []archiveCandidate) (int, error) {
	if len(cands) == 0 {
		return 0, nil
	}
	idv := make([]int64, len(cands))
	states := make([]string, len(cands))
	updated := make([]pgtype.Timestamptz, len(cands))
	for i, c := range cands {
		idv[i], states[i], updated[i] = c.id, c.state, c.updatedAt
	}
	collect := func(q string) (map[int64]bool, error) {
		r, err := e.db.Query(ctx, archiveQueries[q], params.Queue, idv, states, updated, ts(params.Now))
		if err != nil {
			return nil, err
		}
		out := map[int64]bool{}
		var id int64
		_, err = pgx.ForEachRow(r, []any{&id}, func() error {
			out[id] = true
			return nil
		})
		return out, err
	}
	copied, err := collect(qArchiveCopy)
	if err != nil {
		return 0, mapErr(op+": copy", err)
	}
	shadowed, err := collect(qArchiveShadow)
	if err != nil {
		return 0, mapErr(op+": shadow", err)
	}
	var refused []int64
	for id := range copied {
		if !shadowed[id] {
			refused = append(refused, id)
		}
	}
	for id := range shadowed {
		if !copied[id] {
			// The row changed and came back to the selected state between the
			// copy and the update: its history copy is not the row archived.
			return 0, fmt.Errorf("relaypgx: %s: message %d was shadowed without its history copy", op, id)
		}
	}
	if len(refused) > 0 {
		if _, err := e.db.Exec(ctx, archiveQueries[qArchiveUncopy], params.Queue, refused); err != nil {
			return 0, mapErr(op+": uncopy", err)
		}
	}
	return len(shadowed), nil
}
