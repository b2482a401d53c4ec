package flightstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Request types (Request.Type) and states (Request.State) of REQ_TRACK.
const (
	RequestTypeSCHD = "SCHD" // a daily-schedule request; Scope is the operating day YYYYMMDD
	RequestTypeREFD = "REFD" // a reference-data request; Scope is the reference type

	RequestStatePending = "PENDING" // registered, not yet confirmed written to COUTMSGS
	RequestStateSent    = "SENT"    // written to COUTMSGS (OutboxID), awaiting the response
	RequestStateDone    = "DONE"    // answered and the answer processed
	RequestStateExpired = "EXPIRED" // superseded by a newer request, or timed out
)

// Request is one REQ_TRACK row (seed 000 §7.2, G-REQ-TRACK): PENDING → SENT →
// DONE | EXPIRED. At most one request per (Type, Scope, Sender) is open
// (PENDING or SENT).
type Request struct {
	// ID is the row's id, assigned by RequestRegister.
	ID int64
	// Type is RequestTypeSCHD or RequestTypeREFD.
	Type string
	// Scope is what the request covers: the operating day (YYYYMMDD) of a SCHD
	// request, the reference type of a REFD one.
	Scope string
	// Sender is the sending system the request is tracked for.
	Sender string
	// SEQN is our outbound message's SEQN, echoed back by the response as
	// RQSQ; unique per Sender over every retained row.
	SEQN string
	// State is PENDING, SENT, DONE or EXPIRED.
	State string
	// OutboxID is the COUTMSGS.ID of the written request; 0 until SENT.
	OutboxID int64
	// CreatedAt is the registration time; SentAt the SENT time (zero before);
	// DoneAt the time it was closed, DONE or EXPIRED (zero while open).
	CreatedAt, SentAt, DoneAt time.Time
}

