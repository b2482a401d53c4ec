package flightstore_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/flightstore"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// The line loads, applies once and is then current.
func TestMigrationLine(t *testing.T) {
	t.Parallel()
	line := flightstore.MigrationLine()
	require.Equal(t, "msgx", line.Name)
	migs, err := relaymigrate.Load(line)
	require.NoError(t, err)
	require.NotEmpty(t, migs)
	setup(t) // applies it; setup fails otherwise
}

// Every field of randomized and fully populated states — NULL and non-NULL
// values, repeated codes and SOURCE_SEQs, every collection — survives Save and
// Load exactly, and a second Save replaces the collections whole (INV-14).
func TestSaveLoadRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := rand.New(rand.NewPCG(1, 2))

	var states []*flight.State
	for i := range 60 {
		states = append(states, randomState(t, r, fmt.Sprintf("F%03d", i), 4))
	}
	full := randomState(t, r, "FULL", 0)
	seq := 7
	full.Resources[flight.GATE] = append(full.Resources[flight.GATE], full.Resources[flight.GATE][0],
		flight.Resource{SourceSeq: &seq, Code: full.Resources[flight.GATE][0].Code},
		flight.Resource{SourceSeq: &seq}) // repeated code, repeated SOURCE_SEQ, all-NULL values
	minimal := &flight.State{FLID: "MIN", Status: flight.Active, Version: 1, CreatedAt: base, UpdatedAt: base}
	states = append(states, full, minimal, typicalState("TYP"))
	require.NoError(t, flightstore.Save(b.ctx, b.pool, states))

	flids := make([]string, 0, len(states))
	for _, s := range states {
		flids = append(flids, s.FLID)
	}
	got, err := flightstore.Load(b.ctx, b.pool, append(flids, "UNKNOWN", "F001"), false)
	require.NoError(t, err)
	require.Equal(t, byFLID(states...), got)

	// ORDINAL is 1..n in slice order for every flight and kind.
	require.Zero(t, b.count(t, `SELECT count(*) FROM (
		SELECT flid, count(*) AS n, max(ordinal) AS m FROM flight_gate GROUP BY flid
		UNION ALL SELECT flid, count(*), max(ordinal) FROM flight_srvt GROUP BY flid
		UNION ALL SELECT flid || route_kind, count(*), max(ordinal) FROM flight_route_point GROUP BY flid, route_kind) x WHERE n <> m`))
	require.Equal(t, len(full.Resources[flight.GATE]), b.count(t, "SELECT count(*) FROM flight_gate WHERE flid = 'FULL'"))

	// Rewrite: collections shrink, grow, empty and reorder; scalars go NULL.
	var next []*flight.State
	for i, s := range states {
		n := randomState(t, r, s.FLID, 3)
		n.Version = s.Version + int64(i%2) // equal versions may be saved again
		if s.OperationDay != "" {
			n.OperationDay = s.OperationDay // INV-12
		}
		next = append(next, n)
	}
	next[0].Resources = [flight.NumResourceKinds][]flight.Resource{}
	next[0].Delays, next[0].Routes, next[0].Services = nil, [flight.NumRouteKinds][]flight.RoutePoint{}, [flight.NumServiceKinds][]flight.Service{}
	require.NoError(t, flightstore.Save(b.ctx, b.pool, next))
	got, err = flightstore.Load(b.ctx, b.pool, flids, false)
	require.NoError(t, err)
	require.Equal(t, byFLID(next...), got)

	all, err := flightstore.LoadAll(b.ctx, b.pool)
	require.NoError(t, err)
	want := slices.Clone(next)
	slices.SortFunc(want, func(a, b *flight.State) int { return cmpString(a.FLID, b.FLID) })
	require.Equal(t, want, all)

	empty, err := flightstore.Load(b.ctx, b.pool, nil, true)
	require.NoError(t, err)
	require.Empty(t, empty)
	require.NotNil(t, empty)
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// LoadAll pages through more flights than one page, FLID ascending.
func TestLoadAllPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var states []*flight.State
	for i := range flightstore.LoadAllPageSize + 7 {
		states = append(states, typicalState(fmt.Sprintf("P%04d", i)))
	}
	require.NoError(t, flightstore.Save(b.ctx, b.pool, states))
	all, err := flightstore.LoadAll(b.ctx, b.pool)
	require.NoError(t, err)
	require.Equal(t, states, all)
}

