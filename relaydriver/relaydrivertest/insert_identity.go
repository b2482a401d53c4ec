package relaydrivertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Conformance of MessageInsertMany with identities: dedupe at insert time. An
// input whose identity a message of its queue already holds is not
// inserted and is reported as a duplicate of that message; the outcome is the
// one of inserting the inputs one by one in input order.

var insertIdentityCases = []struct {
	name string
	fn   func(t *testing.T, b *bundle)
}{
	{"InsertIdentityBoundAtInsert", testInsertIdentityBound},
	{"InsertIdentityDuplicateAcrossCalls", testInsertIdentityAcrossCalls},
	{"InsertIdentityRepeatedInCall", testInsertIdentityRepeatedInCall},
	{"InsertIdentityOfDecoderBinding", testInsertIdentityOfBinding},
	{"InsertIdentityOfArchived", testInsertIdentityOfArchived},
	{"InsertIdentityExplicitIDs", testInsertIdentityExplicitIDs},
	{"InsertIdentityQueuesIsolated", testInsertIdentityPipelines},
	{"InsertIdentityInTx", testInsertIdentityInTx},
	{"InsertIdentityBindingLeavesItAlone", testInsertIdentityBindLeavesAlone},
}

func init() { cases = append(cases, insertIdentityCases...) }

// insertMany inserts ps (Now defaulted to b.now) in one call and checks the
// result's shape.
func (b *bundle) insertMany(ex relaydriver.Executor, ps ...*relaydriver.MessageInsertParams) *relaydriver.MessageInsertResult {
	b.t.Helper()
	for _, p := range ps {
		if p.Now.IsZero() {
			p.Now = b.now
		}
	}
	res, err := ex.MessageInsertMany(b.ctx, ps)
	require.NoError(b.t, err)
	require.Len(b.t, res.IDs, len(ps))
	require.Len(b.t, res.Duplicate, len(ps))
	return res
}

// requireAbsent checks that no message id exists in queue.
func (b *bundle) requireAbsent(queue string, id int64) {
	b.t.Helper()
	_, err := b.ex.MessageGet(b.ctx, queue, id)
	require.ErrorIs(b.t, err, relaytype.ErrNotFound, "message %s/%d", queue, id)
}

// A message inserted with an identity holds it from the start; inputs
// without one stay unbound, and no input of a plain batch is a duplicate.
func testInsertIdentityBound(t *testing.T, b *bundle) {
	res := b.insertMany(b.ex,
		&relaydriver.MessageInsertParams{Queue: "p", Identity: "A", Payload: []byte("a")},
		&relaydriver.MessageInsertParams{Queue: "p", Payload: []byte("plain")},
		&relaydriver.MessageInsertParams{Queue: "p", ID: 100, Identity: "B"},
	)
	require.Equal(t, 3, res.Inserted)
	require.Equal(t, []bool{false, false, false}, res.Duplicate)
	require.Equal(t, int64(100), res.IDs[2])
	require.Equal(t, []string{"A", "", "B"}, b.identities("p", res.IDs...))
	m := b.get("p", res.IDs[0])
	require.Equal(t, relaytype.StatePending, m.State)
	require.Equal(t, []byte("a"), m.Payload)
	requireTime(t, b.now, m.EnqueuedAt, "EnqueuedAt")

	// Intake's batches (explicit ids, no identity) keep insert-if-absent.
	res = b.insertMany(b.ex,
		&relaydriver.MessageInsertParams{Queue: "p", ID: 100},
		&relaydriver.MessageInsertParams{Queue: "p", ID: 101},
	)
	require.Equal(t, 1, res.Inserted)
	require.Equal(t, []int64{100, 101}, res.IDs)
	require.Equal(t, []bool{false, false}, res.Duplicate)
	require.Equal(t, "B", b.get("p", 100).IdentityKey, "a present row is left as it was")
}

