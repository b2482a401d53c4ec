package relaysqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// LimitDefault is the batch size MessageListUnfinished and MessageClaim use
// when the caller's Limit is zero or negative.
const LimitDefault = 100

// executor implements relaydriver.Executor. With tx nil it is the autocommit
// executor of GetExecutor: reads go to the read pool, writes to the single
// writer, multi-statement operations into their own IMMEDIATE transaction.
// With tx set everything runs in tx.
type executor struct {
	d  *Driver
	tx *sql.Tx
}

var _ relaydriver.Executor = (*executor)(nil)

// reader is where pure reads run: the read pool, or the transaction.
func (e *executor) reader() runner {
	if e.tx != nil {
		return runner{c: e.d.wstmts, tx: e.tx}
	}
	return runner{c: e.d.rstmts}
}

// writer is where single write statements run: the writer, or the transaction.
func (e *executor) writer() runner {
	return runner{c: e.d.wstmts, tx: e.tx}
}

// atomically runs fn in the executor's transaction, or in a new IMMEDIATE
// transaction on the writer when autocommit, and maps its error.
func (e *executor) atomically(ctx context.Context, op string, fn func(r runner) error) error {
	if e.tx != nil {
		return mapErr(op, fn(e.writer()))
	}
	tx, err := e.d.write.BeginTx(ctx, nil)
	if err != nil {
		return mapErr(op, err)
	}
	if err := fn(runner{c: e.d.wstmts, tx: tx}); err != nil {
		return mapErr(op, errors.Join(err, rollbackErr(tx)))
	}
	return mapErr(op, tx.Commit())
}

func rollbackErr(tx *sql.Tx) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

// rawDB is where raw SQL runs: reads on the read pool, Exec on the writer.
func (e *executor) rawDB(write bool) interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
} {
	switch {
	case e.tx != nil:
		return e.tx
	case write:
		return e.d.write
	default:
		return e.d.read
	}
}

// --- raw Querier -----------------------------------------------------------

// Exec runs raw SQL on the writer (or the transaction) and returns the rows
// affected.
func (e *executor) Exec(ctx context.Context, sqlText string, args ...any) (int64, error) {
	res, err := e.rawDB(true).ExecContext(ctx, sqlText, args...)
	if err != nil {
		return 0, mapErr("exec", err)
	}
	n, err := res.RowsAffected()
	return n, mapErr("exec", err)
}

// Query runs raw SQL on the read pool (or the transaction).
func (e *executor) Query(ctx context.Context, sqlText string, args ...any) (relaydriver.Rows, error) {
	rows, err := e.rawDB(false).QueryContext(ctx, sqlText, args...)
	if err != nil {
		return nil, mapErr("query", err)
	}
	return sqlRows{rows}, nil
}

// QueryRow runs raw SQL on the read pool (or the transaction); Scan returns
// relaytype.ErrNotFound when there was no row.
func (e *executor) QueryRow(ctx context.Context, sqlText string, args ...any) relaydriver.Row {
	return sqlRow{e.rawDB(false).QueryRowContext(ctx, sqlText, args...)}
}

type sqlRows struct{ r *sql.Rows }

func (r sqlRows) Next() bool             { return r.r.Next() }
func (r sqlRows) Scan(dest ...any) error { return mapErr("scan", r.r.Scan(dest...)) }
func (r sqlRows) Err() error             { return mapErr("rows", r.r.Err()) }
func (r sqlRows) Close() error           { return mapErr("rows close", r.r.Close()) }

type sqlRow struct{ r *sql.Row }

func (r sqlRow) Scan(dest ...any) error { return mapErr("query row", r.r.Scan(dest...)) }

// --- messages --------------------------------------------------------------

