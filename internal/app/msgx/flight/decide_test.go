package flight_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/sisxml"
)

// Rule 1 — seed 000 §11.2: OPERATION_DAY comes only from a SCHD record's
// SODT, once; FLOP never derives or changes it.
func TestDecideOperationDay(t *testing.T) {
	t.Parallel()
	set := flight.Settings{MessageZone: time.UTC, AirportZone: zone(t, "Asia/Shanghai"), DayCut: 4 * time.Hour}
	base := func(flid, sodt string) sisxml.Flight {
		return sisxml.Flight{FLID: flid, SODT: sisxml.Val(wall(sodt))}
	}
	tests := []struct {
		name     string
		snap     map[string]*flight.State
		msg      *sisxml.Message
		wantDay  string
		wantSODT time.Time // zero: not checked
	}{
		{name: "DNLD creates: 19:59Z is 03:59 Shanghai, before the 4h cut", msg: schd("DNLD", base("1", "20260301195900")), wantDay: "20260301"},
		{name: "DNLD creates: 20:00Z is 04:00 Shanghai", msg: schd("DNLD", base("1", "20260301200000")), wantDay: "20260302"},
		{name: "RESP creates", msg: schd("RESP", base("1", "20260301120000")), wantDay: "20260301"},
		{name: "DNLD fills a flight created without a day", snap: snapOf(active("1", noDay)), msg: schd("DNLD", base("1", "20260301120000")), wantDay: "20260301"},
		{name: "DNLD moves SODT within the day: day kept", snap: snapOf(active("1")), msg: schd("DNLD", base("1", "20260301150000")), wantDay: "20260301", wantSODT: wall("20260301150000")},
		{name: "DNLD clears SODT of a flight with a day: day kept", snap: snapOf(active("1")), msg: schd("DNLD", sisxml.Flight{FLID: "1", SODT: sisxml.Cleared[time.Time](), FLNO: sisxml.Val("X")}), wantDay: "20260301"},
		{name: "ADFT creates with SODT", msg: schd("ADFT", base("1", "20260301200000")), wantDay: "20260302"},
		{name: "ADFT creates without SODT: no day", msg: schd("ADFT", sisxml.Flight{FLID: "1", FLNO: sisxml.Val("CA1")}), wantDay: ""},
		{name: "ADFT fills a flight without a day", snap: snapOf(active("1", noDay)), msg: schd("ADFT", base("1", "20260301120000")), wantDay: "20260301"},
		{name: "FLOP-BASE moves SODT to another day: day kept", snap: snapOf(active("1")), msg: flop("BASE", base("1", "20260305120000")), wantDay: "20260301", wantSODT: wall("20260305120000")},
		{name: "FLOP-BASE on a flight without a day: none derived", snap: snapOf(active("1", noDay)), msg: flop("BASE", base("1", "20260301120000")), wantDay: "", wantSODT: wall("20260301120000")},
		{name: "FLOP creating a flight: none derived", msg: flop("BASE", base("1", "20260301120000")), wantDay: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ch := decide(t, tt.snap, tt.msg, set)
			s, _ := saved(ch, "1")
			require.NotNil(t, s)
			require.Equal(t, tt.wantDay, s.OperationDay)
			if !tt.wantSODT.IsZero() {
				require.Equal(t, tt.wantSODT, s.SODT)
			}
		})
	}

	t.Run("FDEL keeps the day", func(t *testing.T) {
		t.Parallel()
		ch := decide(t, snapOf(active("1")), fdel("1"), set)
		require.Equal(t, "20260301", ch.Saved[0].OperationDay)
	})
}

// Rule 2 — seed 000 §7.1, INV-12, INV-19: DNLD/RESP whole-package validation
// rejects the package before anything is decided.
func TestDecidePlanValidation(t *testing.T) {
	t.Parallel()
	sodt := sisxml.Val(wall("20260301093000"))
	otherDay := sisxml.Val(wall("20260302093000"))
	ok := func(flid string) sisxml.Flight { return sisxml.Flight{FLID: flid, SODT: sodt} }
	tests := []struct {
		name       string
		snap       map[string]*flight.State
		msg        *sisxml.Message
		wantReason string // substring; "" = accepted
		wantFLID   string
	}{
		{name: "same FLID twice", msg: schd("DNLD", ok("1"), ok("2"), ok("1")), wantReason: "twice", wantFLID: "1"},
		{name: "same FLID twice, identical records", msg: schd("RESP", ok("1"), ok("1")), wantReason: "twice", wantFLID: "1"},
		{name: "new flight without SODT", msg: schd("DNLD", ok("1"), sisxml.Flight{FLID: "2", FLNO: sisxml.Val("CA2")}), wantReason: "OPERATION_DAY cannot be derived", wantFLID: "2"},
		{name: "new flight with empty SODT", msg: schd("DNLD", sisxml.Flight{FLID: "2", SODT: sisxml.Cleared[time.Time]()}), wantReason: "OPERATION_DAY cannot be derived", wantFLID: "2"},
		{name: "flight without a day, record without SODT", snap: snapOf(active("2", noDay)), msg: schd("DNLD", sisxml.Flight{FLID: "2", FLNO: sisxml.Val("X")}), wantReason: "OPERATION_DAY cannot be derived", wantFLID: "2"},
		{name: "same flight on two days", snap: snapOf(active("2")), msg: schd("DNLD", ok("1"), sisxml.Flight{FLID: "2", SODT: otherDay}), wantReason: "same flight on two days", wantFLID: "2"},
		{name: "same flight on two days, RESP", snap: snapOf(active("2")), msg: schd("RESP", sisxml.Flight{FLID: "2", SODT: otherDay}), wantReason: "OPERATION_DAY 20260302, the flight's is 20260301", wantFLID: "2"},
		{name: "record without SODT for a flight with a day", snap: snapOf(active("2")), msg: schd("DNLD", sisxml.Flight{FLID: "2", FLNO: sisxml.Val("X")})},
		{name: "MAID equal to its own FLID", msg: schd("DNLD", sisxml.Flight{FLID: "1", SODT: sodt, MAID: sisxml.Val("1")})},
		{name: "DELETED flight's record is skipped, not validated", snap: snapOf(active("2", deleted)), msg: schd("DNLD", ok("1"), sisxml.Flight{FLID: "2", SODT: otherDay})},
		{name: "empty package", msg: schd("DNLD")},
		// §7.1 step 2: a SODT the codec could not read derives no day, for a new
		// flight or one with a day: the whole package is a protocol error.
		{name: "new flight with an unparseable SODT", msg: schd("DNLD", ok("1"), sisxml.Flight{FLID: "2", SODTUnparsed: "2026-03-01 09:30"}), wantReason: `SODT "2026-03-01 09:30" is not a time`, wantFLID: "2"},
		{name: "flight with a day, unparseable SODT", snap: snapOf(active("2")), msg: schd("RESP", sisxml.Flight{FLID: "2", SODTUnparsed: "x"}), wantReason: "OPERATION_DAY cannot be derived", wantFLID: "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ch, err := flight.Decide(tt.snap, tt.msg, msgFor(tt.msg), flight.Settings{})
			if tt.wantReason == "" {
				require.NoError(t, err)
				require.NotNil(t, ch)
				return
			}
			require.Nil(t, ch, "a rejected package decides nothing")
			pe := protocolErr(t, err)
			require.Contains(t, pe.Reason, tt.wantReason)
			require.Equal(t, tt.wantFLID, pe.FLID)
			require.Equal(t, "protocol: "+pe.Reason+" (FLID "+tt.wantFLID+")", err.Error())
		})
	}

	t.Run("self-referencing MAID is in no MAFL", func(t *testing.T) {
		t.Parallel()
		ch := decide(t, nil, schd("DNLD", sisxml.Flight{FLID: "1", SODT: sodt, MAID: sisxml.Val("1")}), flight.Settings{})
		require.Equal(t, []string{"1"}, savedIDs(ch))
		s := ch.Saved[0]
		require.Equal(t, "1", s.MAID)
		require.Nil(t, flight.Children(s, snapOf(s)))
		require.NotContains(t, ch.Notices[0].Fields, "MAFL")
	})
}

