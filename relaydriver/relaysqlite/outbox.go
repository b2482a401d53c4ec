package relaysqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// The transactional outbox (seed 000 §8.1, §8.3; docs/outbox.md).

// outboxAppendSavepoint isolates one OutboxAppend inside the caller's
// transaction: SQLite aborts only a failing statement, so without it a
// duplicate event id would leave its key's seq bumped with no event — a gap the
// caller could commit.
const outboxAppendSavepoint = "relay_outbox_append"

// OutboxAppend allocates each event's seq from its key row and inserts it, in
// (target, key) order, all or nothing: in the caller's transaction under a
// savepoint, otherwise in an IMMEDIATE transaction of its own.
func (e *executor) OutboxAppend(ctx context.Context, params []*relaydriver.OutboxAppendParams) ([]relaydriver.OutboxAppended, error) {
	const op = "outbox append"
	if err := relaydriver.CheckOutboxAppend(params); err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	if len(params) == 0 {
		return nil, nil
	}
	order := make([]int, len(params))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(params[a].Target, params[b].Target), cmp.Compare(params[a].Key, params[b].Key))
	})
	out := make([]relaydriver.OutboxAppended, len(params))
	run := func(q runner) error {
		for _, i := range order {
			p := params[i]
			headers, err := relaydriver.EncodeHeaders(p.Headers)
			if err != nil {
				return fmt.Errorf("event %s: headers: %w", p.ID, err)
			}
			if err := q.queryRow(ctx, qOutboxKeyNext, p.Target, p.Key).Scan(&out[i].Seq); err != nil {
				return fmt.Errorf("event %s: allocate seq: %w", p.ID, err)
			}
			var payload any
			if p.Payload != nil {
				payload = p.Payload
			}
			if err := q.queryRow(ctx, qOutboxInsert, p.ID, p.Target, p.Topic, p.Key, out[i].Seq,
				string(p.Type), headers, payload, timeArg(p.Now)).Scan(&out[i].ID); err != nil {
				return fmt.Errorf("event %s: %w", p.ID, err)
			}
		}
		return nil
	}
	if e.tx == nil {
		if err := e.atomically(ctx, op, run); err != nil {
			return nil, err
		}
		return out, nil
	}
	if _, err := e.tx.ExecContext(ctx, "SAVEPOINT "+outboxAppendSavepoint); err != nil {
		return nil, mapErr(op+": savepoint", err)
	}
	if err := run(e.writer()); err != nil {
		_, rbErr := e.tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+outboxAppendSavepoint)
		_, relErr := e.tx.ExecContext(ctx, "RELEASE SAVEPOINT "+outboxAppendSavepoint)
		return nil, mapErr(op, errors.Join(err, rbErr, relErr))
	}
	if _, err := e.tx.ExecContext(ctx, "RELEASE SAVEPOINT "+outboxAppendSavepoint); err != nil {
		return nil, mapErr(op+": release savepoint", err)
	}
	return out, nil
}

// scanOutbox reads the column list of OutboxFetch and OutboxList.
func scanOutbox(s scanner) (*relaydriver.OutboxRecord, error) {
	var (
		o                            relaydriver.OutboxRecord
		headers                      string
		next, created, sent, updated sql.NullInt64
	)
	err := s.Scan(&o.RowID, &o.ID, &o.Target, &o.Topic, &o.Key, &o.Seq, &o.Type, &headers, &o.Payload,
		&o.State, &o.Attempts, &next, &o.LastError, &created, &sent, &updated)
	if err != nil {
		return nil, err
	}
	if o.Headers, err = relaydriver.DecodeHeaders(headers); err != nil {
		return nil, fmt.Errorf("event %s: headers: %w", o.ID, err)
	}
	o.NextAttemptAt, o.CreatedAt, o.SentAt, o.UpdatedAt = timeOf(next), timeOf(created), timeOf(sent), timeOf(updated)
	return &o, nil
}

func (e *executor) queryOutbox(ctx context.Context, op, name string, args ...any) ([]*relaydriver.OutboxRecord, error) {
	rows, err := e.reader().query(ctx, name, args...)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := collect(rows, scanOutbox)
	return out, mapErr(op, err)
}

