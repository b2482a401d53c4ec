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

// LimitDefault is the batch size MessageListUnfinished and MessageClaim use
// when the caller's Limit is zero or negative.
const LimitDefault = 100

// executor runs the engine's queries on the pool (autocommit) or on one
// transaction (inTx).
type executor struct {
	db   dbtx
	inTx bool
}

var _ relaydriver.Executor = (*executor)(nil)

// ts converts a time to a timestamptz parameter; the zero time is NULL.
func ts(t time.Time) pgtype.Timestamptz {
	if t.IsZero() {
		return pgtype.Timestamptz{}
	}
	return pgtype.Timestamptz{Time: t.UTC(), Valid: true}
}

// fromTS converts a scanned timestamptz to UTC; NULL is the zero time.
func fromTS(v pgtype.Timestamptz) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return v.Time.UTC()
}

// collect reads every row of rows with fn and closes rows: pgx.CollectRows,
// except that no rows give a nil slice (as every listing of both drivers
// returns), not an empty one.
func collect[T any](rows pgx.Rows, fn pgx.RowToFunc[T]) ([]T, error) {
	return pgx.AppendRows([]T(nil), rows, fn)
}

// ---------------------------------------------------------------- raw querier

// Exec runs sql and returns the number of rows affected.
func (e *executor) Exec(ctx context.Context, sql string, args ...any) (int64, error) {
	tag, err := e.db.Exec(ctx, sql, args...)
	if err != nil {
		return 0, mapErr("exec", err)
	}
	return tag.RowsAffected(), nil
}

// Query runs sql and returns its rows.
func (e *executor) Query(ctx context.Context, sql string, args ...any) (relaydriver.Rows, error) {
	r, err := e.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, mapErr("query", err)
	}
	return &rows{r: r}, nil
}

// QueryRow runs sql for one row; Scan reports relaytype.ErrNotFound when there is none.
func (e *executor) QueryRow(ctx context.Context, sql string, args ...any) relaydriver.Row {
	return row{r: e.db.QueryRow(ctx, sql, args...)}
}

type rows struct{ r pgx.Rows }

func (r *rows) Next() bool { return r.r.Next() }

func (r *rows) Scan(dest ...any) error { return mapErr("scan", r.r.Scan(dest...)) }

func (r *rows) Err() error { return mapErr("query", r.r.Err()) }

func (r *rows) Close() error {
	r.r.Close()
	return mapErr("query", r.r.Err())
}

type row struct{ r pgx.Row }

func (r row) Scan(dest ...any) error { return mapErr("query row", r.r.Scan(dest...)) }

// ---------------------------------------------------------------- messages

// scanMessage reads the column list shared by MessageGet, MessageListUnfinished
// and the claims.
func scanMessage(r pgx.Row) (*relaytype.Message, error) {
	var (
		m                                          relaytype.Message
		state, class                               string
		identity                                   pgtype.Text
		next, received, enqueued, updated          pgtype.Timestamptz
		ackNext, ackAt, ackAbandoned, leaseExpires pgtype.Timestamptz
	)
	err := r.Scan(&m.Queue, &m.ID, &m.Key, &state, &m.Attempts, &next, &class, &m.LastError,
		&identity, &m.Payload, &received, &enqueued, &updated,
		&ackNext, &ackAt, &m.AckAttempts, &ackAbandoned, &m.AckAbandonReason,
		&m.LeaseOwner, &leaseExpires)
	if err != nil {
		return nil, err
	}
	m.State = relaytype.State(state)
	m.ErrorClass = relaytype.ErrorClass(class)
	m.IdentityKey = identity.String
	m.NextAttemptAt = fromTS(next)
	m.ReceivedAt = fromTS(received)
	m.EnqueuedAt = fromTS(enqueued)
	m.UpdatedAt = fromTS(updated)
	m.AckNextAt = fromTS(ackNext)
	m.AckAt = fromTS(ackAt)
	m.AckAbandonedAt = fromTS(ackAbandoned)
	m.LeaseExpiresAt = fromTS(leaseExpires)
	return &m, nil
}

// collectMessage is scanMessage as a pgx.RowToFunc.
func collectMessage(r pgx.CollectableRow) (*relaytype.Message, error) { return scanMessage(r) }