// Rule 3 — seed 000 §12.1, INV-15: a plan creates or updates only the
// flights it carries; value overwrites, empty clears, absent per setting.
func TestDecidePlanMerge(t *testing.T) {
	t.Parallel()
	sodt := sisxml.Val(wall("20260301093000"))
	tests := []struct {
		name  string
		set   flight.Settings
		snap  map[string]*flight.State
		recs  []sisxml.Flight
		check func(t *testing.T, ch *flight.Change)
	}{
		{
			name: "value overwrites, empty clears, absent keeps (default)",
			snap: snapOf(active("1", func(s *flight.State) { s.TERM = "T2"; s.Resources[flight.STND] = []flight.Resource{res(1, "215")} })),
			recs: []sisxml.Flight{{
				FLID: "1", FLNO: sisxml.Val("CA9"), STAT: sisxml.Cleared[string](),
				GATE: sisxml.Items(gate(2, "B14")), ROUT: sisxml.Items[sisxml.RoutePoint](),
			}},
			check: func(t *testing.T, ch *flight.Change) {
				s, n := saved(ch, "1")
				require.Equal(t, "CA9", s.FLNO)
				require.Empty(t, s.STAT)
				require.Equal(t, []flight.Resource{res(2, "B14")}, s.Resources[flight.GATE])
				require.Nil(t, s.Routes[flight.ROUT], "an emptied collection is nil")
				require.Equal(t, "T2", s.TERM, "absent: kept")
				require.Equal(t, []flight.Resource{res(1, "215")}, s.Resources[flight.STND], "absent: kept")
				require.NotNil(t, s.Routes[flight.ERUT], "absent: kept")
				require.Equal(t, []string{"FLNO", "GATE", "ROUT", "STAT"}, n.Fields)
				require.Equal(t, flight.ActionUpdate, n.Action)
			},
		},
		{
			name: "absent keeps under explicit keep",
			set:  flight.Settings{AbsentField: flight.AbsentKeep},
			snap: snapOf(active("1")),
			recs: []sisxml.Flight{{FLID: "1", FLNO: sisxml.Val("CA9")}},
			check: func(t *testing.T, ch *flight.Change) {
				s, n := saved(ch, "1")
				require.Equal(t, "SCH", s.STAT)
				require.Equal(t, []string{"FLNO"}, n.Fields)
			},
		},
		{
			name: "absent clears under clear, except FLID and computed fields",
			set:  flight.Settings{AbsentField: flight.AbsentClear},
			snap: snapOf(active("1", childOf("9"))),
			recs: []sisxml.Flight{{FLID: "1", FLNO: sisxml.Val("CA1")}},
			check: func(t *testing.T, ch *flight.Change) {
				s, n := saved(ch, "1")
				want := &flight.State{
					FLID: "1", Status: flight.Active, Version: 4, OperationDay: "20260301", LastMsgID: msgID,
					CreatedAt: created, UpdatedAt: now, FLNO: "CA1",
				}
				require.Equal(t, want, s)
				require.Equal(t, []string{"AWCD", "ERUT", "GATE", "MAID", "ROUT", "SODT", "STAT"}, n.Fields)
			},
		},
		{
			name: "creates a new flight",
			recs: []sisxml.Flight{{FLID: "5", SODT: sodt, FLNO: sisxml.Val("MU5"), VIPF: sisxml.Items[sisxml.Service]()}},
			check: func(t *testing.T, ch *flight.Change) {
				s, n := saved(ch, "5")
				require.Equal(t, &flight.State{
					FLID: "5", Status: flight.Active, Version: 1, OperationDay: "20260301", LastMsgID: msgID,
					CreatedAt: now, UpdatedAt: now, FLNO: "MU5", SODT: wall("20260301093000"),
				}, s)
				require.Equal(t, flight.ActionCreate, n.Action)
				require.Equal(t, []string{"FLNO", "OPERATION_DAY", "SODT", "STATE"}, n.Fields)
			},
		},
		{
			name: "flights not carried are neither deleted nor touched",
			snap: snapOf(active("1"), active("2"), active("3")),
			recs: []sisxml.Flight{{FLID: "2", STAT: sisxml.Val("DEP")}},
			check: func(t *testing.T, ch *flight.Change) {
				require.Equal(t, []string{"2"}, savedIDs(ch))
			},
		},
		{
			name: "a record for a DELETED flight is skipped, the rest applies",
			snap: snapOf(active("1", deleted), active("2")),
			recs: []sisxml.Flight{{FLID: "1", SODT: sodt, FLNO: sisxml.Val("X")}, {FLID: "2", FLNO: sisxml.Val("Y")}},
			check: func(t *testing.T, ch *flight.Change) {
				require.Equal(t, []string{"2"}, savedIDs(ch))
				require.Equal(t, []string{"1"}, ch.SkippedDeleted)
				require.Empty(t, ch.Skipped)
			},
		},
		{
			// Every record names a DELETED flight: nothing applies, SKIPPED like
			// a FLOP for a deleted flight.
			name: "a plan of DELETED flights only is skipped",
			snap: snapOf(active("1", deleted), active("3", deleted)),
			recs: []sisxml.Flight{{FLID: "1", SODT: sodt}, {FLID: "3", FLNO: sisxml.Val("Y")}},
			check: func(t *testing.T, ch *flight.Change) {
				require.Empty(t, ch.Saved)
				require.Equal(t, []string{"1", "3"}, ch.SkippedDeleted)
				require.Equal(t, "flight-deleted:1 (+1 more)", ch.Skipped)
			},
		},
		{
			name: "items keep document order and repeated codes",
			snap: snapOf(active("1")),
			recs: []sisxml.Flight{{FLID: "1", CKIC: sisxml.Items(gate(2, "C02"), gate(1, "C01"), gate(1, "C01"))}},
			check: func(t *testing.T, ch *flight.Change) {
				s, _ := saved(ch, "1")
				require.Equal(t, []flight.Resource{res(2, "C02"), res(1, "C01"), res(1, "C01")}, s.Resources[flight.CKIC])
			},
		},
		{
			name: "every collection and item field converts",
			snap: snapOf(active("1")),
			recs: []sisxml.Flight{{
				FLID: "1",
				BRDG: sisxml.Items(sisxml.Resource{CODE: sisxml.Val("G1"), BTIM: sisxml.Val(wall("20260301080000")), ETIM: sisxml.Val(wall("20260301081000")), ABTM: sisxml.Val(wall("20260301080500")), AETM: sisxml.Val(wall("20260301081500")), SEQU: sisxml.Cleared[int]()}),
				DELY: sisxml.Items(sisxml.Delay{SEQU: sisxml.Val(1), CODE: sisxml.Val("WX"), DURA: sisxml.Val(30), RMRK: sisxml.Val("fog")}),
				ERUT: sisxml.Items(sisxml.RoutePoint{SEQU: sisxml.Val(1), APCD: sisxml.Val("CAN"), SARR: sisxml.Val(wall("20260301100000")), SDEP: sisxml.Val(wall("20260301110000"))}),
				SRVT: sisxml.Items(sisxml.Service{CODE: sisxml.Val("WCHR"), QNTY: sisxml.Val(2), RMRK: sisxml.Cleared[string]()}),
			}},
			check: func(t *testing.T, ch *flight.Change) {
				s, n := saved(ch, "1")
				require.Equal(t, []flight.Resource{{Code: "G1", Begin: wall("20260301080000"), End: wall("20260301081000"), ActualBegin: wall("20260301080500"), ActualEnd: wall("20260301081500")}}, s.Resources[flight.BRDG])
				require.Equal(t, []flight.Delay{{SourceSeq: ptr(1), Code: "WX", Minutes: ptr(30), Remark: "fog"}}, s.Delays)
				require.Equal(t, []flight.RoutePoint{{SourceSeq: ptr(1), Airport: "CAN", SchedArr: wall("20260301100000"), SchedDep: wall("20260301110000")}}, s.Routes[flight.ERUT])
				require.Equal(t, []flight.RoutePoint{{SourceSeq: ptr(1), Airport: "PEK"}}, s.Routes[flight.ROUT], "ROUT independent of ERUT")
				require.Equal(t, []flight.Service{{Code: "WCHR", Quantity: ptr(2)}}, s.Services[flight.SRVT])
				require.Equal(t, []string{"BRDG", "DELY", "ERUT", "SRVT"}, n.Fields)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.check(t, decide(t, tt.snap, schd("DNLD", tt.recs...), tt.set))
		})
	}
}