// MessageInsertMany inserts each message unless (queue, id) exists, or,
// for an input with an Identity, unless a message of its queue holds that
// identity (a duplicate); ID 0 allocates past both the queue's counter and
// its largest id, under the single writer. Inputs are decided one by one in
// input order, which is the contract's outcome by construction; an input
// with an identity is looked up before its id is allocated, so a duplicate
// takes no id. All inserts of one call commit together.
func (e *executor) MessageInsertMany(ctx context.Context, params []*relaydriver.MessageInsertParams) (*relaydriver.MessageInsertResult, error) {
	res := &relaydriver.MessageInsertResult{IDs: make([]int64, len(params)), Duplicate: make([]bool, len(params))}
	if err := relaydriver.CheckMessageInsertMany(params); err != nil {
		return nil, fmt.Errorf("relaysqlite: message insert: %w", err)
	}
	if len(params) == 0 {
		return res, nil
	}
	err := e.atomically(ctx, "message insert", func(q runner) error {
		inserted := 0
		for i, p := range params {
			id := p.ID
			var identity sql.NullString
			if p.Identity != "" {
				identity = sql.NullString{String: p.Identity, Valid: true}
				var (
					present bool
					owner   sql.NullInt64
				)
				if err := q.queryRow(ctx, qMessageInsertLookup, p.Queue, id, p.Identity).Scan(&present, &owner); err != nil {
					return fmt.Errorf("params[%d]: look up id %d and identity: %w", i, id, err)
				}
				switch {
				case present: // an explicit id already present: left as it was
					res.IDs[i] = id
					continue
				case owner.Valid:
					res.IDs[i], res.Duplicate[i] = owner.Int64, true
					continue
				}
			}
			if id == 0 {
				if err := q.queryRow(ctx, qSequenceNext, p.Queue).Scan(&id); err != nil {
					return fmt.Errorf("allocate id: %w", err)
				}
			}
			r, err := q.exec(ctx, qMessageInsert, p.Queue, id, p.Key, p.Payload,
				timeArg(p.ReceivedAt), timeArg(p.Now), identity)
			if err != nil {
				return fmt.Errorf("id %d: %w", id, err)
			}
			n, err := r.RowsAffected()
			if err != nil {
				return err
			}
			inserted += int(n)
			res.IDs[i] = id
		}
		res.Inserted = inserted
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// MessageGet returns one message or relaytype.ErrNotFound.
func (e *executor) MessageGet(ctx context.Context, queue string, id int64) (*relaytype.Message, error) {
	m, err := scanMessage(e.reader().queryRow(ctx, qMessageGet, queue, id))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("message get %s/%d", queue, id), err)
	}
	return m, nil
}

// MessageListUnfinished returns up to Limit PENDING/FAILED messages with
// id > AfterID, ascending. A Limit <= 0 means LimitDefault.
func (e *executor) MessageListUnfinished(ctx context.Context, params *relaydriver.MessageListUnfinishedParams) ([]*relaytype.Message, error) {
	limit := relaydriver.LimitOr(params.Limit, LimitDefault)
	rows, err := e.reader().query(ctx, qMessageListUnfinished, params.Queue, params.AfterID, limit)
	if err != nil {
		return nil, mapErr("message list unfinished", err)
	}
	out, err := collect(rows, scanMessage)
	return out, mapErr("message list unfinished", err)
}

// MessageBindIdentity binds Identity when the message has none (one UPDATE,
// seed 000 §2). A unique violation means another message owns it; that owner
// is returned. A message already bound keeps its identity and reports itself.
func (e *executor) MessageBindIdentity(ctx context.Context, params *relaydriver.MessageBindIdentityParams) (*relaydriver.MessageBindIdentityResult, error) {
	op := fmt.Sprintf("message bind identity %s/%d", params.Queue, params.ID)
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	var res *relaydriver.MessageBindIdentityResult
	err := e.atomically(ctx, op, func(q runner) error {
		var err error
		res, err = bindIdentity(ctx, q, params)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// MessageBindIdentities is MessageBindIdentity for each input in order, in one
// transaction (the caller's, or an IMMEDIATE one of its own): SQLite has one
// writer and no network round trips, so a loop of the single binding is as
// cheap as a set-based statement and is the in-order semantics by
// construction. On error nothing of an own transaction is committed.
func (e *executor) MessageBindIdentities(ctx context.Context, params *relaydriver.MessageBindIdentitiesParams) (*relaydriver.MessageBindIdentitiesResult, error) {
	op := fmt.Sprintf("message bind identities of %d messages of %s", len(params.IDs), params.Queue)
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	res := &relaydriver.MessageBindIdentitiesResult{
		Owners: make([]int64, len(params.IDs)), Identities: make([]string, len(params.IDs)),
	}
	if len(params.IDs) == 0 {
		return res, nil
	}
	err := e.atomically(ctx, op, func(q runner) error {
		for i, id := range params.IDs {
			r, err := bindIdentity(ctx, q, &relaydriver.MessageBindIdentityParams{
				Queue: params.Queue, ID: id, Identity: params.Identities[i],
			})
			if err != nil {
				return fmt.Errorf("message %d: %w", id, err)
			}
			res.Owners[i], res.Identities[i] = r.OwnerID, r.Identity
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// bindIdentity is one binding of MessageBindIdentity, run with q.
func bindIdentity(ctx context.Context, q runner, params *relaydriver.MessageBindIdentityParams) (*relaydriver.MessageBindIdentityResult, error) {
	r, err := q.exec(ctx, qMessageBindIdentity, params.Queue, params.ID, params.Identity)
	if err != nil {
		if !isUniqueViolation(err) {
			return nil, err
		}
		// SQLite aborts only the statement, so the transaction goes on.
		var owner int64
		if err := q.queryRow(ctx, qMessageIdentityOwner, params.Queue, params.Identity).Scan(&owner); err != nil {
			return nil, fmt.Errorf("look up identity owner: %w", err)
		}
		return &relaydriver.MessageBindIdentityResult{OwnerID: owner, Identity: params.Identity}, nil
	}
	if n, err := r.RowsAffected(); err != nil {
		return nil, err
	} else if n == 1 {
		return &relaydriver.MessageBindIdentityResult{OwnerID: params.ID, Identity: params.Identity}, nil
	}
	// Already bound (to this identity on a retry, or to another one), or absent.
	var existing sql.NullString
	if err := q.queryRow(ctx, qMessageIdentityOf, params.Queue, params.ID).Scan(&existing); err != nil {
		return nil, err
	}
	return &relaydriver.MessageBindIdentityResult{OwnerID: params.ID, Identity: existing.String}, nil
}

// guardFailed explains an UPDATE of a state guard that touched no row:
// ErrNotFound when the message does not exist, ErrConflict otherwise.
func (e *executor) guardFailed(ctx context.Context, op, queue string, id int64) error {
	var n int
	if err := e.reader().queryRow(ctx, qMessageExistsByID, queue, id).Scan(&n); err != nil {
		return mapErr(op, err)
	}
	if n == 0 {
		return fmt.Errorf("relaysqlite: %s: %w", op, relaytype.ErrNotFound)
	}
	return fmt.Errorf("relaysqlite: %s: %w", op, relaytype.ErrConflict)
}

// MessageComplete moves an unfinished message to a terminal state with its
// acknowledgement intent in one UPDATE, clearing the lease.
func (e *executor) MessageComplete(ctx context.Context, params *relaydriver.MessageCompleteParams) error {
	op := fmt.Sprintf("message complete %s/%d", params.Queue, params.ID)
	if err := params.Check(); err != nil {
		return fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	q, args := completeStatement(params)
	r, err := e.writer().exec(ctx, q, args...)
	if err != nil {
		return mapErr(op, err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return mapErr(op, err)
	} else if n == 0 {
		return e.guardFailed(ctx, op, params.Queue, params.ID)
	}
	return nil
}

// completeStatement is the statement that finishes p and its arguments:
// MessageComplete, or MessageDelete when p.Delete.
func completeStatement(p *relaydriver.MessageCompleteParams) (string, []any) {
	if p.Delete {
		return qMessageDelete, []any{p.Queue, p.ID, p.LeaseOwner}
	}
	var ackNext any
	if p.AckIntent {
		ackNext = timeArg(p.Now)
	}
	return qMessageComplete, []any{p.Queue, p.ID, string(p.State), string(p.ErrorClass), relaydriver.StoredText(p.LastError),
		ackNext, timeArg(p.Now), p.LeaseOwner, boolArg(p.CountAttempt)}
}

// MessageCompleteMany runs the MessageComplete statement once per message in
// one transaction (the executor's, or its own IMMEDIATE one, rolled back on a
// refusal). SQLite is in-process with a single writer, so one statement per row
// costs no round trip; the first refused row ends the call.
func (e *executor) MessageCompleteMany(ctx context.Context, params []*relaydriver.MessageCompleteParams) error {
	if len(params) == 0 {
		return nil
	}
	op := fmt.Sprintf("complete %d messages", len(params))
	for _, p := range params {
		if err := p.Check(); err != nil {
			return fmt.Errorf("relaysqlite: message complete %s/%d: %w", p.Queue, p.ID, err)
		}
	}
	return e.atomically(ctx, op, func(q runner) error {
		for _, p := range params {
			stmt, args := completeStatement(p)
			n, err := q.affected(ctx, stmt, args...)
			if err != nil {
				return err
			}
			if n == 0 {
				return e.guardFailed(ctx, fmt.Sprintf("message complete %s/%d", p.Queue, p.ID), p.Queue, p.ID)
			}
		}
		return nil
	})
}

// MessageFail records one failed attempt and returns the new attempt count.
func (e *executor) MessageFail(ctx context.Context, params *relaydriver.MessageFailParams) (int, error) {
	op := fmt.Sprintf("message fail %s/%d", params.Queue, params.ID)
	if err := params.Check(); err != nil {
		return 0, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	var attempts int
	err := e.writer().queryRow(ctx, qMessageFail, params.Queue, params.ID,
		string(params.ErrorClass), relaydriver.StoredText(params.LastError), timeArg(params.NextAttemptAt),
		timeArg(params.Now), params.LeaseOwner).Scan(&attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, e.guardFailed(ctx, op, params.Queue, params.ID)
	}
	if err != nil {
		return 0, mapErr(op, err)
	}
	return attempts, nil
}

// MessageExhaust moves a FAILED message with attempts >= MaxAttempts to
// DEAD(EXHAUSTED), keeping LastError.
func (e *executor) MessageExhaust(ctx context.Context, params *relaydriver.MessageExhaustParams) error {
	op := fmt.Sprintf("message exhaust %s/%d", params.Queue, params.ID)
	if err := params.Check(); err != nil {
		return fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	var ackNext any
	if params.AckIntent {
		ackNext = timeArg(params.Now)
	}
	r, err := e.writer().exec(ctx, qMessageExhaust, params.Queue, params.ID, params.MaxAttempts,
		ackNext, timeArg(params.Now))
	if err != nil {
		return mapErr(op, err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return mapErr(op, err)
	} else if n == 0 {
		return e.guardFailed(ctx, op, params.Queue, params.ID)
	}
	return nil
}

// MessageClaim leases up to Limit (LimitDefault when <= 0) ready messages,
// ascending by id. The single
// writer serialises claims: one short IMMEDIATE transaction selects the ready
// rows and sets their lease (SQLite has no SKIP LOCKED and needs none).
func (e *executor) MessageClaim(ctx context.Context, params *relaydriver.MessageClaimParams) ([]*relaytype.Message, error) {
	op := "message claim " + params.Queue
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	limit := relaydriver.LimitOr(params.Limit, LimitDefault)
	name := qMessageClaim
	if params.PerKey {
		name = qMessageClaimPerKey
	}
	var out []*relaytype.Message
	err := e.atomically(ctx, op, func(q runner) error {
		rows, err := q.query(ctx, name, params.Queue, params.Owner,
			timeArg(params.LeaseUntil), timeArg(params.Now), limit)
		if err != nil {
			return err
		}
		out, err = collect(rows, scanMessage)
		return err
	})
	if err != nil {
		return nil, err
	}
	// RETURNING has no defined order.
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// MessageLeaseRenew extends Owner's leases on params.IDs in one statement and
// returns the ids no longer leased to Owner. Under the single writer no row
// is ever in doubt, so every input is either renewed or lost.
func (e *executor) MessageLeaseRenew(ctx context.Context, params *relaydriver.MessageLeaseRenewParams) (*relaydriver.MessageLeaseRenewResult, error) {
	op := fmt.Sprintf("renew %d leases of %s", len(params.IDs), params.Queue)
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	if len(params.IDs) == 0 {
		return &relaydriver.MessageLeaseRenewResult{}, nil
	}
	ids, err := json.Marshal(params.IDs)
	if err != nil {
		return nil, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	rows, err := e.writer().query(ctx, qMessageLeaseRenew, params.Queue, params.Owner,
		timeArg(params.LeaseUntil), string(ids))
	if err != nil {
		return nil, mapErr(op, err)
	}
	renewed, err := collect(rows, scanInt64)
	if err != nil {
		return nil, mapErr(op, err)
	}
	slices.Sort(renewed)
	res := &relaydriver.MessageLeaseRenewResult{}
	for _, id := range params.IDs {
		if _, ok := slices.BinarySearch(renewed, id); !ok {
			res.Lost = append(res.Lost, id)
		}
	}
	sort.Slice(res.Lost, func(i, j int) bool { return res.Lost[i] < res.Lost[j] })
	return res, nil
}

// MessageLeaseRelease clears every lease Owner holds on unfinished messages
// of the queue.
func (e *executor) MessageLeaseRelease(ctx context.Context, params *relaydriver.MessageLeaseReleaseParams) (int, error) {
	op := fmt.Sprintf("release leases of %q on %s", params.Owner, params.Queue)
	if err := params.Check(); err != nil {
		return 0, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	n, err := e.writer().affected(ctx, qMessageLeaseRelease, params.Queue, params.Owner)
	return int(n), mapErr(op, err)
}

// MessageReplay moves FAILED/DEAD messages of the given classes (and ids, when
// IDs is non-empty) back to PENDING, keeping the identity (seed 000 §9.1).
func (e *executor) MessageReplay(ctx context.Context, params *relaydriver.MessageReplayParams) (int, error) {
	op := "message replay " + params.Queue
	if err := params.Check(); err != nil {
		return 0, fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	classes, err := json.Marshal(params.Classes)
	if err != nil {
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
	r, err := e.writer().exec(ctx, qMessageReplay, params.Queue, timeArg(params.Now), string(classes), ids)
	if err != nil {
		return 0, mapErr(op, err)
	}
	n, err := r.RowsAffected()
	return int(n), mapErr(op, err)
}

// MessageStats aggregates the queue in one statement (one snapshot).
func (e *executor) MessageStats(ctx context.Context, queue string) (*relaydriver.MessageStats, error) {
	op := "message stats " + queue
	rows, err := e.reader().query(ctx, qMessageStats, queue)
	if err != nil {
		return nil, mapErr(op, err)
	}
	// One row per state present: (state, count, smallest enqueued_at of the
	// unfinished, largest id).
	type stateRow struct {
		state        string
		count, maxID int64
		minEnq       sql.NullInt64
	}
	got, err := collect(rows, func(s scanner) (r stateRow, err error) {
		err = s.Scan(&r.state, &r.count, &r.minEnq, &r.maxID)
		return r, err
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	st := relaydriver.NewMessageStats()
	var oldest int64
	for _, r := range got {
		st.Counts[relaytype.State(r.state)] = r.count
		if r.minEnq.Valid && (oldest == 0 || r.minEnq.Int64 < oldest) {
			oldest = r.minEnq.Int64
			st.OldestUnfinishedEnqueuedAt = timeOf(r.minEnq)
		}
		st.MaxID = max(st.MaxID, r.maxID)
	}
	return st, nil
}

// MessageExists reports whether the queue has any message.
func (e *executor) MessageExists(ctx context.Context, queue string) (bool, error) {
	var ok bool
	err := e.reader().queryRow(ctx, qMessageExists, queue).Scan(&ok)
	return ok, mapErr("message exists "+queue, err)
}

// --- cursor and holes --------------------------------------------------------

// CursorGet returns the queue's cursor or relaytype.ErrNotFound.
func (e *executor) CursorGet(ctx context.Context, queue string) (*relaytype.Cursor, error) {
	var (
		c                        relaytype.Cursor
		holeSince, seededAt, upd sql.NullInt64
	)
	err := e.reader().queryRow(ctx, qCursorGet, queue).
		Scan(&c.Queue, &c.Watermark, &holeSince, &seededAt, &c.SeedMode, &upd)
	if err != nil {
		return nil, mapErr("cursor get "+queue, err)
	}
	c.HoleSince, c.SeededAt, c.UpdatedAt = timeOf(holeSince), timeOf(seededAt), timeOf(upd)
	return &c, nil
}

// CursorSave upserts (W, holeSince), never touching SeededAt/SeedMode.
func (e *executor) CursorSave(ctx context.Context, params *relaydriver.CursorSaveParams) error {
	op := "cursor save " + params.Queue
	if err := params.Check(); err != nil {
		return fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	_, err := e.writer().exec(ctx, qCursorSave, params.Queue, params.Watermark,
		timeArg(params.HoleSince), timeArg(params.Now))
	return mapErr(op, err)
}

// CursorSeed stores the first watermark; the refusal check and the insert are
// one statement (seed 000 §4.3).
func (e *executor) CursorSeed(ctx context.Context, params *relaydriver.CursorSeedParams) error {
	op := "cursor seed " + params.Queue
	if err := params.Check(); err != nil {
		return fmt.Errorf("relaysqlite: %s: %w", op, err)
	}
	r, err := e.writer().exec(ctx, qCursorSeed, params.Queue, params.Watermark,
		params.Mode, timeArg(params.Now))
	if err != nil {
		return mapErr(op, err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return mapErr(op, err)
	} else if n == 0 {
		return fmt.Errorf("relaysqlite: %s: %w", op, relaytype.ErrSeedRefused)
	}
	return nil
}

// HoleInsert logs a permanent hole; inserting it again changes nothing.
func (e *executor) HoleInsert(ctx context.Context, hole *relaytype.Hole) error {
	if err := relaydriver.CheckHoleInsert(hole); err != nil {
		return fmt.Errorf("relaysqlite: hole insert: %w", err)
	}
	op := fmt.Sprintf("hole insert %s/%d", hole.Queue, hole.ID)

	_, err := e.writer().exec(ctx, qHoleInsert, hole.Queue, hole.ID,
		timeArg(hole.FirstSeenAt), timeArg(hole.ReleasedAt))
	return mapErr(op, err)
}

// HoleList returns the queue's permanent holes in id order.
func (e *executor) HoleList(ctx context.Context, queue string) ([]*relaytype.Hole, error) {
	return e.holes(ctx, "hole list "+queue, qHoleList, queue)
}

// HoleListUnfound returns up to limit holes not found late yet, released at
// or after releasedSince, in id order.
func (e *executor) HoleListUnfound(ctx context.Context, queue string, releasedSince time.Time, limit int) ([]*relaytype.Hole, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("relaysqlite: hole list unfound %s: limit %d must be positive", queue, limit)
	}
	return e.holes(ctx, "hole list unfound "+queue, qHoleListUnfound, queue, timeArg(releasedSince), limit)
}

// HoleListFound returns the holes whose row was found late, in id order.
func (e *executor) HoleListFound(ctx context.Context, queue string) ([]*relaytype.Hole, error) {
	return e.holes(ctx, "hole list found "+queue, qHoleListFound, queue)
}

// HoleMarkFound sets FoundAt once; false when absent or already found.
func (e *executor) HoleMarkFound(ctx context.Context, queue string, id int64, at time.Time) (bool, error) {
	op := fmt.Sprintf("hole mark found %s/%d", queue, id)
	r, err := e.writer().exec(ctx, qHoleMarkFound, queue, id, timeArg(at))
	if err != nil {
		return false, mapErr(op, err)
	}
	n, err := r.RowsAffected()
	return n == 1, mapErr(op, err)
}

// HoleMarkIngested sets IngestedAt and IngestedID once on a found hole; false
// when absent, not found or already ingested.
func (e *executor) HoleMarkIngested(ctx context.Context, queue string, id, messageID int64, at time.Time) (bool, error) {
	op := fmt.Sprintf("hole mark ingested %s/%d", queue, id)
	r, err := e.writer().exec(ctx, qHoleMarkIngested, queue, id, timeArg(at), messageID)
	if err != nil {
		return false, mapErr(op, err)
	}
	n, err := r.RowsAffected()
	return n == 1, mapErr(op, err)
}

// holes runs a hole query selecting the full hole column list.
func (e *executor) holes(ctx context.Context, op, name string, args ...any) ([]*relaytype.Hole, error) {
	rows, err := e.reader().query(ctx, name, args...)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := collect(rows, func(s scanner) (*relaytype.Hole, error) {
		var (
			h                                relaytype.Hole
			first, released, found, ingested sql.NullInt64
			ingestedID                       sql.NullInt64
		)
		if err := s.Scan(&h.Queue, &h.ID, &first, &released, &found, &ingested, &ingestedID); err != nil {
			return nil, err
		}
		h.FirstSeenAt, h.ReleasedAt = timeOf(first), timeOf(released)
		h.FoundAt, h.IngestedAt, h.IngestedID = timeOf(found), timeOf(ingested), ingestedID.Int64
		return &h, nil
	})
	return out, mapErr(op, err)
}

// --- scanning ----------------------------------------------------------------

type scanner interface{ Scan(dest ...any) error }

// scanMessage reads the column list every message query selects (see
// queries.sql), converting NULL to zero values.
func scanMessage(s scanner) (*relaytype.Message, error) {
	var (
		m                                                    relaytype.Message
		state                                                string
		nextAt, recvAt, enqAt, updAt, ackNext, ackAt, ackAbn sql.NullInt64
		leaseExp                                             sql.NullInt64
		identity                                             sql.NullString
	)
	err := s.Scan(&m.Queue, &m.ID, &m.Key, &state, &m.Attempts, &nextAt, &m.ErrorClass, &m.LastError,
		&identity, &m.Payload, &recvAt, &enqAt, &updAt,
		&ackNext, &ackAt, &m.AckAttempts, &ackAbn, &m.AckAbandonReason,
		&m.LeaseOwner, &leaseExp)
	if err != nil {
		return nil, err
	}
	m.State = relaytype.State(state)
	m.NextAttemptAt = timeOf(nextAt)

	m.IdentityKey = identity.String
	m.ReceivedAt, m.EnqueuedAt, m.UpdatedAt = timeOf(recvAt), timeOf(enqAt), timeOf(updAt)
	m.AckNextAt, m.AckAt, m.AckAbandonedAt = timeOf(ackNext), timeOf(ackAt), timeOf(ackAbn)
	m.LeaseExpiresAt = timeOf(leaseExp)
	return &m, nil
}

// collect reads every row of rows with scan, in order, and closes rows: the
// one scan loop of the driver. No rows give a nil slice. The caller maps the
// error.
func collect[T any](rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// scanInt64 reads a row of one integer column.
func scanInt64(s scanner) (v int64, err error) {
	err = s.Scan(&v)
	return v, err
}

// --- transactions ------------------------------------------------------------

// txExecutor is the ExecutorTx of Begin: every method runs in its *sql.Tx.
// Not safe for concurrent use (one transaction, one goroutine).
type txExecutor struct {
	executor
}

var _ relaydriver.ExecutorTx = (*txExecutor)(nil)

// Savepoint opens a savepoint; name must be a plain identifier.
func (t *txExecutor) Savepoint(ctx context.Context, name string) error {
	return t.identExec(ctx, qSavepoint, "savepoint", name)
}

// RollbackTo undoes the work since the savepoint (which stays open).
func (t *txExecutor) RollbackTo(ctx context.Context, name string) error {
	return t.identExec(ctx, qRollbackToSavepoint, "rollback to savepoint", name)
}

// ReleaseSavepoint forgets the savepoint, keeping its work.
func (t *txExecutor) ReleaseSavepoint(ctx context.Context, name string) error {
	return t.identExec(ctx, qReleaseSavepoint, "release savepoint", name)
}

func (t *txExecutor) identExec(ctx context.Context, q, op, name string) error {
	sqlText, err := identQuery(q, name)
	if err != nil {
		return err
	}
	_, err = t.tx.ExecContext(ctx, sqlText)
	return mapErr(op+" "+name, err)
}

// Commit commits the transaction.
func (t *txExecutor) Commit(ctx context.Context) error { return mapErr("commit", t.tx.Commit()) }

// Rollback rolls the transaction back. After Commit or an earlier Rollback it
// does nothing and returns nil, so `defer tx.Rollback(ctx)` is always safe.
func (t *txExecutor) Rollback(ctx context.Context) error {
	return mapErr("rollback", rollbackErr(t.tx))
}

// Unwrap returns the *sql.Tx.
func (t *txExecutor) Unwrap() any { return t.tx }
