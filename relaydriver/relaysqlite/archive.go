package relaysqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"

	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaydriver"
)

// Archival of terminal processing rows (seed 000 §9.3): the store side of
// relaydriver.ArchiveExecutor. Its SQL lives in archive.sql and runs as plain
// SQL text (not through the statement cache of queries.sql).

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
var archiveQueries = sqlfile.MustParse("relaysqlite/archive.sql", archiveSQL,
	qArchiveSelect, qArchiveCopy, qArchiveShadow, qArchiveUncopy)

var _ relaydriver.ArchiveExecutor = (*executor)(nil)

// archiveRunner is where the statements of one archival pass run: the
// caller's transaction or one of the writer's own.
type archiveRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// archiveCandidate is one selected row: its id and the state and updated_at
// (Unix microseconds) it had when selected, which the guarded writes re-check.
type archiveCandidate struct {
	id        int64
	state     string
	updatedAt int64
}

// MessageArchive selects, copies and shadows up to Limit settled terminal
// rows in one transaction (the caller's or an IMMEDIATE one of its own).
func (e *executor) MessageArchive(ctx context.Context, params *relaydriver.MessageArchiveParams) (int, error) {
	op := "archive " + params.Queue
	if err := params.Check(); err != nil {
		return 0, fmt.Errorf("relaysqlite: archive %q: %w", params.Queue, err)
	}
	limit := relaydriver.LimitOr(params.Limit, LimitDefault)
	run := func(q archiveRunner) (int, error) {
		cands, err := selectArchiveCandidates(ctx, q, params.Queue, timeArg(params.TerminalBefore), limit)
		if err != nil {
			return 0, err
		}
		return archiveCandidates(ctx, q, params, cands)
	}
	if e.tx != nil {
		n, err := run(e.tx)
		if err != nil {
			return 0, mapErr(op, err)
		}
		return n, nil
	}
	tx, err := e.d.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, mapErr(op, err)
	}
	n, err := run(tx)
	if err != nil {
		return 0, mapErr(op, errors.Join(err, rollbackErr(tx)))
	}
	if err := tx.Commit(); err != nil {
		return 0, mapErr(op, err)
	}
	return n, nil
}

// selectArchiveCandidates runs ArchiveSelect.
func selectArchiveCandidates(ctx context.Context, q archiveRunner, queue string, before any, limit int) ([]archiveCandidate, error) {
	r, err := q.QueryContext(ctx, archiveQueries[qArchiveSelect], queue, before, limit)
	if err != nil {
		return nil, err
	}
	return collect(r, func(s scanner) (c archiveCandidate, err error) {
		err = s.Scan(&c.id, &c.state, &c.updatedAt)
		return c, err
	})
}

// archiveCandidates copies each candidate into the history and turns its main
// row into the shadow under the guard of the selected state; a row the guard
// refuses loses its copy again. It must run in a transaction.
func archiveCandidates(ctx context.Context, q archiveRunner, params *relaydriver.MessageArchiveParams,
	cands []archiveCandidate) (int, error) {
	now := timeArg(params.Now)
	archived := 0
	for _, c := range cands {
		args := []any{params.Queue, c.id, c.state, c.updatedAt, now}
		copied, err := q.ExecContext(ctx, archiveQueries[qArchiveCopy], args...)
		if err != nil {
			return 0, fmt.Errorf("copy %d: %w", c.id, err)
		}
		nc, err := copied.RowsAffected()
		if err != nil {
			return 0, err
		}
		res, err := q.ExecContext(ctx, archiveQueries[qArchiveShadow], args...)
		if err != nil {
			return 0, fmt.Errorf("shadow %d: %w", c.id, err)
		}
		ns, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		switch {
		case ns == 1 && nc == 1:
			archived++
		case ns == 0 && nc == 1:
			if _, err := q.ExecContext(ctx, archiveQueries[qArchiveUncopy], params.Queue, c.id); err != nil {
				return 0, fmt.Errorf("uncopy %d: %w", c.id, err)
			}
		case ns == 1:
			return 0, fmt.Errorf("message %d was shadowed without its history copy", c.id)
		}
	}
	return archived, nil
}