// Rule 4 — seed 000 §12.3: ADFT is set-only and creates unknown flights.
func TestDecideAdft(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		set   flight.Settings
		snap  map[string]*flight.State
		recs  []sisxml.Flight
		check func(t *testing.T, ch *flight.Change, err error)
	}{
		{
			name: "value overwrites; empty and absent are ignored",
			set:  flight.Settings{AbsentField: flight.AbsentClear}, // never applies to ADFT
			snap: snapOf(active("1")),
			recs: []sisxml.Flight{{FLID: "1", FLNO: sisxml.Val("CA9"), STAT: sisxml.Cleared[string](), GATE: sisxml.Items[sisxml.Resource]()}},
			check: func(t *testing.T, ch *flight.Change, err error) {
				require.NoError(t, err)
				s, n := saved(ch, "1")
				require.Equal(t, "CA9", s.FLNO)
				require.Equal(t, "SCH", s.STAT)
				require.Equal(t, []flight.Resource{res(1, "B12")}, s.Resources[flight.GATE])
				require.Equal(t, "CA", s.AWCD)
				require.Equal(t, []string{"FLNO"}, n.Fields)
			},
		},
		{
			name: "creates an unknown flight",
			recs: []sisxml.Flight{{FLID: "7", FLNO: sisxml.Val("CA7"), AWCD: sisxml.Cleared[string]()}},
			check: func(t *testing.T, ch *flight.Change, err error) {
				require.NoError(t, err)
				s, n := saved(ch, "7")
				require.Equal(t, &flight.State{FLID: "7", Status: flight.Active, Version: 1, LastMsgID: msgID, CreatedAt: now, UpdatedAt: now, FLNO: "CA7"}, s)
				require.Equal(t, flight.ActionCreate, n.Action)
			},
		},
		{
			// §12.3: a new ADFT flight whose SODT cannot be parsed is created
			// with OPERATION_DAY NULL; the SODT is not applied.
			name: "unparseable SODT: created without a day",
			recs: []sisxml.Flight{{FLID: "7", FLNO: sisxml.Val("CA7"), SODTUnparsed: "2026-03-01 09:30"}},
			check: func(t *testing.T, ch *flight.Change, err error) {
				require.NoError(t, err)
				s, n := saved(ch, "7")
				require.Equal(t, &flight.State{FLID: "7", Status: flight.Active, Version: 1, LastMsgID: msgID, CreatedAt: now, UpdatedAt: now, FLNO: "CA7"}, s)
				require.Equal(t, flight.ActionCreate, n.Action)
			},
		},
		{
			name: "unparseable SODT: an existing flight keeps its SODT and day",
			snap: snapOf(active("1")),
			recs: []sisxml.Flight{{FLID: "1", FLNO: sisxml.Val("CA9"), SODTUnparsed: "x"}},
			check: func(t *testing.T, ch *flight.Change, err error) {
				require.NoError(t, err)
				s, n := saved(ch, "1")
				require.Equal(t, active("1").SODT, s.SODT)
				require.Equal(t, active("1").OperationDay, s.OperationDay)
				require.Equal(t, []string{"FLNO"}, n.Fields)
			},
		},
		{
			name: "a SODT deriving another day is a protocol error",
			snap: snapOf(active("1")),
			recs: []sisxml.Flight{{FLID: "1", SODT: sisxml.Val(wall("20260302093000"))}},
			check: func(t *testing.T, ch *flight.Change, err error) {
				require.Nil(t, ch)
				require.Equal(t, "1", protocolErr(t, err).FLID)
			},
		},
		{
			name: "no package validation: a repeated FLID applies in order",
			recs: []sisxml.Flight{
				{FLID: "1", FLNO: sisxml.Val("A"), SODT: sisxml.Val(wall("20260301093000"))},
				{FLID: "1", FLNO: sisxml.Val("B"), TERM: sisxml.Val("T1")},
			},
			check: func(t *testing.T, ch *flight.Change, err error) {
				require.NoError(t, err)
				s, _ := saved(ch, "1")
				require.Equal(t, "B", s.FLNO)
				require.Equal(t, "T1", s.TERM)
				require.Equal(t, "20260301", s.OperationDay)
				require.EqualValues(t, 1, s.Version, "one bump per message")
			},
		},
		{
			name: "a later record conflicting with the day an earlier one set is rejected",
			recs: []sisxml.Flight{
				{FLID: "1", SODT: sisxml.Val(wall("20260301093000"))},
				{FLID: "1", SODT: sisxml.Val(wall("20260302093000"))},
			},
			check: func(t *testing.T, ch *flight.Change, err error) {
				require.Nil(t, ch)
				protocolErr(t, err)
			},
		},
		{
			name: "a DELETED flight is skipped",
			snap: snapOf(active("1", deleted)),
			recs: []sisxml.Flight{{FLID: "1", FLNO: sisxml.Val("X")}},
			check: func(t *testing.T, ch *flight.Change, err error) {
				require.NoError(t, err)
				require.Empty(t, ch.Saved)
				require.Equal(t, "flight-deleted:1", ch.Skipped, "nothing applied: SKIPPED, as a FLOP")
				require.Equal(t, []string{"1"}, ch.SkippedDeleted)
			},
		},
		{
			name: "a DELETED flight is skipped, the rest applies",
			snap: snapOf(active("1", deleted)),
			recs: []sisxml.Flight{{FLID: "1", FLNO: sisxml.Val("X")}, {FLID: "2", FLNO: sisxml.Val("Y")}},
			check: func(t *testing.T, ch *flight.Change, err error) {
				require.NoError(t, err)
				require.Empty(t, ch.Skipped)
				require.Equal(t, []string{"1"}, ch.SkippedDeleted)
				_, n := saved(ch, "2")
				require.Equal(t, flight.ActionCreate, n.Action)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := schd("ADFT", tt.recs...)
			ch, err := flight.Decide(tt.snap, m, msgFor(m), tt.set)
			tt.check(t, ch, err)
		})
	}
}

