package simulate

import (
	"cmp"
	"fmt"
	"time"
)

// Defaults and limits of Options. The message counts not listed here scale
// with Flights; see the Options fields.
const (
	// DayDefault is the default operating day.
	DayDefault = "20260301"
	// FlightsDefault is the default number of flights in the daily plan.
	FlightsDefault = 1000
	// ProtocolDefault is the default number of PROTOCOL-rejected packages.
	ProtocolDefault = 2
	// RollbacksDefault is the default number of rolled-back inserts (holes).
	RollbacksDefault = 5
	// LateDefault is the default number of late-committed inserts.
	LateDefault = 5
	// LateByDefault is how long a late insert stays open by default.
	LateByDefault = 300 * time.Millisecond
	// SharedPercent is the share of plan flights that are shared flights
	// (MAID names a master flight of the plan).
	SharedPercent = 15
	// MaxFlights bounds Options.Flights (the FLID scheme has six digits).
	MaxFlights = 500000
	// MaxPlanRecordsPerChunk bounds the records of one plan package, keeping
	// it well under sisxml.MaxSize (about 150 KiB per 100 records).
	MaxPlanRecordsPerChunk = 300

	replanRecordsPerPackage = 25
)

// Options configure NewPlan. The zero value means every default. For each
// message count, 0 means its default and a negative value means none.
type Options struct {
	// Day is the operating day, YYYYMMDD (default DayDefault). Every plan and
	// ad-hoc flight's SODT is a wall clock on Day in the airport zone, so its
	// OPERATION_DAY is Day (pipeline settings: MessageZone == AirportZone,
	// DayCut 0).
	Day string
	// Flights is the number of flights in the daily plan (default
	// FlightsDefault, at most MaxFlights); SharedPercent of them are shared
	// flights whose MAID names a master flight of the plan.
	Flights int
	// Updates is the number of FLOP dynamic changes (default 3×Flights),
	// spread evenly over all FLOP subtypes (BASE STAT SHAR GATE CKIC BELT STND
	// CHUT BRDG CHOK DELY ROUT ERUT SRVT VIPF), including explicit clears
	// (<GATE/>), MAID moves between masters, changes that change nothing and a
	// few changes of deleted flights (SKIPPED).
	Updates int
	// Deletions is the number of FDEL messages (default Flights/50), including
	// deletions of masters with ACTIVE children (cascade) and repeated FDEL of
	// deleted flights (SKIPPED).
	Deletions int
	// Adhoc is the number of SCHD-ADFT messages, each creating one new flight
	// (default Flights/100).
	Adhoc int
	// Duplicates is the number of re-sent messages with the SNDR/TYPE/STYP/SEQN
	// and content of an earlier one (default Flights/20), expected SKIPPED.
	// Many repeat a message whose effect a later message has since changed
	// (plan packages, FLOPs), so a re-applied duplicate shows in the model.
	Duplicates int
	// Malformed is the number of rows with bad XML, empty or NULL MSGCONTENT
	// (default Flights/100), expected DEAD (MALFORMED).
	Malformed int
	// Ignored is the number of LDM/REGN/RSTA/EROR messages (default
	// Flights/50), expected SKIPPED.
	Ignored int
	// Protocol is the number of SCHD-DNLD packages rejected whole — one FLID
	// twice, or a planned flight moved to another operating day (default
	// ProtocolDefault) — expected DEAD (PROTOCOL) with no state change.
	Protocol int
	// Replans is the number of SCHD-DNLD packages re-sending planned ACTIVE
	// flights with changed, absent (kept) and explicitly empty (cleared)
	// fields (default PlanChunks/5, at least 1). An addition to the brief's
	// options: it exercises the SCHD merge on existing flights.
	Replans int
	// Rollbacks is the number of inserts made in a transaction that rolls
	// back (default RollbacksDefault): each consumes an id that never becomes
	// visible, a permanent hole.
	Rollbacks int
	// Late is the number of inserts committed late (default LateDefault):
	// held open while later rows commit, committed LateBy after the insert
	// (and only once a later row has committed).
	Late int
	// LateBy is how long a late insert stays uncommitted (default
	// LateByDefault). A pipeline must use a max-commit-delay above it, or it
	// would pass the late row as a permanent hole (seed 000 §4.1).
	LateBy time.Duration
	// PlanChunks is the number of SCHD-DNLD packages the daily plan is sent
	// as (default Flights/100, at least 1), each with RCNT records; at most
	// MaxPlanRecordsPerChunk records per package.
	PlanChunks int
	// Seed makes generation deterministic: equal Options give equal plans.
	Seed int64
}

// WithDefaults returns o with every zero field set to its default and every
// negative count set to -1 (none). It is idempotent: NewPlan(p.Options())
// regenerates p.
func (o Options) WithDefaults() Options {
	o.Day = cmp.Or(o.Day, DayDefault)
	o.Flights = cmp.Or(o.Flights, FlightsDefault)
	o.LateBy = cmp.Or(o.LateBy, LateByDefault)
	n := o.Flights
	count := func(v *int, def int) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0:
			*v = -1
		}
	}
	if o.PlanChunks == 0 {
		o.PlanChunks = max(1, n/100)
	}
	count(&o.Updates, 3*n)
	count(&o.Deletions, n/50)
	count(&o.Adhoc, n/100)
	count(&o.Duplicates, n/20)
	count(&o.Malformed, n/100)
	count(&o.Ignored, n/50)
	count(&o.Protocol, ProtocolDefault)
	count(&o.Replans, max(1, o.PlanChunks/5))
	count(&o.Rollbacks, RollbacksDefault)
	count(&o.Late, LateDefault)
	return o
}

// Validate reports the first invalid field of o.WithDefaults(), naming it.
func (o Options) Validate() error {
	o = o.WithDefaults()
	if _, err := time.Parse("20060102", o.Day); err != nil || len(o.Day) != 8 {
		return fmt.Errorf("simulate: options: Day %q: want YYYYMMDD", o.Day)
	}
	if o.Flights < 1 || o.Flights > MaxFlights {
		return fmt.Errorf("simulate: options: Flights %d: want 1..%d", o.Flights, MaxFlights)
	}
	if o.PlanChunks < 1 || o.PlanChunks > o.Flights {
		return fmt.Errorf("simulate: options: PlanChunks %d: want 1..Flights (%d)", o.PlanChunks, o.Flights)
	}
	if per := (o.Flights + o.PlanChunks - 1) / o.PlanChunks; per > MaxPlanRecordsPerChunk {
		return fmt.Errorf("simulate: options: PlanChunks %d: %d records per package, want at most %d", o.PlanChunks, per, MaxPlanRecordsPerChunk)
	}
	if o.LateBy < 0 {
		return fmt.Errorf("simulate: options: LateBy %s: want > 0", o.LateBy)
	}
	if o.Adhoc > 99999 {
		return fmt.Errorf("simulate: options: Adhoc %d: want at most 99999", o.Adhoc)
	}
	return nil
}

// counts returns o with every "none" (-1) count as 0, for the generator.
func (o Options) counts() Options {
	for _, v := range []*int{&o.Updates, &o.Deletions, &o.Adhoc, &o.Duplicates, &o.Malformed, &o.Ignored,
		&o.Protocol, &o.Replans, &o.Rollbacks, &o.Late} {
		*v = max(0, *v)
	}
	return o
}
