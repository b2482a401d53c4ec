package relaysqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Latest-state outbox rows (seed 000 §8.2; docs/outbox.md): the store side of
// relaydriver.LatestExecutor. Its SQL lives in latest.sql and runs as plain
// SQL text (not through the statement cache of queries.sql).

// latestSQL holds the latest-state statements; see latest.sql.
//
//go:embed latest.sql
var latestSQL string

// Query names in latest.sql, checked at init.
const (
	qLatestNextGeneration = "LatestNextGeneration"
	qLatestUpsert         = "LatestUpsert"
	qLatestFetch          = "LatestFetch"
	qLatestMarkSent       = "LatestMarkSent"
	qLatestFail           = "LatestFail"
	qLatestGet            = "LatestGet"
	qLatestStats          = "LatestStats"
)

// latestQueries maps a latest-state query name to its SQL.
var latestQueries = sqlfile.MustParse("relaysqlite/latest.sql", latestSQL,
	qLatestNextGeneration, qLatestUpsert, qLatestFetch, qLatestMarkSent, qLatestFail, qLatestGet, qLatestStats)

var _ relaydriver.LatestExecutor = (*executor)(nil)

// rawRunner is where raw SQL of one atomic unit runs: the caller's
// transaction or one of the writer's own.
type rawRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// LatestUpsert takes the next generation and writes the key's state only
// forward, in the caller's transaction or in an IMMEDIATE one of its own. A
// refused write leaves a gap in the generations, which is harmless.
func (e *executor) LatestUpsert(ctx context.Context, params *relaydriver.LatestUpsertParams) (*relaydriver.LatestUpserted, error) {
	const op = "latest upsert"
	if err := relaydriver.CheckLatestUpsert(params); err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %s", op, err)
	}
	var res *relaydriver.LatestUpserted
	err := e.latestAtomically(ctx, fmt.Sprintf("%s %s/%s", op, params.Target, params.Key), func(q rawRunner) error {
		var err error
		res, err = latestUpsertOne(ctx, q, params)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// LatestUpsertMany is LatestUpsert for each state in input order, in the
// caller's transaction or in one IMMEDIATE transaction of its own: with one
// writer and no round trips a loop costs what one statement would.
func (e *executor) LatestUpsertMany(ctx context.Context, params []*relaydriver.LatestUpsertParams) ([]*relaydriver.LatestUpserted, error) {
	op := fmt.Sprintf("latest upsert of %d states", len(params))
	if err := relaydriver.CheckLatestUpsertMany(params); err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	out := make([]*relaydriver.LatestUpserted, len(params))
	if len(params) == 0 {
		return out, nil
	}
	err := e.latestAtomically(ctx, op, func(q rawRunner) error {
		for i, p := range params {
			res, err := latestUpsertOne(ctx, q, p)
			if err != nil {
				return fmt.Errorf("%s/%s: %w", p.Target, p.Key, err)
			}
			out[i] = res
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// latestAtomically runs fn in the executor's transaction, or in an IMMEDIATE
// transaction of its own on the writer, and maps its error.
func (e *executor) latestAtomically(ctx context.Context, op string, fn func(q rawRunner) error) error {
	if e.tx != nil {
		return mapErr(op, fn(e.tx))
	}
	tx, err := e.d.write.BeginTx(ctx, nil)
	if err != nil {
		return mapErr(op, err)
	}
	if err := fn(tx); err != nil {
		return mapErr(op, errors.Join(err, rollbackErr(tx)))
	}
	return mapErr(op, tx.Commit())
}

// latestUpsertOne takes the next generation and writes one validated state
// only forward, with q.
func latestUpsertOne(ctx context.Context, q rawRunner, params *relaydriver.LatestUpsertParams) (*relaydriver.LatestUpserted, error) {
	headers, err := relaydriver.EncodeHeaders(params.Headers)
	if err != nil {
		return nil, fmt.Errorf("headers: %w", err)
	}
	var payload any
	if params.Payload != nil {
		payload = params.Payload
	}
	var next int64
	if err := q.QueryRowContext(ctx, latestQueries[qLatestNextGeneration]).Scan(&next); err != nil {
		return nil, fmt.Errorf("next generation: %w", err)
	}
	res := &relaydriver.LatestUpserted{}
	err = q.QueryRowContext(ctx, latestQueries[qLatestUpsert], params.Target, params.Key, params.Topic,
		params.Version, params.Type, headers, payload, timeArg(params.Now), next).Scan(&res.Generation)
	if errors.Is(err, sql.ErrNoRows) {
		return res, nil // refused: an older version
	}
	if err != nil {
		return nil, err
	}
	res.Accepted = true
	return res, nil
}

// scanLatest reads the column list of LatestFetch and LatestGet.
func scanLatest(s scanner) (*relaydriver.LatestRecord, error) {
	var (
		l                   relaydriver.LatestRecord
		headers             string
		next, updated, sent sql.NullInt64
	)
	err := s.Scan(&l.Target, &l.Key, &l.Topic, &l.Version, &l.Generation, &l.Type, &headers, &l.Payload,
		&l.State, &l.Attempts, &next, &l.LastError, &updated, &sent)
	if err != nil {
		return nil, err
	}
	if l.Headers, err = relaydriver.DecodeHeaders(headers); err != nil {
		return nil, fmt.Errorf("latest %s/%s: headers: %w", l.Target, l.Key, err)
	}
	l.NextAttemptAt, l.UpdatedAt, l.SentAt = timeOf(next), timeOf(updated), timeOf(sent)
	return &l, nil
}

// LatestFetch returns the due PENDING rows of a target in key order.
func (e *executor) LatestFetch(ctx context.Context, params *relaydriver.LatestFetchParams) ([]*relaydriver.LatestRecord, error) {
	op := "latest fetch " + params.Target
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	limit := relaydriver.LimitOr(params.Limit, LimitDefault)
	rows, err := e.rawDB(false).QueryContext(ctx, latestQueries[qLatestFetch], params.Target, timeArg(params.Now), limit)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := collect(rows, scanLatest)
	return out, mapErr(op, err)
}

// LatestMarkSent sets SENT on the referenced rows still PENDING at the
// referenced generation, in one statement.
func (e *executor) LatestMarkSent(ctx context.Context, params *relaydriver.LatestMarkSentParams) (int, error) {
	op := "latest mark sent " + params.Target
	if err := params.Check(); err != nil {
		return 0, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	if len(params.Rows) == 0 {
		return 0, nil
	}
	pairs := make([][2]any, len(params.Rows))
	for i, r := range params.Rows {
		pairs[i] = [2]any{r.Key, r.Generation}
	}
	b, err := json.Marshal(pairs)
	if err != nil {
		return 0, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	res, err := e.rawDB(true).ExecContext(ctx, latestQueries[qLatestMarkSent], params.Target, string(b), timeArg(params.Now))
	if err != nil {
		return 0, mapErr(op, err)
	}
	n, err := res.RowsAffected()
	return int(n), mapErr(op, err)
}

// LatestFail records one failed delivery of the generation read, DEAD at the
// limit, in one statement.
func (e *executor) LatestFail(ctx context.Context, params *relaydriver.LatestFailParams) (*relaydriver.OutboxFailed, error) {
	op := fmt.Sprintf("latest fail %s/%s@%d", params.Target, params.Key, params.Generation)
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	var (
		res   relaydriver.OutboxFailed
		state string
	)
	err := e.rawDB(true).QueryRowContext(ctx, latestQueries[qLatestFail], params.Target, params.Key, params.Generation,
		relaydriver.StoredText(params.Error), timeArg(params.NextAttemptAt), params.MaxAttempts, timeArg(params.Now)).Scan(&res.Attempts, &state)
	if errors.Is(err, sql.ErrNoRows) {
		cur, gerr := e.LatestGet(ctx, params.Target, params.Key)
		if gerr != nil {
			return nil, gerr
		}
		return nil, fmt.Errorf("relaysqlite: %s: %w: the row is %s at generation %d", op, relaytype.ErrConflict, cur.State, cur.Generation)
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	res.Dead = state == relaydriver.OutboxDead
	return &res, nil
}

// LatestGet returns one row or relaytype.ErrNotFound.
func (e *executor) LatestGet(ctx context.Context, target, key string) (*relaydriver.LatestRecord, error) {
	op := fmt.Sprintf("latest get %s/%s", target, key)
	l, err := scanLatest(e.rawDB(false).QueryRowContext(ctx, latestQueries[qLatestGet], target, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, relaytype.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	return l, nil
}

// LatestStats counts a target's rows per state.
func (e *executor) LatestStats(ctx context.Context, target string) (*relaydriver.OutboxStats, error) {
	op := "latest stats " + target
	rows, err := e.rawDB(false).QueryContext(ctx, latestQueries[qLatestStats], target)
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
