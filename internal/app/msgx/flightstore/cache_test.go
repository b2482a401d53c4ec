package flightstore_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/flightstore"
)

// mix returns cur with a random subset of its collections and scalars taken
// from donor, the version moved forward and OPERATION_DAY kept (INV-12).
func mix(r *rand.Rand, cur, donor *flight.State) *flight.State {
	n := cur.Clone()
	pick := func() bool { return r.IntN(3) == 0 }
	for k := range n.Resources {
		if pick() {
			n.Resources[k] = donor.Resources[k]
		}
	}
	if pick() {
		n.Delays = donor.Delays
	}
	for k := range n.Routes {
		if pick() {
			n.Routes[k] = donor.Routes[k]
		}
	}
	for k := range n.Services {
		if pick() {
			n.Services[k] = donor.Services[k]
		}
	}
	if pick() {
		n.FLNO, n.SODT, n.STAT = donor.FLNO, donor.SODT, donor.STAT
	}
	n.Version++
	n.UpdatedAt = n.UpdatedAt.Add(time.Second)
	return n
}

// SaveWith over an exact base stores the same result as a full Save — every
// collection as in the state, whatever subset changed — through many random
// rounds, in and out of transactions.
func TestSaveWithBaseStoresTheWholeState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := rand.New(rand.NewPCG(3, 4))
	cur := map[string]*flight.State{}
	var flids []string
	var states []*flight.State
	for i := range 20 {
		s := randomState(t, r, fmt.Sprintf("B%02d", i), 3)
		cur[s.FLID] = s
		flids = append(flids, s.FLID)
		states = append(states, s)
	}
	require.NoError(t, flightstore.Save(b.ctx, b.pool, states))
	for round := range 30 {
		base := map[string]*flight.State{}
		var next []*flight.State
		for _, f := range flids {
			if r.IntN(2) == 0 {
				continue
			}
			base[f] = cur[f]
			n := mix(r, cur[f], randomState(t, r, f, 3))
			next = append(next, n)
			cur[f] = n
		}
		if round%2 == 0 {
			require.NoError(t, flightstore.SaveWith(b.ctx, b.pool, next, flightstore.SaveOpts{Base: base}))
		} else {
			b.inTx(t, func(tx pgx.Tx) {
				require.NoError(t, flightstore.SaveWith(b.ctx, tx, next, flightstore.SaveOpts{Base: base}))
			})
		}
		got, err := flightstore.Load(b.ctx, b.pool, flids, false)
		require.NoError(t, err)
		require.Equal(t, cur, got, "round %d", round)
	}
}

// A collection equal in the base and the state keeps its rows (the same row
// versions); a changed one — ROUT apart from ERUT — is rewritten.
func TestSaveWithBaseRewritesOnlyChangedCollections(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := typicalState("F1")
	require.NoError(t, flightstore.Save(b.ctx, b.pool, []*flight.State{s}))
	rowVersions := func(table, where string) string {
		var v string
		require.NoError(t, b.pool.QueryRow(b.ctx,
			"SELECT coalesce(string_agg(xmin::text, ',' ORDER BY ordinal), '') FROM "+table+" WHERE flid = 'F1' "+where).Scan(&v))
		return v
	}
	ckic, rout, erut, gate := rowVersions("flight_ckic", ""), rowVersions("flight_route_point", "AND route_kind = 'ROUT'"),
		rowVersions("flight_route_point", "AND route_kind = 'ERUT'"), rowVersions("flight_gate", "")
	require.NotEmpty(t, ckic)
	require.NotEmpty(t, rout)
	require.NotEmpty(t, gate)

	n := s.Clone()
	n.Version++
	n.Resources[flight.GATE] = []flight.Resource{{Code: "G99"}}
	n.Routes[flight.ERUT] = append(n.Routes[flight.ERUT], flight.RoutePoint{Airport: "ZZZ"})
	require.NoError(t, flightstore.SaveWith(b.ctx, b.pool, []*flight.State{n}, flightstore.SaveOpts{Base: map[string]*flight.State{"F1": s}}))

	require.Equal(t, ckic, rowVersions("flight_ckic", ""), "unchanged CKIC rewritten")
	require.Equal(t, rout, rowVersions("flight_route_point", "AND route_kind = 'ROUT'"), "unchanged ROUT rewritten")
	require.NotEqual(t, erut, rowVersions("flight_route_point", "AND route_kind = 'ERUT'"))
	require.NotEqual(t, gate, rowVersions("flight_gate", ""))
	got, err := flightstore.Load(b.ctx, b.pool, []string{"F1"}, false)
	require.NoError(t, err)
	require.Equal(t, n, got["F1"])

	// Without a base every collection is rewritten (Save).
	n2 := n.Clone()
	n2.Version++
	require.NoError(t, flightstore.Save(b.ctx, b.pool, []*flight.State{n2}))
	require.NotEqual(t, ckic, rowVersions("flight_ckic", ""))
}

// loadCached runs a cache-backed LoadWith (with the pipeline lock) in its own
// transaction.
func loadCached(t *testing.T, b *bundle, c *flightstore.Cache, opts flightstore.LoadOpts, flids ...string) map[string]*flight.State {
	t.Helper()
	opts.LockPipeline, opts.Cache = true, c
	var got map[string]*flight.State
	b.inTx(t, func(tx pgx.Tx) {
		var err error
		got, err = flightstore.LoadWith(b.ctx, tx, flids, opts)
		require.NoError(t, err)
	})
	return got
}

