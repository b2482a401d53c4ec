package simulate

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
)

// Sender and receiver codes of every generated message.
const (
	Sender   = "AODB"
	Receiver = "RMS"
)

// homeAirport is the simulated airport.
const homeAirport = "PEK"

var (
	airlines   = []string{"CA", "MU", "CZ", "HU", "3U", "ZH", "FM", "MF", "SC", "9C", "HO", "KN"}
	flightType = []string{"W/Z", "W/Z", "W/Z", "W/Z", "J/B", "L/W", "W/C"}
	acTypes    = []string{"A320", "A321", "A319", "B738", "B38M", "B789", "A333", "A359", "C919", "E190", "B77W"}
	terminals  = []string{"T1", "T2", "T3"}
	airports   = []string{"SHA", "PVG", "CAN", "CTU", "SZX", "KMG", "XIY", "HGH", "CKG", "WUH", "TAO", "NKG", "XMN", "HKG", "ICN", "NRT"}
	statuses   = []string{"SCH", "BOR", "DEP", "ARR", "DLY", "CNL", "DIV", "TKO", "LND", "ONB"}
	abnormal   = []string{"DELAY", "CANCEL", "DIVERT", "RETURN", "ALTERN"}
	reasons    = []string{"WX", "ATC", "TECH", "CREW", "PAX", "LATE", "MIL", "OPS"}
	delayCodes = []string{"WX", "ATC", "TECH", "CREW", "PAX", "LATE", "CATR", "FUEL"}
	remarks    = []string{"thunderstorm", "flow control", "fuel & catering", "late inbound <A1>", "贵宾室 3", "crew rest", "de-icing"}
	services   = []string{"WCHR", "WCHS", "WCHC", "UMNR", "MEDA", "BLND", "DEAF", "PETC"}
	vipCodes   = []string{"VIP", "CIP", "VVIP"}
	regChars   = "0123456789ABCDEFGHJKLMNPQRSTUVWXYZ"
)

// gen generates a plan. The model is updated as every message is added, so
// each choice (which flight is ACTIVE, which is a master) sees the state the
// pipeline will have reached at that point of the mailbox.
type gen struct {
	o     Options
	rng   *rand.Rand
	day   time.Time // 00:00 of the operating day, a wall clock held in UTC like the decoder's
	dttm  time.Time // send time of the next message
	model *Model
	msgs  []Message
	seqn  int
	flids []string // every flight created so far, in creation order

	// lastSet is "FLID|subtype" -> plan index of the last FLOP that changed
	// that group, to find FLOPs whose effect was overwritten since.
	lastSet   map[string]int
	usedClear bool // the flight record being built carries an explicit empty

	nUpdate, nStat, nDelete, nDup, nMalformed, nIgnored, nProtocol, nAdhoc int
}

func generate(opts Options) *Plan {
	o := opts.counts()
	g := &gen{
		o:       o,
		rng:     rand.New(rand.NewPCG(uint64(o.Seed), 0x4d534758_41414442)),
		model:   newModel(),
		lastSet: map[string]int{},
	}
	g.day, _ = time.ParseInLocation("20060102", o.Day, time.UTC)
	g.plan()
	slots := g.slots()
	subtypes := make([]string, o.Updates)
	for i := range subtypes {
		subtypes[i] = sisxml.FlopSubtypes[i%len(sisxml.FlopSubtypes)]
	}
	g.rng.Shuffle(len(subtypes), func(i, j int) { subtypes[i], subtypes[j] = subtypes[j], subtypes[i] })
	if len(slots) > 0 {
		// The day's traffic is spread from 00:10 to 23:50.
		step := (23*time.Hour + 40*time.Minute) / time.Duration(len(slots))
		for i, c := range slots {
			g.dttm = g.day.Add(10*time.Minute + time.Duration(i)*step).Truncate(time.Second)
			switch c {
			case CategoryUpdate:
				g.update(subtypes[g.nUpdate])
			case CategoryDeletion:
				g.deletion()
			case CategoryAdhoc:
				g.adhoc()
			case CategoryDuplicate:
				g.duplicate()
			case CategoryMalformed:
				g.malformed()
			case CategoryIgnored:
				g.ignored()
			case CategoryProtocol:
				g.protocol()
			case CategoryReplan:
				g.replan()
			case CategoryRollback:
				g.rollback()
			}
		}
	}
	g.markLate()
	g.markNullReceiveTime()
	return &Plan{opts: opts, msgs: g.msgs, model: g.model}
}

// slots returns the shuffled categories of every message after the plan
// packages; never a rollback last, so every hole has a row after it.
func (g *gen) slots() []Category {
	var s []Category
	for _, c := range []struct {
		cat Category
		n   int
	}{{CategoryUpdate, g.o.Updates}, {CategoryDeletion, g.o.Deletions}, {CategoryAdhoc, g.o.Adhoc},
		{CategoryDuplicate, g.o.Duplicates}, {CategoryMalformed, g.o.Malformed}, {CategoryIgnored, g.o.Ignored},
		{CategoryProtocol, g.o.Protocol}, {CategoryReplan, g.o.Replans}, {CategoryRollback, g.o.Rollbacks}} {
		for range c.n {
			s = append(s, c.cat)
		}
	}
	g.rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
	for j := len(s) - 1; j >= 0 && len(s) > 0 && s[len(s)-1] == CategoryRollback; j-- {
		if s[j] != CategoryRollback {
			s[j], s[len(s)-1] = s[len(s)-1], s[j]
		}
	}
	return s
}

