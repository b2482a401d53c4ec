package flight

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/relaytype"
)

// Msg is the mailbox message causing a decision.
type Msg struct {
	// ID is the mailbox id (CMINMSGS.ID); it becomes State.LastMsgID of every
	// flight the decision saves.
	ID int64
	// Kind is TYPE-STYP (sisxml.Meta.Kind), e.g. "FLOP-GATE"; it becomes Notice.Cause.
	Kind string
	// Now is the processing clock: CreatedAt of created flights and UpdatedAt
	// of every saved flight. The domain never reads a clock itself.
	Now time.Time
}

// Notice actions.
const (
	ActionCreate = "CREATE" // the flight did not exist
	ActionUpdate = "UPDATE" // an ACTIVE flight changed (a master's MAFL included)
	ActionDelete = "DELETE" // ACTIVE -> DELETED (FDEL, or its master cascade)
)

// Skip reason prefixes of Change.Skipped; the full reason is "<prefix>:<FLID>".
const (
	// SkipFlightDeleted: a FLOP or FDEL names a DELETED flight, or every
	// record of a SCHD package does (FLID is never reused, C-21; a repeated
	// FDEL is an idempotent success, seed 000 §12.3, which §3 spells SKIPPED:
	// a terminal state that applied nothing).
	SkipFlightDeleted = "flight-deleted"
	// SkipUnknownFlight: an FDEL names a flight that does not exist (idempotent success).
	SkipUnknownFlight = "unknown-flight"
)

// Change is the outcome of Decide: what to persist and notify, in one
// transaction with the message's terminal state (seed 000 §12, INV-17).
//
// Saved empty and Skipped "" means the message is valid and changes nothing
// (every value already equal, or an empty package): a success with nothing
// to write. Decide never puts "no-change" in Skipped. A message that names
// only DELETED flights — a FLOP, a repeated FDEL, a SCHD package every record
// of which names one — is Skipped, whatever its kind.
type Change struct {
	// Saved are the next full states to persist, FLID ascending; each changed
	// flight exactly once, with Version = old+1 (1 when created), UpdatedAt =
	// Msg.Now, LastMsgID = Msg.ID. They share no slices with the snapshot.
	Saved []*State
	// Notices are the KAFKA:msg change notices, one per flight in Saved, in
	// the same order.
	Notices []Notice
	// Skipped is non-empty ("<SkipXxx>:<FLID>") when the message changes
	// nothing for a reason the caller records; Saved is then empty. For a
	// FLOP or FDEL it names the message's flight; for a SCHD package whose
	// every record names a DELETED flight it is "flight-deleted:<first
	// FLID>", with " (+N more)" when there are N more such records.
	Skipped string
	// SkippedDeleted lists, in record order, the FLIDs of SCHD (DNLD, RESP or
	// ADFT) records that were not applied because the flight is DELETED: a
	// plan never revives a deleted flight (FLID is never reused, C-21). The
	// other records of the message apply normally; when there are none, the
	// message is Skipped.
	SkippedDeleted []string
}

// Notice is one KAFKA:msg change notice (seed 000 §8.1); see NoticeDocument.
type Notice struct {
	FLID    string
	Version int64  // STATE_VERSION after the change
	Action  string // ActionCreate, ActionUpdate or ActionDelete
	Cause   string // Msg.Kind
	// Fields are the sorted names of what changed (see Changed), plus "MAFL"
	// when the flight is an ACTIVE master whose projection changed.
	Fields []string
}

// ProtocolError is a whole-package rejection (seed 000 §7.1, INV-19): the
// pipeline makes the message DEAD(PROTOCOL) and writes no flight state. The
// pipeline wraps it with relay.Classify(relaytype.ClassProtocol, err); this
// package stays free of engine imports.
type ProtocolError struct {
	Reason string // what rule the package breaks
	FLID   string // the record that breaks it
}

// Error returns "protocol: <reason> (FLID <flid>)".
func (e *ProtocolError) Error() string {
	if e.FLID == "" {
		return "protocol: " + e.Reason
	}
	return "protocol: " + e.Reason + " (FLID " + e.FLID + ")"
}

// Named returns the FLIDs m names, in message order: every SCHD record's
// (duplicates kept), the FLOP flight's, the FDEL FLID. nil for other kinds
// and for nil.
func Named(m *sisxml.Message) []string {
	if m == nil {
		return nil
	}
	switch {
	case m.Kind == sisxml.KindSchd && m.Schd != nil:
		var out []string
		for i := range m.Schd.Flights {
			out = append(out, m.Schd.Flights[i].FLID)
		}
		return out
	case m.Kind == sisxml.KindFlop && m.Flop != nil:
		return []string{m.Flop.Flight.FLID}
	case m.Kind == sisxml.KindFdel && m.Fdel != nil:
		return []string{m.Fdel.FLID}
	}
	return nil
}

