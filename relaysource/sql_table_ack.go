package relaysource

import (
	"context"
	"errors"
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
	if s.queries.mark == "" {
		return 0, fmt.Errorf("relaysource: acknowledge %s id %d: SQLTableConfig.MarkColumn is not set", s.cfg.Table, id)
	}
	if mark == "" {
		return 0, errors.New("relaysource: acknowledge: the mark is empty (an empty mark reads as \"not marked\")")
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadTimeout)
	defer cancel()
	args := []any{mark}
	if s.cfg.MarkTimeColumn != "" {
		args = append(args, at.UTC())
	}
	args = append(args, id)
	res, err := s.db.ExecContext(ctx, s.queries.mark, args...)
	if err != nil {
		return 0, fmt.Errorf("relaysource: acknowledge %s id %d: %w", s.cfg.Table, id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("relaysource: acknowledge %s id %d: rows affected: %w", s.cfg.Table, id, err)
	}
	switch {
	case n == 1:
		return AckWritten, nil
	case n > 1:
		return 0, fmt.Errorf("relaysource: acknowledge %s id %d: %d rows updated (is %s unique?)", s.cfg.Table, id, n, s.cfg.IDColumn)
	}
	var exists bool
	if err := s.db.QueryRowContext(ctx, s.queries.exists, id).Scan(&exists); err != nil {
		return 0, fmt.Errorf("relaysource: acknowledge %s id %d: existence check: %w", s.cfg.Table, id, err)
	}
	if exists {
		return AckAlreadyMarked, nil
	}
	return AckMissingRow, nil
}

// AcknowledgeBatch is Acknowledge for many rows in one transaction: the same
// conditional UPDATE per item (prepared once), the existence check for those
// that changed no row, one commit. ctx and ReadTimeout bound the whole batch.
// An item with an empty mark fails the batch before anything is written.
func (s *SQLTable) AcknowledgeBatch(ctx context.Context, items []AckItem) (_ []AckOutcome, err error) {
	if s.queries.mark == "" {
		return nil, fmt.Errorf("relaysource: acknowledge %s: SQLTableConfig.MarkColumn is not set", s.cfg.Table)
	}
	for _, it := range items {
		if it.Mark == "" {
			return nil, fmt.Errorf("relaysource: acknowledge %s id %d: the mark is empty (an empty mark reads as \"not marked\")", s.cfg.Table, it.ID)
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
		args := []any{it.Mark}
		if s.cfg.MarkTimeColumn != "" {
			args = append(args, it.At.UTC())
		}
		res, err := mark.ExecContext(ctx, append(args, it.ID)...)
		if err != nil {
			return nil, fail(fmt.Sprintf("id %d", it.ID), err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, fail(fmt.Sprintf("id %d: rows affected", it.ID), err)
		}
		switch {
		case n == 1:
			out[i] = AckWritten
			continue
		case n > 1:
			return nil, fail(fmt.Sprintf("id %d", it.ID), fmt.Errorf("%d rows updated (is %s unique?)", n, s.cfg.IDColumn))
		}
		var exists bool
		if err := tx.QueryRowContext(ctx, s.queries.exists, it.ID).Scan(&exists); err != nil {
			return nil, fail(fmt.Sprintf("id %d: existence check", it.ID), err)
		}
		out[i] = AckMissingRow
		if exists {
			out[i] = AckAlreadyMarked
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fail("commit", err)
	}
	return out, nil
}
