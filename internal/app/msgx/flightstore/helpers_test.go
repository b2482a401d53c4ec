package flightstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/flightstore"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaymigrate"
)

// bundle is one test's database: a fresh schema with the msgx line applied.
type bundle struct {
	ctx  context.Context
	pool *pgxpool.Pool
}

func setup(t testing.TB) *bundle {
	t.Helper()
	ctx := context.Background()
	d, err := relaypgx.Open(ctx, testdb.PGSchema(t))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	clock := relayclock.NewFake(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	_, err = relaymigrate.Up(ctx, d, clock, flightstore.MigrationLine())
	require.NoError(t, err)
	return &bundle{ctx: ctx, pool: d.Pool()}
}

// inTx runs fn in a transaction and commits it.
func (b *bundle) inTx(t testing.TB, fn func(tx pgx.Tx)) {
	t.Helper()
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(b.ctx) }()
	fn(tx)
	require.NoError(t, tx.Commit(b.ctx))
}

// count returns the result of a count(*) query.
func (b *bundle) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(b.ctx, sql, args...).Scan(&n))
	return n
}

var (
	base     = time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	timeType = reflect.TypeFor[time.Time]()
	// Small pools make repeated codes and SOURCE_SEQs likely.
	stringPool = []string{"A1", "A1", "B22", "航班", `x'y"z\`, " spaced ", "a\tb", "GATE-07"}
	intPool    = []int{0, 1, 1, 2, -3, 7, 1 << 40}
)

// filler fills every field of a value by reflection, so that a field added to
// flight.State later is exercised (and must be persisted) without editing the
// test. zeroOneIn > 0 leaves about one value in zeroOneIn zero (NULL, nil,
// empty collection); 0 fills everything.
type filler struct {
	r         *rand.Rand
	zeroOneIn int
}

func (f filler) zero() bool { return f.zeroOneIn > 0 && f.r.IntN(f.zeroOneIn) == 0 }

func (f filler) fill(t testing.TB, v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == timeType {
			if !f.zero() {
				// UTC, microseconds: what PostgreSQL keeps.
				v.Set(reflect.ValueOf(time.UnixMicro(base.UnixMicro() + f.r.Int64N(400*24*3600*1e6) - 200*24*3600*1e6).UTC()))
			}
			return
		}
		for i := range v.NumField() {
			f.fill(t, v.Field(i))
		}
	case reflect.String:
		if !f.zero() {
			v.SetString(stringPool[f.r.IntN(len(stringPool))])
		}
	case reflect.Int, reflect.Int64:
		v.SetInt(f.r.Int64N(1 << 50))
	case reflect.Pointer:
		if v.Type().Elem().Kind() != reflect.Int {
			t.Fatalf("filler: unsupported pointer %s", v.Type())
		}
		if !f.zero() {
			n := intPool[f.r.IntN(len(intPool))]
			v.Set(reflect.ValueOf(&n))
		}
	case reflect.Slice:
		n := 1 + f.r.IntN(4)
		if f.zero() {
			return // nil: an empty collection
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			f.fill(t, s.Index(i))
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			f.fill(t, v.Index(i))
		}
	default:
		t.Fatalf("filler: unsupported kind %s (%s): teach the filler and the store", v.Kind(), v.Type())
	}
}

// randomState returns a state with every field filled at random, then the
// constrained ones fixed: FLID, STATE, STATE_VERSION, OPERATION_DAY, MAID and
// the audit times.
func randomState(t testing.TB, r *rand.Rand, flid string, zeroOneIn int) *flight.State {
	s := &flight.State{}
	filler{r: r, zeroOneIn: zeroOneIn}.fill(t, reflect.ValueOf(s).Elem())
	s.FLID = flid
	s.Status = []flight.Status{flight.Active, flight.Deleted}[r.IntN(2)]
	s.Version = 1 + r.Int64N(50)
	s.OperationDay = ""
	if r.IntN(3) > 0 {
		s.OperationDay = fmt.Sprintf("202603%02d", 1+r.IntN(28))
	}
	if s.MAID != "" {
		s.MAID = "M-" + s.MAID
	}
	s.CreatedAt = base.Add(time.Duration(r.Int64N(1e9)) * time.Microsecond)
	s.UpdatedAt = s.CreatedAt.Add(time.Duration(r.Int64N(1e9)) * time.Microsecond)
	return s
}

// typicalState is a flight as the pipeline sees it: base fields and several
// collections.
func typicalState(flid string) *flight.State {
	seq := func(n int) *int { return &n }
	at := func(min int) time.Time { return base.Add(time.Duration(min) * time.Minute) }
	s := &flight.State{
		FLID: flid, Status: flight.Active, Version: 1, OperationDay: "20260301", LastMsgID: 1,
		CreatedAt: base, UpdatedAt: base,
		FLNO: "MU5101", AWCD: "MU", ADID: "D", FLTY: "PAX", SODT: at(120), EODT: at(125),
		ACTY: "A321", ACRG: "B-1234", TERM: "T2", STAT: "SCH",
	}
	s.Resources[flight.GATE] = []flight.Resource{{SourceSeq: seq(1), Code: "G12", Begin: at(60), End: at(110)}, {SourceSeq: seq(2), Code: "G14", Begin: at(60), End: at(110)}}
	s.Resources[flight.CKIC] = []flight.Resource{
		{SourceSeq: seq(1), Code: "C01", Begin: at(-60), End: at(75)}, {SourceSeq: seq(2), Code: "C02", Begin: at(-60), End: at(75)},
		{SourceSeq: seq(3), Code: "C03", Begin: at(-60), End: at(75)}, {SourceSeq: seq(4), Code: "C04", Begin: at(-60), End: at(75)},
		{SourceSeq: seq(5), Code: "C05", Begin: at(-60), End: at(75)}, {SourceSeq: seq(6), Code: "C06", Begin: at(-60), End: at(75)},
	}
	s.Resources[flight.STND] = []flight.Resource{{Code: "215", Begin: at(0), End: at(130)}}
	s.Resources[flight.CHUT] = []flight.Resource{{Code: "CH3", Begin: at(-60), End: at(90)}}
	s.Delays = []flight.Delay{{Code: "81", Minutes: seq(15), Remark: "ATC"}}
	s.Routes[flight.ROUT] = []flight.RoutePoint{{SourceSeq: seq(1), Airport: "PVG", SchedDep: at(120)}, {SourceSeq: seq(2), Airport: "PEK", SchedArr: at(260)}}
	s.Services[flight.SRVT] = []flight.Service{{Code: "WCHR", Quantity: seq(2)}}
	return s
}

// byFLID keys states by FLID.
func byFLID(states ...*flight.State) map[string]*flight.State {
	m := make(map[string]*flight.State, len(states))
	for _, s := range states {
		m[s.FLID] = s
	}
	return m
}