// The cache serves a flight only while its row is the one it recorded: a
// cache-backed load always returns what an uncached load returns — after the
// cache's own saves, a save by someone else (even of the same STATE_VERSION),
// a save that rolled back, a deletion — and it actually serves the unchanged
// flights.
func TestCacheServesOnlyTheCurrentRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := flightstore.NewCache(100)
	check := func(step string, opts flightstore.LoadOpts, flids ...string) map[string]*flight.State {
		t.Helper()
		got := loadCached(t, b, c, opts, flids...)
		want, err := flightstore.LoadWith(b.ctx, b.pool, flids, flightstore.LoadOpts{Masters: opts.Masters, Children: opts.Children})
		require.NoError(t, err)
		require.Equal(t, want, got, step)
		return got
	}

	// Times with nanoseconds in a non-UTC zone come back as the store holds them.
	zone := time.FixedZone("UTC+8", 8*3600)
	m := typicalState("M1")
	m.SODT = time.Date(2026, 3, 1, 9, 30, 0, 123456789, zone)
	m.UpdatedAt = m.UpdatedAt.Add(987 * time.Nanosecond)
	k := typicalState("K1")
	k.MAID = "M1"
	b.inTx(t, func(tx pgx.Tx) {
		require.NoError(t, flightstore.SaveWith(b.ctx, tx, []*flight.State{m, k}, flightstore.SaveOpts{Cache: c}))
	})
	before := c.Stats()
	got := check("after the cache's own save", flightstore.LoadOpts{Children: true}, "M1")
	require.Len(t, got, 2)
	require.Equal(t, before.Hits+2, c.Stats().Hits, "both flights served from the cache")
	require.Equal(t, before.Misses, c.Stats().Misses)

	// Someone else saves K1 again with the same STATE_VERSION: a new row version.
	k2 := k.Clone()
	k2.Resources[flight.GATE] = []flight.Resource{{Code: "OTHER"}}
	require.NoError(t, flightstore.Save(b.ctx, b.pool, []*flight.State{k2}))
	misses := c.Stats().Misses
	got = check("after a save by someone else", flightstore.LoadOpts{Children: true}, "M1")
	require.Equal(t, "OTHER", got["K1"].Resources[flight.GATE][0].Code)
	require.Equal(t, misses+1, c.Stats().Misses)

	// A cache-backed save whose transaction rolls back leaves the store as it was.
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	k3 := k2.Clone()
	k3.Version++
	k3.FLNO = "ROLLED-BACK"
	require.NoError(t, flightstore.SaveWith(b.ctx, tx, []*flight.State{k3}, flightstore.SaveOpts{Cache: c}))
	inTx, err := flightstore.LoadWith(b.ctx, tx, []string{"K1"}, flightstore.LoadOpts{LockPipeline: true, Cache: c})
	require.NoError(t, err)
	require.Equal(t, "ROLLED-BACK", inTx["K1"].FLNO, "the saving transaction sees its own save")
	require.NoError(t, tx.Rollback(b.ctx))
	got = check("after a rolled-back save", flightstore.LoadOpts{}, "K1")
	require.Equal(t, k2.FLNO, got["K1"].FLNO)

	// Two saves of one flight in one transaction share the xmin: the later wins.
	b.inTx(t, func(tx pgx.Tx) {
		a, z := k2.Clone(), k2.Clone()
		a.Version, z.Version = k2.Version+1, k2.Version+2
		a.FLNO, z.FLNO = "FIRST", "SECOND"
		require.NoError(t, flightstore.SaveWith(b.ctx, tx, []*flight.State{a}, flightstore.SaveOpts{Cache: c}))
		require.NoError(t, flightstore.SaveWith(b.ctx, tx, []*flight.State{z}, flightstore.SaveOpts{Cache: c}))
	})
	got = check("after two saves in one transaction", flightstore.LoadOpts{}, "K1")
	require.Equal(t, "SECOND", got["K1"].FLNO)

	// A deleted flight is gone, not served.
	_, err = b.pool.Exec(b.ctx, "DELETE FROM flight_schd WHERE flid = 'K1'")
	require.NoError(t, err)
	got = check("after a deletion", flightstore.LoadOpts{Children: true}, "M1", "K1")
	require.NotContains(t, got, "K1")

	// A served state is a copy: changing it changes neither the cache nor the next load.
	got = loadCached(t, b, c, flightstore.LoadOpts{}, "M1")
	got["M1"].Resources[flight.GATE] = nil
	got["M1"].FLNO = "MUTATED"
	check("after a caller changed a served state", flightstore.LoadOpts{}, "M1")
}

// The cache holds at most its capacity of flights and still loads every one.
func TestCacheCapacity(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := flightstore.NewCache(3)
	var states []*flight.State
	var flids []string
	for i := range 8 {
		s := typicalState(fmt.Sprintf("C%d", i))
		states, flids = append(states, s), append(flids, s.FLID)
	}
	b.inTx(t, func(tx pgx.Tx) {
		require.NoError(t, flightstore.SaveWith(b.ctx, tx, states, flightstore.SaveOpts{Cache: c}))
	})
	require.Equal(t, 3, c.Stats().Flights)
	got := loadCached(t, b, c, flightstore.LoadOpts{}, flids...)
	require.Equal(t, byFLID(states...), got)
	require.LessOrEqual(t, c.Stats().Flights, 3)
}