func (e *executor) queryMessages(ctx context.Context, op, query string, args ...any) ([]*relaytype.Message, error) {
	r, err := e.db.Query(ctx, queries[query], args...)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := collect(r, collectMessage)
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// MessageInsertMany inserts each message unless (queue, id) exists, or,
// for an input with an Identity, unless a message of its queue holds that
// identity (a duplicate). IDs of ID-0 inputs come from relay_message_id_seq;
// an allocated id that collides with an explicitly inserted one is
// reallocated.
//
// A round is one batch (one round trip after the id allocation): the INSERT
// … ON CONFLICT DO NOTHING, whose arbiters are the primary key and the
// partial unique identity index (an identity being inserted by a concurrent
// transaction makes it wait for that transaction's outcome), and, when an
// input has an identity, the MessageInsertLookup statement. That statement
// takes a new snapshot (READ COMMITTED), so it sees the row a waited-for
// transaction committed, and tells for each input whether its id is present
// and who holds its identity. A round sends only the first input of each
// explicit (queue, id) and of each (queue, identity); a later input
// repeating one of those keys (a follower) is decided in input order from
// the outcome of the first one and the lookup, as inserting one by one would
// decide it. Only a follower whose first input does not decide it (that
// input's explicit id was present, so its identity is still free) and an
// allocated id taken meanwhile by an explicit insert need another round.
func (e *executor) MessageInsertMany(ctx context.Context, params []*relaydriver.MessageInsertParams) (*relaydriver.MessageInsertResult, error) {
	if err := relaydriver.CheckMessageInsertMany(params); err != nil {
		return nil, fmt.Errorf("relaypgx: insert messages: %w", err)
	}
	res := &relaydriver.MessageInsertResult{IDs: make([]int64, len(params)), Duplicate: make([]bool, len(params))}
	if len(params) == 0 {
		return res, nil
	}
	todo := make([]int, len(params))
	for i, p := range params {
		res.IDs[i] = p.ID
		todo[i] = i
	}
	// retries counts rounds that left an input undecided; every round decides
	// at least its first input unless that is an allocated id taken meanwhile.
	for retries := 0; len(todo) > 0; {
		send, follow := splitRound(params, todo)
		var alloc, look []int // sent inputs needing an id; inputs to look up
		for _, i := range send {
			if params[i].ID == 0 {
				alloc = append(alloc, i)
			}
			if params[i].Identity != "" {
				look = append(look, i)
			}
		}
		for _, f := range follow {
			if p := params[f.index]; p.ID != 0 && p.Identity != "" {
				look = append(look, f.index)
			}
		}
		if len(alloc) > 0 {
			if err := e.allocateIDs(ctx, res.IDs, alloc); err != nil {
				return nil, err
			}
		}
		inserted, found, err := e.insertMessages(ctx, params, res.IDs, send, look)
		if err != nil {
			return nil, err
		}
		outcome := make(map[int]insertOutcome, len(todo))
		var next []int
		for _, i := range send {
			p := params[i]
			key := queueID{p.Queue, res.IDs[i]}
			switch {
			case inserted[key]:
				delete(inserted, key) // one row per sent (queue, id)
				res.Inserted++
				outcome[i] = insertedNew
			case p.ID != 0 && (p.Identity == "" || found[i].present):
				// An explicit id already present: left as it was.
				outcome[i] = insertedPresent
			case p.Identity != "" && found[i].owner.Valid:
				res.IDs[i], res.Duplicate[i] = found[i].owner.Int64, true
				outcome[i] = insertedDuplicate
			default:
				// An allocated id taken by an explicit insert, or a conflicting
				// row the lookup did not see: send it again.
				if p.ID == 0 {
					res.IDs[i] = 0
				}
				next = append(next, i)
			}
		}
		if len(next) > 0 {
			if retries++; retries > insertRetriesMax {
				return nil, fmt.Errorf("relaypgx: insert messages: %d inputs still conflict after %d rounds (allocated ids keep colliding with existing rows): %w",
					len(next), insertRetriesMax, relaytype.ErrConflict)
			}
		}
		for _, f := range follow { // in input order: a follower may follow a follower
			o := decideFollower(params, res, found, outcome, f)
			outcome[f.index] = o
			if o == insertedUndecided {
				next = append(next, f.index)
			}
		}
		slices.Sort(next) // input order decides the next round's first inputs
		todo = next
	}
	return res, nil
}

// decideFollower decides follower f of a MessageInsertMany round as
// inserting one by one would, from the outcomes of the inputs before it and
// the lookup (found), filling res; insertedUndecided sends it to the next
// round. No input of the round after f has f's id or identity (those are
// followers too, not sent), so the lookup's answers about f's own keys are
// what a one-by-one insert would have found.
func decideFollower(params []*relaydriver.MessageInsertParams, res *relaydriver.MessageInsertResult, found []insertFound, outcome map[int]insertOutcome, f insertFollower) insertOutcome {
	p := params[f.index]
	if p.ID != 0 {
		idPresent := found[f.index].present
		if f.sameID >= 0 {
			switch outcome[f.sameID] {
			case insertedNew, insertedPresent:
				idPresent = true
			case insertedDuplicate:
				idPresent = false // that input took no row; no other input of the round has the id
			default:
				return insertedUndecided
			}
		}
		if idPresent {
			res.IDs[f.index] = p.ID
			return insertedPresent
		}
		if p.Identity == "" {
			return insertedUndecided // its id is free: send it next round
		}
	}
	if f.sameIdentity < 0 {
		// The first input of its identity (a follower by its id): the lookup
		// found the identity's holder, if any.
		if found[f.index].owner.Valid {
			res.IDs[f.index], res.Duplicate[f.index] = found[f.index].owner.Int64, true
			return insertedDuplicate
		}
		return insertedUndecided
	}
	switch outcome[f.sameIdentity] {
	case insertedNew, insertedDuplicate:
		// Its identity is held now: by its first input, or by the message that
		// input duplicates.
		res.IDs[f.index], res.Duplicate[f.index] = res.IDs[f.sameIdentity], true
		return insertedDuplicate
	}
	return insertedUndecided
}

// insertRetriesMax bounds the rounds of MessageInsertMany that leave inputs
// undecided.
const insertRetriesMax = 5

// insertOutcome is what a round of MessageInsertMany decided for an input.
type insertOutcome int

const (
	insertedUndecided insertOutcome = iota
	insertedNew
	insertedPresent
	insertedDuplicate
)

// insertFollower is an input a round of MessageInsertMany does not send
// because an earlier input of the round has the same explicit (queue, id)
// (sameID: the first such input) or the same (queue, identity)
// (sameIdentity); -1: none.
type insertFollower struct {
	index, sameID, sameIdentity int
}

// splitRound splits the inputs todo (in input order) into those a round
// sends — inputs whose explicit (queue, id) and (queue, identity) no
// earlier input of todo has — and the followers, in input order.
func splitRound(params []*relaydriver.MessageInsertParams, todo []int) (send []int, follow []insertFollower) {
	type identityKey struct{ queue, identity string }
	byID := make(map[queueID]int)
	byIdentity := make(map[identityKey]int)
	for _, i := range todo {
		p := params[i]
		f := insertFollower{index: i, sameID: -1, sameIdentity: -1}
		if p.ID != 0 {
			k := queueID{p.Queue, p.ID}
			if first, ok := byID[k]; ok {
				f.sameID = first
			} else {
				byID[k] = i
			}
		}
		if p.Identity != "" {
			k := identityKey{p.Queue, p.Identity}
			if first, ok := byIdentity[k]; ok {
				f.sameIdentity = first
			} else {
				byIdentity[k] = i
			}
		}
		if f.sameID >= 0 || f.sameIdentity >= 0 {
			follow = append(follow, f)
		} else {
			send = append(send, i)
		}
	}
	return send, follow
}

type queueID struct {
	queue string
	id    int64
}

func (e *executor) allocateIDs(ctx context.Context, ids []int64, alloc []int) error {
	r, err := e.db.Query(ctx, queries[qMessageAllocateIDs], len(alloc))
	if err != nil {
		return mapErr("allocate message ids", err)
	}
	got, err := pgx.CollectRows(r, pgx.RowTo[int64])
	if err != nil {
		return mapErr("allocate message ids", err)
	}
	if len(got) != len(alloc) {
		return fmt.Errorf("relaypgx: allocate message ids: got %d ids, want %d", len(got), len(alloc))
	}
	slices.Sort(got) // allocated ids follow input order
	for k, i := range alloc {
		ids[i] = got[k]
	}
	return nil
}

// insertFound is what the MessageInsertLookup statement found for one input
// after the INSERT: whether its (queue, id) exists and which message holds
// its identity.
type insertFound struct {
	present bool
	owner   pgtype.Int8
}

// insertMessages inserts the inputs at indexes send (each explicit id and
// each identity at most once) and looks up the inputs at indexes look, in one
// batch. It returns the keys of the rows that were new and, per input index,
// what the lookup found (zero for inputs not looked up).
func (e *executor) insertMessages(ctx context.Context, params []*relaydriver.MessageInsertParams, ids []int64, send, look []int) (map[queueID]bool, []insertFound, error) {
	var (
		queues     = make([]string, len(send))
		idv        = make([]int64, len(send))
		keys       = make([]string, len(send))
		identities = make([]pgtype.Text, len(send))
		payloads   = make([][]byte, len(send))
		received   = make([]pgtype.Timestamptz, len(send))
		nows       = make([]pgtype.Timestamptz, len(send))
	)
	for k, i := range send {
		p := params[i]
		queues[k], idv[k], keys[k], payloads[k] = p.Queue, ids[i], p.Key, p.Payload
		received[k], nows[k] = ts(p.ReceivedAt), ts(p.Now)
		if p.Identity != "" {
			identities[k] = pgtype.Text{String: p.Identity, Valid: true}
		}
	}
	b := &pgx.Batch{}
	b.Queue(queries[qMessageInsertMany], queues, idv, keys, payloads, received, nows, identities)
	if len(look) > 0 {
		lp, li, lk := make([]string, len(look)), make([]int64, len(look)), make([]string, len(look))
		for j, i := range look {
			lp[j], li[j], lk[j] = params[i].Queue, ids[i], params[i].Identity
		}
		b.Queue(queries[qMessageInsertLookup], lp, li, lk)
	}
	br := e.db.SendBatch(ctx, b)
	inserted, found, err := scanInsertBatch(br, len(params), look)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, nil, mapErr("insert messages", err)
	}
	return inserted, found, nil
}