// Rule 5 — seed 000 §12.2: a FLOP changes only the elements it carries.
func TestDecideFlop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		snap        map[string]*flight.State
		msg         *sisxml.Message
		wantSkipped string
		check       func(t *testing.T, ch *flight.Change)
	}{
		{
			name: "GATE replaces the whole collection in document order, no dedup by code",
			snap: snapOf(active("1")),
			msg:  flop("GATE", sisxml.Flight{FLID: "1", GATE: sisxml.Items(gate(2, "B14"), gate(1, "B14"))}),
			check: func(t *testing.T, ch *flight.Change) {
				s, n := saved(ch, "1")
				require.Equal(t, []flight.Resource{res(2, "B14"), res(1, "B14")}, s.Resources[flight.GATE])
				require.Equal(t, []string{"GATE"}, n.Fields)
				require.Equal(t, "FLOP-GATE", n.Cause)
				s.Resources[flight.GATE] = []flight.Resource{res(1, "B12")}
				require.Empty(t, flight.Changed(active("1"), s), "nothing else changed")
			},
		},
		{
			name: "an empty collection clears it",
			snap: snapOf(active("1")),
			msg:  flop("GATE", sisxml.Flight{FLID: "1", GATE: sisxml.Items[sisxml.Resource]()}),
			check: func(t *testing.T, ch *flight.Change) {
				s, _ := saved(ch, "1")
				require.Nil(t, s.Resources[flight.GATE])
			},
		},
		{
			name: "STAT: value sets, empty clears, absent keeps",
			snap: snapOf(active("1", func(s *flight.State) { s.ABST = "DLY"; s.ABRS = "WX" })),
			msg:  flop("STAT", sisxml.Flight{FLID: "1", STAT: sisxml.Val("DEP"), ABST: sisxml.Cleared[string]()}),
			check: func(t *testing.T, ch *flight.Change) {
				s, n := saved(ch, "1")
				require.Equal(t, "DEP", s.STAT)
				require.Empty(t, s.ABST)
				require.Equal(t, "WX", s.ABRS)
				require.Equal(t, []string{"ABST", "STAT"}, n.Fields)
			},
		},
		{
			name: "ROUT leaves ERUT alone",
			snap: snapOf(active("1")),
			msg:  flop("ROUT", sisxml.Flight{FLID: "1", ROUT: sisxml.Items(sisxml.RoutePoint{APCD: sisxml.Val("SHA")})}),
			check: func(t *testing.T, ch *flight.Change) {
				s, n := saved(ch, "1")
				require.Equal(t, []flight.RoutePoint{{Airport: "SHA"}}, s.Routes[flight.ROUT])
				require.Equal(t, []flight.RoutePoint{{SourceSeq: ptr(1), Airport: "SHA"}}, s.Routes[flight.ERUT])
				require.Equal(t, []string{"ROUT"}, n.Fields)
			},
		},
		{
			name: "ERUT leaves ROUT alone",
			snap: snapOf(active("1")),
			msg:  flop("ERUT", sisxml.Flight{FLID: "1", ERUT: sisxml.Items[sisxml.RoutePoint]()}),
			check: func(t *testing.T, ch *flight.Change) {
				s, n := saved(ch, "1")
				require.Nil(t, s.Routes[flight.ERUT])
				require.Equal(t, []flight.RoutePoint{{SourceSeq: ptr(1), Airport: "PEK"}}, s.Routes[flight.ROUT])
				require.Equal(t, []string{"ERUT"}, n.Fields)
			},
		},
		{
			name: "VIPF sets services",
			snap: snapOf(active("1")),
			msg:  flop("VIPF", sisxml.Flight{FLID: "1", VIPF: sisxml.Items(sisxml.Service{CODE: sisxml.Val("VIP"), QNTY: sisxml.Val(1)})}),
			check: func(t *testing.T, ch *flight.Change) {
				s, _ := saved(ch, "1")
				require.Equal(t, []flight.Service{{Code: "VIP", Quantity: ptr(1)}}, s.Services[flight.VIPF])
				require.Nil(t, s.Services[flight.SRVT])
			},
		},
		{
			name: "unknown FLID creates an ACTIVE flight without a day",
			msg:  flop("GATE", sisxml.Flight{FLID: "9", GATE: sisxml.Items(gate(1, "A1"))}),
			check: func(t *testing.T, ch *flight.Change) {
				s, n := saved(ch, "9")
				want := &flight.State{FLID: "9", Status: flight.Active, Version: 1, LastMsgID: msgID, CreatedAt: now, UpdatedAt: now}
				want.Resources[flight.GATE] = []flight.Resource{res(1, "A1")}
				require.Equal(t, want, s)
				require.Equal(t, flight.ActionCreate, n.Action)
				require.Equal(t, []string{"GATE", "STATE"}, n.Fields)
			},
		},
		{
			name:        "DELETED flight is skipped",
			snap:        snapOf(active("1", deleted)),
			msg:         flop("GATE", sisxml.Flight{FLID: "1", GATE: sisxml.Items(gate(1, "A1"))}),
			wantSkipped: "flight-deleted:1",
		},
		{
			name: "same value: no change, not a skip",
			snap: snapOf(active("1")),
			msg:  flop("GATE", sisxml.Flight{FLID: "1", GATE: sisxml.Items(gate(1, "B12"))}),
			check: func(t *testing.T, ch *flight.Change) {
				require.Empty(t, ch.Saved)
				require.Empty(t, ch.Notices)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// AbsentClear must not matter: a FLOP only changes what it carries.
			for _, set := range []flight.Settings{{}, {AbsentField: flight.AbsentClear}} {
				ch := decide(t, tt.snap, tt.msg, set)
				require.Equal(t, tt.wantSkipped, ch.Skipped)
				if tt.check != nil {
					tt.check(t, ch)
				}
			}
		})
	}
}

