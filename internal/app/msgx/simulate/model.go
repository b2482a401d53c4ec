package simulate

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
)

// Outcome is the expected terminal PROCFLAG of a mailbox row, exactly the
// string the pipeline writes back.
type Outcome string

const (
	// Succeeded: a valid message applied, even one that changes nothing.
	Succeeded Outcome = "SUCCEEDED"
	// Skipped: a duplicate identity, an ignored kind, a FLOP on a deleted
	// flight or a repeated FDEL.
	Skipped Outcome = "SKIPPED"
	// Dead: malformed (NULL, empty, bad XML, bad RCNT …) or a PROTOCOL package.
	Dead Outcome = "DEAD"
)

// Model is the expected flight state after every committed message of a plan
// is applied in mailbox-id order, built by the simulator itself with the
// rules below — a deliberately small restatement, independent of the flight
// package's decision code (seed 000 §11–§12, docs/msgx/sis-xml.md §5):
//
//   - Identity SNDR|TYPE|STYP|SEQN (no day boundary; every DTTM is on the
//     operating day, so the day-boundary setting gives the same identities):
//     a message whose identity an earlier one bound is SKIPPED and changes
//     nothing, even if re-applying it now would change something.
//   - Malformed (no message) → DEAD. Ignored kinds → SKIPPED.
//   - SCHD DNLD/RESP: the package is DEAD (PROTOCOL) and changes nothing if
//     one FLID appears twice, a record's SODT puts a flight with an
//     OPERATION_DAY on another day, or a record gives no day where one is
//     needed (its SODT is not a time, or it has none and the flight has no
//     OPERATION_DAY); records of deleted flights are not checked. Otherwise every record creates or updates
//     its flight (never deletes others): Set overwrites, Empty clears, Absent
//     keeps; OPERATION_DAY = the date of SODT when still empty, then fixed.
//   - SCHD ADFT: set-only (Absent and Empty ignored); creates an unknown
//     flight, OPERATION_DAY from SODT; a SODT that is not a time is not
//     applied, so a new flight then has no OPERATION_DAY.
//   - SCHD (any subtype): a record for a deleted flight is not applied; a
//     package whose every record names one → SKIPPED.
//   - FLOP: a deleted flight → SKIPPED; otherwise Set overwrites and Empty
//     clears the elements it carries (only its subtype's, Decode enforces
//     it); a collection is replaced whole, in document order. An unknown
//     flight is created with an empty OPERATION_DAY (never generated).
//   - FDEL: ACTIVE → DELETED, with every ACTIVE flight whose MAID is its FLID
//     (cascade, one level); a deleted flight → SKIPPED.
//
// Times are compared as wall clocks (YYYYMMDDhhmmss in the time's own
// location), as SIS sends them. A Model is read-only once built and safe for
// concurrent use.
type Model struct {
	flights    map[string]*flight.State
	identities map[string]int // identity -> plan index of the message that bound it
}

func newModel() *Model {
	return &Model{flights: map[string]*flight.State{}, identities: map[string]int{}}
}

// Flights returns the number of flights the model holds, ACTIVE and DELETED.
func (m *Model) Flights() int { return len(m.flights) }

// States returns deep copies of the expected flight states in FLID order.
// Only the business content is set: Version, LastMsgID, CreatedAt and
// UpdatedAt are zero.
func (m *Model) States() []*flight.State {
	out := make([]*flight.State, 0, len(m.flights))
	for _, flid := range m.flids() {
		out = append(out, cloneState(m.flights[flid]))
	}
	return out
}