// A later call with a held identity inserts nothing and names the holder,
// whether its id is allocated or explicit.
func testInsertIdentityAcrossCalls(t *testing.T, b *bundle) {
	first := b.insertMany(b.ex, &relaydriver.MessageInsertParams{Queue: "p", Identity: "A", Payload: []byte("first")})
	require.Equal(t, 1, first.Inserted)
	owner := first.IDs[0]

	b.now = at(time.Minute)
	res := b.insertMany(b.ex,
		&relaydriver.MessageInsertParams{Queue: "p", Identity: "A", Payload: []byte("again")},
		&relaydriver.MessageInsertParams{Queue: "p", ID: 500, Identity: "A"},
		&relaydriver.MessageInsertParams{Queue: "p", Identity: "B"},
	)
	require.Equal(t, 1, res.Inserted, "only B is new")
	require.Equal(t, []bool{true, true, false}, res.Duplicate)
	require.Equal(t, []int64{owner, owner}, res.IDs[:2])
	require.NotEqual(t, owner, res.IDs[2])
	b.requireAbsent("p", 500)
	require.Equal(t, []int64{owner, res.IDs[2]}, b.head("p"), "a duplicate takes no row")
	m := b.get("p", owner)
	require.Equal(t, []byte("first"), m.Payload, "the holder is left as it was")
	requireTime(t, t0, m.EnqueuedAt, "EnqueuedAt of the holder")

	// A finished holder still holds its identity.
	b.complete("p", owner, relaytype.StateSucceeded, "", "")
	res = b.insertMany(b.ex, &relaydriver.MessageInsertParams{Queue: "p", Identity: "A"})
	require.Equal(t, []bool{true}, res.Duplicate)
	require.Equal(t, []int64{owner}, res.IDs)
	require.Zero(t, res.Inserted)
}

// Two inputs of one call with one identity: the first in input order wins,
// even when a later input has a smaller explicit id, and the later ones are
// its duplicates.
func testInsertIdentityRepeatedInCall(t *testing.T, b *bundle) {
	res := b.insertMany(b.ex,
		&relaydriver.MessageInsertParams{Queue: "p", Identity: "X", Payload: []byte("x1")},
		&relaydriver.MessageInsertParams{Queue: "p", Identity: "Y"},
		&relaydriver.MessageInsertParams{Queue: "p", Identity: "X", Payload: []byte("x2")},
		&relaydriver.MessageInsertParams{Queue: "p"},
		&relaydriver.MessageInsertParams{Queue: "p", Identity: "Y"},
	)
	require.Equal(t, 3, res.Inserted)
	require.Equal(t, []bool{false, false, true, false, true}, res.Duplicate)
	require.Equal(t, res.IDs[0], res.IDs[2])
	require.Equal(t, res.IDs[1], res.IDs[4])
	require.Equal(t, []byte("x1"), b.get("p", res.IDs[0]).Payload)
	require.Equal(t, []int64{res.IDs[0], res.IDs[1], res.IDs[3]}, b.head("p"))

	res = b.insertMany(b.ex,
		&relaydriver.MessageInsertParams{Queue: "q", ID: 20, Identity: "Z"},
		&relaydriver.MessageInsertParams{Queue: "q", ID: 10, Identity: "Z"},
	)
	require.Equal(t, 1, res.Inserted)
	require.Equal(t, []bool{false, true}, res.Duplicate)
	require.Equal(t, []int64{20, 20}, res.IDs)
	b.requireAbsent("q", 10)
	require.Equal(t, "Z", b.get("q", 20).IdentityKey)
}

// An identity bound later by MessageBindIdentity (a decoder's) counts the
// same as one bound at insert.
func testInsertIdentityOfBinding(t *testing.T, b *bundle) {
	b.insert("p", 1, 2)
	require.Equal(t, int64(1), b.bindOne("p", 1, "A").OwnerID)
	res := b.insertMany(b.ex, &relaydriver.MessageInsertParams{Queue: "p", Identity: "A"})
	require.Equal(t, []bool{true}, res.Duplicate)
	require.Equal(t, []int64{1}, res.IDs)
	require.Equal(t, []int64{1, 2}, b.head("p"))

	// And the other way round: an identity inserted first makes a later
	// binding of it a duplicate.
	res = b.insertMany(b.ex, &relaydriver.MessageInsertParams{Queue: "p", Identity: "B"})
	require.Equal(t, []bool{false}, res.Duplicate)
	require.Equal(t, res.IDs[0], b.bindOne("p", 2, "B").OwnerID)
	require.Empty(t, b.get("p", 2).IdentityKey)
}