// Rule 6 — seed 000 §12.3: FDEL is ACTIVE -> DELETED, idempotent, and
// cascades atomically from a master to its ACTIVE children.
func TestDecideFdel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		snap        map[string]*flight.State
		flid        string
		wantSkipped string
		wantSaved   map[string]string   // FLID -> notice action
		wantFields  map[string][]string // FLID -> notice fields
	}{
		{
			name:       "ACTIVE becomes DELETED",
			snap:       snapOf(active("1")),
			flid:       "1",
			wantSaved:  map[string]string{"1": flight.ActionDelete},
			wantFields: map[string][]string{"1": {"STATE"}},
		},
		{name: "already DELETED: idempotent skip", snap: snapOf(active("1", deleted)), flid: "1", wantSkipped: "flight-deleted:1"},
		{name: "unknown flight: idempotent skip", snap: snapOf(active("2")), flid: "1", wantSkipped: "unknown-flight:1"},
		{
			name: "master cascades to its ACTIVE children only",
			snap: snapOf(active("M"), active("C1", childOf("M")), active("C2", childOf("M")),
				active("C3", childOf("M"), deleted), active("S", childOf("S")), active("O", childOf("X"))),
			flid:       "M",
			wantSaved:  map[string]string{"M": flight.ActionDelete, "C1": flight.ActionDelete, "C2": flight.ActionDelete},
			wantFields: map[string][]string{"M": {"STATE"}, "C1": {"STATE"}, "C2": {"STATE"}},
		},
		{
			name:       "child deleted: master's MAFL changes",
			snap:       snapOf(active("M"), active("C1", childOf("M")), active("C2", childOf("M"))),
			flid:       "C1",
			wantSaved:  map[string]string{"C1": flight.ActionDelete, "M": flight.ActionUpdate},
			wantFields: map[string][]string{"C1": {"STATE"}, "M": {"MAFL"}},
		},
		{
			name:      "a shared flight with a MAID pointing at it has no children: no cascade",
			snap:      snapOf(active("M"), active("C", childOf("M")), active("G", childOf("C"))),
			flid:      "C",
			wantSaved: map[string]string{"C": flight.ActionDelete, "M": flight.ActionUpdate},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ch := decide(t, tt.snap, fdel(tt.flid), flight.Settings{})
			require.Equal(t, tt.wantSkipped, ch.Skipped)
			require.Len(t, ch.Saved, len(tt.wantSaved))
			for id, action := range tt.wantSaved {
				s, n := saved(ch, id)
				require.NotNil(t, s, id)
				require.Equal(t, action, n.Action, id)
				require.Equal(t, "FDEL-DELE", n.Cause)
				require.Equal(t, tt.snap[id].Version+1, s.Version, id)
				if action == flight.ActionDelete {
					require.Equal(t, flight.Deleted, s.Status)
					// details kept: only STATE and the bookkeeping differ
					require.Equal(t, []string{"STATE"}, flight.Changed(tt.snap[id], s))
					require.Equal(t, tt.snap[id].Resources, s.Resources)
				}
				if f, ok := tt.wantFields[id]; ok {
					require.Equal(t, f, n.Fields, id)
				}
			}
		})
	}
}

