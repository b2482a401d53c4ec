package relaysource

import (
	"context"
	"errors"
	"fmt"
	"time"
)

var _ Acknowledger = (*SQLTable)(nil)

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