// scanInsertBatch reads the batch of insertMessages: the keys the INSERT
// returned, then (when queued) the lookup's rows for the input indexes look.
func scanInsertBatch(br pgx.BatchResults, n int, look []int) (map[queueID]bool, []insertFound, error) {
	r, err := br.Query()
	if err != nil {
		return nil, nil, err
	}
	inserted := map[queueID]bool{}
	var k queueID
	if _, err := pgx.ForEachRow(r, []any{&k.queue, &k.id}, func() error {
		inserted[k] = true
		return nil
	}); err != nil {
		return nil, nil, err
	}
	found := make([]insertFound, n)
	if len(look) == 0 {
		return inserted, found, nil
	}
	r, err = br.Query()
	if err != nil {
		return nil, nil, err
	}
	var (
		j   int
		ord int64
		f   insertFound
	)
	if _, err := pgx.ForEachRow(r, []any{&ord, &f.present, &f.owner}, func() error {
		if j >= len(look) || ord != int64(j)+1 {
			return fmt.Errorf("lookup row %d out of order (want %d of %d)", ord, j+1, len(look))
		}
		found[look[j]] = f
		j++
		return nil
	}); err != nil {
		return nil, nil, err
	}
	if j != len(look) {
		return nil, nil, fmt.Errorf("lookup returned %d rows for %d inputs", j, len(look))
	}
	return inserted, found, nil
}