// Rule 7 — seed 000 §11.4, §12.3: MAID is the fact, MAFL derived; every
// ACTIVE master whose projection changes is bumped once, with "MAFL".
func TestDecideMasterProjection(t *testing.T) {
	t.Parallel()
	sodt := sisxml.Val(wall("20260301093000"))
	shar := func(flid string, maid sisxml.Field[string]) *sisxml.Message {
		return flop("SHAR", sisxml.Flight{FLID: flid, MAID: maid})
	}
	tests := []struct {
		name       string
		snap       map[string]*flight.State
		msg        *sisxml.Message
		wantFields map[string][]string // every saved flight -> its notice fields
	}{
		{
			name:       "child created by a plan",
			snap:       snapOf(active("M")),
			msg:        schd("DNLD", sisxml.Flight{FLID: "C", SODT: sodt, FLNO: sisxml.Val("MU1"), MAID: sisxml.Val("M")}),
			wantFields: map[string][]string{"C": {"FLNO", "MAID", "OPERATION_DAY", "SODT", "STATE"}, "M": {"MAFL"}},
		},
		{
			name:       "MAID moves from X to Y",
			snap:       snapOf(active("X"), active("Y"), active("C", childOf("X"))),
			msg:        shar("C", sisxml.Val("Y")),
			wantFields: map[string][]string{"C": {"MAID"}, "X": {"MAFL"}, "Y": {"MAFL"}},
		},
		{
			name:       "child leaves (MAID cleared)",
			snap:       snapOf(active("M"), active("C", childOf("M"))),
			msg:        shar("C", sisxml.Cleared[string]()),
			wantFields: map[string][]string{"C": {"MAID"}, "M": {"MAFL"}},
		},
		{
			name:       "child FLNO changes",
			snap:       snapOf(active("M"), active("C", childOf("M"))),
			msg:        flop("BASE", sisxml.Flight{FLID: "C", FLNO: sisxml.Val("MU9")}),
			wantFields: map[string][]string{"C": {"FLNO"}, "M": {"MAFL"}},
		},
		{
			name:       "child changes something else: master untouched",
			snap:       snapOf(active("M"), active("C", childOf("M"))),
			msg:        flop("BASE", sisxml.Flight{FLID: "C", TERM: sisxml.Val("T3")}),
			wantFields: map[string][]string{"C": {"TERM"}},
		},
		{
			name: "master changed itself and gains a child: one bump, both reasons",
			snap: snapOf(active("M")),
			msg: schd("DNLD",
				sisxml.Flight{FLID: "M", FLNO: sisxml.Val("CA8")},
				sisxml.Flight{FLID: "C", SODT: sodt, MAID: sisxml.Val("M")}),
			wantFields: map[string][]string{"M": {"FLNO", "MAFL"}, "C": {"MAID", "OPERATION_DAY", "SODT", "STATE"}},
		},
		{
			name:       "dangling MAID: no projection",
			msg:        shar("C", sisxml.Val("NOPE")),
			wantFields: map[string][]string{"C": {"MAID", "STATE"}},
		},
		{
			name:       "DELETED master gets no bump",
			snap:       snapOf(active("M", deleted), active("C")),
			msg:        shar("C", sisxml.Val("M")),
			wantFields: map[string][]string{"C": {"MAID"}},
		},
		{
			name:       "a shared flight as MAID target is not a master",
			snap:       snapOf(active("M"), active("S", childOf("M")), active("C")),
			msg:        shar("C", sisxml.Val("S")),
			wantFields: map[string][]string{"C": {"MAID"}},
		},
		{
			name:       "self-reference leaves a master",
			snap:       snapOf(active("M"), active("C", childOf("M"))),
			msg:        shar("C", sisxml.Val("C")),
			wantFields: map[string][]string{"C": {"MAID"}, "M": {"MAFL"}},
		},
		{
			name:       "a master becoming shared loses its MAFL (no longer a master: no MAFL field)",
			snap:       snapOf(active("M"), active("C", childOf("M")), active("Z")),
			msg:        shar("M", sisxml.Val("Z")),
			wantFields: map[string][]string{"M": {"MAID"}, "Z": {"MAFL"}},
		},
		{
			name:       "a shared flight becoming a master with children gains a MAFL",
			snap:       snapOf(active("M", childOf("Z")), active("C", childOf("M")), active("Z")),
			msg:        shar("M", sisxml.Cleared[string]()),
			wantFields: map[string][]string{"M": {"MAFL", "MAID"}, "Z": {"MAFL"}},
		},
		{
			name: "two children join one master in one plan: one bump",
			snap: snapOf(active("M")),
			msg: schd("RESP",
				sisxml.Flight{FLID: "C1", SODT: sodt, MAID: sisxml.Val("M")},
				sisxml.Flight{FLID: "C2", SODT: sodt, MAID: sisxml.Val("M")}),
			wantFields: map[string][]string{"M": {"MAFL"}, "C1": {"MAID", "OPERATION_DAY", "SODT", "STATE"}, "C2": {"MAID", "OPERATION_DAY", "SODT", "STATE"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ch := decide(t, tt.snap, tt.msg, flight.Settings{})
			got := make(map[string][]string)
			for _, n := range ch.Notices {
				got[n.FLID] = n.Fields
			}
			require.Equal(t, tt.wantFields, got)
			for _, s := range ch.Saved {
				if old := tt.snap[s.FLID]; old != nil {
					require.Equal(t, old.Version+1, s.Version, "one bump for %s", s.FLID)
				}
			}
		})
	}

	t.Run("MAFL after a move matches Children of the next states", func(t *testing.T) {
		t.Parallel()
		snap := snapOf(active("X"), active("Y"), active("C", childOf("X")), active("D", childOf("Y")))
		ch := decide(t, snap, shar("C", sisxml.Val("Y")), flight.Settings{})
		next := snapOf(snap["X"], snap["Y"], snap["C"], snap["D"])
		for _, s := range ch.Saved {
			next[s.FLID] = s
		}
		require.Equal(t, []flight.MAFLEntry{{FLID: "C", FLNO: "CAC"}, {FLID: "D", FLNO: "CAD"}}, flight.Projection(next["Y"], next))
		require.Nil(t, flight.Projection(next["X"], next))
	})
}

// Rule 8 — seed 000 INV-13: a changed flight is bumped once; an unchanged one
// is not saved.
func TestDecideVersions(t *testing.T) {
	t.Parallel()
	shanghai := zone(t, "Asia/Shanghai")
	tests := []struct {
		name      string
		snap      map[string]*flight.State
		msg       *sisxml.Message
		wantSaved []string
	}{
		{
			name: "same values: nothing saved, not a skip",
			snap: snapOf(active("1")),
			msg:  schd("DNLD", sisxml.Flight{FLID: "1", FLNO: sisxml.Val("CA1"), SODT: sisxml.Val(wall("20260301093000")), GATE: sisxml.Items(gate(1, "B12"))}),
		},
		{
			name: "same instant in another location is the same value",
			snap: snapOf(active("1", func(s *flight.State) { s.SODT = wall("20260301093000").In(shanghai) })),
			msg:  flop("BASE", sisxml.Flight{FLID: "1", SODT: sisxml.Val(wall("20260301093000"))}),
		},
		{
			name: "clearing what is already empty",
			snap: snapOf(active("1")),
			msg:  flop("STAT", sisxml.Flight{FLID: "1", ABST: sisxml.Cleared[string]()}),
		},
		{
			name:      "only the changed flights of a plan",
			snap:      snapOf(active("1"), active("2"), active("3")),
			msg:       schd("DNLD", sisxml.Flight{FLID: "3", STAT: sisxml.Val("DEP")}, sisxml.Flight{FLID: "1", STAT: sisxml.Val("SCH")}, sisxml.Flight{FLID: "2", STAT: sisxml.Val("ARR")}),
			wantSaved: []string{"2", "3"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ch := decide(t, tt.snap, tt.msg, flight.Settings{})
			require.Equal(t, tt.wantSaved, savedIDs(ch))
			require.Empty(t, ch.Skipped)
			for _, s := range ch.Saved {
				old := tt.snap[s.FLID]
				require.Equal(t, old.Version+1, s.Version)
				require.Equal(t, old.CreatedAt, s.CreatedAt)
				require.Equal(t, now, s.UpdatedAt)
				require.EqualValues(t, msgID, s.LastMsgID)
			}
		})
	}
}

// Rule 9: Decide never modifies the snapshot, and what it returns shares no
// mutable storage with it.
func TestDecideDoesNotMutateSnapshot(t *testing.T) {
	t.Parallel()
	fixture := func() map[string]*flight.State {
		return snapOf(
			active("M", func(s *flight.State) {
				s.Delays = []flight.Delay{{SourceSeq: ptr(1), Minutes: ptr(5)}}
				s.Services[flight.SRVT] = []flight.Service{{Code: "WCHR", Quantity: ptr(1)}}
			}),
			active("C1", childOf("M")), active("C2", childOf("M")), active("X"),
			active("D", deleted), active("N", noDay),
		)
	}
	sodt := sisxml.Val(wall("20260301093000"))
	msgs := []*sisxml.Message{
		schd("DNLD", sisxml.Flight{FLID: "M", FLNO: sisxml.Val("Z"), GATE: sisxml.Items(gate(9, "Z9"))},
			sisxml.Flight{FLID: "C1", MAID: sisxml.Val("X")}, sisxml.Flight{FLID: "D", SODT: sodt}, sisxml.Flight{FLID: "NEW", SODT: sodt}),
		schd("DNLD", sisxml.Flight{FLID: "N", SODT: sodt}, sisxml.Flight{FLID: "C2", FLNO: sisxml.Val("Q")}),
		schd("RESP", sisxml.Flight{FLID: "M", SODT: sisxml.Val(wall("20260309093000"))}), // rejected
		schd("ADFT", sisxml.Flight{FLID: "M", DELY: sisxml.Items(sisxml.Delay{CODE: sisxml.Val("WX")})}),
		flop("GATE", sisxml.Flight{FLID: "M", GATE: sisxml.Items[sisxml.Resource]()}),
		flop("SHAR", sisxml.Flight{FLID: "C2", MAID: sisxml.Cleared[string]()}),
		flop("BASE", sisxml.Flight{FLID: "C1", FLNO: sisxml.Val("NEWNO")}),
		fdel("M"),
		fdel("C1"),
		fdel("D"),
	}
	for _, set := range []flight.Settings{{}, {AbsentField: flight.AbsentClear}} {
		for _, m := range msgs {
			snap, want := fixture(), fixture()
			ch, _ := flight.Decide(snap, m, msgFor(m), set)
			require.Equal(t, want, snap, "%s modified the snapshot", m.Meta.Kind())
			if ch == nil {
				continue
			}
			// Scribble over everything returned: the snapshot must not see it.
			for _, s := range ch.Saved {
				for k := range s.Resources {
					for i := range s.Resources[k] {
						s.Resources[k][i].Code = "SCRIBBLE"
					}
				}
				for i := range s.Delays {
					s.Delays[i].Code = "SCRIBBLE"
				}
				for k := range s.Services {
					for i := range s.Services[k] {
						s.Services[k][i].Code = "SCRIBBLE"
					}
				}
				for k := range s.Routes {
					for i := range s.Routes[k] {
						s.Routes[k][i].Airport = "SCRIBBLE"
					}
				}
				s.FLNO = "SCRIBBLE"
			}
			require.Equal(t, want, snap, "%s returned storage shared with the snapshot", m.Meta.Kind())
		}
	}
}

func TestDecideRejectsNonFlightInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		msg  *sisxml.Message
		set  flight.Settings
	}{
		{name: "nil message"},
		{name: "reference data", msg: &sisxml.Message{Kind: sisxml.KindRef, Ref: &sisxml.RefData{RTYP: "AIRLINE"}}},
		{name: "SCHD of an unknown subtype", msg: &sisxml.Message{Kind: sisxml.KindSchd, Schd: &sisxml.Schedule{Subtype: "XXXX"}}},
		{name: "Flop kind without body", msg: &sisxml.Message{Kind: sisxml.KindFlop}},
		{name: "invalid settings", msg: fdel("1"), set: flight.Settings{AbsentField: "bogus"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ch, err := flight.Decide(nil, tt.msg, flight.Msg{ID: 1, Now: now}, tt.set)
			require.Error(t, err)
			require.Nil(t, ch)
			var pe *flight.ProtocolError
			require.NotErrorAs(t, err, &pe, "a caller bug is not a protocol error")
		})
	}
}