// RequestRegister registers a new PENDING request for r's Type, Scope, Sender
// and SEQN (the other fields of r are ignored) and returns it. It first
// expires the open request of the same (Type, Scope, Sender), if any (seed 000
// §7.2): registrations of one triple are serialised by a transaction-scoped
// advisory lock, so concurrent registrations all succeed, in some order, and
// leave exactly one open request. A SEQN already used by the Sender wraps
// relaytype.ErrConflict. One round trip; atomic even outside a transaction.
func RequestRegister(ctx context.Context, q Querier, r *Request, now time.Time) (*Request, error) {
	op := fmt.Sprintf("register %s request %s/%s SEQN %s", r.Type, r.Scope, r.Sender, r.SEQN)
	if r.Type != RequestTypeSCHD && r.Type != RequestTypeREFD {
		return nil, fmt.Errorf("flightstore: %s: type must be SCHD or REFD", op)
	}
	if r.Scope == "" || r.Sender == "" || r.SEQN == "" {
		return nil, fmt.Errorf("flightstore: %s: Scope, Sender and SEQN are required", op)
	}
	b := &pgx.Batch{}
	b.Queue(stmts.requestLock, r.Type, r.Scope, r.Sender)
	b.Queue(stmts.requestExpireOpen, r.Type, r.Scope, r.Sender, now)
	b.Queue(stmts.requestInsert, r.Type, r.Scope, r.Sender, r.SEQN, now)
	br := q.SendBatch(ctx, b)
	out := &Request{Type: r.Type, Scope: r.Scope, Sender: r.Sender, SEQN: r.SEQN, State: RequestStatePending, CreatedAt: now}
	err := func() error {
		if _, err := br.Exec(); err != nil {
			return mapErr(op+": lock", err)
		}
		if _, err := br.Exec(); err != nil {
			return mapErr(op+": expire open request", err)
		}
		return mapErr(op, br.QueryRow().Scan(&out.ID))
	}()
	if cerr := br.Close(); err == nil && cerr != nil {
		err = mapErr(op, cerr)
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RequestMarkSent moves request id from PENDING to SENT once its message is
// confirmed written to COUTMSGS as outboxID (> 0). A request that is not
// PENDING (expired meanwhile, or unknown) wraps ErrNoRequest and is left as
// it is.
func RequestMarkSent(ctx context.Context, q Querier, id, outboxID int64, now time.Time) error {
	op := fmt.Sprintf("mark request %d sent", id)
	if outboxID <= 0 {
		return fmt.Errorf("flightstore: %s: outbox id %d must be positive", op, outboxID)
	}
	tag, err := q.Exec(ctx, stmts.requestMarkSent, id, outboxID, now)
	if err != nil {
		return mapErr(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("flightstore: %s: not PENDING: %w", op, ErrNoRequest)
	}
	return nil
}

// RequestFindOpen returns the open (PENDING or SENT) request of type typ and
// sender whose SEQN is seqn — the response's RQSQ — or an error wrapping
// ErrNoRequest. The row is locked FOR UPDATE until the caller's transaction
// ends, so RequestExpire cannot close it between this call and RequestDone in
// the same transaction; only a SENT request can be completed (RequestDone),
// so the caller must check State.
func RequestFindOpen(ctx context.Context, q Querier, typ, sender, seqn string) (*Request, error) {
	op := fmt.Sprintf("find open %s request of %s SEQN %s", typ, sender, seqn)
	r, err := scanRequest(q.QueryRow(ctx, stmts.requestFindOpen, typ, sender, seqn))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("flightstore: %s: %w", op, ErrNoRequest)
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	return r, nil
}

// RequestDone closes request id as DONE, only from SENT; it reports false,
// changing nothing, when the request was not SENT (closed meanwhile, still
// PENDING or unknown). Call it after the response's data is processed, in the
// same transaction (seed 000 §7.2).
func RequestDone(ctx context.Context, q Querier, id int64, now time.Time) (bool, error) {
	tag, err := q.Exec(ctx, stmts.requestDone, id, now)
	if err != nil {
		return false, mapErr(fmt.Sprintf("close request %d", id), err)
	}
	return tag.RowsAffected() == 1, nil
}

// RequestExpire closes as EXPIRED (DoneAt = now) every SENT request sent
// before sentBefore and every PENDING request registered before it, and
// returns how many it closed.
func RequestExpire(ctx context.Context, q Querier, sentBefore, now time.Time) (int, error) {
	tag, err := q.Exec(ctx, stmts.requestExpire, sentBefore, now)
	if err != nil {
		return 0, mapErr("expire requests", err)
	}
	return int(tag.RowsAffected()), nil
}

// RequestPending returns the PENDING requests, oldest first (for the sender
// job).
func RequestPending(ctx context.Context, q Querier) ([]*Request, error) {
	rows, err := q.Query(ctx, stmts.requestPending)
	if err != nil {
		return nil, mapErr("pending requests", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Request, error) { return scanRequest(row) })
	if err != nil {
		return nil, mapErr("pending requests", err)
	}
	return out, nil
}

// RequestPurgeClosed deletes at most limit (> 0) closed (DONE or EXPIRED)
// requests closed before `before`, oldest first, and returns how many it
// deleted (G-REQ-TRACK-RETENTION). Their SEQNs become usable again.
func RequestPurgeClosed(ctx context.Context, q Querier, before time.Time, limit int) (int, error) {
	return purge(ctx, q, "purge closed requests", stmts.requestPurgeClosed, limit, before, limit)
}

// scanRequest scans the REQ_TRACK columns of RequestFindOpen / RequestPending.
func scanRequest(row pgx.Row) (*Request, error) {
	var (
		r                   Request
		outbox              pgtype.Int8
		created, sent, done pgtype.Timestamptz
	)
	if err := row.Scan(&r.ID, &r.Type, &r.Scope, &r.Sender, &r.SEQN, &r.State, &outbox, &created, &sent, &done); err != nil {
		return nil, err
	}
	r.OutboxID = outbox.Int64
	r.CreatedAt, r.SentAt, r.DoneAt = fromTS(created), fromTS(sent), fromTS(done)
	return &r, nil
}
