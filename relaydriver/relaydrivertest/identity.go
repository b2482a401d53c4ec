package relaydrivertest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Conformance of MessageBindIdentities: the set-based identity binding of a
// FIFO batch (seed 000 §2) must decide every input as MessageBindIdentity
// would, called for each input in order.

var bindIdentitiesCases = []struct {
	name string
	fn   func(t *testing.T, b *bundle)
}{
	{"BindIdentitiesFresh", testBindIdentitiesFresh},
	{"BindIdentitiesAlreadyBound", testBindIdentitiesAlreadyBound},
	{"BindIdentitiesOwnedByOther", testBindIdentitiesOwnedByOther},
	{"BindIdentitiesRepeatedInCall", testBindIdentitiesRepeated},
	{"BindIdentitiesMixedAsOneByOne", testBindIdentitiesMixed},
	{"BindIdentitiesInTx", testBindIdentitiesInTx},
	{"BindIdentitiesErrors", testBindIdentitiesErrors},
}

func init() { cases = append(cases, bindIdentitiesCases...) }

// bindMany binds ids[i] to identities[i] in one MessageBindIdentities call.
func (b *bundle) bindMany(queue string, ids []int64, identities []string) *relaydriver.MessageBindIdentitiesResult {
	b.t.Helper()
	res, err := b.ex.MessageBindIdentities(b.ctx, &relaydriver.MessageBindIdentitiesParams{
		Queue: queue, IDs: ids, Identities: identities,
	})
	require.NoError(b.t, err)
	require.Len(b.t, res.Owners, len(ids))
	require.Len(b.t, res.Identities, len(ids))
	return res
}

// bindOne binds one identity with MessageBindIdentity.
func (b *bundle) bindOne(queue string, id int64, identity string) *relaydriver.MessageBindIdentityResult {
	b.t.Helper()
	res, err := b.ex.MessageBindIdentity(b.ctx, &relaydriver.MessageBindIdentityParams{Queue: queue, ID: id, Identity: identity})
	require.NoError(b.t, err)
	return res
}

// identities returns the bound identity of each id ("" when unbound).
func (b *bundle) identities(queue string, ids ...int64) []string {
	b.t.Helper()
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = b.get(queue, id).IdentityKey
	}
	return out
}

// Unbound messages with distinct free identities are all bound.
func testBindIdentitiesFresh(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3)
	res := b.bindMany("p", []int64{1, 2, 3}, []string{"A", "B", "C"})
	require.Equal(t, &relaydriver.MessageBindIdentitiesResult{Owners: []int64{1, 2, 3}, Identities: []string{"A", "B", "C"}}, res)
	require.Equal(t, []string{"A", "B", "C"}, b.identities("p", 1, 2, 3))

	// Identities are unique per queue only.
	b.insert("q", 1, 2)
	res = b.bindMany("q", []int64{2, 1}, []string{"A", "B"})
	require.Equal(t, []int64{2, 1}, res.Owners)
	require.Equal(t, []string{"B", "A"}, b.identities("q", 1, 2))

	res = b.bindMany("p", nil, nil)
	require.Empty(t, res.Owners, "no inputs is a no-op")
}

// A message already bound keeps its identity and owns it, whatever the call
// asks (a retry rebinding the same identity, or a different one).
func testBindIdentitiesAlreadyBound(t *testing.T, b *bundle) {
	b.insert("p", 1, 2)
	b.bindOne("p", 1, "A")
	res := b.bindMany("p", []int64{1}, []string{"A"})
	require.Equal(t, &relaydriver.MessageBindIdentitiesResult{Owners: []int64{1}, Identities: []string{"A"}}, res, "self rebind")
	res = b.bindMany("p", []int64{1, 2}, []string{"B", "C"})
	require.Equal(t, &relaydriver.MessageBindIdentitiesResult{Owners: []int64{1, 2}, Identities: []string{"A", "C"}}, res,
		"a bound message keeps its identity")
	require.Equal(t, []string{"A", "C"}, b.identities("p", 1, 2))
}

// An identity owned by another message (bound before, an archived shadow row,
// or inside the same call) makes the input a duplicate of that owner; the
// duplicate stays unbound.
func testBindIdentitiesOwnedByOther(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 9)
	b.bindOne("p", 9, "A")
	res := b.bindMany("p", []int64{1, 2}, []string{"A", "B"})
	require.Equal(t, &relaydriver.MessageBindIdentitiesResult{Owners: []int64{9, 2}, Identities: []string{"A", "B"}}, res)
	require.Equal(t, []string{"", "B"}, b.identities("p", 1, 2))

	// The owner is also an input of the call, already bound: its position does
	// not matter, it owned the identity before the call.
	res = b.bindMany("p", []int64{3, 2}, []string{"B", "Z"})
	require.Equal(t, &relaydriver.MessageBindIdentitiesResult{Owners: []int64{2, 2}, Identities: []string{"B", "B"}}, res)
	require.Empty(t, b.get("p", 3).IdentityKey)
}

// An identity repeated within the call is owned by its first input; the later
// ones are its duplicates.
func testBindIdentitiesRepeated(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4)
	res := b.bindMany("p", []int64{2, 1, 3, 4}, []string{"A", "A", "B", "A"})
	require.Equal(t, &relaydriver.MessageBindIdentitiesResult{Owners: []int64{2, 2, 3, 2}, Identities: []string{"A", "A", "B", "A"}}, res,
		"input order decides, not id order")
	require.Equal(t, []string{"", "A", "B", ""}, b.identities("p", 1, 2, 3, 4))
}