func TestNamedInvolved(t *testing.T) {
	t.Parallel()
	cur := snapOf(active("C", childOf("M")), active("D", childOf("D")), active("P"))
	tests := []struct {
		name         string
		msg          *sisxml.Message
		wantNamed    []string
		wantInvolved []string
	}{
		{
			name: "SCHD: records in order, carried MAIDs, current MAIDs",
			msg: schd("DNLD", sisxml.Flight{FLID: "P"}, sisxml.Flight{FLID: "C", MAID: sisxml.Val("N")},
				sisxml.Flight{FLID: "A", MAID: sisxml.Cleared[string]()}, sisxml.Flight{FLID: "A"}),
			wantNamed:    []string{"P", "C", "A", "A"},
			wantInvolved: []string{"A", "C", "M", "N", "P"},
		},
		{name: "FLOP of a child", msg: flop("BASE", sisxml.Flight{FLID: "C", FLNO: sisxml.Val("X")}), wantNamed: []string{"C"}, wantInvolved: []string{"C", "M"}},
		{name: "FLOP-SHAR self reference", msg: flop("SHAR", sisxml.Flight{FLID: "D", MAID: sisxml.Val("D")}), wantNamed: []string{"D"}, wantInvolved: []string{"D"}},
		{name: "FDEL", msg: fdel("C"), wantNamed: []string{"C"}, wantInvolved: []string{"C", "M"}},
		{name: "FDEL unknown", msg: fdel("Q"), wantNamed: []string{"Q"}, wantInvolved: []string{"Q"}},
		{name: "other kind", msg: &sisxml.Message{Kind: sisxml.KindIgnored}},
		{name: "nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.wantNamed, flight.Named(tt.msg))
			require.Equal(t, tt.wantInvolved, flight.Involved(tt.msg, cur))
		})
	}
	require.Equal(t, []string{"C"}, flight.Involved(fdel("C"), nil), "cur may be nil")
}

