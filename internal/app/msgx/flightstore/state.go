package flightstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/relayhq/relay/internal/app/msgx/flight"
)

// LoadAllPageSize is how many flights LoadAll reads per page.
const LoadAllPageSize = 500

// Load returns the full states (FLIGHT_SCHD row and every detail row) of the
// flights in flids that exist, keyed by FLID; unknown FLIDs are absent, and
// duplicates in flids are harmless. With withChildren it also returns every
// flight whose MAID is one of flids, whatever its STATE (the MAFL projection
// and master/shared cascades, seed 000 §11.4, §12.3); the caller filters by
// STATE. The map is never nil. It is LoadWith with LoadOpts{Children:
// withChildren}.
//
// Exactly flids take one round trip, a batch of two statements (FLIGHT_SCHD
// rows, then every detail row in one result); with children the set is read
// first (see LoadWith). Under READ COMMITTED each statement reads its own
// snapshot, so for a consistent read (seed 000 §12.4) call it in the
// transaction that holds PIPELINE_LOCK — every writer of flights takes it —
// or in a REPEATABLE READ transaction. A detail row whose FLIGHT_SCHD row the
// first statement did not see is ignored. ctx governs the round trips.
func Load(ctx context.Context, q Querier, flids []string, withChildren bool) (map[string]*flight.State, error) {
	return LoadWith(ctx, q, flids, LoadOpts{Children: withChildren})
}

// LoadOpts are the optional settings of LoadWith. The zero value loads
// exactly the given flights.
type LoadOpts struct {
	// LockPipeline takes PIPELINE_LOCK (see LockPipeline) before reading, in
	// the same round trip: the lock statement leads the first batch. q must
	// then be a transaction.
	LockPipeline bool
	// Masters also loads the flights the given flights currently point to by
	// MAID (their masters). A coordinator can then pass the FLIDs a message
	// names plus the MAIDs it carries and get, with Children, the whole
	// snapshot flight.Decide needs (flight.Involved's set and the children of
	// each) in one call, the set read in one statement; it may be slightly
	// larger (the MAIDs of the masters the message names, and their children).
	Masters bool
	// Children also loads every flight whose MAID is one of the flights
	// selected so far (flids, and their masters with Masters), any STATE.
	Children bool
	// Cache, with LockPipeline, serves the flights whose row has not changed
	// since the cache recorded them: the first round trip then reads only the
	// row versions of the selected flights (with the lock), and a second one,
	// only when some are missing or stale, loads just those (and records
	// them). Without LockPipeline it is not used: the two reads would not see
	// one state of the flights.
	Cache *Cache
}

// LoadWith is Load with options: the pipeline lock and a wider set of flights.
// With no flids it loads nothing (and only takes the lock, if asked). Exactly
// the given flights take one round trip (the lock, if asked, leads the batch);
// with Masters or Children the set is read first (SchdKeys, with the lock),
// then its rows — two round trips, or one when a Cache serves every flight.
func LoadWith(ctx context.Context, q Querier, flids []string, opts LoadOpts) (map[string]*flight.State, error) {
	out := make(map[string]*flight.State, len(flids))
	if len(flids) == 0 {
		if opts.LockPipeline {
			return out, LockPipeline(ctx, q)
		}
		return out, nil
	}
	cached := opts.Cache != nil && opts.LockPipeline
	if !cached && !opts.Masters && !opts.Children {
		return out, loadExact(ctx, q, flids, opts.LockPipeline, out)
	}
	keys, err := rowVersions(ctx, q, flids, opts)
	if err != nil {
		return nil, err
	}
	if !cached {
		return out, loadExact(ctx, q, slices.Sorted(maps.Keys(keys)), false, out)
	}
	for _, f := range flids {
		if _, ok := keys[f]; !ok {
			opts.Cache.forget(f) // gone from the store
		}
	}
	var missing []string
	for f, k := range keys {
		if s, ok := opts.Cache.get(f, k.version, k.xmin); ok {
			out[f] = s
		} else {
			missing = append(missing, f)
		}
	}
	loaded := make(map[string]*flight.State, len(missing))
	if err := loadExact(ctx, q, missing, false, loaded); err != nil {
		return nil, err
	}
	for f, s := range loaded {
		out[f] = s
		if k := keys[f]; k.version == s.Version {
			opts.Cache.put(s, k.xmin)
		}
	}
	return out, nil
}