// Involved returns, sorted and unique, the FLIDs whose current state Decide
// needs: Named(m), every MAID value the message carries (a master a record
// joins), and the non-empty current MAID of each named flight found in cur (a
// master a record may leave or whose MAFL shows its FLNO). cur maps FLID to
// current state and may be nil or partial. The coordinator loads these FLIDs
// and every flight (any status) whose MAID is one of them — a master's
// children — into the snapshot it gives Decide. nil when there are none.
func Involved(m *sisxml.Message, cur map[string]*State) []string {
	set := make(map[string]struct{})
	for _, id := range Named(m) {
		set[id] = struct{}{}
		if s := cur[id]; s != nil && s.MAID != "" {
			set[s.MAID] = struct{}{}
		}
	}
	for _, f := range records(m) {
		if f.MAID.Presence == sisxml.Set {
			set[f.MAID.Value] = struct{}{}
		}
	}
	if len(set) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(set))
}

// records returns the flight records m carries (SCHD and FLOP).
func records(m *sisxml.Message) []*sisxml.Flight {
	if m == nil {
		return nil
	}
	var out []*sisxml.Flight
	switch {
	case m.Kind == sisxml.KindSchd && m.Schd != nil:
		for i := range m.Schd.Flights {
			out = append(out, &m.Schd.Flights[i])
		}
	case m.Kind == sisxml.KindFlop && m.Flop != nil:
		out = append(out, &m.Flop.Flight)
	}
	return out
}

// Decide is the whole pure decision for a SCHD (DNLD, RESP, ADFT), FLOP or
// FDEL message (seed 000 §11–§12). snap maps FLID to the current state of
// every Involved flight that exists plus every flight whose MAID is one of
// them; Decide never modifies it or its states. It reads no clock: times come
// from msg.
//
// Errors: a *ProtocolError is a whole-package rejection (the caller makes the
// message DEAD(PROTOCOL) and writes nothing); any other error is a caller bug
// (invalid settings, a nil or non-flight message) — nothing is decided.
//
// The rules, by kind:
//   - SCHD DNLD/RESP (§7.1, §12.1): the package is validated first — a FLID
//     twice, a record without SODT for a flight that has no OPERATION_DAY, or
//     a SODT deriving another day than the flight's OPERATION_DAY is a
//     ProtocolError. Then each record creates or updates its flight: a value
//     overwrites, an explicit empty clears, a missing element keeps or clears
//     per Settings.AbsentField. A SODT that is present but not a time is a
//     ProtocolError too (the day cannot be derived). Flights not in the package are untouched
//     (INV-15). Records for DELETED flights are skipped (SkippedDeleted);
//     when every record is, the message is Skipped.
//   - SCHD ADFT (§12.3): set-only — values overwrite, empty and missing
//     elements are ignored; creates an unknown flight (without OPERATION_DAY
//     when its SODT cannot be parsed: that SODT is not applied); records
//     apply in order; the only rejection is a SODT deriving another day than
//     the flight's.
//   - FLOP (§12.2): changes only what it carries (a value overwrites, an
//     empty clears, a collection is replaced whole); never touches
//     OPERATION_DAY. An unknown FLID creates an ACTIVE flight with no
//     OPERATION_DAY; a DELETED flight is Skipped.
//   - FDEL (§12.3): ACTIVE -> DELETED keeping every detail; a master's ACTIVE
//     children are deleted with it. Unknown or already DELETED: Skipped.
//
// Then, for every ACTIVE master whose MAFL projection changed by value
// (§11.4: a child joined, left, was deleted or renamed), the master is saved
// too with "MAFL" in its notice fields. Every flight is bumped at most once.
func Decide(snap map[string]*State, m *sisxml.Message, msg Msg, set Settings) (*Change, error) {
	if err := set.Validate(); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("flight: decide: nil message")
	}
	d := &decision{snap: snap, next: make(map[string]*State), msg: msg, set: set}
	var err error
	switch {
	case m.Kind == sisxml.KindSchd && m.Schd != nil:
		switch m.Schd.Subtype {
		case "DNLD", "RESP":
			err = d.plan(m.Schd.Flights)
		case "ADFT":
			err = d.adhoc(m.Schd.Flights)
		default:
			return nil, fmt.Errorf("flight: decide: SCHD-%s is not a flight message", m.Schd.Subtype)
		}
	case m.Kind == sisxml.KindFlop && m.Flop != nil:
		d.flop(&m.Flop.Flight)
	case m.Kind == sisxml.KindFdel && m.Fdel != nil:
		d.fdel(m.Fdel.FLID)
	default:
		return nil, fmt.Errorf("flight: decide: %s message (%s) is not a flight message", m.Kind, m.Meta.Kind())
	}
	if err != nil {
		return nil, err
	}
	if m.Kind == sisxml.KindSchd && len(m.Schd.Flights) > 0 && len(d.skippedDeleted) == len(m.Schd.Flights) {
		// Every record named a DELETED flight: nothing applies, the same
		// outcome as a FLOP for a deleted flight (seed 000 §3: SKIPPED is the
		// terminal state of a message that matches nothing to change).
		d.skipped = SkipFlightDeleted + ":" + d.skippedDeleted[0]
		if n := len(d.skippedDeleted) - 1; n > 0 {
			d.skipped += fmt.Sprintf(" (+%d more)", n)
		}
	}
	if d.skipped != "" {
		return &Change{Skipped: d.skipped, SkippedDeleted: d.skippedDeleted}, nil
	}
	return d.finish(), nil
}