// Children are the flights whose MAID is a given FLID, in any STATE; Masters
// adds the flights the given ones point to.
func TestLoadChildrenAndMasters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mk := func(flid, maid string, st flight.Status) *flight.State {
		s := typicalState(flid)
		s.MAID, s.Status = maid, st
		return s
	}
	m := mk("M", "", flight.Active)
	c1 := mk("C1", "M", flight.Active)
	c2 := mk("C2", "M", flight.Deleted)
	self := mk("S", "S", flight.Active) // MAID = FLID
	other := mk("O", "X", flight.Active)
	m2 := mk("M2", "", flight.Active)
	c3 := mk("C3", "M2", flight.Active)
	all := []*flight.State{m, c1, c2, self, other, m2, c3}
	require.NoError(t, flightstore.Save(b.ctx, b.pool, all))

	load := func(opts flightstore.LoadOpts, flids ...string) map[string]*flight.State {
		got, err := flightstore.LoadWith(b.ctx, b.pool, flids, opts)
		require.NoError(t, err)
		return got
	}
	require.Equal(t, byFLID(m), load(flightstore.LoadOpts{}, "M"))
	require.Equal(t, byFLID(m, c1, c2), load(flightstore.LoadOpts{Children: true}, "M"))
	require.Equal(t, byFLID(self), load(flightstore.LoadOpts{Children: true}, "S"))
	require.Equal(t, byFLID(c1, m), load(flightstore.LoadOpts{Masters: true}, "C1"))
	require.Equal(t, byFLID(c1, c2, m), load(flightstore.LoadOpts{Masters: true, Children: true}, "C1"))
	require.Equal(t, byFLID(c1, c2, m, m2, c3), load(flightstore.LoadOpts{Masters: true, Children: true}, "C1", "M2", "NOPE"))
	require.Equal(t, byFLID(other), load(flightstore.LoadOpts{Masters: true, Children: true}, "O")) // dangling MAID
	got, err := flightstore.Load(b.ctx, b.pool, []string{"M", "M"}, true)
	require.NoError(t, err)
	require.Equal(t, byFLID(m, c1, c2), got)
}