// rowVersion is a FLIGHT_SCHD row's STATE_VERSION and xmin.
type rowVersion struct{ version, xmin int64 }

// rowVersions reads the set LoadWith selects for flids and opts (SchdKeys),
// taking the lock first when opts asks, in one round trip.
func rowVersions(ctx context.Context, q Querier, flids []string, opts LoadOpts) (map[string]rowVersion, error) {
	op := flidOp("load", flids)
	b := &pgx.Batch{}
	if opts.LockPipeline {
		b.Queue(stmts.pipelineLock)
	}
	b.Queue(stmts.schdKeys, flids, opts.Children, opts.Masters)
	br := q.SendBatch(ctx, b)
	keys := make(map[string]rowVersion, len(flids))
	err := func() error {
		if opts.LockPipeline {
			if _, err := br.Exec(); err != nil {
				return mapErr("lock pipeline", err)
			}
		}
		rows, err := br.Query()
		if err != nil {
			return mapErr(op+": row versions", err)
		}
		var (
			flid string
			k    rowVersion
		)
		_, err = pgx.ForEachRow(rows, []any{&flid, &k.version, &k.xmin}, func() error {
			keys[flid] = k
			return nil
		})
		return mapErr(op+": row versions", err)
	}()
	if cerr := br.Close(); err == nil && cerr != nil {
		err = mapErr(op, cerr)
	}
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// loadExact reads the full states of exactly flids into out, in one round
// trip, taking the lock first when lock is set. No flids: nothing to read.
func loadExact(ctx context.Context, q Querier, flids []string, lock bool, out map[string]*flight.State) error {
	if len(flids) == 0 {
		if lock {
			return LockPipeline(ctx, q)
		}
		return nil
	}
	op := flidOp("load", flids)
	b := &pgx.Batch{}
	if lock {
		b.Queue(stmts.pipelineLock)
	}
	b.Queue(stmts.schdLoad, flids)
	b.Queue(stmts.detailsLoad, flids)
	br := q.SendBatch(ctx, b)
	err := func() error {
		if lock {
			if _, err := br.Exec(); err != nil {
				return mapErr("lock pipeline", err)
			}
		}
		if err := readSchd(br, out); err != nil {
			return mapErr(op, err)
		}
		if err := readDetails(br, out); err != nil {
			return mapErr(op+": details", err)
		}
		return nil
	}()
	if cerr := br.Close(); err == nil && cerr != nil {
		err = mapErr(op, cerr)
	}
	return err
}

// readSchd reads the SchdLoad result into out.
func readSchd(br pgx.BatchResults, out map[string]*flight.State) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			s                                               flight.State
			status                                          string
			opDay, flno, awcd, adid, flty, acty, acrg, term pgtype.Text
			stat, abst, abrs, maid, csop, csft              pgtype.Text
			created, updated, sodt, eodt, aodt              pgtype.Timestamptz
		)
		if err := rows.Scan(&s.FLID, &status, &s.Version, &opDay, &s.LastMsgID, &created, &updated,
			&flno, &awcd, &adid, &flty, &sodt, &eodt, &aodt, &acty, &acrg, &term,
			&stat, &abst, &abrs, &maid, &csop, &csft); err != nil {
			return err
		}
		s.Status = flight.Status(status)
		s.OperationDay = opDay.String
		s.CreatedAt, s.UpdatedAt = fromTS(created), fromTS(updated)
		s.FLNO, s.AWCD, s.ADID, s.FLTY = flno.String, awcd.String, adid.String, flty.String
		s.SODT, s.EODT, s.AODT = fromTS(sodt), fromTS(eodt), fromTS(aodt)
		s.ACTY, s.ACRG, s.TERM = acty.String, acrg.String, term.String
		s.STAT, s.ABST, s.ABRS = stat.String, abst.String, abrs.String
		s.MAID, s.CSOP, s.CSFT = maid.String, csop.String, csft.String
		out[s.FLID] = &s
	}
	return rows.Err()
}