func (m *Model) flids() []string {
	ids := make([]string, 0, len(m.flights))
	for id := range m.flights {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// apply applies the message at plan index idx (nil: malformed) and returns
// its expected outcome and the reason.
func (m *Model) apply(idx int, msg *sisxml.Message) (Outcome, string) {
	if msg == nil {
		return Dead, "MALFORMED"
	}
	id := sisxml.Identity(msg.Meta, false)
	if first, ok := m.identities[id]; ok {
		return Skipped, "duplicate-of:" + strconv.Itoa(first)
	}
	m.identities[id] = idx
	switch msg.Kind {
	case sisxml.KindIgnored:
		return Skipped, "ignored"
	case sisxml.KindSchd:
		adft := msg.Schd.Subtype == "ADFT"
		if !adft {
			if why := m.protocol(msg.Schd); why != "" {
				return Dead, "PROTOCOL: " + why
			}
		}
		applied := 0
		for i := range msg.Schd.Flights {
			r := &msg.Schd.Flights[i]
			if st := m.flights[r.FLID]; st != nil && st.Status == flight.Deleted {
				continue // a plan never revives a deleted flight
			}
			m.merge(r, adft)
			applied++
		}
		if applied == 0 && len(msg.Schd.Flights) > 0 {
			return Skipped, "flight deleted"
		}
		return Succeeded, ""
	case sisxml.KindFlop:
		if st := m.flights[msg.Flop.Flight.FLID]; st != nil && st.Status == flight.Deleted {
			return Skipped, "flight deleted"
		}
		m.merge(&msg.Flop.Flight, false)
		return Succeeded, ""
	case sisxml.KindFdel:
		st := m.flights[msg.Fdel.FLID]
		if st == nil {
			return Skipped, "unknown flight" // never generated
		}
		if st.Status == flight.Deleted {
			return Skipped, "already deleted"
		}
		st.Status = flight.Deleted
		for _, child := range m.flights {
			if child.Status == flight.Active && child.MAID == st.FLID {
				child.Status = flight.Deleted
			}
		}
		return Succeeded, ""
	}
	panic(fmt.Sprintf("simulate: model: message kind %s is never generated", msg.Kind))
}

// wouldChange reports whether applying msg now, were its identity still
// free, would change any flight (a duplicate of it would then show if
// wrongly re-applied).
func (m *Model) wouldChange(msg *sisxml.Message) bool {
	var touched []string
	switch {
	case msg.Schd != nil:
		for _, r := range msg.Schd.Flights {
			touched = append(touched, r.FLID)
		}
	case msg.Flop != nil:
		touched = []string{msg.Flop.Flight.FLID}
	case msg.Fdel != nil:
		st := m.flights[msg.Fdel.FLID]
		return st != nil && st.Status == flight.Active
	default:
		return false
	}
	scratch := newModel()
	for _, id := range touched {
		if st := m.flights[id]; st != nil {
			scratch.flights[id] = cloneState(st)
		}
	}
	if o, _ := scratch.apply(-1, msg); o != Succeeded {
		return false
	}
	for _, id := range touched {
		before := m.flights[id]
		if before == nil || !slices.Equal(render(before), render(scratch.flights[id])) {
			return true
		}
	}
	return false
}

// operationDay is OPERATION_DAY for a SODT wall clock with the airport zone
// equal to the message zone and no day cut: its date.
func operationDay(sodt time.Time) string { return sodt.Format("20060102") }

// protocol returns why a SCHD DNLD/RESP package is rejected whole, or "".
func (m *Model) protocol(s *sisxml.Schedule) string {
	seen := map[string]bool{}
	for _, r := range s.Flights {
		if seen[r.FLID] {
			return "FLID " + r.FLID + " twice"
		}
		seen[r.FLID] = true
		st := m.flights[r.FLID]
		if st != nil && st.Status == flight.Deleted {
			continue // not applied, not checked
		}
		switch {
		case r.SODTUnparsed != "":
			return "FLID " + r.FLID + ": SODT is not a time"
		case r.SODT.Presence != sisxml.Set && (st == nil || st.OperationDay == ""):
			return "FLID " + r.FLID + ": no SODT for a flight without OPERATION_DAY"
		case st != nil && st.OperationDay != "" && r.SODT.Presence == sisxml.Set && operationDay(r.SODT.Value) != st.OperationDay:
			return "FLID " + r.FLID + " moved from " + st.OperationDay + " to " + operationDay(r.SODT.Value)
		}
	}
	return ""
}

// merge applies one record: Set overwrites; Empty clears unless setOnly;
// Absent keeps. An unknown FLID is created ACTIVE.
func (m *Model) merge(r *sisxml.Flight, setOnly bool) {
	st := m.flights[r.FLID]
	if st == nil {
		st = &flight.State{FLID: r.FLID, Status: flight.Active}
		m.flights[r.FLID] = st
	}
	if st.OperationDay == "" && r.SODT.Presence == sisxml.Set {
		st.OperationDay = operationDay(r.SODT.Value)
	}
	put(&st.FLNO, r.FLNO, setOnly)
	put(&st.AWCD, r.AWCD, setOnly)
	put(&st.ADID, r.ADID, setOnly)
	put(&st.FLTY, r.FLTY, setOnly)
	put(&st.SODT, r.SODT, setOnly)
	put(&st.EODT, r.EODT, setOnly)
	put(&st.AODT, r.AODT, setOnly)
	put(&st.ACTY, r.ACTY, setOnly)
	put(&st.ACRG, r.ACRG, setOnly)
	put(&st.TERM, r.TERM, setOnly)
	put(&st.STAT, r.STAT, setOnly)
	put(&st.ABST, r.ABST, setOnly)
	put(&st.ABRS, r.ABRS, setOnly)
	put(&st.MAID, r.MAID, setOnly)
	put(&st.CSOP, r.CSOP, setOnly)
	put(&st.CSFT, r.CSFT, setOnly)
	putList(&st.Resources[flight.GATE], r.GATE, resourceOf, setOnly)
	putList(&st.Resources[flight.CKIC], r.CKIC, resourceOf, setOnly)
	putList(&st.Resources[flight.BELT], r.BELT, resourceOf, setOnly)
	putList(&st.Resources[flight.STND], r.STND, resourceOf, setOnly)
	putList(&st.Resources[flight.CHUT], r.CHUT, resourceOf, setOnly)
	putList(&st.Resources[flight.BRDG], r.BRDG, resourceOf, setOnly)
	putList(&st.Resources[flight.CHOK], r.CHOK, resourceOf, setOnly)
	putList(&st.Delays, r.DELY, delayOf, setOnly)
	putList(&st.Routes[flight.ROUT], r.ROUT, routePointOf, setOnly)
	putList(&st.Routes[flight.ERUT], r.ERUT, routePointOf, setOnly)
	putList(&st.Services[flight.SRVT], r.SRVT, serviceOf, setOnly)
	putList(&st.Services[flight.VIPF], r.VIPF, serviceOf, setOnly)
}

func put[T any](dst *T, f sisxml.Field[T], setOnly bool) {
	switch {
	case f.Presence == sisxml.Set:
		*dst = f.Value
	case f.Presence == sisxml.Empty && !setOnly:
		var zero T
		*dst = zero
	}
}

// putList replaces a collection whole; an empty one is nil (State convention).
func putList[S, T any](dst *[]T, l sisxml.List[S], conv func(S) T, setOnly bool) {
	switch {
	case l.Presence == sisxml.Set:
		out := make([]T, 0, len(l.Items))
		for _, it := range l.Items {
			out = append(out, conv(it))
		}
		*dst = out
	case l.Presence == sisxml.Empty && !setOnly:
		*dst = nil
	}
}

// value returns f's value when Set, else the zero value (NULL). Inside an
// item Absent and Empty both mean NULL: an item is replaced whole.
func value[T any](f sisxml.Field[T]) T {
	if f.Presence != sisxml.Set {
		var zero T
		return zero
	}
	return f.Value
}

func intPtr(f sisxml.Field[int]) *int {
	if f.Presence != sisxml.Set {
		return nil
	}
	v := f.Value
	return &v
}

func resourceOf(r sisxml.Resource) flight.Resource {
	return flight.Resource{SourceSeq: intPtr(r.SEQU), Code: value(r.CODE), Begin: value(r.BTIM), End: value(r.ETIM),
		ActualBegin: value(r.ABTM), ActualEnd: value(r.AETM)}
}

func delayOf(d sisxml.Delay) flight.Delay {
	return flight.Delay{SourceSeq: intPtr(d.SEQU), Code: value(d.CODE), Minutes: intPtr(d.DURA), Remark: value(d.RMRK)}
}

func routePointOf(p sisxml.RoutePoint) flight.RoutePoint {
	return flight.RoutePoint{SourceSeq: intPtr(p.SEQU), Airport: value(p.APCD), SchedArr: value(p.SARR), SchedDep: value(p.SDEP)}
}

func serviceOf(s sisxml.Service) flight.Service {
	return flight.Service{SourceSeq: intPtr(s.SEQU), Code: value(s.CODE), Quantity: intPtr(s.QNTY), Remark: value(s.RMRK)}
}

// cloneState deep-copies the business content of s.
func cloneState(s *flight.State) *flight.State {
	c := &flight.State{
		FLID: s.FLID, Status: s.Status, OperationDay: s.OperationDay,
		FLNO: s.FLNO, AWCD: s.AWCD, ADID: s.ADID, FLTY: s.FLTY, SODT: s.SODT, EODT: s.EODT, AODT: s.AODT,
		ACTY: s.ACTY, ACRG: s.ACRG, TERM: s.TERM, STAT: s.STAT, ABST: s.ABST, ABRS: s.ABRS,
		MAID: s.MAID, CSOP: s.CSOP, CSFT: s.CSFT,
	}
	for k := range s.Resources {
		c.Resources[k] = copyItems(s.Resources[k], func(r flight.Resource) flight.Resource {
			r.SourceSeq = copyInt(r.SourceSeq)
			return r
		})
	}
	c.Delays = copyItems(s.Delays, func(d flight.Delay) flight.Delay {
		d.SourceSeq, d.Minutes = copyInt(d.SourceSeq), copyInt(d.Minutes)
		return d
	})
	for k := range s.Routes {
		c.Routes[k] = copyItems(s.Routes[k], func(p flight.RoutePoint) flight.RoutePoint {
			p.SourceSeq = copyInt(p.SourceSeq)
			return p
		})
	}
	for k := range s.Services {
		c.Services[k] = copyItems(s.Services[k], func(v flight.Service) flight.Service {
			v.SourceSeq, v.Quantity = copyInt(v.SourceSeq), copyInt(v.Quantity)
			return v
		})
	}
	return c
}

func copyItems[T any](items []T, deep func(T) T) []T {
	if len(items) == 0 {
		return nil
	}
	out := make([]T, len(items))
	for i, it := range items {
		out[i] = deep(it)
	}
	return out
}

func copyInt(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Compare returns human-readable differences between the model and actual,
// one line per differing field, missing flight or extra flight, in FLID
// order; empty means equal. It compares the business content — Status,
// OperationDay, every scalar (MAID/CSOP/CSFT included) and every collection
// item by item in order — and never Version, LastMsgID, CreatedAt or
// UpdatedAt. NULL conventions follow flight.State ("" and the zero time are
// NULL; nil and empty collections are equal); times compare as wall clocks.
func (m *Model) Compare(actual []*flight.State) []string {
	var diffs []string
	have := make(map[string]*flight.State, len(actual))
	for _, s := range actual {
		if s == nil {
			diffs = append(diffs, "actual holds a nil state")
			continue
		}
		if _, dup := have[s.FLID]; dup {
			diffs = append(diffs, fmt.Sprintf("FLID %s: appears twice in actual", s.FLID))
		}
		have[s.FLID] = s
	}
	for _, flid := range m.flids() {
		want := m.flights[flid]
		got := have[flid]
		if got == nil {
			diffs = append(diffs, fmt.Sprintf("FLID %s: missing (want a %s flight)", flid, want.Status))
			continue
		}
		w, g := render(want), render(got)
		for i := range w {
			if w[i].value != g[i].value {
				diffs = append(diffs, fmt.Sprintf("FLID %s: %s: want %s, have %s", flid, w[i].name, w[i].value, g[i].value))
			}
		}
	}
	extra := make([]string, 0)
	for flid := range have {
		if m.flights[flid] == nil {
			extra = append(extra, flid)
		}
	}
	slices.Sort(extra)
	for _, flid := range extra {
		diffs = append(diffs, fmt.Sprintf("FLID %s: extra flight (%s), not in the model", flid, have[flid].Status))
	}
	return diffs
}

type renderedField struct{ name, value string }

// render lists the business content of s as comparable strings, one per
// field or collection.
func render(s *flight.State) []renderedField {
	f := []renderedField{
		{"Status", string(s.Status)}, {"OperationDay", quote(s.OperationDay)},
		{"FLNO", quote(s.FLNO)}, {"AWCD", quote(s.AWCD)}, {"ADID", quote(s.ADID)}, {"FLTY", quote(s.FLTY)},
		{"SODT", wall(s.SODT)}, {"EODT", wall(s.EODT)}, {"AODT", wall(s.AODT)},
		{"ACTY", quote(s.ACTY)}, {"ACRG", quote(s.ACRG)}, {"TERM", quote(s.TERM)},
		{"STAT", quote(s.STAT)}, {"ABST", quote(s.ABST)}, {"ABRS", quote(s.ABRS)},
		{"MAID", quote(s.MAID)}, {"CSOP", quote(s.CSOP)}, {"CSFT", quote(s.CSFT)},
	}
	for _, k := range []struct {
		name string
		kind flight.ResourceKind
	}{{"GATE", flight.GATE}, {"CKIC", flight.CKIC}, {"BELT", flight.BELT}, {"STND", flight.STND},
		{"CHUT", flight.CHUT}, {"BRDG", flight.BRDG}, {"CHOK", flight.CHOK}} {
		f = append(f, renderedField{k.name, items(s.Resources[k.kind], func(r flight.Resource) string {
			return fmt.Sprintf("seq=%s code=%s btim=%s etim=%s abtm=%s aetm=%s",
				num(r.SourceSeq), quote(r.Code), wall(r.Begin), wall(r.End), wall(r.ActualBegin), wall(r.ActualEnd))
		})})
	}
	f = append(f, renderedField{"DELY", items(s.Delays, func(d flight.Delay) string {
		return fmt.Sprintf("seq=%s code=%s dura=%s rmrk=%s", num(d.SourceSeq), quote(d.Code), num(d.Minutes), quote(d.Remark))
	})})
	route := func(p flight.RoutePoint) string {
		return fmt.Sprintf("seq=%s apcd=%s sarr=%s sdep=%s", num(p.SourceSeq), quote(p.Airport), wall(p.SchedArr), wall(p.SchedDep))
	}
	service := func(v flight.Service) string {
		return fmt.Sprintf("seq=%s code=%s qnty=%s rmrk=%s", num(v.SourceSeq), quote(v.Code), num(v.Quantity), quote(v.Remark))
	}
	return append(f,
		renderedField{"ROUT", items(s.Routes[flight.ROUT], route)},
		renderedField{"ERUT", items(s.Routes[flight.ERUT], route)},
		renderedField{"SRVT", items(s.Services[flight.SRVT], service)},
		renderedField{"VIPF", items(s.Services[flight.VIPF], service)})
}

func quote(s string) string {
	if s == "" {
		return "NULL"
	}
	return strconv.Quote(s)
}

func wall(t time.Time) string {
	if t.IsZero() {
		return "NULL"
	}
	return t.Format(sisxml.TimeLayout)
}

func num(p *int) string {
	if p == nil {
		return "NULL"
	}
	return strconv.Itoa(*p)
}

func items[T any](list []T, one func(T) string) string {
	parts := make([]string, len(list))
	for i, it := range list {
		parts[i] = "{" + one(it) + "}"
	}
	return "[" + strings.Join(parts, " ") + "]"
}