// add appends m, applying it to the model unless it is rolled back, and
// returns its plan index.
func (g *gen) add(m Message) int {
	idx := len(g.msgs)
	if m.Category != CategoryDuplicate {
		m.Original = -1
	}
	if m.Raw == nil && m.Msg != nil {
		m.Raw = encode(m.Msg)
	}
	if m.Category != CategoryRollback {
		m.Outcome, m.Reason = g.model.apply(idx, m.Msg)
	}
	g.msgs = append(g.msgs, m)
	return idx
}

func encode(m *sisxml.Message) []byte {
	raw, err := sisxml.Encode(m)
	if err != nil {
		panic(fmt.Sprintf("simulate: generated an unencodable message: %v", err))
	}
	return raw
}

// meta returns the envelope of the next message: SEQN is Day followed by a
// six-digit counter, unique within the plan.
func (g *gen) meta(typ, styp string) sisxml.Meta {
	g.seqn++
	return sisxml.Meta{SNDR: Sender, RCVR: Receiver, SEQN: fmt.Sprintf("%s%06d", g.o.Day, g.seqn), DTTM: g.dttm, TYPE: typ, STYP: styp}
}

func schedule(meta sisxml.Meta, records []sisxml.Flight) *sisxml.Message {
	return &sisxml.Message{Meta: meta, Kind: sisxml.KindSchd,
		Schd: &sisxml.Schedule{Subtype: meta.STYP, RCNT: len(records), Flights: records}}
}

// ---- random values ----

func pick[T any](g *gen, list []T) T { return list[g.rng.IntN(len(list))] }

func (g *gen) chance(percent int) bool { return g.rng.IntN(100) < percent }

// minutes returns a multiple of 5 minutes in [lo, hi] (in units of 5 minutes).
func (g *gen) minutes(lo, hi int) time.Duration {
	return time.Duration(lo+g.rng.IntN(hi-lo+1)) * 5 * time.Minute
}

// onDay clamps t into the operating day.
func (g *gen) onDay(t time.Time) time.Time {
	if t.Before(g.day) {
		return g.day
	}
	if last := g.day.Add(24*time.Hour - time.Minute); t.After(last) {
		return last
	}
	return t
}

func (g *gen) flightNumber(awcd string) string { return awcd + strconv.Itoa(1000+g.rng.IntN(9000)) }

func (g *gen) registration() string {
	b := []byte("B-")
	b = append(b, regChars[g.rng.IntN(10)])
	for range 3 {
		b = append(b, regChars[g.rng.IntN(len(regChars))])
	}
	return string(b)
}

func cleared[T any](g *gen) sisxml.Field[T] {
	g.usedClear = true
	return sisxml.Cleared[T]()
}

func clearedList[T any](g *gen) sisxml.List[T] {
	g.usedClear = true
	return sisxml.Items[T]()
}

// seq returns a SEQU: mostly position+1, sometimes absent or repeated
// (SOURCE_SEQ may be NULL or repeat, seed 000 §11.3).
func (g *gen) seq(i int) sisxml.Field[int] {
	switch r := g.rng.IntN(20); {
	case r < 2:
		return sisxml.Field[int]{}
	case r < 3:
		return sisxml.Val(1)
	}
	return sisxml.Val(i + 1)
}

// resources returns a resource collection of kind sub around base: 1 to
// most items (sometimes the same code twice), or, with clear, sometimes <X/>.
func (g *gen) resources(sub string, base time.Time, most int, clear bool) sisxml.List[sisxml.Resource] {
	if clear && g.rng.IntN(8) == 0 {
		return clearedList[sisxml.Resource](g)
	}
	n := 1 + g.rng.IntN(most)
	items := make([]sisxml.Resource, n)
	for i := range items {
		r := sisxml.Resource{SEQU: g.seq(i)}
		j := g.minutes(0, 2)
		switch sub {
		case "GATE":
			r.CODE = sisxml.Val(fmt.Sprintf("%c%02d", 'A'+g.rng.IntN(5), 1+g.rng.IntN(40)))
			r.BTIM, r.ETIM = sisxml.Val(base.Add(-50*time.Minute+j)), sisxml.Val(base.Add(-15*time.Minute+j))
			if g.chance(30) {
				r.ABTM = sisxml.Val(base.Add(-45*time.Minute + j))
			}
		case "CKIC":
			r.CODE = sisxml.Val(fmt.Sprintf("C%02d", 1+g.rng.IntN(80)))
			r.BTIM, r.ETIM = sisxml.Val(base.Add(-3*time.Hour+j)), sisxml.Val(base.Add(-45*time.Minute+j))
		case "BELT":
			r.CODE = sisxml.Val(fmt.Sprintf("%02d", 1+g.rng.IntN(20)))
			r.BTIM, r.ETIM = sisxml.Val(base.Add(10*time.Minute+j)), sisxml.Val(base.Add(45*time.Minute+j))
			if g.chance(30) {
				r.ABTM, r.AETM = sisxml.Val(base.Add(12*time.Minute+j)), sisxml.Val(base.Add(50*time.Minute+j))
			}
		case "STND":
			r.CODE = sisxml.Val(strconv.Itoa(101 + g.rng.IntN(499)))
			r.BTIM, r.ETIM = sisxml.Val(base.Add(-time.Hour+j)), sisxml.Val(base.Add(20*time.Minute+j))
		case "CHUT":
			r.CODE = sisxml.Val("CH" + strconv.Itoa(1+g.rng.IntN(20)))
			r.BTIM, r.ETIM = sisxml.Val(base.Add(-2*time.Hour+j)), sisxml.Val(base.Add(-30*time.Minute+j))
		case "BRDG":
			r.CODE = sisxml.Val("BR" + strconv.Itoa(1+g.rng.IntN(40)))
			r.ABTM = sisxml.Val(base.Add(-40*time.Minute + j))
			if g.chance(50) {
				r.AETM = sisxml.Val(base.Add(-5*time.Minute + j))
			}
		case "CHOK":
			if g.chance(50) {
				r.CODE = sisxml.Val(strconv.Itoa(101 + g.rng.IntN(499)))
			}
			r.ABTM = sisxml.Val(base.Add(-10*time.Minute + j))
			if g.chance(50) {
				r.AETM = sisxml.Val(base.Add(5*time.Minute + j))
			}
		}
		items[i] = r
	}
	if n > 1 && g.rng.IntN(5) == 0 {
		items[n-1].CODE = items[0].CODE // the same code twice: two allocations (seed 000 §11.3)
	}
	return sisxml.Items(items...)
}

