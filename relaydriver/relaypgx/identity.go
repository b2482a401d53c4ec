package relaypgx

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// bindSavepoint guards MessageBindIdentities inside a caller's transaction, so
// that a unique violation (an identity taken concurrently) leaves it usable.
const bindSavepoint = "relay_bind_identities"

// bindRow is one input's row of the MessageBindIdentities statement.
type bindRow struct {
	found   bool        // the message exists
	bound   pgtype.Text // its identity before the statement (NULL: unbound)
	owner   pgtype.Int8 // the owner of the input identity before the statement
	applied bool        // the statement bound the input identity to it
}

// distinctIDs reports whether no id appears twice.
func distinctIDs(ids []int64) bool {
	seen := make(map[int64]struct{}, len(ids))
	for _, id := range ids {
		if _, dup := seen[id]; dup {
			return false
		}
		seen[id] = struct{}{}
	}
	return true
}

// MessageBindIdentities binds a batch in one round trip: one statement
// (MessageBindIdentities in queries.sql) reads every input's message and the
// owner of every input identity and binds the free ones WHERE identity_key IS
// NULL, and Go decides each input from what it read, in input order, as
// MessageBindIdentity would one by one. Outside a transaction the statement
// commits without waiting for its WAL flush, for MessageBindIdentity's reason
// (a binding lost in a crash is bound again; the message's durable terminal
// state flushes it first). Inside one it runs under a savepoint, released in
// the same round trip.
//
// When another writer interferes between the statement's snapshot and its
// UPDATE — it took one of the identities (a unique violation) or bound one of
// the messages meanwhile — and when the same id appears twice, the call falls
// back to MessageBindIdentity per input, in order; bindings the statement
// made are idempotent, so the outcome is the in-order one either way.
func (e *executor) MessageBindIdentities(ctx context.Context, params *relaydriver.MessageBindIdentitiesParams) (*relaydriver.MessageBindIdentitiesResult, error) {
	op := fmt.Sprintf("bind identities of %d messages of %s", len(params.IDs), params.Queue)
	if err := params.Check(); err != nil {
		return nil, fmt.Errorf("relaypgx: %s: %w", op, err)
	}
	if len(params.IDs) == 0 {
		return &relaydriver.MessageBindIdentitiesResult{Owners: []int64{}, Identities: []string{}}, nil
	}
	if !distinctIDs(params.IDs) {
		return e.bindIdentitiesEach(ctx, params)
	}
	rows, err := e.bindIdentitiesStatement(ctx, params)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeUniqueViolation {
		return e.bindIdentitiesEach(ctx, params) // an identity was taken concurrently
	}
	if err != nil {
		return nil, mapErr(op, err)
	}
	if len(rows) != len(params.IDs) {
		return nil, fmt.Errorf("relaypgx: %s: %d result rows for %d inputs", op, len(rows), len(params.IDs))
	}
	for i, r := range rows {
		if !r.found {
			return nil, fmt.Errorf("relaypgx: %s: message %d: %w", op, params.IDs[i], relaytype.ErrNotFound)
		}
	}
	res := &relaydriver.MessageBindIdentitiesResult{
		Owners: make([]int64, len(rows)), Identities: make([]string, len(rows)),
	}
	binder := make(map[string]int64) // identity → the input that binds it in this call
	for i, r := range rows {
		id, identity := params.IDs[i], params.Identities[i]
		switch {
		case r.bound.Valid: // already bound: it keeps its identity
			res.Owners[i], res.Identities[i] = id, r.bound.String
		case r.owner.Valid: // owned by another message: a duplicate
			res.Owners[i], res.Identities[i] = r.owner.Int64, identity
		default:
			if first, ok := binder[identity]; ok { // an earlier input binds it
				res.Owners[i], res.Identities[i] = first, identity
				continue
			}
			if !r.applied {
				// Bound by another writer since the statement's snapshot.
				return e.bindIdentitiesEach(ctx, params)
			}
			binder[identity] = id
			res.Owners[i], res.Identities[i] = id, identity
		}
	}
	return res, nil
}

// bindIdentitiesStatement runs the MessageBindIdentities statement in one
// round trip and returns its rows in input order; the error is pgx's, unmapped.
func (e *executor) bindIdentitiesStatement(ctx context.Context, params *relaydriver.MessageBindIdentitiesParams) ([]bindRow, error) {
	b := &pgx.Batch{}
	var release string
	if e.inTx {
		sp, err := withIdent(qSavepoint, bindSavepoint)
		if err != nil {
			return nil, err
		}
		if release, err = withIdent(qReleaseSavepoint, bindSavepoint); err != nil {
			return nil, err
		}
		b.Queue(sp)
	} else {
		b.Queue(queries[qSessionAsyncCommit]) // see MessageBindIdentity
	}
	b.Queue(queries[qMessageBindIdentities], params.Queue, params.IDs, params.Identities)
	if e.inTx {
		b.Queue(release)
	}
	br := e.db.SendBatch(ctx, b)
	_, err := br.Exec() // savepoint or async commit
	var out []bindRow
	if err == nil {
		out, err = scanBindRows(br)
		if err == nil && e.inTx {
			_, err = br.Exec() // release
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil && e.inTx {
		// Leave the caller's transaction usable, as MessageBindIdentity does.
		if rbErr := e.rollbackToBindSavepoint(ctx); rbErr != nil {
			return nil, errors.Join(err, rbErr)
		}
	}
	return out, err
}

// scanBindRows reads the rows of the MessageBindIdentities statement.
func scanBindRows(br pgx.BatchResults) ([]bindRow, error) {
	rs, err := br.Query()
	if err != nil {
		return nil, err
	}
	var n int64
	return collect(rs, func(row pgx.CollectableRow) (r bindRow, err error) {
		var ord int64
		if err := row.Scan(&ord, &r.found, &r.bound, &r.owner, &r.applied); err != nil {
			return r, err
		}
		if n++; ord != n {
			return r, fmt.Errorf("result row %d out of order (want %d)", ord, n)
		}
		return r, nil
	})
}

// rollbackToBindSavepoint undoes a failed MessageBindIdentities statement
// inside a transaction and forgets its savepoint, in one round trip. Exec
// without arguments uses the simple protocol, which also runs both statements
// in an aborted transaction (a batch would first prepare them, which the
// aborted transaction refuses).
func (e *executor) rollbackToBindSavepoint(ctx context.Context) error {
	rb, err := withIdent(qRollbackToSavepoint, bindSavepoint)
	if err != nil {
		return err
	}
	rel, err := withIdent(qReleaseSavepoint, bindSavepoint)
	if err != nil {
		return err
	}
	_, err = e.db.Exec(ctx, rb+"; "+rel)
	return mapErr("rollback to savepoint "+bindSavepoint, err)
}

// bindIdentitiesEach is MessageBindIdentities as MessageBindIdentity per
// input, in order: the fallback when the one-statement path cannot decide.
func (e *executor) bindIdentitiesEach(ctx context.Context, params *relaydriver.MessageBindIdentitiesParams) (*relaydriver.MessageBindIdentitiesResult, error) {
	res := &relaydriver.MessageBindIdentitiesResult{
		Owners: make([]int64, len(params.IDs)), Identities: make([]string, len(params.IDs)),
	}
	for i, id := range params.IDs {
		r, err := e.MessageBindIdentity(ctx, &relaydriver.MessageBindIdentityParams{
			Queue: params.Queue, ID: id, Identity: params.Identities[i],
		})
		if err != nil {
			return nil, err
		}
		res.Owners[i], res.Identities[i] = r.OwnerID, r.Identity
	}
	return res, nil
}
