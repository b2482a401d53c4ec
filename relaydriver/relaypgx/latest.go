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
	"github.com/relayhq/relay/relaytype"
)

// Latest-state outbox rows (seed 000 §8.2; docs/outbox.md): the store side of
// relaydriver.LatestExecutor. Its SQL lives in latest.sql.

// latestSQL holds the latest-state statements; see latest.sql.
//
//go:embed latest.sql
var latestSQL string

// Query names in latest.sql, checked at init.
const (
	qLatestUpsert     = "LatestUpsert"
	qLatestUpsertMany = "LatestUpsertMany"
	qLatestFetch      = "LatestFetch"
	qLatestMarkSent   = "LatestMarkSent"
	qLatestFail       = "LatestFail"
	qLatestGet        = "LatestGet"
	qLatestStats      = "LatestStats"
)

// latestQueries maps a latest-state query name to its SQL.
var latestQueries = sqlfile.MustParse("relaypgx: latest.sql", latestSQL,
	qLatestUpsert, qLatestUpsertMany, qLatestFetch, qLatestMarkSent, qLatestFail, qLatestGet, qLatestStats)

var _ relaydriver.LatestExecutor = (*executor)(nil)

// LatestUpsert writes the key's state only forward, in one statement that also
// notifies started dispatchers of the target at commit.
func (e *executor) LatestUpsert(ctx context.Context, params *relaydriver.LatestUpsertParams) (*relaydriver.LatestUpserted, error) {
	const op = "latest upsert"
	if err := relaydriver.CheckLatestUpsert(params); err != nil {
		return nil, fmt.Errorf("relaypgx: %s: %s", op, err)
	}
	h, err := relaydriver.EncodeHeaders(params.Headers)
	if err != nil {
		return nil, fmt.Errorf("relaypgx: %s %s/%s: headers: %w", op, params.Target, params.Key, err)
	}
	var gen int64
	err = e.db.QueryRow(ctx, latestQueries[qLatestUpsert], params.Target, params.Key, params.Topic, params.Version,
		params.Type, h, params.Payload, ts(params.Now)).Scan(&gen)
	if errors.Is(err, pgx.ErrNoRows) {
		return &relaydriver.LatestUpserted{}, nil
	}
	if err != nil {
		return nil, mapErr(fmt.Sprintf("%s %s/%s", op, params.Target, params.Key), err)
	}
	return &relaydriver.LatestUpserted{Accepted: true, Generation: gen}, nil
}

// latestKey is one (target, key) of a LatestUpsertMany call.
type latestKey struct{ target, key string }

