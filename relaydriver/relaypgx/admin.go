package relaypgx

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Operator listings (docs/operations.md): the store side of
// relaydriver.AdminExecutor. Its SQL lives in admin.sql.

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
var adminQueries = sqlfile.MustParse("relaypgx: admin.sql", adminSQL, qAdminMessageList, qAdminMessageClasses)

var _ relaydriver.AdminExecutor = (*executor)(nil)

// MessageList returns one page of an operator listing in id order, without
// payloads. A Limit <= 0 means LimitDefault; above
// relaydriver.MessageListLimitMax it is refused.
func (e *executor) MessageList(ctx context.Context, params *relaydriver.MessageListParams) ([]*relaytype.Message, error) {
	op := "list messages of " + params.Queue
	limit := relaydriver.LimitOr(params.Limit, LimitDefault)
	if err := relaydriver.CheckMessageListLimit(limit); err != nil {
		return nil, fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	states := make([]string, 0, len(params.States))
	for _, s := range params.States {
		states = append(states, string(s))
	}
	classes := make([]string, 0, len(params.Classes))
	for _, c := range params.Classes {
		classes = append(classes, string(c))
	}
	r, err := e.db.Query(ctx, adminQueries[qAdminMessageList], params.Queue, states, classes,
		params.AckAbandoned, params.AfterID, limit, relaytype.MaxErrorText)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := collect(r, collectMessage)
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// MessageClasses returns the sorted distinct classes of the FAILED/DEAD
// messages among params.IDs in one query.
func (e *executor) MessageClasses(ctx context.Context, params *relaydriver.MessageClassesParams) ([]relaytype.ErrorClass, error) {
	op := "classes of messages of " + params.Queue
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	out := []relaytype.ErrorClass{}
	if len(params.IDs) == 0 {
		return out, nil
	}
	r, err := e.db.Query(ctx, adminQueries[qAdminMessageClasses], params.Queue, params.IDs)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err = pgx.AppendRows(out, r, pgx.RowTo[relaytype.ErrorClass])
	return out, mapErr(op, err)
}