// An ARCHIVED shadow keeps its identity (seed 000 §9.3), so it is still the
// holder an insert is a duplicate of.
func testInsertIdentityOfArchived(t *testing.T, b *bundle) {
	res := b.insertMany(b.ex, &relaydriver.MessageInsertParams{Queue: "p", Identity: "A"})
	owner := res.IDs[0]
	b.complete("p", owner, relaytype.StateSucceeded, "", "")
	b.now = at(time.Hour)
	require.Equal(t, 1, b.archive("p", at(time.Minute), 10))
	require.Equal(t, relaytype.StateArchived, b.get("p", owner).State)

	res = b.insertMany(b.ex, &relaydriver.MessageInsertParams{Queue: "p", Identity: "A"})
	require.Equal(t, []bool{true}, res.Duplicate)
	require.Equal(t, []int64{owner}, res.IDs)
	require.Empty(t, b.head("p"))
}

// An explicit id already present is reported present (not a duplicate) and
// left as it was, whatever identity the input carries; an explicit id that
// is absent with a held identity is a duplicate and takes no row.
func testInsertIdentityExplicitIDs(t *testing.T, b *bundle) {
	b.insert("p", 5)
	res := b.insertMany(b.ex, &relaydriver.MessageInsertParams{Queue: "p", ID: 5, Identity: "A"})
	require.Zero(t, res.Inserted)
	require.Equal(t, []int64{5}, res.IDs)
	require.Equal(t, []bool{false}, res.Duplicate)
	require.Empty(t, b.get("p", 5).IdentityKey, "the present row is not bound")

	// A is still free, so the next input with it is inserted; the one after
	// it (an explicit id repeated in the call) finds its id present.
	res = b.insertMany(b.ex,
		&relaydriver.MessageInsertParams{Queue: "p", ID: 6, Identity: "A", Payload: []byte("six")},
		&relaydriver.MessageInsertParams{Queue: "p", ID: 6, Identity: "B"},
		&relaydriver.MessageInsertParams{Queue: "p", ID: 7, Identity: "A"},
	)
	require.Equal(t, 1, res.Inserted)
	require.Equal(t, []int64{6, 6, 6}, res.IDs)
	require.Equal(t, []bool{false, false, true}, res.Duplicate)
	require.Equal(t, "A", b.get("p", 6).IdentityKey)
	require.Equal(t, []byte("six"), b.get("p", 6).Payload)
	b.requireAbsent("p", 7)

	// The first input of an identity is a present id: the second input of
	// that identity is decided on its own (inserted, as one by one).
	res = b.insertMany(b.ex,
		&relaydriver.MessageInsertParams{Queue: "p", ID: 5, Identity: "C"},
		&relaydriver.MessageInsertParams{Queue: "p", Identity: "C"},
		&relaydriver.MessageInsertParams{Queue: "p", Identity: "C"},
	)
	require.Equal(t, 1, res.Inserted)
	require.Equal(t, []bool{false, false, true}, res.Duplicate)
	require.Equal(t, int64(5), res.IDs[0])
	require.Equal(t, res.IDs[1], res.IDs[2])
	require.Equal(t, "C", b.get("p", res.IDs[1]).IdentityKey)
	require.ElementsMatch(t, []int64{5, 6, res.IDs[1]}, b.head("p"))

	// A duplicate takes no row, so a later input with its explicit id is
	// inserted.
	res = b.insertMany(b.ex,
		&relaydriver.MessageInsertParams{Queue: "p", ID: 20, Identity: "D"},
		&relaydriver.MessageInsertParams{Queue: "p", ID: 21, Identity: "D"},
		&relaydriver.MessageInsertParams{Queue: "p", ID: 21, Identity: "E", Payload: []byte("e")},
	)
	require.Equal(t, 2, res.Inserted)
	require.Equal(t, []int64{20, 20, 21}, res.IDs)
	require.Equal(t, []bool{false, true, false}, res.Duplicate)
	require.Equal(t, "E", b.get("p", 21).IdentityKey)
	require.Equal(t, []byte("e"), b.get("p", 21).Payload)
}