// decision is one Decide call's working set: next holds the edited clones,
// snap stays untouched.
type decision struct {
	snap           map[string]*State
	next           map[string]*State
	msg            Msg
	set            Settings
	skipped        string
	skippedDeleted []string
}

// current returns the flight's state as edited so far (nil if unknown).
func (d *decision) current(flid string) *State {
	if s, ok := d.next[flid]; ok {
		return s
	}
	return d.snap[flid]
}

// edit returns the mutable next state of flid, cloning the current one or
// creating an ACTIVE flight with no OPERATION_DAY.
func (d *decision) edit(flid string) *State {
	if s, ok := d.next[flid]; ok {
		return s
	}
	s := d.snap[flid].Clone()
	if s == nil {
		s = &State{FLID: flid, Status: Active, CreatedAt: d.msg.Now}
	}
	d.next[flid] = s
	return s
}

// plan applies a SCHD DNLD/RESP package: whole-package validation first,
// then the merge (seed 000 §7.1 steps 2–3, §12.1).
func (d *decision) plan(recs []sisxml.Flight) error {
	seen := make(map[string]bool, len(recs))
	for i := range recs {
		id := recs[i].FLID
		if id == "" {
			return &ProtocolError{Reason: fmt.Sprintf("record %d has no FLID", i+1)}
		}
		if seen[id] {
			return &ProtocolError{Reason: "FLID appears twice in the package", FLID: id}
		}
		seen[id] = true
	}
	days := make([]string, len(recs))
	for i := range recs {
		r := &recs[i]
		cur := d.snap[r.FLID]
		if cur != nil && cur.Status == Deleted {
			continue // skipped below: its day is not checked, nothing is written
		}
		var curDay string
		if cur != nil {
			curDay = cur.OperationDay
		}
		if r.SODTUnparsed != "" {
			// seed 000 §7.1 step 2: the operating day cannot be derived — a
			// whole-package check, DEAD(PROTOCOL), not a retried codec error.
			return &ProtocolError{Reason: "SODT " + relaytype.QuoteValue(r.SODTUnparsed) +
				" is not a time: OPERATION_DAY cannot be derived", FLID: r.FLID}
		}
		if r.SODT.Presence != sisxml.Set {
			if curDay == "" {
				return &ProtocolError{Reason: "no SODT: OPERATION_DAY cannot be derived", FLID: r.FLID}
			}
			continue
		}
		day, err := d.day(r, curDay)
		if err != nil {
			return err
		}
		days[i] = day
	}
	p := policy{applyEmpty: true, clearAbsent: d.set.Absent() == AbsentClear}
	for i := range recs {
		r := &recs[i]
		if cur := d.snap[r.FLID]; cur != nil && cur.Status == Deleted {
			d.skippedDeleted = append(d.skippedDeleted, r.FLID)
			continue
		}
		st := d.edit(r.FLID)
		merge(st, r, p)
		if st.OperationDay == "" {
			st.OperationDay = days[i]
		}
	}
	return nil
}

// adhoc applies a SCHD ADFT: set-only, record by record (seed 000 §12.3).
// A SODT that cannot be parsed (Flight.SODTUnparsed) is not applied: a new
// flight is created without OPERATION_DAY ("新建 ADFT 若带可解析的 SODT，按同一
// 运营日规则计算 OPERATION_DAY；否则保留为 NULL"), an existing one keeps its
// SODT and day.
func (d *decision) adhoc(recs []sisxml.Flight) error {
	p := policy{} // neither empty nor absent clears
	for i := range recs {
		r := &recs[i]
		cur := d.current(r.FLID)
		if cur != nil && cur.Status == Deleted {
			d.skippedDeleted = append(d.skippedDeleted, r.FLID)
			continue
		}
		var day string
		if r.SODT.Presence == sisxml.Set {
			var curDay string
			if cur != nil {
				curDay = cur.OperationDay
			}
			var err error
			if day, err = d.day(r, curDay); err != nil {
				return err
			}
		}
		st := d.edit(r.FLID)
		merge(st, r, p)
		if st.OperationDay == "" {
			st.OperationDay = day
		}
	}
	return nil
}

