package simulate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
)

func wallClock(s string) time.Time {
	t, err := time.ParseInLocation(sisxml.TimeLayout, s, time.UTC)
	if err != nil {
		panic(err)
	}
	return t
}

// TestModelRules pins the model's rules on a hand-written day, state by
// state: the oracle itself must be right.
func TestModelRules(t *testing.T) {
	t.Parallel()
	seqn := 0
	meta := func(typ, styp string) sisxml.Meta {
		seqn++
		return sisxml.Meta{SNDR: "AODB", SEQN: string(rune('A' + seqn)), DTTM: wallClock("20260301080000"), TYPE: typ, STYP: styp}
	}
	schd := func(styp string, recs ...sisxml.Flight) *sisxml.Message {
		return schedule(meta("SCHD", styp), recs)
	}
	flop := func(styp string, f sisxml.Flight) *sisxml.Message {
		return &sisxml.Message{Meta: meta("FLOP", styp), Kind: sisxml.KindFlop, Flop: &sisxml.FlightOp{Subtype: styp, Flight: f}}
	}
	fdel := func(flid string) *sisxml.Message {
		return &sisxml.Message{Meta: meta("FDEL", "DELE"), Kind: sisxml.KindFdel, Fdel: &sisxml.FlightDelete{FLID: flid}}
	}
	v := sisxml.Val[string]
	ts := func(s string) sisxml.Field[time.Time] { return sisxml.Val(wallClock(s)) }
	gate := func(codes ...string) sisxml.List[sisxml.Resource] {
		var items []sisxml.Resource
		for i, c := range codes {
			items = append(items, sisxml.Resource{SEQU: sisxml.Val(i + 1), CODE: v(c)})
		}
		return sisxml.Items(items...)
	}

	plan := schd("DNLD",
		sisxml.Flight{FLID: "F1", FLNO: v("CA1"), SODT: ts("20260301093000"), TERM: v("T2"), STAT: v("SCH"), GATE: gate("B12")},
		sisxml.Flight{FLID: "F2", FLNO: v("MU5"), SODT: ts("20260301093000"), MAID: v("F1"), CSOP: v("MU"), CSFT: v("MU5")},
		sisxml.Flight{FLID: "F3", FLNO: v("HU7"), SODT: ts("20260301235900"), VIPF: sisxml.Items[sisxml.Service]()})
	steps := []struct {
		msg     *sisxml.Message
		outcome Outcome
		reason  string
	}{
		{plan, Succeeded, ""},
		{flop("GATE", sisxml.Flight{FLID: "F1", GATE: gate("B14", "A1", "B14")}), Succeeded, ""},
		{flop("BASE", sisxml.Flight{FLID: "F1", TERM: sisxml.Cleared[string](), EODT: ts("20260301094500")}), Succeeded, ""},
		// SCHD on an existing flight: Set overwrites, Empty clears, Absent keeps (GATE, EODT, FLNO).
		{schd("DNLD", sisxml.Flight{FLID: "F1", SODT: ts("20260301100000"), STAT: v("DLY"), ABST: sisxml.Cleared[string]()}), Succeeded, ""},
		// A duplicate of the plan, sent before the changes above: skipped, not re-applied.
		{plan, Skipped, "duplicate-of:0"},
		{nil, Dead, "MALFORMED"},
		{&sisxml.Message{Meta: meta("LDM", "LDM"), Kind: sisxml.KindIgnored}, Skipped, "ignored"},
		// PROTOCOL packages change nothing, not even their valid records.
		{schd("DNLD", sisxml.Flight{FLID: "F9", SODT: ts("20260301100000")}, sisxml.Flight{FLID: "F3", STAT: v("X")},
			sisxml.Flight{FLID: "F3", STAT: v("Y")}), Dead, "PROTOCOL: FLID F3 twice"},
		{schd("DNLD", sisxml.Flight{FLID: "F3", STAT: v("X")}, sisxml.Flight{FLID: "F1", SODT: ts("20260302100000")}),
			Dead, "PROTOCOL: FLID F1 moved from 20260301 to 20260302"},
		// ADFT: set-only, creates; the empty TERM and GATE are ignored.
		{schd("ADFT", sisxml.Flight{FLID: "F4", FLNO: v("ZH9"), SODT: ts("20260301200000"), TERM: sisxml.Cleared[string]()},
			sisxml.Flight{FLID: "F3", STAT: v("BOR"), FLNO: sisxml.Cleared[string](), GATE: sisxml.Items[sisxml.Resource]()}), Succeeded, ""},
		// The shared flight moves to F3, which is then deleted: the cascade follows the current MAID.
		{flop("SHAR", sisxml.Flight{FLID: "F2", MAID: v("F3")}), Succeeded, ""},
		{fdel("F3"), Succeeded, ""},
		{fdel("F3"), Skipped, "already deleted"},
		{fdel("F2"), Skipped, "already deleted"},
		{flop("STAT", sisxml.Flight{FLID: "F2", STAT: v("CNL")}), Skipped, "flight deleted"},
		{flop("STAT", sisxml.Flight{FLID: "F1", STAT: v("DLY")}), Succeeded, ""},  // changes nothing
		{flop("CHOK", sisxml.Flight{FLID: "F7", CHOK: gate("9")}), Succeeded, ""}, // unknown: created, no OPERATION_DAY
	}
	m := newModel()
	for i, s := range steps {
		o, reason := m.apply(i, s.msg)
		require.Equal(t, s.outcome, o, "step %d", i)
		require.Equal(t, s.reason, reason, "step %d", i)
	}
	one := 1
	two, three := 2, 3
	want := []*flight.State{
		{FLID: "F1", Status: flight.Active, OperationDay: "20260301", FLNO: "CA1", SODT: wallClock("20260301100000"),
			EODT: wallClock("20260301094500"), STAT: "DLY",
			Resources: [flight.NumResourceKinds][]flight.Resource{flight.GATE: {
				{SourceSeq: &one, Code: "B14"}, {SourceSeq: &two, Code: "A1"}, {SourceSeq: &three, Code: "B14"}}}},
		{FLID: "F2", Status: flight.Deleted, OperationDay: "20260301", FLNO: "MU5", SODT: wallClock("20260301093000"),
			MAID: "F3", CSOP: "MU", CSFT: "MU5"},
		{FLID: "F3", Status: flight.Deleted, OperationDay: "20260301", FLNO: "HU7", SODT: wallClock("20260301235900"), STAT: "BOR"},
		{FLID: "F4", Status: flight.Active, OperationDay: "20260301", FLNO: "ZH9", SODT: wallClock("20260301200000")},
		{FLID: "F7", Status: flight.Active,
			Resources: [flight.NumResourceKinds][]flight.Resource{flight.CHOK: {{SourceSeq: &one, Code: "9"}}}},
	}
	require.Equal(t, want, m.States())
	require.Empty(t, m.Compare(want))
	require.Equal(t, 5, m.Flights())

	// wouldChange: re-applying the plan now would revert F1; the last FLOP would not.
	require.True(t, m.wouldChange(plan))
	require.False(t, m.wouldChange(steps[len(steps)-2].msg))
	require.False(t, m.wouldChange(fdel("F3")))
}