func TestChildren(t *testing.T) {
	t.Parallel()
	states := snapOf(active("M"), active("c2", childOf("M")), active("c1", childOf("M")), active("c3", childOf("M"), deleted),
		active("S", childOf("M")), active("T", childOf("S")), active("Q", childOf("Q")), active("M2", childOf("")))
	states["M"].MAID = ""
	ids := func(ss []*flight.State) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.FLID)
		}
		return out
	}
	require.Equal(t, []string{"S", "c1", "c2"}, ids(flight.Children(states["M"], states)), "ACTIVE, FLID byte order")
	require.Nil(t, flight.Children(states["S"], states), "a shared flight has no children")
	require.Nil(t, flight.Children(states["Q"], states), "self-reference")
	require.Nil(t, flight.Children(states["M2"], states))
	require.Nil(t, flight.Children(nil, states))
	require.Equal(t, []flight.MAFLEntry{{"S", "CAS"}, {"c1", "CAc1"}, {"c2", "CAc2"}}, flight.Projection(states["M"], states))
	states["M"].Status = flight.Deleted
	require.Nil(t, flight.Projection(states["M"], states), "a DELETED master projects nothing")
}

// Decide bumps exactly the masters whose MAFL changes, found by comparing every
// ACTIVE master's Projection over the whole snapshot before and after — over
// random families of flights and random membership, FLNO and deletion changes.
func TestDecideMasterProjectionRandom(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(5, 6))
	ids := []string{"A", "B", "C", "D", "E", "F", "G", "H"}
	pick := func() string { return ids[r.IntN(len(ids))] }
	for round := range 500 {
		snap := map[string]*flight.State{}
		for _, id := range ids {
			if r.IntN(5) == 0 {
				continue // not in the store
			}
			var mods []func(*flight.State)
			if r.IntN(3) == 0 {
				mods = append(mods, childOf(pick()))
			}
			if r.IntN(6) == 0 {
				mods = append(mods, deleted)
			}
			snap[id] = active(id, mods...)
		}
		var m *sisxml.Message
		switch r.IntN(4) {
		case 0:
			m = flop("SHAR", sisxml.Flight{FLID: pick(), MAID: sisxml.Val(pick())})
		case 1:
			m = flop("SHAR", sisxml.Flight{FLID: pick(), MAID: sisxml.Cleared[string]()})
		case 2:
			m = flop("BASE", sisxml.Flight{FLID: pick(), FLNO: sisxml.Val(fmt.Sprintf("MU%d", r.IntN(3)))})
		default:
			m = fdel(pick())
		}
		ch, err := flight.Decide(snap, m, msgFor(m), flight.Settings{})
		require.NoError(t, err)
		after := maps.Clone(snap)
		for _, s := range ch.Saved {
			after[s.FLID] = s
		}
		for _, id := range ids {
			changed := !slices.Equal(flight.Projection(snap[id], snap), flight.Projection(after[id], after))
			isMaster := after[id] != nil && after[id].Status == flight.Active && after[id].MAID == ""
			_, n := saved(ch, id)
			bumped := n != nil && slices.Contains(n.Fields, "MAFL")
			require.Equal(t, changed && isMaster, bumped, "round %d, %s, master %s: snapshot %v", round, m.Meta.Kind(), id, snap)
		}
	}
}