// Collection names of the DetailsLoad "tab" column.
const tabDelay = "DELY"

var (
	tabResource = map[string]flight.ResourceKind{}
	tabService  = map[string]flight.ServiceKind{}
	tabRoute    = map[string]flight.RouteKind{}
)

func init() {
	for k := range flight.NumResourceKinds {
		tabResource[k.String()] = k
	}
	for k := range flight.NumServiceKinds {
		tabService[k.String()] = k
	}
	for k := range flight.NumRouteKinds {
		tabRoute[k.String()] = k
	}
}

// readDetails reads the DetailsLoad result (ordered by FLID, collection,
// ORDINAL) into the states of out.
func readDetails(br pgx.BatchResults, out map[string]*flight.State) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		tab, flid      string
		ordinal        int32
		seq, n         pgtype.Int8
		code, remark   pgtype.Text
		t1, t2, t3, t4 pgtype.Timestamptz
		s              *flight.State
	)
	for rows.Next() {
		if err := rows.Scan(&tab, &flid, &ordinal, &seq, &code, &t1, &t2, &t3, &t4, &n, &remark); err != nil {
			return err
		}
		if s == nil || s.FLID != flid {
			if s = out[flid]; s == nil {
				continue // written after the FLIGHT_SCHD statement's snapshot
			}
		}
		if k, ok := tabResource[tab]; ok {
			s.Resources[k] = append(s.Resources[k], flight.Resource{
				SourceSeq: fromInt8(seq), Code: code.String,
				Begin: fromTS(t1), End: fromTS(t2), ActualBegin: fromTS(t3), ActualEnd: fromTS(t4),
			})
		} else if k, ok := tabService[tab]; ok {
			s.Services[k] = append(s.Services[k], flight.Service{
				SourceSeq: fromInt8(seq), Code: code.String, Quantity: fromInt8(n), Remark: remark.String,
			})
		} else if k, ok := tabRoute[tab]; ok {
			s.Routes[k] = append(s.Routes[k], flight.RoutePoint{
				SourceSeq: fromInt8(seq), Airport: code.String, SchedArr: fromTS(t1), SchedDep: fromTS(t2),
			})
		} else if tab == tabDelay {
			s.Delays = append(s.Delays, flight.Delay{
				SourceSeq: fromInt8(seq), Code: code.String, Minutes: fromInt8(n), Remark: remark.String,
			})
		} else {
			return fmt.Errorf("unknown detail collection %q", tab)
		}
	}
	return rows.Err()
}

// Save writes each state as the whole truth of its flight: it upserts the
// FLIGHT_SCHD row (every column from the state) and rewrites every detail
// collection delete-then-insert (INV-14), ORDINAL 1..n in slice order. A
// collection that is empty in the state leaves no rows. It is SaveWith with
// no options.
//
// One round trip for the whole slice: a batch of two statements whatever the
// number of flights and collections — the detail deletes with the FLIGHT_SCHD
// upsert, then every detail row in one multi-table insert (parallel arrays
// and unnest). Outside an explicit transaction the batch is one implicit
// transaction.
//
// Save refuses, aborting the transaction, a state that would change a stored
// non-NULL OPERATION_DAY (ErrOperationDayChanged, INV-12) or lower the stored
// STATE_VERSION (ErrStaleVersion, INV-13). A nil state, an empty FLID or a FLID
// twice in states is an error before any I/O. CreatedAt and UpdatedAt must be
// set (NOT NULL). ctx governs the round trip.
func Save(ctx context.Context, q Querier, states []*flight.State) error {
	return SaveWith(ctx, q, states, SaveOpts{})
}

