package relaysqlite

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Operator listings (docs/operations.md): the store side of
// relaydriver.AdminExecutor. Its SQL lives in admin.sql and runs as plain SQL
// text (not through the statement cache of queries.sql): operators call it
// rarely.

// adminSQL holds the operator statements; see admin.sql.
//
//go:embed admin.sql
var adminSQL string

// Query names in admin.sql, checked at init.
const (
	qAdminMessageList    = "MessageList"
	qAdminMessageClasses = "MessageClasses"
)

// adminQueries maps an operator query name to its SQL.
var adminQueries = sqlfile.MustParse("relaysqlite/admin.sql", adminSQL, qAdminMessageList, qAdminMessageClasses)

var _ relaydriver.AdminExecutor = (*executor)(nil)

// MessageList returns one page of an operator listing in id order, without
// payloads. A Limit <= 0 means LimitDefault; above
// relaydriver.MessageListLimitMax it is refused.
func (e *executor) MessageList(ctx context.Context, params *relaydriver.MessageListParams) ([]*relaytype.Message, error) {
	op := "list messages of " + params.Queue
	limit := relaydriver.LimitOr(params.Limit, LimitDefault)
	if err := relaydriver.CheckMessageListLimit(limit); err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	states, err := jsonList(params.States)
	if err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	classes, err := jsonList(params.Classes)
	if err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	abandoned := 0
	if params.AckAbandoned {
		abandoned = 1
	}
	rows, err := e.rawDB(false).QueryContext(ctx, adminQueries[qAdminMessageList], params.Queue, states, classes,
		abandoned, params.AfterID, limit, relaytype.MaxErrorText)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := collect(rows, scanMessage)
	return out, mapErr(op, err)
}

// jsonList encodes a non-empty filter list as a JSON array; an empty one is
// NULL (no filter).
func jsonList[T ~string](xs []T) (any, error) {
	if len(xs) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(xs)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// MessageClasses returns the sorted distinct classes of the FAILED/DEAD
// messages among params.IDs in one query.
func (e *executor) MessageClasses(ctx context.Context, params *relaydriver.MessageClassesParams) ([]relaytype.ErrorClass, error) {
	op := "classes of messages of " + params.Queue
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	out := []relaytype.ErrorClass{}
	if len(params.IDs) == 0 {
		return out, nil
	}
	ids, err := json.Marshal(params.IDs)
	if err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	rows, err := e.rawDB(false).QueryContext(ctx, adminQueries[qAdminMessageClasses], params.Queue, string(ids))
	if err != nil {
		return nil, mapErr(op, err)
	}
	classes, err := collect(rows, func(s scanner) (c relaytype.ErrorClass, err error) {
		err = s.Scan(&c)
		return c, err
	})
	return append(out, classes...), mapErr(op, err)
}
