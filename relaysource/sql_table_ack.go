package relaysource

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

var _ BatchAcknowledger = (*SQLTable)(nil)

// Acknowledge writes mark into MarkColumn of row id (and at, in UTC, into
// MarkTimeColumn when configured) with one conditional UPDATE that only
// touches a row whose mark is NULL or empty; when it changed no row, one
// existence check tells an already marked row from a missing one (seed 000
// §6.2). ctx and ReadTimeout bound both statements. Every error is transient
// for the caller. It requires SQLTableConfig.MarkColumn and a non-empty mark.
func (s *SQLTable) Acknowledge(ctx context.Context, id int64, mark string, at time.Time) (AckOutcome, error) {
	it := AckItem{ID: id, Mark: mark, At: at}
	if err := s.checkAck(it); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadTimeout)
	defer cancel()
	out, err := s.markRow(ctx, it, func(ctx context.Context, args ...any) (sql.Result, error) {
		return s.db.ExecContext(ctx, s.queries.mark, args...)
	}, s.db.QueryRowContext)
	if err != nil {
		return 0, fmt.Errorf("relaysource: acknowledge %s id %d: %w", s.cfg.Table, id, err)
	}
	return out, nil
}

// AcknowledgeBatch is Acknowledge for many rows in one transaction: the same
// conditional UPDATE per item (prepared once), the existence check for those
// that changed no row, one commit. ctx and ReadTimeout bound the whole batch.
// An item with an empty mark fails the batch before anything is written.
func (s *SQLTable) AcknowledgeBatch(ctx context.Context, items []AckItem) (_ []AckOutcome, err error) {
	for _, it := range items {
		if err := s.checkAck(it); err != nil {
			return nil, err
		}
	}
	if len(items) == 0 {
		return nil, nil
	}
	fail := func(what string, err error) error {
		return fmt.Errorf("relaysource: acknowledge %d rows of %s from id %d: %s: %w", len(items), s.cfg.Table, items[0].ID, what, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadTimeout)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fail("begin", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	mark, err := tx.PrepareContext(ctx, s.queries.mark)
	if err != nil {
		return nil, fail("prepare", err)
	}
	defer mark.Close()
	out := make([]AckOutcome, len(items))
	for i, it := range items {
		if out[i], err = s.markRow(ctx, it, mark.ExecContext, tx.QueryRowContext); err != nil {
			return nil, fail(fmt.Sprintf("id %d", it.ID), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fail("commit", err)
	}
	return out, nil
}

// checkAck refuses what no acknowledgement can write: a source without a mark
// column, or an empty mark (which reads as "not marked").
func (s *SQLTable) checkAck(it AckItem) error {
	if s.queries.mark == "" {
		return fmt.Errorf("relaysource: acknowledge %s id %d: SQLTableConfig.MarkColumn is not set", s.cfg.Table, it.ID)
	}
	if it.Mark == "" {
		return fmt.Errorf("relaysource: acknowledge %s id %d: the mark is empty (an empty mark reads as \"not marked\")", s.cfg.Table, it.ID)
	}
	return nil
}

// markRow writes one acknowledgement: exec runs the conditional UPDATE with
// its arguments; when it changed no row, queryRow runs the existence check.
// Acknowledge runs them on the pool, AcknowledgeBatch on its transaction.
func (s *SQLTable) markRow(ctx context.Context, it AckItem,
	exec func(ctx context.Context, args ...any) (sql.Result, error),
	queryRow func(ctx context.Context, query string, args ...any) *sql.Row) (AckOutcome, error) {
	args := []any{it.Mark}
	if s.cfg.MarkTimeColumn != "" {
		args = append(args, it.At.UTC())
	}
	res, err := exec(ctx, append(args, it.ID)...)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	switch {
	case err != nil:
		return 0, fmt.Errorf("rows affected: %w", err)
	case n == 1:
		return AckWritten, nil
	case n > 1:
		return 0, fmt.Errorf("%d rows updated (is %s unique?)", n, s.cfg.IDColumn)
	}
	var exists bool
	if err := queryRow(ctx, s.queries.exists, it.ID).Scan(&exists); err != nil {
		return 0, fmt.Errorf("existence check: %w", err)
	}
	if exists {
		return AckAlreadyMarked, nil
	}
	return AckMissingRow, nil
}