// SaveOpts are the optional settings of SaveWith. The zero value is Save.
type SaveOpts struct {
	// Base holds, by FLID, exactly what the store holds for flights of states
	// at the time of the save — the states as loaded in this transaction under
	// PIPELINE_LOCK, or as last saved by it. A detail collection equal in the
	// base and in the state (flight.Changed) is then left as it is instead of
	// being deleted and inserted again: the stored result is the same as
	// Save's, with a fraction of the writes, since a message usually changes
	// one collection of a flight. A flight missing from Base has every
	// collection rewritten. A base that differs from the stored rows would
	// leave those rows behind, so pass only what was read or written here.
	Base map[string]*flight.State
	// Cache, when set, records each saved state under its new row version
	// (see Cache).
	Cache *Cache
}

// SaveWith is Save with options: only the changed collections rewritten, and
// the saved states recorded in a Cache.
func SaveWith(ctx context.Context, q Querier, states []*flight.State, opts SaveOpts) error {
	if len(states) == 0 {
		return nil
	}
	flids := make([]string, len(states))
	seen := make(map[string]struct{}, len(states))
	for i, s := range states {
		if s == nil {
			return fmt.Errorf("flightstore: save: state %d is nil", i)
		}
		if s.FLID == "" {
			return fmt.Errorf("flightstore: save: state %d has no FLID", i)
		}
		if _, dup := seen[s.FLID]; dup {
			return fmt.Errorf("flightstore: save FLID %s: given twice", s.FLID)
		}
		seen[s.FLID] = struct{}{}
		flids[i] = s.FLID
	}

	var (
		schd          schdCols
		delTab, delID []string
		res           resourceCols
		nums          numberCols
		route         routeCols
	)
	for _, s := range states {
		schd.add(s)
		rewrite := rewritten(opts.Base[s.FLID], s)
		for _, tab := range rewrite {
			delTab, delID = append(delTab, tab), append(delID, s.FLID)
		}
		want := func(tab string) bool { return slices.Contains(rewrite, tab) }
		for k, items := range s.Resources {
			if tab := flight.ResourceKind(k).String(); want(tab) {
				res.add(tab, s.FLID, items)
			}
		}
		if want(tabDelay) {
			nums.addDelays(s.FLID, s.Delays)
		}
		for k, items := range s.Services {
			if tab := flight.ServiceKind(k).String(); want(tab) {
				nums.addServices(tab, s.FLID, items)
			}
		}
		for k, items := range s.Routes {
			if tab := flight.RouteKind(k).String(); want(tab) {
				route.add(tab, s.FLID, items)
			}
		}
	}

	op := flidOp("save", flids)
	b := &pgx.Batch{}
	b.Queue(stmts.schdSave, append(schd.args(), delTab, delID)...)
	details := len(res.flid)+len(nums.flid)+len(route.flid) > 0
	if details {
		args := append(append(res.args(), nums.args()...), route.args()...)
		b.Queue(stmts.detailsInsert, args...)
	}
	br := q.SendBatch(ctx, b)
	xmins, err := readXmins(br)
	if err != nil {
		err = mapErr(op+": FLIGHT_SCHD", err)
	} else if details {
		if _, e := br.Exec(); e != nil {
			err = mapErr(op+": details", e)
		}
	}
	if cerr := br.Close(); err == nil && cerr != nil {
		err = mapErr(op, cerr)
	}
	if err != nil {
		return err
	}
	if opts.Cache != nil {
		for _, s := range states {
			opts.Cache.put(s, xmins[s.FLID])
		}
	}
	return nil
}

// rewritten returns the detail collections of next that a save over base must
// rewrite: every collection without a base, else those flight.Changed names.
func rewritten(base, next *flight.State) []string {
	if base == nil {
		return detailTabs
	}
	return slices.DeleteFunc(flight.Changed(base, next), func(name string) bool {
		return !slices.Contains(detailTabs, name)
	})
}