// LatestUpsertMany writes several keys' states only forward in one statement
// (LatestUpsertMany in latest.sql), which also notifies started dispatchers
// of each target written at commit.
func (e *executor) LatestUpsertMany(ctx context.Context, params []*relaydriver.LatestUpsertParams) ([]*relaydriver.LatestUpserted, error) {
	op := fmt.Sprintf("latest upsert of %d states", len(params))
	if err := relaydriver.CheckLatestUpsertMany(params); err != nil {
		return nil, fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	out := make([]*relaydriver.LatestUpserted, len(params))
	if len(params) == 0 {
		return out, nil
	}
	var (
		targets  = make([]string, len(params))
		keys     = make([]string, len(params))
		topics   = make([]string, len(params))
		versions = make([]int64, len(params))
		types    = make([]string, len(params))
		headers  = make([]string, len(params))
		payloads = make([][]byte, len(params))
		nows     = make([]pgtype.Timestamptz, len(params))
		index    = make(map[latestKey]int, len(params))
	)
	for i, p := range params {
		h, err := relaydriver.EncodeHeaders(p.Headers)
		if err != nil {
			return nil, fmt.Errorf("relaypgx: %s: %s/%s: headers: %w", op, p.Target, p.Key, err)
		}
		targets[i], keys[i], topics[i], versions[i], types[i] = p.Target, p.Key, p.Topic, p.Version, string(p.Type)
		headers[i], payloads[i], nows[i] = h, p.Payload, ts(p.Now)
		index[latestKey{p.Target, p.Key}] = i
		out[i] = &relaydriver.LatestUpserted{}
	}
	r, err := e.db.Query(ctx, latestQueries[qLatestUpsertMany], targets, keys, topics, versions, types, headers,
		payloads, nows)
	if err != nil {
		return nil, mapErr(op, err)
	}
	var (
		target, key string
		gen         int64
	)
	_, err = pgx.ForEachRow(r, []any{&target, &key, &gen}, func() error {
		i, ok := index[latestKey{target, key}]
		if !ok {
			return fmt.Errorf("the store returned %s/%s, which was not written", target, key)
		}
		out[i] = &relaydriver.LatestUpserted{Accepted: true, Generation: gen}
		return nil
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// scanLatest reads the column list of LatestFetch and LatestGet.
func scanLatest(r pgx.Row) (*relaydriver.LatestRecord, error) {
	var (
		l                   relaydriver.LatestRecord
		headers             string
		next, updated, sent pgtype.Timestamptz
	)
	err := r.Scan(&l.Target, &l.Key, &l.Topic, &l.Version, &l.Generation, &l.Type, &headers, &l.Payload,
		&l.State, &l.Attempts, &next, &l.LastError, &updated, &sent)
	if err != nil {
		return nil, err
	}
	if l.Headers, err = relaydriver.DecodeHeaders(headers); err != nil {
		return nil, fmt.Errorf("latest %s/%s: headers: %w", l.Target, l.Key, err)
	}
	l.NextAttemptAt, l.UpdatedAt, l.SentAt = fromTS(next), fromTS(updated), fromTS(sent)
	return &l, nil
}

// LatestFetch returns the due PENDING rows of a target in key order.
func (e *executor) LatestFetch(ctx context.Context, params *relaydriver.LatestFetchParams) ([]*relaydriver.LatestRecord, error) {
	op := "latest fetch " + params.Target
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	limit := relaydriver.LimitOr(params.Limit, LimitDefault)
	r, err := e.db.Query(ctx, latestQueries[qLatestFetch], params.Target, ts(params.Now), limit)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := collect(r, func(r pgx.CollectableRow) (*relaydriver.LatestRecord, error) { return scanLatest(r) })
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// LatestMarkSent sets SENT on the referenced rows still PENDING at the
// referenced generation, in one statement.
func (e *executor) LatestMarkSent(ctx context.Context, params *relaydriver.LatestMarkSentParams) (int, error) {
	op := "latest mark sent " + params.Target
	if err := params.Check(); err != nil {
		return 0, fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	if len(params.Rows) == 0 {
		return 0, nil
	}
	keys := make([]string, len(params.Rows))
	gens := make([]int64, len(params.Rows))
	for i, r := range params.Rows {
		keys[i], gens[i] = r.Key, r.Generation
	}
	tag, err := e.db.Exec(ctx, latestQueries[qLatestMarkSent], params.Target, keys, gens, ts(params.Now))
	if err != nil {
		return 0, mapErr(op, err)
	}
	return int(tag.RowsAffected()), nil
}

// LatestFail records one failed delivery of the generation read, DEAD at the
// limit, in one statement.
func (e *executor) LatestFail(ctx context.Context, params *relaydriver.LatestFailParams) (*relaydriver.OutboxFailed, error) {
	op := fmt.Sprintf("latest fail %s/%s@%d", params.Target, params.Key, params.Generation)
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	var (
		res   relaydriver.OutboxFailed
		state string
	)
	err := e.db.QueryRow(ctx, latestQueries[qLatestFail], params.Target, params.Key, params.Generation, relaydriver.StoredText(params.Error),
		ts(params.NextAttemptAt), params.MaxAttempts, ts(params.Now)).Scan(&res.Attempts, &state)
	if errors.Is(err, pgx.ErrNoRows) {
		cur, gerr := e.LatestGet(ctx, params.Target, params.Key)
		if gerr != nil {
			return nil, gerr
		}
		return nil, fmt.Errorf("relaypgx: %s: %w: the row is %s at generation %d", op, relaytype.ErrConflict, cur.State, cur.Generation)
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
	l, err := scanLatest(e.db.QueryRow(ctx, latestQueries[qLatestGet], target, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("relaypgx: %s: %w", op, relaytype.ErrNotFound)
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	return l, nil
}

// LatestStats counts a target's rows per state.
func (e *executor) LatestStats(ctx context.Context, target string) (*relaydriver.OutboxStats, error) {
	op := "latest stats " + target
	r, err := e.db.Query(ctx, latestQueries[qLatestStats], target)
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