func (g *gen) delays(clear bool) sisxml.List[sisxml.Delay] {
	if clear && g.rng.IntN(8) == 0 {
		return clearedList[sisxml.Delay](g)
	}
	items := make([]sisxml.Delay, 1+g.rng.IntN(3))
	for i := range items {
		items[i] = sisxml.Delay{SEQU: g.seq(i), CODE: sisxml.Val(pick(g, delayCodes)), DURA: sisxml.Val(5 * (1 + g.rng.IntN(36)))}
		if g.chance(30) {
			items[i].RMRK = sisxml.Val(pick(g, remarks))
		}
	}
	return sisxml.Items(items...)
}

// route returns 2–4 route points around base, departing from or arriving at
// the home airport.
func (g *gen) route(base time.Time, adid string, clear bool) sisxml.List[sisxml.RoutePoint] {
	if clear && g.rng.IntN(8) == 0 {
		return clearedList[sisxml.RoutePoint](g)
	}
	n := 2 + g.rng.IntN(3)
	codes := make([]string, n)
	for i, k := range g.rng.Perm(len(airports))[:n] {
		codes[i] = airports[k]
	}
	if adid == "A" {
		codes[n-1] = homeAirport
	} else {
		codes[0] = homeAirport
	}
	items := make([]sisxml.RoutePoint, n)
	for i := range items {
		p := sisxml.RoutePoint{SEQU: sisxml.Val(i + 1), APCD: sisxml.Val(codes[i])}
		leg := time.Duration(i-(n-1)*boolInt(adid == "A")) * 2 * time.Hour
		if i > 0 {
			p.SARR = sisxml.Val(base.Add(leg - 10*time.Minute))
		}
		if i < n-1 {
			p.SDEP = sisxml.Val(base.Add(leg))
		}
		items[i] = p
	}
	return sisxml.Items(items...)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (g *gen) services(codes []string, clear bool) sisxml.List[sisxml.Service] {
	if clear && g.rng.IntN(8) == 0 {
		return clearedList[sisxml.Service](g)
	}
	items := make([]sisxml.Service, 1+g.rng.IntN(3))
	for i := range items {
		items[i] = sisxml.Service{SEQU: g.seq(i), CODE: sisxml.Val(pick(g, codes)), QNTY: sisxml.Val(1 + g.rng.IntN(5))}
		if g.chance(20) {
			items[i].RMRK = sisxml.Val(pick(g, remarks))
		}
	}
	return sisxml.Items(items...)
}

// ---- flights ----

// newFlight returns a complete record for a new flight with SODT on the day
// at or after from.
func (g *gen) newFlight(flid string, from time.Time) sisxml.Flight {
	awcd := pick(g, airlines)
	adid := pick(g, []string{"A", "D"})
	span := int(g.day.Add(23*time.Hour+45*time.Minute).Sub(from) / (5 * time.Minute))
	sodt := from.Truncate(5 * time.Minute).Add(time.Duration(g.rng.IntN(max(1, span+1))) * 5 * time.Minute)
	sodt = g.onDay(sodt)
	f := sisxml.Flight{
		FLID: flid, FLNO: sisxml.Val(g.flightNumber(awcd)), AWCD: sisxml.Val(awcd), ADID: sisxml.Val(adid),
		FLTY: sisxml.Val(pick(g, flightType)), SODT: sisxml.Val(sodt), ACTY: sisxml.Val(pick(g, acTypes)),
		ACRG: sisxml.Val(g.registration()), TERM: sisxml.Val(pick(g, terminals)), STAT: sisxml.Val("SCH"),
	}
	if g.chance(50) {
		f.EODT = sisxml.Val(sodt.Add(g.minutes(-2, 6)))
	}
	if adid == "D" {
		f.GATE = g.resources("GATE", sodt, 1, false)
		f.CKIC = g.resources("CKIC", sodt, 3, false)
		f.CHUT = g.resources("CHUT", sodt, 2, false)
	} else {
		f.BELT = g.resources("BELT", sodt, 1, false)
	}
	f.STND = g.resources("STND", sodt, 1, false)
	f.ROUT = g.route(sodt, adid, false)
	if g.chance(5) {
		f.ERUT = g.route(sodt, adid, false)
	}
	if g.chance(20) {
		f.SRVT = g.services(services, false)
	}
	switch r := g.rng.IntN(10); {
	case r == 0:
		f.VIPF = g.services(vipCodes, false)
	case r == 1:
		f.VIPF = sisxml.Items[sisxml.Service]() // <VIPF/> on a new flight: stays empty
	}
	return f
}

// share makes child a shared flight of master: same operation, own flight
// number, no resources of its own (seed 000 §11.4).
func share(child, master *sisxml.Flight) {
	*child = sisxml.Flight{
		FLID: child.FLID, FLNO: child.FLNO, AWCD: child.AWCD, ADID: master.ADID, FLTY: child.FLTY,
		SODT: master.SODT, EODT: master.EODT, ACTY: master.ACTY, ACRG: master.ACRG, TERM: master.TERM, STAT: master.STAT,
		MAID: sisxml.Val(master.FLID), CSOP: child.AWCD, CSFT: child.FLNO,
		ROUT: master.ROUT,
	}
}

// plan adds the daily plan: Flights records, SharedPercent of them shared
// flights of a master in the plan, as PlanChunks SCHD-DNLD packages.
func (g *gen) plan() {
	n := g.o.Flights
	g.dttm = g.day
	recs := make([]sisxml.Flight, n)
	for i := range recs {
		recs[i] = g.newFlight(fmt.Sprintf("%s%06d", g.o.Day[2:], i+1), g.day.Add(6*time.Hour))
	}
	perm := g.rng.Perm(n)
	shared := perm[:n*SharedPercent/100]
	masters := perm[n*SharedPercent/100:]
	slices.Sort(shared)
	for _, i := range shared {
		share(&recs[i], &recs[masters[g.rng.IntN(len(masters))]])
	}
	for c := range g.o.PlanChunks {
		lo, hi := c*n/g.o.PlanChunks, (c+1)*n/g.o.PlanChunks
		g.dttm = g.day.Add(time.Duration(c) * time.Second)
		g.add(Message{Category: CategoryPlan, Variant: "dnld", Msg: schedule(g.meta("SCHD", "DNLD"), recs[lo:hi])})
	}
	for i := range recs {
		g.flids = append(g.flids, recs[i].FLID)
	}
}

func (g *gen) state(flid string) *flight.State { return g.model.flights[flid] }

// pickFlight returns a random known flight satisfying ok, or "".
func (g *gen) pickFlight(ok func(*flight.State) bool) string {
	if len(g.flids) == 0 {
		return ""
	}
	for range 64 {
		if id := g.flids[g.rng.IntN(len(g.flids))]; ok(g.state(id)) {
			return id
		}
	}
	start := g.rng.IntN(len(g.flids))
	for i := range g.flids {
		if id := g.flids[(start+i)%len(g.flids)]; ok(g.state(id)) {
			return id
		}
	}
	return ""
}

func active(s *flight.State) bool  { return s.Status == flight.Active }
func deleted(s *flight.State) bool { return s.Status == flight.Deleted }

// isMasterCandidate: an ACTIVE flight that is not itself shared, so MAID
// never chains (a cascade is one level).
func isMasterCandidate(s *flight.State) bool { return s.Status == flight.Active && s.MAID == "" }

func (g *gen) hasChildren(flid string) bool {
	for _, s := range g.model.flights {
		if s.MAID == flid {
			return true
		}
	}
	return false
}

// ---- categories ----

// update adds one FLOP of subtype sub; every 40th targets a deleted flight.
func (g *gen) update(sub string) {
	g.nUpdate++
	var target string
	if g.nUpdate%40 == 0 {
		target = g.pickFlight(deleted)
	}
	if target == "" && sub == "SHAR" && g.chance(60) {
		target = g.pickFlight(func(s *flight.State) bool { return active(s) && s.MAID != "" })
	}
	if target == "" {
		target = g.pickFlight(active)
	}
	if target == "" {
		target = g.pickFlight(func(*flight.State) bool { return true })
	}
	st := g.state(target)
	g.usedClear = false
	f := g.flopFields(sub, st)
	before := render(st)
	maidBefore := st.MAID
	idx := g.add(Message{Category: CategoryUpdate, Msg: &sisxml.Message{Meta: g.meta("FLOP", sub), Kind: sisxml.KindFlop,
		Flop: &sisxml.FlightOp{Subtype: sub, Flight: f}}})
	m := &g.msgs[idx]
	switch {
	case m.Outcome == Skipped:
		m.Variant = "on-deleted"
	case slices.Equal(before, render(st)):
		m.Variant = "noop"
	case maidBefore == "" && st.MAID != "":
		m.Variant = "link"
	case maidBefore != "" && st.MAID == "":
		m.Variant = "unlink"
	case maidBefore != st.MAID:
		m.Variant = "maid-move"
	case g.usedClear:
		m.Variant = "clear"
	default:
		m.Variant = "set"
	}
	if m.Outcome == Succeeded {
		g.lastSet[target+"|"+sub] = idx
	}
}

// flopFields returns the record of a FLOP-sub for st: FLID and only
// elements of sub.
func (g *gen) flopFields(sub string, st *flight.State) sisxml.Flight {
	f := sisxml.Flight{FLID: st.FLID}
	base := st.SODT
	if base.IsZero() {
		base = g.day.Add(12 * time.Hour)
	}
	switch sub {
	case "BASE":
		for _, k := range g.rng.Perm(9)[:1+g.rng.IntN(3)] {
			switch k {
			case 0:
				f.EODT = g.maybeClearTime(base.Add(g.minutes(-3, 12)))
			case 1:
				f.AODT = g.maybeClearTime(base.Add(g.minutes(-1, 10)))
			case 2:
				f.ACRG = g.maybeClear(g.registration())
			case 3:
				f.ACTY = sisxml.Val(pick(g, acTypes))
			case 4:
				f.TERM = g.maybeClear(pick(g, terminals))
			case 5:
				f.FLTY = g.maybeClear(pick(g, flightType))
			case 6:
				f.SODT = sisxml.Val(g.onDay(base.Add(g.minutes(-6, 12)))) // the day stays: OPERATION_DAY never moves
			case 7:
				f.FLNO = sisxml.Val(g.flightNumber(cmpOr(st.AWCD, "CA")))
			case 8:
				f.ADID = sisxml.Val(cmpOr(st.ADID, "D"))
			}
		}
	case "STAT":
		g.nStat++
		if g.nStat%25 == 0 { // re-sends the current status: changes nothing, still SUCCEEDED
			f.STAT = sisxml.Val(st.STAT)
			if st.STAT == "" {
				f.STAT = sisxml.Cleared[string]()
			}
			break
		}
		f.STAT = sisxml.Val(pick(g, statuses))
		switch r := g.rng.IntN(10); {
		case r < 3:
			f.ABST, f.ABRS = sisxml.Val(pick(g, abnormal)), sisxml.Val(pick(g, reasons))
		case r < 5:
			f.ABST, f.ABRS = cleared[string](g), cleared[string](g)
		}
	case "SHAR":
		g.sharFields(&f, st)
	case "GATE":
		f.GATE = g.resources(sub, base, 3, true)
	case "CKIC":
		f.CKIC = g.resources(sub, base, 3, true)
	case "BELT":
		f.BELT = g.resources(sub, base, 3, true)
	case "STND":
		f.STND = g.resources(sub, base, 3, true)
	case "CHUT":
		f.CHUT = g.resources(sub, base, 3, true)
	case "BRDG":
		f.BRDG = g.resources(sub, base, 3, true)
	case "CHOK":
		f.CHOK = g.resources(sub, base, 3, true)
	case "DELY":
		f.DELY = g.delays(true)
	case "ROUT":
		f.ROUT = g.route(base, cmpOr(st.ADID, "D"), true)
	case "ERUT":
		f.ERUT = g.route(base, cmpOr(st.ADID, "D"), true)
	case "SRVT":
		f.SRVT = g.services(services, true)
	case "VIPF":
		f.VIPF = g.services(vipCodes, true)
	}
	return f
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (g *gen) maybeClear(v string) sisxml.Field[string] {
	if g.rng.IntN(7) == 0 {
		return cleared[string](g)
	}
	return sisxml.Val(v)
}

func (g *gen) maybeClearTime(t time.Time) sisxml.Field[time.Time] {
	if g.rng.IntN(7) == 0 {
		return cleared[time.Time](g)
	}
	return sisxml.Val(t)
}

// sharFields fills a FLOP-SHAR: a shared flight moves to another master,
// leaves its master (explicit clears) or changes its code-share flight; an
// ordinary flight without children joins a master. MAID never chains.
func (g *gen) sharFields(f *sisxml.Flight, st *flight.State) {
	other := func(s *flight.State) bool { return isMasterCandidate(s) && s.FLID != st.FLID && s.FLID != st.MAID }
	switch {
	case st.MAID != "":
		switch g.rng.IntN(4) {
		case 0, 1:
			if m := g.pickFlight(other); m != "" {
				f.MAID = sisxml.Val(m)
				if g.chance(50) {
					f.CSFT = sisxml.Val(g.flightNumber(cmpOr(st.AWCD, "CA")))
				}
				return
			}
			fallthrough
		case 2:
			f.MAID, f.CSOP, f.CSFT = cleared[string](g), cleared[string](g), cleared[string](g)
		default:
			f.CSFT = sisxml.Val(g.flightNumber(cmpOr(st.AWCD, "CA")))
		}
	case !g.hasChildren(st.FLID):
		if m := g.pickFlight(other); m != "" {
			f.MAID, f.CSOP, f.CSFT = sisxml.Val(m), sisxml.Val(cmpOr(st.AWCD, "CA")), sisxml.Val(cmpOr(st.FLNO, "CA1001"))
			return
		}
		fallthrough
	default: // a master with children stays a master
		f.CSOP, f.CSFT = cleared[string](g), cleared[string](g)
	}
}

// deletion adds one FDEL: of a master with ACTIVE children (cascade) for 2
// in 5, of an already deleted flight (repeat) for 1 in 5, else of any
// ACTIVE flight.
func (g *gen) deletion() {
	g.nDelete++
	var target string
	switch g.nDelete % 5 {
	case 0, 2:
		target = g.pickCascadeMaster()
	case 3:
		target = g.pickFlight(deleted)
	}
	if target == "" {
		target = g.pickFlight(active)
	}
	if target == "" {
		target = g.pickFlight(func(*flight.State) bool { return true })
	}
	before := g.activeCount()
	idx := g.add(Message{Category: CategoryDeletion, Msg: &sisxml.Message{Meta: g.meta("FDEL", "DELE"), Kind: sisxml.KindFdel,
		Fdel: &sisxml.FlightDelete{FLID: target}}})
	switch m := &g.msgs[idx]; {
	case m.Outcome == Skipped:
		m.Variant = "repeat"
	case before-g.activeCount() > 1:
		m.Variant = "cascade"
	default:
		m.Variant = "single"
	}
}

func (g *gen) activeCount() int {
	n := 0
	for _, s := range g.model.flights {
		if s.Status == flight.Active {
			n++
		}
	}
	return n
}

// pickCascadeMaster returns a random ACTIVE flight with ACTIVE children, or "".
func (g *gen) pickCascadeMaster() string {
	children := map[string]bool{}
	for _, s := range g.model.flights {
		if s.Status == flight.Active && s.MAID != "" {
			children[s.MAID] = true
		}
	}
	var masters []string
	for _, id := range g.flids { // creation order: deterministic
		if children[id] && active(g.state(id)) {
			masters = append(masters, id)
		}
	}
	if len(masters) == 0 {
		return ""
	}
	return pick(g, masters)
}

// adhoc adds one SCHD-ADFT creating a new flight later that day; some
// records carry explicit empties, which ADFT ignores (set-only). Every
// fourth from the second (so even a small day has one) writes its SODT in a
// form that is not a SIS time: the flight is created without OPERATION_DAY
// and SODT.
func (g *gen) adhoc() {
	g.nAdhoc++
	f := g.newFlight(fmt.Sprintf("%s9%05d", g.o.Day[2:], g.nAdhoc), g.onDay(g.dttm.Add(time.Hour)))
	if g.chance(40) {
		f.TERM = sisxml.Cleared[string]()
	}
	if g.chance(40) {
		f.DELY = sisxml.Items[sisxml.Delay]()
	}
	variant := "new"
	if g.nAdhoc%4 == 2 {
		variant = "new-unreadable-sodt"
		f.SODTUnparsed, f.SODT = f.SODT.Value.Format("2006-01-02 15:04"), sisxml.Field[time.Time]{}
	}
	g.add(Message{Category: CategoryAdhoc, Variant: variant, Msg: schedule(g.meta("SCHD", "ADFT"), []sisxml.Flight{f})})
	g.flids = append(g.flids, f.FLID)
}

// duplicate re-sends an earlier message byte for byte: for 1 in 4 a plan
// package, for 1 in 4 a FLOP whose change a later message has overwritten,
// else any earlier message that bound its identity.
func (g *gen) duplicate() {
	g.nDup++
	eligible := func(i int) bool {
		m := &g.msgs[i]
		switch m.Category {
		case CategoryRollback, CategoryMalformed, CategoryProtocol, CategoryDuplicate:
			return false
		}
		return m.Outcome == Succeeded || m.Outcome == Skipped
	}
	var cands []int
	for i := range g.msgs {
		if !eligible(i) {
			continue
		}
		m := &g.msgs[i]
		switch g.nDup % 4 {
		case 0:
			if m.Category == CategoryPlan || m.Category == CategoryReplan {
				cands = append(cands, i)
			}
		case 1:
			if m.Category == CategoryUpdate && m.Outcome == Succeeded &&
				g.lastSet[m.Msg.Flop.Flight.FLID+"|"+m.Msg.Flop.Subtype] != i {
				cands = append(cands, i)
			}
		default:
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		for i := range g.msgs {
			if eligible(i) {
				cands = append(cands, i)
			}
		}
	}
	if len(cands) == 0 {
		g.malformed() // nothing to repeat yet (only with a degenerate plan)
		return
	}
	i := pick(g, cands)
	orig := g.msgs[i]
	variant := "same" // re-applying it would change nothing
	if g.model.wouldChange(orig.Msg) {
		variant = "stale"
	}
	g.add(Message{Category: CategoryDuplicate, Variant: variant, Raw: orig.Raw, Msg: orig.Msg, Original: i})
}

var malformedVariants = []string{"null", "empty", "blank", "truncated", "not-xml", "mismatched-tag", "no-meta",
	"rcnt-mismatch", "no-flid", "wrong-root", "no-seqn", "flop-nothing"}

// malformed adds a row every decoder rejects at once — MALFORMED, or
// PROTOCOL for rcnt-mismatch (the declared count is a whole-package check):
// DEAD either way — cycling through
// malformedVariants. Those built from a real message would change a flight
// if applied.
func (g *gen) malformed() {
	g.nMalformed++
	v := malformedVariants[(g.nMalformed-1)%len(malformedVariants)]
	target := g.pickFlight(func(*flight.State) bool { return true })
	st := g.state(target)
	flop := encode(&sisxml.Message{Meta: g.meta("FLOP", "GATE"), Kind: sisxml.KindFlop,
		Flop: &sisxml.FlightOp{Subtype: "GATE", Flight: sisxml.Flight{FLID: target, GATE: g.resources("GATE", st.SODT, 2, false)}}})
	var raw []byte
	switch v {
	case "null":
	case "empty":
		raw = []byte{}
	case "blank":
		raw = []byte(" \n\t ")
	case "truncated":
		raw = flop[:len(flop)/2]
	case "not-xml":
		raw = []byte("FLOP GATE " + target + " B12")
	case "mismatched-tag":
		raw = bytes.Replace(flop, []byte("</FLGT>"), []byte("</FLOP>"), 1)
	case "no-meta":
		i, j := bytes.Index(flop, []byte("  <META>")), bytes.Index(flop, []byte("</META>\n"))+len("</META>\n")
		raw = append(append([]byte{}, flop[:i]...), flop[j:]...)
	case "rcnt-mismatch":
		rec := sisxml.Flight{FLID: target, STAT: sisxml.Val("CNL"), SODT: sisxml.Val(st.SODT)}
		if st.SODT.IsZero() {
			rec.SODT = sisxml.Field[time.Time]{}
		}
		raw = bytes.Replace(encode(schedule(g.meta("SCHD", "DNLD"), []sisxml.Flight{rec})), []byte("<RCNT>1</RCNT>"), []byte("<RCNT>2</RCNT>"), 1)
	case "no-flid":
		raw = bytes.Replace(flop, []byte("<FLID>"+target+"</FLID>"), nil, 1)
	case "wrong-root":
		raw = bytes.Replace(bytes.Replace(flop, []byte("<MSG>"), []byte("<MESSAGE>"), 1), []byte("</MSG>"), []byte("</MESSAGE>"), 1)
	case "no-seqn":
		raw = regexpRemove(flop, "SEQN")
	case "flop-nothing":
		raw = bytes.Replace(flop, flop[bytes.Index(flop, []byte("      <GATE>")):bytes.Index(flop, []byte("</GATE>\n"))+len("</GATE>\n")], nil, 1)
	}
	g.add(Message{Category: CategoryMalformed, Variant: v, Raw: raw})
}

// regexpRemove removes the line holding element name.
func regexpRemove(raw []byte, name string) []byte {
	lines := strings.SplitAfter(string(raw), "\n")
	var b strings.Builder
	for _, l := range lines {
		if !strings.Contains(l, "<"+name+">") {
			b.WriteString(l)
		}
	}
	return []byte(b.String())
}

// ignored adds an LDM, REGN, RSTA or EROR message with a free-form body.
func (g *gen) ignored() {
	g.nIgnored++
	target := g.pickFlight(func(*flight.State) bool { return true })
	kinds := []struct{ typ, styp, body string }{
		{"LDM", "LDM", "<LDM><FLID>" + target + "</FLID><TEXT>LDM " + target + "/01.B1234.Y150.2/4</TEXT></LDM>"},
		{"REGN", "CHNG", "<REGN><FLID>" + target + "</FLID><ACRG>" + g.registration() + "</ACRG></REGN>"},
		{"RSTA", "STND", "<RSTA><CODE>" + strconv.Itoa(101+g.rng.IntN(499)) + "</CODE><STAT>CLOSED</STAT></RSTA>"},
		{"EROR", "FDEL", "<EROR><RQSQ>" + strconv.Itoa(g.seqn) + "</RQSQ><CODE>E101</CODE><TEXT>master deleted before shared</TEXT></EROR>"},
	}
	k := kinds[(g.nIgnored-1)%len(kinds)]
	m := &sisxml.Message{Meta: g.meta(k.typ, k.styp), Kind: sisxml.KindIgnored}
	raw := encode(m)
	raw = bytes.Replace(raw, []byte("</MSG>"), []byte("  "+k.body+"\n</MSG>"), 1)
	g.add(Message{Category: CategoryIgnored, Variant: k.typ, Raw: raw, Msg: m})
}

// protocol adds a SCHD-DNLD the pipeline must reject whole (DEAD PROTOCOL):
// alternately one FLID twice, and a planned flight moved to the next day.
// Each also carries a new flight and a real change of another, so applying
// any part of it shows in the model.
func (g *gen) protocol() {
	g.nProtocol++
	newRec := g.newFlight(fmt.Sprintf("%s8%05d", g.o.Day[2:], g.nProtocol), g.day.Add(6*time.Hour))
	// A flight with a day: moving it is the violation (a flight without one
	// takes any day).
	x := g.pickFlight(func(s *flight.State) bool { return active(s) && s.OperationDay != "" })
	variant := "dup-flid"
	var recs []sisxml.Flight
	if g.nProtocol%2 == 0 && x != "" {
		variant = "moved-day"
		moved := g.replanRecord(g.state(x))
		moved.SODT = sisxml.Val(moved.SODT.Value.AddDate(0, 0, 1))
		recs = []sisxml.Flight{newRec, moved}
		if w := g.pickFlight(func(s *flight.State) bool { return active(s) && s.FLID != x }); w != "" {
			recs = append(recs, g.replanRecord(g.state(w)))
		}
	} else if x != "" {
		recs = []sisxml.Flight{g.replanRecord(g.state(x)), newRec, g.replanRecord(g.state(x))}
	} else {
		recs = []sisxml.Flight{newRec, newRec}
	}
	g.add(Message{Category: CategoryProtocol, Variant: variant, Msg: schedule(g.meta("SCHD", "DNLD"), recs)})
}

// replan adds a SCHD-DNLD re-sending up to replanRecordsPerPackage ACTIVE
// flights, each with SODT, some changed values, some explicit empties
// (cleared) and the rest absent (kept).
func (g *gen) replan() {
	var recs []sisxml.Flight
	for _, i := range g.rng.Perm(len(g.flids)) {
		if st := g.state(g.flids[i]); active(st) && st.OperationDay == g.o.Day {
			recs = append(recs, g.replanRecord(st))
			if len(recs) == replanRecordsPerPackage {
				break
			}
		}
	}
	if len(recs) == 0 {
		g.ignored() // nothing left to re-plan (only with a degenerate plan)
		return
	}
	g.add(Message{Category: CategoryReplan, Variant: "update", Msg: schedule(g.meta("SCHD", "DNLD"), recs)})
}

// replanRecord returns a SCHD record for st: SODT on the day (sometimes
// moved within it), and a random mix of changed, cleared and absent groups.
func (g *gen) replanRecord(st *flight.State) sisxml.Flight {
	sodt := st.SODT
	if sodt.IsZero() || operationDay(sodt) != g.o.Day {
		sodt = g.day.Add(12 * time.Hour)
	}
	if g.chance(50) {
		sodt = g.onDay(sodt.Add(g.minutes(-6, 6)))
	}
	r := sisxml.Flight{FLID: st.FLID, SODT: sisxml.Val(sodt)}
	if g.chance(50) {
		r.STAT = sisxml.Val(pick(g, statuses))
	}
	switch x := g.rng.IntN(10); {
	case x < 4:
		r.EODT = sisxml.Val(sodt.Add(g.minutes(-2, 8)))
	case x < 5:
		r.EODT = sisxml.Cleared[time.Time]()
	}
	switch x := g.rng.IntN(10); {
	case x < 2:
		r.TERM = sisxml.Val(pick(g, terminals))
	case x < 4:
		r.TERM = sisxml.Cleared[string]()
	}
	if g.chance(20) {
		r.ABST, r.ABRS = sisxml.Cleared[string](), sisxml.Cleared[string]()
	}
	switch x := g.rng.IntN(10); {
	case x < 3:
		r.GATE = g.resources("GATE", sodt, 1, false)
	case x < 4:
		r.GATE = sisxml.Items[sisxml.Resource]()
	}
	if g.chance(20) {
		r.CKIC = g.resources("CKIC", sodt, 3, false)
	}
	if g.chance(15) {
		r.VIPF = sisxml.Items[sisxml.Service]()
	}
	if g.chance(15) {
		r.DELY = g.delays(false)
	}
	if g.chance(15) {
		r.ROUT = g.route(sodt, cmpOr(st.ADID, "D"), false)
	}
	return r
}

// rollback adds an insert that is rolled back: a real FLOP that must never
// be applied (it never becomes visible).
func (g *gen) rollback() {
	target := g.pickFlight(func(*flight.State) bool { return true })
	sub := pick(g, sisxml.FlopSubtypes)
	f := g.flopFields(sub, g.state(target))
	g.add(Message{Category: CategoryRollback, Variant: "ghost", Msg: &sisxml.Message{Meta: g.meta("FLOP", sub),
		Kind: sisxml.KindFlop, Flop: &sisxml.FlightOp{Subtype: sub, Flight: f}}})
}

// markLate marks Options.Late committed non-plan messages in the first 90%
// of the plan, each with a committed row after it, as committed late.
func (g *gen) markLate() {
	lastCommitted := -1
	for i := range g.msgs {
		if g.msgs[i].Category != CategoryRollback {
			lastCommitted = i
		}
	}
	var cands []int
	for i := range g.msgs[:len(g.msgs)*9/10] {
		if c := g.msgs[i].Category; c != CategoryPlan && c != CategoryRollback && i < lastCommitted {
			cands = append(cands, i)
		}
	}
	g.rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	for _, i := range cands[:min(g.o.Late, len(cands))] {
		g.msgs[i].Late = true
	}
}

// markNullReceiveTime marks about 1% of the committed rows (at least one) to
// be written with a NULL RECEIVETIME.
func (g *gen) markNullReceiveTime() {
	var cands []int
	for i := range g.msgs {
		if g.msgs[i].Category != CategoryRollback {
			cands = append(cands, i)
		}
	}
	g.rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
	for _, i := range cands[:min(max(1, len(cands)/100), len(cands))] {
		g.msgs[i].NullReceiveTime = true
	}
}
