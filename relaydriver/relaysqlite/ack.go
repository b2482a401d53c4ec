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

// Acknowledgement write-back (seed 000 §6; docs/ack.md): the store side of
// relaydriver.AckExecutor. Its SQL lives in ack.sql and runs as plain SQL text
// (not through the statement cache of queries.sql): the scan runs once per
// poll, far from the pump's hot path.

// ackSQL holds the acknowledgement statements; see ack.sql.
//
//go:embed ack.sql
var ackSQL string

// Query names in ack.sql, checked at init.
const (
	qAckScan     = "AckScan"
	qAckDone     = "AckDone"
	qAckRetry    = "AckRetry"
	qAckAbandon  = "AckAbandon"
	qAckReopen   = "AckReopen"
	qAckRowState = "AckRowState"
	qAckStats    = "AckStats"
)

// ackQueries maps an acknowledgement query name to its SQL.
var ackQueries = sqlfile.MustParse("relaysqlite/ack.sql", ackSQL,
	qAckScan, qAckDone, qAckRetry, qAckAbandon, qAckReopen, qAckRowState, qAckStats)

var _ relaydriver.AckExecutor = (*executor)(nil)

// AckScan returns up to Limit messages owing an acknowledgement, in the seed's
// order (attempts, then id). A Limit <= 0 means LimitDefault.
func (e *executor) AckScan(ctx context.Context, params *relaydriver.AckScanParams) ([]*relaytype.Message, error) {
	op := "ack scan of " + params.Queue
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	limit := relaydriver.LimitOr(params.Limit, LimitDefault)
	rows, err := e.rawDB(false).QueryContext(ctx, ackQueries[qAckScan], params.Queue,
		timeArg(params.Now), timeArg(params.Now.Add(-params.R)), limit)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := collect(rows, scanMessage)
	return out, mapErr(op, err)
}

// AckDone sets ack_at = Now on the given rows still owing an acknowledgement,
// in one statement, and returns how many it set.
func (e *executor) AckDone(ctx context.Context, params *relaydriver.AckDoneParams) (int, error) {
	op := "ack done on " + params.Queue
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
	return e.ackExec(ctx, op, qAckDone, params.Queue, string(ids), timeArg(params.Now))
}

// AckRetry records one transient failure. A row that does not owe an
// acknowledgement (confirmed, abandoned, not terminal) is relaytype.ErrConflict;
// an unknown row is relaytype.ErrNotFound.
func (e *executor) AckRetry(ctx context.Context, params *relaydriver.AckRetryParams) error {
	op := fmt.Sprintf("ack retry %s/%d", params.Queue, params.ID)
	if err := params.Check(); err != nil {
		return fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	n, err := e.ackExec(ctx, op, qAckRetry, params.Queue, params.ID, timeArg(params.NextAt))
	if err != nil {
		return err
	}
	if n == 0 {
		return e.ackRefused(ctx, op, params.Queue, params.ID)
	}
	return nil
}

// AckAbandon stops automatic retries of one row with Reason; ack_at stays
// NULL. Refusals as AckRetry.
func (e *executor) AckAbandon(ctx context.Context, params *relaydriver.AckAbandonParams) error {
	op := fmt.Sprintf("ack abandon %s/%d", params.Queue, params.ID)
	if err := params.Check(); err != nil {
		return fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	n, err := e.ackExec(ctx, op, qAckAbandon, params.Queue, params.ID, params.Reason, timeArg(params.Now))
	if err != nil {
		return err
	}
	if n == 0 {
		return e.ackRefused(ctx, op, params.Queue, params.ID)
	}
	return nil
}

// AckReopen clears abandonments (by IDs, or with IDs empty by Reason) so the
// rows are due at once, and returns how many it reopened.
func (e *executor) AckReopen(ctx context.Context, params *relaydriver.AckReopenParams) (int, error) {
	op := "ack reopen on " + params.Queue
	if err := params.Check(); err != nil {
		return 0, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	var ids any
	if len(params.IDs) > 0 {
		b, err := json.Marshal(params.IDs)
		if err != nil {
			return 0, fmt.Errorf("relaysqlite: %s: %w", op, err)
		}
		ids = string(b)
	}
	return e.ackExec(ctx, op, qAckReopen, params.Queue, ids, params.Reason, timeArg(params.Now))
}

// ackExec runs one acknowledgement write on the writer (or the transaction)
// and returns the rows it changed.
func (e *executor) ackExec(ctx context.Context, op, name string, args ...any) (int, error) {
	res, err := e.rawDB(true).ExecContext(ctx, ackQueries[name], args...)
	if err != nil {
		return 0, mapErr(op, err)
	}
	n, err := res.RowsAffected()
	return int(n), mapErr(op, err)
}

// ackRefused explains a guarded update that changed nothing: ErrNotFound for
// an unknown row, ErrConflict for a row that does not owe an acknowledgement.
func (e *executor) ackRefused(ctx context.Context, op, queue string, id int64) error {
	var (
		state            string
		acked, abandoned bool
	)
	err := e.rawDB(false).QueryRowContext(ctx, ackQueries[qAckRowState], queue, id).Scan(&state, &acked, &abandoned)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("relaysqlite: %s: %w", op, relaytype.ErrNotFound)
	}
	if err != nil {
		return mapErr(op, err)
	}
	return fmt.Errorf("relaysqlite: %s: %w: the row owes no acknowledgement (state %s, acknowledged %t, abandoned %t)",
		op, relaytype.ErrConflict, state, acked, abandoned)
}

// AckStats counts the queue's terminal messages by acknowledgement state.
func (e *executor) AckStats(ctx context.Context, queue string) (*relaydriver.AckStats, error) {
	st := &relaydriver.AckStats{}
	err := e.rawDB(false).QueryRowContext(ctx, ackQueries[qAckStats], queue).Scan(&st.Owing, &st.Abandoned, &st.Acknowledged)
	if err != nil {
		return nil, mapErr("ack stats of "+queue, err)
	}
	return st, nil
}