// readXmins reads the (FLID, xmin) rows SchdSave returns.
func readXmins(br pgx.BatchResults) (map[string]int64, error) {
	rows, err := br.Query()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	var (
		flid string
		xmin int64
	)
	_, err = pgx.ForEachRow(rows, []any{&flid, &xmin}, func() error {
		out[flid] = xmin
		return nil
	})
	return out, err
}

// LoadAll returns every flight, FLID ascending, reading LoadAllPageSize
// flights per page (two round trips per page). Pages are separate reads: for
// one snapshot of the whole table run it in a REPEATABLE READ transaction.
// Meant for verification tools, not the pipeline. ctx governs every page.
func LoadAll(ctx context.Context, q Querier) ([]*flight.State, error) {
	var (
		out   []*flight.State
		after string
	)
	for {
		rows, err := q.Query(ctx, stmts.schdPage, after, LoadAllPageSize)
		if err != nil {
			return nil, mapErr("load all: page", err)
		}
		flids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, mapErr("load all: page", err)
		}
		if len(flids) == 0 {
			return out, nil
		}
		page, err := loadOrdered(ctx, q, flids)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		after = flids[len(flids)-1]
		if len(flids) < LoadAllPageSize {
			return out, nil
		}
	}
}

// loadOrdered loads flids (FLID ascending) and returns those that still exist
// in that order.
func loadOrdered(ctx context.Context, q Querier, flids []string) ([]*flight.State, error) {
	m, err := Load(ctx, q, flids, false)
	if err != nil {
		return nil, err
	}
	out := make([]*flight.State, 0, len(m))
	for _, f := range flids {
		if s := m[f]; s != nil {
			out = append(out, s)
		}
	}
	return out, nil
}

// Column builders: the parallel arrays of one unnest insert.

type schdCols struct {
	flid, state                                     []string
	version, lastMsgID                              []int64
	opDay, flno, awcd, adid, flty, acty, acrg, term []pgtype.Text
	stat, abst, abrs, maid, csop, csft              []pgtype.Text
	created, updated, sodt, eodt, aodt              []pgtype.Timestamptz
}

func (c *schdCols) add(s *flight.State) {
	c.flid = append(c.flid, s.FLID)
	c.state = append(c.state, string(s.Status))
	c.version = append(c.version, s.Version)
	c.opDay = append(c.opDay, text(s.OperationDay))
	c.lastMsgID = append(c.lastMsgID, s.LastMsgID)
	c.created = append(c.created, ts(s.CreatedAt))
	c.updated = append(c.updated, ts(s.UpdatedAt))
	c.flno = append(c.flno, text(s.FLNO))
	c.awcd = append(c.awcd, text(s.AWCD))
	c.adid = append(c.adid, text(s.ADID))
	c.flty = append(c.flty, text(s.FLTY))
	c.sodt = append(c.sodt, ts(s.SODT))
	c.eodt = append(c.eodt, ts(s.EODT))
	c.aodt = append(c.aodt, ts(s.AODT))
	c.acty = append(c.acty, text(s.ACTY))
	c.acrg = append(c.acrg, text(s.ACRG))
	c.term = append(c.term, text(s.TERM))
	c.stat = append(c.stat, text(s.STAT))
	c.abst = append(c.abst, text(s.ABST))
	c.abrs = append(c.abrs, text(s.ABRS))
	c.maid = append(c.maid, text(s.MAID))
	c.csop = append(c.csop, text(s.CSOP))
	c.csft = append(c.csft, text(s.CSFT))
}

// args follows the column order of SchdUpsert.
func (c *schdCols) args() []any {
	return []any{c.flid, c.state, c.version, c.opDay, c.lastMsgID, c.created, c.updated,
		c.flno, c.awcd, c.adid, c.flty, c.sodt, c.eodt, c.aodt, c.acty, c.acrg, c.term,
		c.stat, c.abst, c.abrs, c.maid, c.csop, c.csft}
}