// MessageGet returns one message or relaytype.ErrNotFound.
func (e *executor) MessageGet(ctx context.Context, queue string, id int64) (*relaytype.Message, error) {
	m, err := scanMessage(e.db.QueryRow(ctx, queries[qMessageGet], queue, id))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("get message %s/%d", queue, id), err)
	}
	return m, nil
}

// MessageListUnfinished returns PENDING/FAILED messages after AfterID, ascending.
func (e *executor) MessageListUnfinished(ctx context.Context, params *relaydriver.MessageListUnfinishedParams) ([]*relaytype.Message, error) {
	limit := relaydriver.LimitOr(params.Limit, LimitDefault)
	return e.queryMessages(ctx, "list unfinished messages", qMessageListUnfinished, params.Queue, params.AfterID, limit)
}

// MessageBindIdentity binds the identity when still NULL (seed 000 §2). Inside
// a transaction the UPDATE runs under a savepoint, so that a unique violation
// (the identity belongs to another message) does not abort the caller's
// transaction.
func (e *executor) MessageBindIdentity(ctx context.Context, params *relaydriver.MessageBindIdentityParams) (*relaydriver.MessageBindIdentityResult, error) {
	op := fmt.Sprintf("bind identity of message %s/%d", params.Queue, params.ID)
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	db := e.db
	var sp pgx.Tx
	if e.inTx {
		var err error
		if sp, err = e.db.Begin(ctx); err != nil { // a savepoint
			return nil, mapErr(op, err)
		}
		defer sp.Rollback(ctx) //nolint:errcheck // no-op after Commit
		db = sp
	}
	var id int64
	var err error
	if sp == nil {
		// Outside a transaction the binding commits on its own. It does not
		// wait for its WAL flush (synchronous_commit off for this implicit
		// transaction only): PostgreSQL flushes WAL in order, so the first
		// durable commit that could depend on the binding — the message's
		// terminal state — also makes the binding durable; a binding lost to a
		// crash before that is simply bound again (WHERE identity_key IS
		// NULL). This takes an fsync off every message's path. The batch is one
		// round trip and one implicit transaction.
		err = e.asyncCommit(ctx, queries[qMessageBindIdentity], []any{params.Queue, params.ID, params.Identity},
			func(br pgx.BatchResults) error { return br.QueryRow().Scan(&id) })
	} else {
		err = db.QueryRow(ctx, queries[qMessageBindIdentity], params.Queue, params.ID, params.Identity).Scan(&id)
	}
	switch {
	case err == nil:
		if sp != nil {
			if err := sp.Commit(ctx); err != nil {
				return nil, mapErr(op, err)
			}
		}
		return &relaydriver.MessageBindIdentityResult{OwnerID: params.ID, Identity: params.Identity}, nil
	case errors.Is(err, pgx.ErrNoRows):
		// Already bound (to this identity or another): the message keeps it.
		if sp != nil {
			if err := sp.Commit(ctx); err != nil {
				return nil, mapErr(op, err)
			}
		}
		var cur string
		if err := e.db.QueryRow(ctx, queries[qMessageIdentityOf], params.Queue, params.ID).Scan(&cur); err != nil {
			return nil, mapErr(op, err)
		}
		return &relaydriver.MessageBindIdentityResult{OwnerID: params.ID, Identity: cur}, nil
	}
	if !errors.Is(mapErr(op, err), relaytype.ErrConflict) {
		return nil, mapErr(op, err)
	}
	if sp != nil {
		if err := sp.Rollback(ctx); err != nil {
			return nil, mapErr(op, err)
		}
	}
	// Another message owns the identity: a duplicate.
	var owner int64
	if err := e.db.QueryRow(ctx, queries[qMessageIdentityOwner], params.Queue, params.Identity).Scan(&owner); err != nil {
		return nil, mapErr(op+": look up owner", err)
	}
	return &relaydriver.MessageBindIdentityResult{OwnerID: owner, Identity: params.Identity}, nil
}