// Save refuses to change a set OPERATION_DAY (INV-12) or lower STATE_VERSION
// (INV-13) and then writes nothing, even outside a transaction; it accepts a
// first OPERATION_DAY and an equal version.
func TestSaveGuards(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := typicalState("G1")
	s.OperationDay, s.Version = "", 3
	require.NoError(t, flightstore.Save(b.ctx, b.pool, []*flight.State{s}))

	set := s.Clone()
	set.OperationDay = "20260302"
	require.NoError(t, flightstore.Save(b.ctx, b.pool, []*flight.State{set}))

	stored := set.Clone()
	for name, tc := range map[string]struct {
		edit func(*flight.State)
		want error
	}{
		"day changes":  {func(s *flight.State) { s.OperationDay = "20260303" }, flightstore.ErrOperationDayChanged},
		"day cleared":  {func(s *flight.State) { s.OperationDay = "" }, flightstore.ErrOperationDayChanged},
		"version back": {func(s *flight.State) { s.Version = 2 }, flightstore.ErrStaleVersion},
	} {
		bad := stored.Clone()
		bad.Resources[flight.GATE] = nil // would delete details if it got through
		tc.edit(bad)
		other := typicalState("G2")
		err := flightstore.Save(b.ctx, b.pool, []*flight.State{other, bad})
		require.ErrorIs(t, err, tc.want, name)
		require.ErrorContains(t, err, "G1", name)
		got, err := flightstore.Load(b.ctx, b.pool, []string{"G1", "G2"}, false)
		require.NoError(t, err)
		require.Equal(t, byFLID(stored), got, name)
	}

	for name, states := range map[string][]*flight.State{
		"nil":       {nil},
		"no FLID":   {{Status: flight.Active, Version: 1, CreatedAt: base, UpdatedAt: base}},
		"twice":     {typicalState("D"), typicalState("D")},
		"no times":  {{FLID: "T", Status: flight.Active, Version: 1}},
		"no status": {{FLID: "T", Version: 1, CreatedAt: base, UpdatedAt: base}},
		"version 0": {{FLID: "T", Status: flight.Active, CreatedAt: base, UpdatedAt: base}},
		"bad day":   {{FLID: "T", Status: flight.Active, Version: 1, OperationDay: "2026-03-01", CreatedAt: base, UpdatedAt: base}},
	} {
		require.Error(t, flightstore.Save(b.ctx, b.pool, states), name)
	}
	require.Zero(t, b.count(t, "SELECT count(*) FROM flight_schd WHERE flid IN ('D', 'T')"))
	require.NoError(t, flightstore.Save(b.ctx, b.pool, nil))
}

// In a transaction a refused Save aborts the transaction; the caller rolls back.
func TestSaveGuardAbortsTx(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := typicalState("A")
	s.Version = 5
	require.NoError(t, flightstore.Save(b.ctx, b.pool, []*flight.State{s}))
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(b.ctx) }()
	old := s.Clone()
	old.Version = 4
	err = flightstore.Save(b.ctx, tx, []*flight.State{old})
	require.ErrorIs(t, err, flightstore.ErrStaleVersion)
	require.NotErrorIs(t, err, relaytype.ErrTransient)
	_, err = flightstore.Load(b.ctx, tx, []string{"A"}, false)
	require.Error(t, err, "the transaction is aborted")
	require.NoError(t, tx.Rollback(b.ctx))
}

// Load and Save work the same on a transaction and a single connection.
func TestQueriers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	conn, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	defer conn.Release()
	var q flightstore.Querier = conn.Conn()
	s := typicalState("Q")
	require.NoError(t, flightstore.Save(b.ctx, q, []*flight.State{s}))
	b.inTx(t, func(tx pgx.Tx) {
		got, err := flightstore.Load(b.ctx, tx, []string{"Q"}, true)
		require.NoError(t, err)
		require.Equal(t, byFLID(s), got)
	})
}

// The hot statements (Load's two, Save's two) reach a generic plan: their
// parameters go through materialized CTEs so that no estimate depends on
// them, so PostgreSQL stops planning a custom plan per execution after the
// fifth (pg_prepared_statements counts both kinds per session).
func TestHotStatementsUseGenericPlans(t *testing.T) {
	t.Parallel()
	b := setup(t)
	conn, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	defer conn.Release()
	s := typicalState("P")
	for i := range 12 {
		s.Version = int64(i + 1)
		require.NoError(t, flightstore.Save(b.ctx, conn, []*flight.State{s}))
		_, err := flightstore.LoadWith(b.ctx, conn, []string{"P", fmt.Sprint(i)}, flightstore.LoadOpts{Children: i%2 == 0, Masters: i%3 == 0})
		require.NoError(t, err)
	}
	rows, err := conn.Query(b.ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements
		WHERE statement LIKE '%flight_schd%'`)
	require.NoError(t, err)
	type stmt struct {
		SQL             string
		Generic, Custom int64
	}
	stmts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[stmt])
	require.NoError(t, err)
	require.Len(t, stmts, 4)
	for _, st := range stmts {
		require.Positive(t, st.Generic, "%d generic, %d custom plans: %.80s", st.Generic, st.Custom, st.SQL)
	}
}
