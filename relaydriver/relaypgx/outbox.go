package relaypgx

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// The transactional outbox (seed 000 §8.1, §8.3; docs/outbox.md).

// OutboxAppend appends the events of one call with one statement (key-row
// upserts that allocate the seqs, then the inserts; see the OutboxAppend
// query), sent with the targets' NOTIFY as one pgx batch: one round trip.
func (e *executor) OutboxAppend(ctx context.Context, params []*relaydriver.OutboxAppendParams) ([]relaydriver.OutboxAppended, error) {
	const op = "outbox append"
	if err := relaydriver.CheckOutboxAppend(params); err != nil {
		return nil, fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	if len(params) == 0 {
		return nil, nil
	}
	if !e.inTx {
		tx, err := e.db.Begin(ctx)
		if err != nil {
			return nil, mapErr(op+": begin", err)
		}
		out, err := (&executor{db: tx, inTx: true}).OutboxAppend(ctx, params)
		if err != nil {
			if rbErr := tx.Rollback(ctx); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) {
				return nil, errors.Join(err, mapErr(op+": rollback", rbErr))
			}
			return nil, err
		}
		if err := tx.Commit(ctx); err != nil {
			return nil, mapErr(op+": commit", err)
		}
		return out, nil
	}
	n := len(params)
	var (
		ids, targets, topics = make([]string, n), make([]string, n), make([]string, n)
		keys, types, headers = make([]string, n), make([]string, n), make([]string, n)
		payloads             = make([][]byte, n)
		times                = make([]pgtype.Timestamptz, n)
		at                   = make(map[string]int, n) // event id → index in params
	)
	for i, p := range params {
		h, err := relaydriver.EncodeHeaders(p.Headers)
		if err != nil {
			return nil, fmt.Errorf("relaypgx: %s: event %s: headers: %w", op, p.ID, err)
		}
		ids[i], targets[i], topics[i], keys[i], types[i], headers[i] = p.ID, p.Target, p.Topic, p.Key, string(p.Type), h
		payloads[i], times[i] = p.Payload, ts(p.Now)
		at[p.ID] = i
	}
	b := &pgx.Batch{}
	b.Queue(queries[qOutboxAppend], ids, targets, topics, keys, types, headers, payloads, times)
	notify := appendTargets(params)
	for _, target := range notify {
		b.Queue(queries[qOutboxNotify], target)
	}
	res := e.db.SendBatch(ctx, b)
	out := make([]relaydriver.OutboxAppended, n)
	if err := scanAppended(res, at, out); err != nil {
		_ = res.Close()
		return nil, mapErr(op, err)
	}
	for range notify {
		if _, err := res.Exec(); err != nil {
			_ = res.Close()
			return nil, mapErr(op+": notify", err)
		}
	}
	if err := res.Close(); err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// scanAppended reads the OutboxAppend statement's (event_id, id, seq) rows
// into out, at each event's index in the call.
func scanAppended(res pgx.BatchResults, at map[string]int, out []relaydriver.OutboxAppended) error {
	rows, err := res.Query()
	if err != nil {
		return err
	}
	var (
		got int
		id  string
		a   relaydriver.OutboxAppended
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &a.ID, &a.Seq}, func() error {
		i, ok := at[id]
		if !ok {
			return fmt.Errorf("the store returned unknown event id %s", id)
		}
		out[i] = a
		got++
		return nil
	}); err != nil {
		return err
	}
	if got != len(out) {
		return fmt.Errorf("the store appended %d of %d events", got, len(out))
	}
	return nil
}

// scanOutbox reads the column list of OutboxFetch and OutboxList, followed by
// extra destinations for the query's further columns.
func scanOutbox(r pgx.Row, extra ...any) (*relaydriver.OutboxRecord, error) {
	var (
		o                   relaydriver.OutboxRecord
		headers             string
		next, created, sent pgtype.Timestamptz
		updated             pgtype.Timestamptz
	)
	err := r.Scan(append([]any{&o.RowID, &o.ID, &o.Target, &o.Topic, &o.Key, &o.Seq, &o.Type, &headers, &o.Payload,
		&o.State, &o.Attempts, &next, &o.LastError, &created, &sent, &updated}, extra...)...)
	if err != nil {
		return nil, err
	}
	if o.Headers, err = relaydriver.DecodeHeaders(headers); err != nil {
		return nil, fmt.Errorf("event %s: headers: %w", o.ID, err)
	}
	o.NextAttemptAt, o.CreatedAt, o.SentAt, o.UpdatedAt = fromTS(next), fromTS(created), fromTS(sent), fromTS(updated)
	return &o, nil
}