// resourceCols are the resource rows of every kind; tab is the kind.
type resourceCols struct {
	tab, flid              []string
	ordinal                []int32
	seq                    []pgtype.Int8
	code                   []pgtype.Text
	begin, end, aBeg, aEnd []pgtype.Timestamptz
}

func (c *resourceCols) add(tab, flid string, items []flight.Resource) {
	for i, r := range items {
		c.tab = append(c.tab, tab)
		c.flid = append(c.flid, flid)
		c.ordinal = append(c.ordinal, int32(i+1))
		c.seq = append(c.seq, int8p(r.SourceSeq))
		c.code = append(c.code, text(r.Code))
		c.begin = append(c.begin, ts(r.Begin))
		c.end = append(c.end, ts(r.End))
		c.aBeg = append(c.aBeg, ts(r.ActualBegin))
		c.aEnd = append(c.aEnd, ts(r.ActualEnd))
	}
}

func (c *resourceCols) args() []any {
	return []any{c.tab, c.flid, c.ordinal, c.seq, c.code, c.begin, c.end, c.aBeg, c.aEnd}
}

// numberCols are the rows of one shape — a code, a number, a remark — of
// delays (tab DELY, the number is DURA) and services (tab SRVT or VIPF, QNTY).
type numberCols struct {
	tab, flid    []string
	ordinal      []int32
	seq, n       []pgtype.Int8
	code, remark []pgtype.Text
}

func (c *numberCols) add(tab, flid string, ordinal int, seq *int, code string, n *int, remark string) {
	c.tab = append(c.tab, tab)
	c.flid = append(c.flid, flid)
	c.ordinal = append(c.ordinal, int32(ordinal))
	c.seq = append(c.seq, int8p(seq))
	c.code = append(c.code, text(code))
	c.n = append(c.n, int8p(n))
	c.remark = append(c.remark, text(remark))
}

func (c *numberCols) addDelays(flid string, items []flight.Delay) {
	for i, d := range items {
		c.add(tabDelay, flid, i+1, d.SourceSeq, d.Code, d.Minutes, d.Remark)
	}
}

func (c *numberCols) addServices(tab, flid string, items []flight.Service) {
	for i, s := range items {
		c.add(tab, flid, i+1, s.SourceSeq, s.Code, s.Quantity, s.Remark)
	}
}

func (c *numberCols) args() []any {
	return []any{c.tab, c.flid, c.ordinal, c.seq, c.code, c.n, c.remark}
}

// routeCols are the route points of both kinds; kind is ROUTE_KIND.
type routeCols struct {
	kind, flid []string
	ordinal    []int32
	seq        []pgtype.Int8
	airport    []pgtype.Text
	arr, dep   []pgtype.Timestamptz
}

func (c *routeCols) add(kind, flid string, items []flight.RoutePoint) {
	for i, p := range items {
		c.kind = append(c.kind, kind)
		c.flid = append(c.flid, flid)
		c.ordinal = append(c.ordinal, int32(i+1))
		c.seq = append(c.seq, int8p(p.SourceSeq))
		c.airport = append(c.airport, text(p.Airport))
		c.arr = append(c.arr, ts(p.SchedArr))
		c.dep = append(c.dep, ts(p.SchedDep))
	}
}

func (c *routeCols) args() []any {
	return []any{c.kind, c.flid, c.ordinal, c.seq, c.airport, c.arr, c.dep}
}

// Value conversions: "" ↔ NULL, zero time ↔ NULL, nil *int ↔ NULL; times
// come back in UTC.

func text(s string) pgtype.Text { return pgtype.Text{String: s, Valid: s != ""} }

func ts(t time.Time) pgtype.Timestamptz { return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()} }

func fromTS(v pgtype.Timestamptz) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return v.Time.UTC()
}

func int8p(p *int) pgtype.Int8 {
	if p == nil {
		return pgtype.Int8{}
	}
	return pgtype.Int8{Int64: int64(*p), Valid: true}
}

func fromInt8(v pgtype.Int8) *int {
	if !v.Valid {
		return nil
	}
	n := int(v.Int64)
	return &n
}