// day derives the record's OPERATION_DAY from its (Set) SODT and rejects a
// move away from the flight's existing day (INV-12, INV-19).
func (d *decision) day(r *sisxml.Flight, curDay string) (string, error) {
	day := d.set.OperationDay(r.SODT.Value)
	if curDay != "" && day != curDay {
		return "", &ProtocolError{
			Reason: fmt.Sprintf("SODT derives OPERATION_DAY %s, the flight's is %s (same flight on two days)", day, curDay),
			FLID:   r.FLID,
		}
	}
	return day, nil
}

// flop applies one dynamic change (seed 000 §12.2). It applies every element
// the record carries, so a codec that maps combined changes needs no change here.
func (d *decision) flop(f *sisxml.Flight) {
	if cur := d.snap[f.FLID]; cur != nil && cur.Status == Deleted {
		d.skipped = SkipFlightDeleted + ":" + f.FLID
		return
	}
	merge(d.edit(f.FLID), f, policy{applyEmpty: true})
}

// fdel applies a business deletion, cascading to a master's ACTIVE children
// in the same change (seed 000 §12.3: no master-deleted, child-left state).
func (d *decision) fdel(flid string) {
	cur := d.snap[flid]
	switch {
	case cur == nil:
		d.skipped = SkipUnknownFlight + ":" + flid
		return
	case cur.Status == Deleted:
		d.skipped = SkipFlightDeleted + ":" + flid
		return
	}
	d.edit(flid).Status = Deleted
	for _, c := range Children(cur, d.snap) {
		d.edit(c.FLID).Status = Deleted
	}
}

// finish adds the masters whose projection changed, drops unchanged
// flights, stamps versions and builds the notices.
func (d *decision) finish() *Change {
	// Only a master that is edited here, or that an edited flight points to
	// before or after, can see its MAFL change; projecting just those keeps a
	// decision linear in the snapshot (a batch's snapshot holds every flight
	// of its run of messages).
	masters := make(map[string]bool, 2*len(d.next))
	for id, s := range d.next {
		masters[id] = true
		if old := d.snap[id]; old != nil && old.MAID != "" {
			masters[old.MAID] = true
		}
		if s != nil && s.MAID != "" {
			masters[s.MAID] = true
		}
	}
	after := func(id string) *State {
		if s, ok := d.next[id]; ok {
			return s
		}
		return d.snap[id]
	}
	// The children of those masters before and after, from one pass over
	// the snapshot: a flight edited here counts before with its snapshot
	// state and after with its edited one.
	child := func(s *State) bool {
		return s != nil && s.Status == Active && s.MAID != "" && s.MAID != s.FLID && masters[s.MAID]
	}
	beforeKids, laterKids := make(map[string][]*State), make(map[string][]*State)
	for id, s := range d.snap {
		if !child(s) {
			continue
		}
		beforeKids[s.MAID] = append(beforeKids[s.MAID], s)
		if _, edited := d.next[id]; !edited {
			laterKids[s.MAID] = append(laterKids[s.MAID], s)
		}
	}
	for _, s := range d.next {
		if child(s) {
			laterKids[s.MAID] = append(laterKids[s.MAID], s)
		}
	}
	before := projections(beforeKids, func(id string) *State { return d.snap[id] })
	later := projections(laterKids, after)
	maflChanged := make(map[string]bool)
	for id := range masters {
		s := after(id)
		if s == nil || s.Status != Active || s.MAID != "" {
			continue
		}
		if !slices.Equal(before[id], later[id]) {
			maflChanged[id] = true
			d.edit(id) // a master saved only for its projection
		}
	}

	ch := &Change{SkippedDeleted: d.skippedDeleted}
	for _, id := range slices.Sorted(maps.Keys(d.next)) {
		st, old := d.next[id], d.snap[id]
		fields := Changed(old, st)
		if maflChanged[id] {
			fields = append(fields, "MAFL")
			slices.Sort(fields)
		}
		if len(fields) == 0 {
			continue
		}
		action := ActionUpdate
		switch {
		case old == nil:
			action = ActionCreate
			st.Version = 1
		case old.Status == Active && st.Status == Deleted:
			action = ActionDelete
			st.Version = old.Version + 1
		default:
			st.Version = old.Version + 1
		}
		st.UpdatedAt = d.msg.Now
		st.LastMsgID = d.msg.ID
		ch.Saved = append(ch.Saved, st)
		ch.Notices = append(ch.Notices, Notice{
			FLID: id, Version: st.Version, Action: action, Cause: d.msg.Kind, Fields: fields,
		})
	}
	return ch
}