// guardFailed explains a guarded UPDATE that touched no row: ErrNotFound when
// the message does not exist, ErrConflict when its state or lease refused.
func (e *executor) guardFailed(ctx context.Context, op, queue string, id int64, why string) error {
	var exists bool
	if err := e.db.QueryRow(ctx, queries[qMessageIDExists], queue, id).Scan(&exists); err != nil {
		return mapErr(op, err)
	}
	if !exists {
		return fmt.Errorf("relaypgx: %s: %w", op, relaytype.ErrNotFound)
	}
	return fmt.Errorf("relaypgx: %s: %s: %w", op, why, relaytype.ErrConflict)
}

// MessageComplete moves an unfinished message to a terminal state with its
// acknowledgement intent in one UPDATE.
func (e *executor) MessageComplete(ctx context.Context, params *relaydriver.MessageCompleteParams) error {
	op := fmt.Sprintf("complete message %s/%d", params.Queue, params.ID)
	if err := params.Check(); err != nil {
		return fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	var tag pgconn.CommandTag
	var err error
	if params.Delete {
		tag, err = e.db.Exec(ctx, queries[qMessageDelete], params.Queue, params.ID, params.LeaseOwner)
	} else {
		tag, err = e.db.Exec(ctx, queries[qMessageComplete], params.Queue, params.ID, string(params.State),
			string(params.ErrorClass), relaydriver.StoredText(params.LastError), params.AckIntent, ts(params.Now), params.LeaseOwner,
			params.CountAttempt)
	}
	if err != nil {
		return mapErr(op, err)
	}
	if tag.RowsAffected() == 0 {
		return e.guardFailed(ctx, op, params.Queue, params.ID, "not PENDING/FAILED or not leased to "+cmp.Or(params.LeaseOwner, "anyone"))
	}
	return nil
}

// MessageCompleteMany finishes several messages in one UPDATE … FROM unnest
// (and the ones to delete in one DELETE … USING unnest), then compares the
// rows it touched with its input: a short count names the first refused
// message. On the pool it runs in a transaction of its own, so a refusal
// applies nothing.
func (e *executor) MessageCompleteMany(ctx context.Context, params []*relaydriver.MessageCompleteParams) error {
	if len(params) == 0 {
		return nil
	}
	n := len(params)
	var (
		queues   = make([]string, 0, n)
		idv      = make([]int64, 0, n)
		states   = make([]string, 0, n)
		classes  = make([]string, 0, n)
		lastErrs = make([]string, 0, n)
		acks     = make([]bool, 0, n)
		nows     = make([]pgtype.Timestamptz, 0, n)
		owners   = make([]string, 0, n)
		counts   = make([]bool, 0, n)
		// The messages to delete (MessageCompleteParams.Delete).
		delQueues, delOwners []string
		delIDs               []int64
	)
	for _, p := range params {
		if err := p.Check(); err != nil {
			return fmt.Errorf("relaypgx: complete message %s/%d: %w", p.Queue, p.ID, err)
		}
		if p.Delete {
			delQueues, delIDs, delOwners = append(delQueues, p.Queue), append(delIDs, p.ID), append(delOwners, p.LeaseOwner)
			continue
		}
		queues, idv, states, classes = append(queues, p.Queue), append(idv, p.ID), append(states, string(p.State)),
			append(classes, string(p.ErrorClass))
		lastErrs, acks = append(lastErrs, relaydriver.StoredText(p.LastError)), append(acks, p.AckIntent)
		nows, owners, counts = append(nows, ts(p.Now)), append(owners, p.LeaseOwner), append(counts, p.CountAttempt)
	}
	run := func(x *executor) error {
		done := make(map[queueID]int, n)
		collect := func(r pgx.Rows, err error) error {
			if err != nil {
				return mapErr(fmt.Sprintf("complete %d messages", n), err)
			}
			var key queueID
			_, err = pgx.ForEachRow(r, []any{&key.queue, &key.id}, func() error {
				done[key]++
				return nil
			})
			if err != nil {
				return mapErr(fmt.Sprintf("complete %d messages", n), err)
			}
			return nil
		}
		if len(queues) > 0 {
			if err := collect(x.db.Query(ctx, queries[qMessageCompleteMany], queues, idv, states, classes, lastErrs, acks,
				nows, owners, counts)); err != nil {
				return err
			}
		}
		if len(delQueues) > 0 {
			if err := collect(x.db.Query(ctx, queries[qMessageDeleteMany], delQueues, delIDs, delOwners)); err != nil {
				return err
			}
		}
		for _, p := range params {
			k := queueID{p.Queue, p.ID}
			if done[k] > 0 {
				done[k]-- // a row touched once satisfies one input only
				continue
			}
			return x.guardFailed(ctx, fmt.Sprintf("complete message %s/%d (batch of %d)", p.Queue, p.ID, n),
				p.Queue, p.ID, "not PENDING/FAILED, not leased to "+cmp.Or(p.LeaseOwner, "anyone")+", or twice in the batch")
		}
		return nil
	}
	if e.inTx {
		return run(e)
	}
	tx, err := e.db.Begin(ctx)
	if err != nil {
		return mapErr("complete messages: begin", err)
	}
	if err := run(&executor{db: tx, inTx: true}); err != nil {
		if rbErr := tx.Rollback(ctx); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) {
			return errors.Join(err, mapErr("complete messages: rollback", rbErr))
		}
		return err
	}
	return mapErr("complete messages: commit", tx.Commit(ctx))
}