func (e *executor) queryOutbox(ctx context.Context, op, query string, args ...any) ([]*relaydriver.OutboxRecord, error) {
	r, err := e.db.Query(ctx, queries[query], args...)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := collect(r, func(r pgx.CollectableRow) (*relaydriver.OutboxRecord, error) { return scanOutbox(r) })
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// OutboxFetch returns the ready runs of the keys it serves, in serving order
// (rotation from AfterKey; see the OutboxFetch query).
func (e *executor) OutboxFetch(ctx context.Context, params *relaydriver.OutboxFetchParams) ([]*relaydriver.OutboxRecord, error) {
	op := "outbox fetch " + params.Target
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	limit := relaydriver.LimitOr(params.Limit, LimitDefault)
	skip := params.SkipKeys
	if skip == nil {
		skip = []string{}
	}
	r, err := e.db.Query(ctx, queries[qOutboxFetch], params.Target, ts(params.Now), params.AfterKey, limit, skip)
	if err != nil {
		return nil, mapErr(op, err)
	}
	type served struct {
		rec      *relaydriver.OutboxRecord
		lap, ord int64
	}
	out, err := collect(r, func(r pgx.CollectableRow) (s served, err error) {
		s.rec, err = scanOutbox(r, &s.lap, &s.ord)
		return s, err
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	// The statement has no ORDER BY (a sort would make it visit every key);
	// (lap, ord, seq) is the serving order.
	slices.SortFunc(out, func(a, b served) int {
		return cmp.Or(cmp.Compare(a.lap, b.lap), cmp.Compare(a.ord, b.ord), cmp.Compare(a.rec.Seq, b.rec.Seq))
	})
	recs := make([]*relaydriver.OutboxRecord, len(out))
	for i, s := range out {
		recs[i] = s.rec
	}
	return recs, nil
}

// OutboxMarkSent sets SENT and sent_at on the rows still PENDING (with Delete:
// deletes them). With Async and outside a caller's transaction, the
// statement's implicit transaction commits without waiting for the WAL flush
// (one round trip either way).
func (e *executor) OutboxMarkSent(ctx context.Context, params *relaydriver.OutboxMarkSentParams) (int, error) {
	const op = "outbox mark sent"
	if err := params.Check(); err != nil {
		return 0, fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	if len(params.IDs) == 0 {
		return 0, nil
	}
	query, args := queries[qOutboxMarkSent], []any{params.IDs, ts(params.Now)}
	if params.Delete {
		query, args = queries[qOutboxDeleteDelivered], []any{params.IDs}
	}
	if !params.Async || e.inTx {
		tag, err := e.db.Exec(ctx, query, args...)
		if err != nil {
			return 0, mapErr(op, err)
		}
		return int(tag.RowsAffected()), nil
	}
	var tag pgconn.CommandTag
	err := e.asyncCommit(ctx, query, args, func(br pgx.BatchResults) (err error) {
		tag, err = br.Exec()
		return err
	})
	if err != nil {
		return 0, mapErr(op, err)
	}
	return int(tag.RowsAffected()), nil
}

// OutboxFail records one failed delivery, DEAD at the limit, in one statement.
func (e *executor) OutboxFail(ctx context.Context, params *relaydriver.OutboxFailParams) (*relaydriver.OutboxFailed, error) {
	op := fmt.Sprintf("outbox fail %d", params.ID)
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	var (
		res   relaydriver.OutboxFailed
		state string
	)
	err := e.db.QueryRow(ctx, queries[qOutboxFail], params.ID, relaydriver.StoredText(params.Error), ts(params.NextAttemptAt),
		params.MaxAttempts, ts(params.Now)).Scan(&res.Attempts, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		var exists bool
		if err := e.db.QueryRow(ctx, queries[qOutboxExists], params.ID).Scan(&exists); err != nil {
			return nil, mapErr(op, err)
		}
		if !exists {
			return nil, fmt.Errorf("relaypgx: %s: %w", op, relaytype.ErrNotFound)
		}
		return nil, fmt.Errorf("relaypgx: %s: not PENDING: %w", op, relaytype.ErrConflict)
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
		return 0, fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	limit = relaydriver.LimitOr(limit, LimitDefault)
	tag, err := e.db.Exec(ctx, queries[qOutboxDeleteSent], target, ts(sentBefore), limit)
	if err != nil {
		return 0, mapErr(op, err)
	}
	return int(tag.RowsAffected()), nil
}

// OutboxList lists a target's events in (key, seq) order.
func (e *executor) OutboxList(ctx context.Context, params *relaydriver.OutboxListParams) ([]*relaydriver.OutboxRecord, error) {
	limit := relaydriver.LimitOr(params.Limit, LimitDefault)
	return e.queryOutbox(ctx, "outbox list "+params.Target, qOutboxList, params.Target, params.State, limit)
}

// OutboxStats counts a target's events per state.
func (e *executor) OutboxStats(ctx context.Context, target string) (*relaydriver.OutboxStats, error) {
	op := "outbox stats " + target
	r, err := e.db.Query(ctx, queries[qOutboxStats], target)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer r.Close()
	st, err := relaydriver.ScanOutboxStats(r, fromTS)
	if err != nil {
		return nil, mapErr(op, err)
	}
	return st, nil
}

// appendTargets returns the distinct targets of params, sorted.
func appendTargets(params []*relaydriver.OutboxAppendParams) []string {
	seen := make(map[string]bool, 1)
	var out []string
	for _, p := range params {
		if !seen[p.Target] {
			seen[p.Target] = true
			out = append(out, p.Target)
		}
	}
	slices.Sort(out)
	return out
}

var _ relaydriver.Listener = (*Driver)(nil)

// ListenOutbox implements relaydriver.Listener with LISTEN relay_outbox on a
// connection of its own, taken out of the pool for as long as ctx lives. The
// appending transaction's pg_notify carries the target, so only this target's
// commits wake the channel.
func (d *Driver) ListenOutbox(ctx context.Context, target string) (<-chan struct{}, error) {
	pc, err := d.pool.Acquire(ctx)
	if err != nil {
		return nil, mapErr("outbox listen", err)
	}
	conn := pc.Hijack()
	if _, err := conn.Exec(ctx, queries[qOutboxListen]); err != nil {
		_ = conn.Close(context.WithoutCancel(ctx))
		return nil, mapErr("outbox listen", err)
	}
	ch := make(chan struct{}, 1)
	go func() {
		defer close(ch)
		defer conn.Close(context.WithoutCancel(ctx))
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				return // ctx ended or the connection was lost: the caller polls
			}
			if n.Payload != target {
				continue
			}
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return ch, nil
}