// Identities are unique per queue only.
func testInsertIdentityPipelines(t *testing.T, b *bundle) {
	res := b.insertMany(b.ex,
		&relaydriver.MessageInsertParams{Queue: "p", Identity: "A"},
		&relaydriver.MessageInsertParams{Queue: "q", Identity: "A"},
	)
	require.Equal(t, 2, res.Inserted)
	require.Equal(t, []bool{false, false}, res.Duplicate)
	require.Equal(t, "A", b.get("p", res.IDs[0]).IdentityKey)
	require.Equal(t, "A", b.get("q", res.IDs[1]).IdentityKey)
}

// Inside a transaction a duplicate leaves it usable, the transaction sees its
// own insert as the holder, and a rollback frees the identity.
func testInsertIdentityInTx(t *testing.T, b *bundle) {
	b.insertMany(b.ex, &relaydriver.MessageInsertParams{Queue: "p", ID: 1, Identity: "held"})

	tx, err := b.d.Begin(b.ctx)
	require.NoError(t, err)
	res := b.insertMany(tx,
		&relaydriver.MessageInsertParams{Queue: "p", ID: 2, Identity: "held"},
		&relaydriver.MessageInsertParams{Queue: "p", ID: 3, Identity: "A"},
	)
	require.Equal(t, []bool{true, false}, res.Duplicate)
	require.Equal(t, []int64{1, 3}, res.IDs)
	res = b.insertMany(tx, &relaydriver.MessageInsertParams{Queue: "p", Identity: "A"})
	require.Equal(t, []bool{true}, res.Duplicate)
	require.Equal(t, []int64{3}, res.IDs)
	require.NoError(t, tx.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{
		Queue: "p", ID: 3, State: relaytype.StateSucceeded, Now: b.now,
	}), "the transaction is still usable")
	require.NoError(t, tx.Rollback(b.ctx))

	b.requireAbsent("p", 3)
	res = b.insertMany(b.ex, &relaydriver.MessageInsertParams{Queue: "p", Identity: "A"})
	require.Equal(t, []bool{false}, res.Duplicate)
	require.Equal(t, 1, res.Inserted)

	tx, err = b.d.Begin(b.ctx)
	require.NoError(t, err)
	res = b.insertMany(tx, &relaydriver.MessageInsertParams{Queue: "p", ID: 9, Identity: "B"})
	require.Equal(t, 1, res.Inserted)
	require.NoError(t, tx.Commit(b.ctx))
	require.Equal(t, "B", b.get("p", 9).IdentityKey)
}

// A message inserted with an identity is bound: a later binding (a decoder's
// identity at processing time) leaves it alone and reports the message as
// the owner of its own identity, one by one or set-based.
func testInsertIdentityBindLeavesAlone(t *testing.T, b *bundle) {
	res := b.insertMany(b.ex,
		&relaydriver.MessageInsertParams{Queue: "p", ID: 1, Identity: "A"},
		&relaydriver.MessageInsertParams{Queue: "p", ID: 2, Identity: "B"},
	)
	require.Equal(t, 2, res.Inserted)
	one := b.bindOne("p", 1, "decoded")
	require.Equal(t, int64(1), one.OwnerID)
	require.Equal(t, "A", one.Identity)
	many := b.bindMany("p", []int64{2}, []string{"decoded"})
	require.Equal(t, []int64{2}, many.Owners)
	require.Equal(t, []string{"B"}, many.Identities)
	require.Equal(t, []string{"A", "B"}, b.identities("p", 1, 2))
}