// MessageFail records one failed attempt and returns the new attempt count.
func (e *executor) MessageFail(ctx context.Context, params *relaydriver.MessageFailParams) (int, error) {
	op := fmt.Sprintf("fail message %s/%d", params.Queue, params.ID)
	if err := params.Check(); err != nil {
		return 0, fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	var attempts int
	err := e.db.QueryRow(ctx, queries[qMessageFail], params.Queue, params.ID, string(params.ErrorClass),
		relaydriver.StoredText(params.LastError), ts(params.NextAttemptAt), ts(params.Now), params.LeaseOwner).Scan(&attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, e.guardFailed(ctx, op, params.Queue, params.ID, "not PENDING/FAILED or not leased to "+cmp.Or(params.LeaseOwner, "anyone"))
	}
	if err != nil {
		return 0, mapErr(op, err)
	}
	return attempts, nil
}

// MessageExhaust moves a FAILED message at its attempt limit to DEAD(EXHAUSTED).
func (e *executor) MessageExhaust(ctx context.Context, params *relaydriver.MessageExhaustParams) error {
	op := fmt.Sprintf("exhaust message %s/%d", params.Queue, params.ID)
	if err := params.Check(); err != nil {
		return fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	tag, err := e.db.Exec(ctx, queries[qMessageExhaust], params.Queue, params.ID, params.MaxAttempts,
		params.AckIntent, ts(params.Now))
	if err != nil {
		return mapErr(op, err)
	}
	if tag.RowsAffected() == 0 {
		return e.guardFailed(ctx, op, params.Queue, params.ID, fmt.Sprintf("not FAILED with attempts >= %d", params.MaxAttempts))
	}
	return nil
}

// MessageClaim leases ready messages with FOR UPDATE SKIP LOCKED, returned in
// ascending id order.
func (e *executor) MessageClaim(ctx context.Context, params *relaydriver.MessageClaimParams) ([]*relaytype.Message, error) {
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaypgx: claim messages of %s: %w", params.Queue, err)
	}
	limit := relaydriver.LimitOr(params.Limit, LimitDefault)
	query := qMessageClaim
	if params.PerKey {
		query = qMessageClaimPerKey
	}
	op := "claim messages of " + params.Queue
	args := []any{params.Queue, ts(params.Now), limit, params.Owner, ts(params.LeaseUntil), params.SkipExpired}
	var out []*relaytype.Message
	var err error
	if e.inTx {
		out, err = e.queryMessages(ctx, op, query, args...)
	} else {
		out, err = e.claimAsync(ctx, op, query, args)
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *relaytype.Message) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// MessageLeaseRenew extends Owner's leases on params.IDs in one statement and
// returns the ids no longer leased to Owner; rows locked by another
// transaction are skipped, neither renewed nor lost.
func (e *executor) MessageLeaseRenew(ctx context.Context, params *relaydriver.MessageLeaseRenewParams) (*relaydriver.MessageLeaseRenewResult, error) {
	op := fmt.Sprintf("renew %d leases of %s", len(params.IDs), params.Queue)
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	if len(params.IDs) == 0 {
		return &relaydriver.MessageLeaseRenewResult{}, nil
	}
	r, err := e.db.Query(ctx, queries[qMessageLeaseRenew], params.Queue, params.IDs, params.Owner, ts(params.LeaseUntil))
	if err != nil {
		return nil, mapErr(op, err)
	}
	lost, err := pgx.CollectRows(r, pgx.RowTo[int64])
	if err != nil {
		return nil, mapErr(op, err)
	}
	return &relaydriver.MessageLeaseRenewResult{Lost: lost}, nil
}

// MessageLeaseRelease clears every lease Owner holds on unfinished messages
// of the queue.
func (e *executor) MessageLeaseRelease(ctx context.Context, params *relaydriver.MessageLeaseReleaseParams) (int, error) {
	op := fmt.Sprintf("release leases of %q on %s", params.Owner, params.Queue)
	if err := params.Check(); err != nil {
		return 0, fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	tag, err := e.db.Exec(ctx, queries[qMessageLeaseRelease], params.Queue, params.Owner)
	if err != nil {
		return 0, mapErr(op, err)
	}
	return int(tag.RowsAffected()), nil
}

// claimAsync runs a claim outside a transaction as one batch (one round trip,
// one implicit transaction) whose commit does not wait for its WAL flush. A
// lease is safe to lose in a crash: the message is then simply unleased and
// claimed again, and the terminal write of whoever processes it checks the
// lease owner in the same transaction as its effects, so a lost lease can only
// drop a decision, never apply one twice. A lease that matters is made durable
// by that synchronous terminal commit anyway (PostgreSQL flushes WAL in order).
// This takes a WAL flush off every claim, which runs on the claim loop's
// critical path.
func (e *executor) claimAsync(ctx context.Context, op, query string, args []any) ([]*relaytype.Message, error) {
	var out []*relaytype.Message
	err := e.asyncCommit(ctx, queries[query], args, func(br pgx.BatchResults) error {
		r, err := br.Query()
		if err != nil {
			return err
		}
		out, err = collect(r, collectMessage)
		return err
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}

// asyncCommit runs query as its own implicit transaction that commits
// without waiting for its WAL flush (synchronous_commit off for that
// transaction only), in one round trip, and hands its result to read. Only
// for writes that are safe to lose in a crash: the binding, the claim's lease
// and the outbox's SENT mark say why each is. Outside a transaction only.
func (e *executor) asyncCommit(ctx context.Context, query string, args []any, read func(pgx.BatchResults) error) error {
	b := &pgx.Batch{}
	b.Queue(queries[qSessionAsyncCommit])
	b.Queue(query, args...)
	br := e.db.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		err = read(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// MessageReplay moves FAILED/DEAD messages of the given classes back to PENDING.
func (e *executor) MessageReplay(ctx context.Context, params *relaydriver.MessageReplayParams) (int, error) {
	if err := params.Check(); err != nil {
		return 0, fmt.Errorf("relaypgx: replay messages of %s: %w", params.Queue, err)
	}
	classes := make([]string, len(params.Classes))
	for i, c := range params.Classes {
		classes[i] = string(c)
	}
	ids := params.IDs
	if ids == nil {
		ids = []int64{}
	}
	tag, err := e.db.Exec(ctx, queries[qMessageReplay], params.Queue, classes, ids, ts(params.Now))
	if err != nil {
		return 0, mapErr("replay messages of "+params.Queue, err)
	}
	return int(tag.RowsAffected()), nil
}

// MessageStats aggregates a queue in one query.
func (e *executor) MessageStats(ctx context.Context, queue string) (*relaydriver.MessageStats, error) {
	op := "stats of " + queue
	r, err := e.db.Query(ctx, queries[qMessageStats], queue)
	if err != nil {
		return nil, mapErr(op, err)
	}
	st := relaydriver.NewMessageStats()
	var (
		state  string
		n      int64
		oldest pgtype.Timestamptz
		maxID  int64
	)
	_, err = pgx.ForEachRow(r, []any{&state, &n, &oldest, &maxID}, func() error {
		st.Counts[relaytype.State(state)] = n
		if o := fromTS(oldest); !o.IsZero() && (st.OldestUnfinishedEnqueuedAt.IsZero() || o.Before(st.OldestUnfinishedEnqueuedAt)) {
			st.OldestUnfinishedEnqueuedAt = o
		}
		st.MaxID = max(st.MaxID, maxID)
		return nil
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	return st, nil
}

// MessageExists reports whether the queue has any message.
func (e *executor) MessageExists(ctx context.Context, queue string) (bool, error) {
	var ok bool
	if err := e.db.QueryRow(ctx, queries[qMessageExists], queue).Scan(&ok); err != nil {
		return false, mapErr("message exists in "+queue, err)
	}
	return ok, nil
}

// ---------------------------------------------------------------- cursor, holes

// CursorGet returns the queue's cursor or relaytype.ErrNotFound.
func (e *executor) CursorGet(ctx context.Context, queue string) (*relaytype.Cursor, error) {
	var (
		c                              relaytype.Cursor
		holeSince, seededAt, updatedAt pgtype.Timestamptz
	)
	err := e.db.QueryRow(ctx, queries[qCursorGet], queue).Scan(&c.Queue, &c.Watermark, &holeSince, &seededAt, &c.SeedMode, &updatedAt)
	if err != nil {
		return nil, mapErr("get cursor of "+queue, err)
	}
	c.HoleSince, c.SeededAt, c.UpdatedAt = fromTS(holeSince), fromTS(seededAt), fromTS(updatedAt)
	return &c, nil
}

// CursorSave upserts (W, holeSince), leaving the seeding facts alone.
func (e *executor) CursorSave(ctx context.Context, params *relaydriver.CursorSaveParams) error {
	if err := params.Check(); err != nil {
		return fmt.Errorf("relaypgx: save cursor of %s: %w", params.Queue, err)
	}
	_, err := e.db.Exec(ctx, queries[qCursorSave], params.Queue, params.Watermark, ts(params.HoleSince), ts(params.Now))
	return mapErr("save cursor of "+params.Queue, err)
}

// CursorSeed stores the first watermark, or returns relaytype.ErrSeedRefused.
func (e *executor) CursorSeed(ctx context.Context, params *relaydriver.CursorSeedParams) error {
	if err := params.Check(); err != nil {
		return fmt.Errorf("relaypgx: seed cursor of %s: %w", params.Queue, err)
	}
	var p string
	err := e.db.QueryRow(ctx, queries[qCursorSeed], params.Queue, params.Watermark, params.Mode, ts(params.Now)).Scan(&p)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("relaypgx: seed cursor of %s: %w", params.Queue, relaytype.ErrSeedRefused)
	}
	return mapErr("seed cursor of "+params.Queue, err)
}

// HoleInsert logs a permanent hole; inserting it again is a no-op.
func (e *executor) HoleInsert(ctx context.Context, hole *relaytype.Hole) error {
	if err := relaydriver.CheckHoleInsert(hole); err != nil {
		return fmt.Errorf("relaypgx: insert hole: %w", err)
	}
	_, err := e.db.Exec(ctx, queries[qHoleInsert], hole.Queue, hole.ID, ts(hole.FirstSeenAt), ts(hole.ReleasedAt))
	return mapErr(fmt.Sprintf("insert hole %s/%d", hole.Queue, hole.ID), err)
}

// HoleList returns the queue's holes in id order.
func (e *executor) HoleList(ctx context.Context, queue string) ([]*relaytype.Hole, error) {
	return e.holes(ctx, "list holes of "+queue, qHoleList, queue)
}

// HoleListUnfound returns up to limit holes not found late yet, released at
// or after releasedSince, in id order.
func (e *executor) HoleListUnfound(ctx context.Context, queue string, releasedSince time.Time, limit int) ([]*relaytype.Hole, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("relaypgx: list unfound holes of %s: limit %d must be positive", queue, limit)
	}
	return e.holes(ctx, "list unfound holes of "+queue, qHoleListUnfound, queue, ts(releasedSince), limit)
}

// HoleListFound returns the holes whose row was found late, in id order.
func (e *executor) HoleListFound(ctx context.Context, queue string) ([]*relaytype.Hole, error) {
	return e.holes(ctx, "list found holes of "+queue, qHoleListFound, queue)
}

// HoleMarkFound sets FoundAt once; false when absent or already found.
func (e *executor) HoleMarkFound(ctx context.Context, queue string, id int64, at time.Time) (bool, error) {
	tag, err := e.db.Exec(ctx, queries[qHoleMarkFound], queue, id, ts(at))
	if err != nil {
		return false, mapErr(fmt.Sprintf("mark hole %s/%d found", queue, id), err)
	}
	return tag.RowsAffected() == 1, nil
}

// HoleMarkIngested sets IngestedAt and IngestedID once on a found hole; false
// when absent, not found or already ingested.
func (e *executor) HoleMarkIngested(ctx context.Context, queue string, id, messageID int64, at time.Time) (bool, error) {
	tag, err := e.db.Exec(ctx, queries[qHoleMarkIngested], queue, id, ts(at), messageID)
	if err != nil {
		return false, mapErr(fmt.Sprintf("mark hole %s/%d ingested", queue, id), err)
	}
	return tag.RowsAffected() == 1, nil
}

// holes runs a hole query selecting the full hole column list.
func (e *executor) holes(ctx context.Context, op, name string, args ...any) ([]*relaytype.Hole, error) {
	r, err := e.db.Query(ctx, queries[name], args...)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := collect(r, func(r pgx.CollectableRow) (*relaytype.Hole, error) {
		var (
			h                                relaytype.Hole
			first, released, found, ingested pgtype.Timestamptz
			ingestedID                       pgtype.Int8
		)
		if err := r.Scan(&h.Queue, &h.ID, &first, &released, &found, &ingested, &ingestedID); err != nil {
			return nil, err
		}
		h.FirstSeenAt, h.ReleasedAt = fromTS(first), fromTS(released)
		h.FoundAt, h.IngestedAt, h.IngestedID = fromTS(found), fromTS(ingested), ingestedID.Int64
		return &h, nil
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}