// A mix of every case, and the same id twice in one call, decide exactly as
// MessageBindIdentity called for each input in order on an identical store.
func testBindIdentitiesMixed(t *testing.T, b *bundle) {
	type input struct {
		id       int64
		identity string
	}
	inputs := []input{
		{3, "A"},  // owned by 1 before the call: duplicate
		{4, "C"},  // free: binds
		{5, "C"},  // bound by 4 in this call: duplicate of 4
		{6, "B"},  // owned by 2, which is a later input: duplicate of 2
		{7, "D"},  // free: binds
		{2, "X"},  // already bound to B: keeps B
		{8, "D"},  // duplicate of 7
		{10, "E"}, // free: binds
		{11, "F"}, // owned by an ARCHIVED shadow row: duplicate of it
	}
	ids := make([]int64, len(inputs))
	idents := make([]string, len(inputs))
	for i, in := range inputs {
		ids[i], idents[i] = in.id, in.identity
	}
	all := []int64{1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12}
	for _, p := range []string{"many", "each"} {
		b.insert(p, all...)
		b.bindOne(p, 1, "A")
		b.bindOne(p, 2, "B")
		b.bindOne(p, 12, "F")
		b.complete(p, 12, relaytype.StateSucceeded, "", "")
		n, err := b.ex.Exec(b.ctx, "UPDATE relay_message SET state = $1 WHERE queue = $2 AND id = $3",
			string(relaytype.StateArchived), p, int64(12))
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
	}
	got := b.bindMany("many", ids, idents)
	want := &relaydriver.MessageBindIdentitiesResult{}
	for _, in := range inputs {
		r := b.bindOne("each", in.id, in.identity)
		want.Owners = append(want.Owners, r.OwnerID)
		want.Identities = append(want.Identities, r.Identity)
	}
	require.Equal(t, want, got)
	require.Equal(t, []int64{1, 4, 4, 2, 7, 2, 7, 10, 12}, got.Owners)
	require.Equal(t, []string{"A", "C", "C", "B", "D", "B", "D", "E", "F"}, got.Identities)
	require.Equal(t, b.identities("each", all...), b.identities("many", all...))

	// The same id twice: the second input sees the first one's outcome.
	for _, p := range []string{"many", "each"} {
		b.insert(p, 20, 21)
	}
	rep := []input{{20, "A"}, {21, "G"}, {20, "G"}, {20, "H"}, {21, "I"}}
	ids, idents = ids[:0], idents[:0]
	want = &relaydriver.MessageBindIdentitiesResult{}
	for _, in := range rep {
		ids, idents = append(ids, in.id), append(idents, in.identity)
		r := b.bindOne("each", in.id, in.identity)
		want.Owners = append(want.Owners, r.OwnerID)
		want.Identities = append(want.Identities, r.Identity)
	}
	require.Equal(t, want, b.bindMany("many", ids, idents))
	require.Equal(t, []int64{1, 21, 21, 20, 21}, want.Owners)
	require.Equal(t, b.identities("each", 20, 21), b.identities("many", 20, 21))
}

// Inside a transaction the bindings commit or roll back with it, and a
// duplicate leaves the transaction usable.
func testBindIdentitiesInTx(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3)
	b.bindOne("p", 1, "A")

	tx, err := b.d.Begin(b.ctx)
	require.NoError(t, err)
	defer tx.Rollback(b.ctx) //nolint:errcheck
	res, err := tx.MessageBindIdentities(b.ctx, &relaydriver.MessageBindIdentitiesParams{
		Queue: "p", IDs: []int64{2, 3}, Identities: []string{"A", "C"},
	})
	require.NoError(t, err)
	require.Equal(t, &relaydriver.MessageBindIdentitiesResult{Owners: []int64{1, 3}, Identities: []string{"A", "C"}}, res)
	require.NoError(t, tx.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{
		Queue: "p", ID: 2, State: relaytype.StateSkipped, LastError: "duplicate-of:1", Now: b.now,
	}))
	require.NoError(t, tx.Rollback(b.ctx))
	require.Equal(t, []string{"A", "", ""}, b.identities("p", 1, 2, 3), "rolled back with the transaction")
	require.Equal(t, relaytype.StatePending, b.get("p", 2).State)

	tx, err = b.d.Begin(b.ctx)
	require.NoError(t, err)
	defer tx.Rollback(b.ctx) //nolint:errcheck
	res, err = tx.MessageBindIdentities(b.ctx, &relaydriver.MessageBindIdentitiesParams{
		Queue: "p", IDs: []int64{3, 2}, Identities: []string{"C", "C"},
	})
	require.NoError(t, err)
	require.Equal(t, []int64{3, 3}, res.Owners)
	require.NoError(t, tx.Commit(b.ctx))
	require.Equal(t, []string{"A", "", "C"}, b.identities("p", 1, 2, 3))
}

// An unknown id is ErrNotFound; malformed inputs are refused.
func testBindIdentitiesErrors(t *testing.T, b *bundle) {
	b.insert("p", 1)
	bind := func(ids []int64, identities []string) error {
		_, err := b.ex.MessageBindIdentities(b.ctx, &relaydriver.MessageBindIdentitiesParams{
			Queue: "p", IDs: ids, Identities: identities,
		})
		return err
	}
	require.ErrorIs(t, bind([]int64{1, 99}, []string{"A", "Z"}), relaytype.ErrNotFound)
	require.ErrorIs(t, bind([]int64{99}, []string{"Z"}), relaytype.ErrNotFound)
	require.Error(t, bind([]int64{1}, []string{""}), "an empty identity")
	require.Error(t, bind([]int64{1}, nil), "fewer identities than ids")
	require.Equal(t, &relaydriver.MessageBindIdentitiesResult{Owners: []int64{1}, Identities: []string{"A"}},
		b.bindMany("p", []int64{1}, []string{"A"}), "the store is usable after the errors")
}