// OutboxFetch returns the ready runs of each key in serving order (rotation
// from AfterKey).
func (e *executor) OutboxFetch(ctx context.Context, params *relaydriver.OutboxFetchParams) ([]*relaydriver.OutboxRecord, error) {
	op := "outbox fetch " + params.Target
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	limit := relaydriver.LimitOr(params.Limit, LimitDefault)
	skip, err := jsonList(params.SkipKeys)
	if err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	return e.queryOutbox(ctx, op, qOutboxFetch, params.Target, timeArg(params.Now), params.AfterKey, limit, skip)
}

// OutboxMarkSent sets SENT and sent_at on the rows still PENDING (with Delete:
// deletes them).
func (e *executor) OutboxMarkSent(ctx context.Context, params *relaydriver.OutboxMarkSentParams) (int, error) {
	const op = "outbox mark sent"
	if err := params.Check(); err != nil {
		return 0, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	if len(params.IDs) == 0 {
		return 0, nil
	}
	ids, err := json.Marshal(params.IDs)
	if err != nil {
		return 0, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	query, args := qOutboxMarkSent, []any{string(ids), timeArg(params.Now)}
	if params.Delete {
		query, args = qOutboxDeleteDelivered, []any{string(ids)}
	}
	n, err := e.writer().affected(ctx, query, args...)
	return int(n), mapErr(op, err)
}

// OutboxFail records one failed delivery, DEAD at the limit, in one statement.
func (e *executor) OutboxFail(ctx context.Context, params *relaydriver.OutboxFailParams) (*relaydriver.OutboxFailed, error) {
	op := fmt.Sprintf("outbox fail %d", params.ID)
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	var (
		res   relaydriver.OutboxFailed
		state string
	)
	err := e.writer().queryRow(ctx, qOutboxFail, params.ID, relaydriver.StoredText(params.Error), timeArg(params.NextAttemptAt),
		params.MaxAttempts, timeArg(params.Now)).Scan(&res.Attempts, &state)
	if errors.Is(err, sql.ErrNoRows) {
		var n int
		if err := e.reader().queryRow(ctx, qOutboxExists, params.ID).Scan(&n); err != nil {
			return nil, mapErr(op, err)
		}
		if n == 0 {
			return nil, fmt.Errorf("relaysqlite: %s: %w", op, relaytype.ErrNotFound)
		}
		return nil, fmt.Errorf("relaysqlite: %s: not PENDING: %w", op, relaytype.ErrConflict)
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	res.Dead = state == relaydriver.OutboxDead
	return &res, nil
}

// OutboxDeleteSent deletes up to limit SENT rows sent before the cutoff.
func (e *executor) OutboxDeleteSent(ctx context.Context, target string, sentBefore time.Time, limit int) (int, error) {
	op := "outbox delete sent " + target
	if err := relaydriver.CheckOutboxDeleteSent(sentBefore); err != nil {
		return 0, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	limit = relaydriver.LimitOr(limit, LimitDefault)
	n, err := e.writer().affected(ctx, qOutboxDeleteSent, target, timeArg(sentBefore), limit)
	return int(n), mapErr(op, err)
}

// OutboxList lists a target's events in (key, seq) order.
func (e *executor) OutboxList(ctx context.Context, params *relaydriver.OutboxListParams) ([]*relaydriver.OutboxRecord, error) {
	limit := relaydriver.LimitOr(params.Limit, LimitDefault)
	return e.queryOutbox(ctx, "outbox list "+params.Target, qOutboxList, params.Target, params.State, limit)
}

// OutboxStats counts a target's events per state.
func (e *executor) OutboxStats(ctx context.Context, target string) (*relaydriver.OutboxStats, error) {
	op := "outbox stats " + target
	rows, err := e.reader().query(ctx, qOutboxStats, target)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	st, err := relaydriver.ScanOutboxStats(rows, timeOf)
	if err != nil {
		return nil, mapErr(op, err)
	}
	return st, nil
}
