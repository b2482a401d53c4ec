package flight

import (
	"bytes"
	"slices"
	"testing"
	"time"
)

// The encoding/json form of Document, as it was before the hand-written
// writer: the reference Document is checked against byte for byte.

func documentJSON(s *State, children []*State, zone *time.Location) []byte {
	doc := stateJSON{
		FLID:         s.FLID,
		State:        string(s.Status),
		StateVersion: s.Version,
		OperationDay: str(s.OperationDay),
		LastMsgID:    s.LastMsgID,
		CreatedAt:    ts(s.CreatedAt),
		UpdatedAt:    ts(s.UpdatedAt),
		FLNO:         str(s.FLNO),
		AWCD:         str(s.AWCD),
		ADID:         str(s.ADID),
		FLTY:         str(s.FLTY),
		SODT:         wall(s.SODT, zone),
		EODT:         wall(s.EODT, zone),
		AODT:         wall(s.AODT, zone),
		ACTY:         str(s.ACTY),
		ACRG:         str(s.ACRG),
		TERM:         str(s.TERM),
		STAT:         str(s.STAT),
		ABST:         str(s.ABST),
		ABRS:         str(s.ABRS),
		MAID:         str(s.MAID),
		CSOP:         str(s.CSOP),
		CSFT:         str(s.CSFT),
		DELY:         items(s.Delays, delayItem),
		ROUT:         items(s.Routes[ROUT], routeItem(zone)),
		ERUT:         items(s.Routes[ERUT], routeItem(zone)),
		SRVT:         items(s.Services[SRVT], serviceItem),
		VIPF:         items(s.Services[VIPF], serviceItem),
	}
	if s.MAID == "" {
		kids := slices.Clone(children)
		slices.SortFunc(kids, byFLID)
		mafl := make([]maflJSON, 0, len(kids))
		for _, c := range kids {
			mafl = append(mafl, maflJSON{FLID: c.FLID, FLNO: str(c.FLNO)})
		}
		doc.MAFL = &mafl
	}
	res := [NumResourceKinds]*[]resourceJSON{&doc.GATE, &doc.CKIC, &doc.BELT, &doc.STND, &doc.CHUT, &doc.BRDG, &doc.CHOK}
	for k, dst := range res {
		*dst = items(s.Resources[k], resourceItem(zone))
	}
	return marshal(doc)
}

// stateJSON is Document's layout: the field order is the key order.
type stateJSON struct {
	FLID         string         `json:"FLID"`
	State        string         `json:"STATE"`
	StateVersion int64          `json:"STATE_VERSION"`
	OperationDay *string        `json:"OPERATION_DAY"`
	LastMsgID    int64          `json:"LAST_MSG_ID"`
	CreatedAt    *string        `json:"CREATED_AT"`
	UpdatedAt    *string        `json:"UPDATED_AT"`
	FLNO         *string        `json:"FLNO"`
	AWCD         *string        `json:"AWCD"`
	ADID         *string        `json:"ADID"`
	FLTY         *string        `json:"FLTY"`
	SODT         *string        `json:"SODT"`
	EODT         *string        `json:"EODT"`
	AODT         *string        `json:"AODT"`
	ACTY         *string        `json:"ACTY"`
	ACRG         *string        `json:"ACRG"`
	TERM         *string        `json:"TERM"`
	STAT         *string        `json:"STAT"`
	ABST         *string        `json:"ABST"`
	ABRS         *string        `json:"ABRS"`
	MAID         *string        `json:"MAID"`
	CSOP         *string        `json:"CSOP"`
	CSFT         *string        `json:"CSFT"`
	MAFL         *[]maflJSON    `json:"MAFL,omitempty"` // nil for a shared flight: no key
	GATE         []resourceJSON `json:"GATE"`
	CKIC         []resourceJSON `json:"CKIC"`
	BELT         []resourceJSON `json:"BELT"`
	STND         []resourceJSON `json:"STND"`
	CHUT         []resourceJSON `json:"CHUT"`
	BRDG         []resourceJSON `json:"BRDG"`
	CHOK         []resourceJSON `json:"CHOK"`
	DELY         []delayJSON    `json:"DELY"`
	ROUT         []routeJSON    `json:"ROUT"`
	ERUT         []routeJSON    `json:"ERUT"`
	SRVT         []serviceJSON  `json:"SRVT"`
	VIPF         []serviceJSON  `json:"VIPF"`
}

type maflJSON struct {
	FLID string  `json:"FLID"`
	FLNO *string `json:"FLNO"`
}

type resourceJSON struct {
	Ordinal   int     `json:"ORDINAL"`
	SourceSeq *int    `json:"SOURCE_SEQ"`
	Code      *string `json:"CODE"`
	BTIM      *string `json:"BTIM"`
	ETIM      *string `json:"ETIM"`
	ABTM      *string `json:"ABTM"`
	AETM      *string `json:"AETM"`
}

type delayJSON struct {
	Ordinal   int     `json:"ORDINAL"`
	SourceSeq *int    `json:"SOURCE_SEQ"`
	Code      *string `json:"CODE"`
	DURA      *int    `json:"DURA"`
	RMRK      *string `json:"RMRK"`
}

type routeJSON struct {
	Ordinal   int     `json:"ORDINAL"`
	SourceSeq *int    `json:"SOURCE_SEQ"`
	APCD      *string `json:"APCD"`
	SARR      *string `json:"SARR"`
	SDEP      *string `json:"SDEP"`
}

type serviceJSON struct {
	Ordinal   int     `json:"ORDINAL"`
	SourceSeq *int    `json:"SOURCE_SEQ"`
	Code      *string `json:"CODE"`
	QNTY      *int    `json:"QNTY"`
	RMRK      *string `json:"RMRK"`
}

func resourceItem(zone *time.Location) func(int, Resource) resourceJSON {
	return func(ord int, r Resource) resourceJSON {
		return resourceJSON{Ordinal: ord, SourceSeq: r.SourceSeq, Code: str(r.Code),
			BTIM: wall(r.Begin, zone), ETIM: wall(r.End, zone), ABTM: wall(r.ActualBegin, zone), AETM: wall(r.ActualEnd, zone)}
	}
}

func delayItem(ord int, d Delay) delayJSON {
	return delayJSON{Ordinal: ord, SourceSeq: d.SourceSeq, Code: str(d.Code), DURA: d.Minutes, RMRK: str(d.Remark)}
}

func routeItem(zone *time.Location) func(int, RoutePoint) routeJSON {
	return func(ord int, p RoutePoint) routeJSON {
		return routeJSON{Ordinal: ord, SourceSeq: p.SourceSeq, APCD: str(p.Airport), SARR: wall(p.SchedArr, zone), SDEP: wall(p.SchedDep, zone)}
	}
}

func serviceItem(ord int, s Service) serviceJSON {
	return serviceJSON{Ordinal: ord, SourceSeq: s.SourceSeq, Code: str(s.Code), QNTY: s.Quantity, RMRK: str(s.Remark)}
}

// items maps a collection to its JSON array, ORDINAL from 1; never nil, so an
// empty collection is [] rather than null.
func items[T, J any](in []T, item func(int, T) J) []J {
	out := make([]J, 0, len(in))
	for i, v := range in {
		out = append(out, item(i+1, v))
	}
	return out
}

// str maps "" (NULL) to JSON null.
func str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// wall maps a SIS wall clock (its fields, whatever its location) read in
// zone to RFC 3339 with zone's offset; nil zone is UTC, the zero time (NULL)
// JSON null.
func wall(t time.Time, zone *time.Location) *string {
	if t.IsZero() {
		return nil
	}
	if zone == nil {
		zone = time.UTC
	}
	w := time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, zone).Format(time.RFC3339)
	return &w
}

func noticeDocumentJSON(n Notice, msg Msg) []byte {
	fields := n.Fields
	if fields == nil {
		fields = []string{}
	}
	return marshal(noticeJSON{
		FLID:         n.FLID,
		StateVersion: n.Version,
		Action:       n.Action,
		Cause:        n.Cause,
		Fields:       fields,
		MsgID:        msg.ID,
		UpdatedAt:    ts(msg.Now),
	})
}

type noticeJSON struct {
	FLID         string   `json:"FLID"`
	StateVersion int64    `json:"STATE_VERSION"`
	Action       string   `json:"ACTION"`
	Cause        string   `json:"CAUSE"`
	Fields       []string `json:"FIELDS"`
	MsgID        int64    `json:"MSG_ID"`
	UpdatedAt    *string  `json:"UPDATED_AT"`
}

// ts maps a time to RFC 3339 UTC, the zero time (NULL) to JSON null.
func ts(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}

// FuzzDocumentMatchesJSON: Document (and NoticeDocument) write the same bytes as the
// encoding/json form (documentJSON) for any state, children and zone.
func FuzzDocumentMatchesJSON(f *testing.F) {
	f.Add("100001", "CA1234", `a "b" <c>&\u2028`, int64(4), 15, int64(1772330400), uint16(0xffff))
	f.Add("", "", "\x01\xff\u00e9\\", int64(-1), -3, int64(-62135596800), uint16(0))
	f.Add("9", "MU5", "\t\n\r\b\f", int64(1<<62), 0, int64(253402300799), uint16(0x5a5a))
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		f.Fatal(err)
	}
	zones := []*time.Location{nil, time.UTC, shanghai, time.FixedZone("X", -(3*3600 + 1800))}
	f.Fuzz(func(t *testing.T, flid, flno, text string, version int64, n int, unix int64, shape uint16) {
		at := time.Unix(unix, 0)
		pick := func(bit int, v string) string {
			if shape&(1<<bit) != 0 {
				return v
			}
			return ""
		}
		when := func(bit int) time.Time {
			if shape&(1<<bit) != 0 {
				return at
			}
			return time.Time{}
		}
		num := func(bit int) *int {
			if shape&(1<<bit) != 0 {
				return &n
			}
			return nil
		}
		s := &State{
			FLID: flid, Status: Status(pick(0, "ACTIVE") + pick(1, text)), Version: version, OperationDay: pick(2, text),
			LastMsgID: version / 3, CreatedAt: when(3), UpdatedAt: when(4).In(shanghai),
			FLNO: flno, AWCD: pick(5, text), ADID: pick(6, "D"), FLTY: text, SODT: when(7), EODT: when(8), AODT: when(9),
			ACTY: pick(10, flno), ACRG: text, TERM: pick(11, "T2"), STAT: text, ABST: pick(12, text), ABRS: flid,
			MAID: pick(13, flid), CSOP: pick(14, text), CSFT: flno,
		}
		for k := range s.Resources {
			for i := 0; i < int(shape>>(k%12))&3; i++ {
				s.Resources[k] = append(s.Resources[k], Resource{SourceSeq: num(i + k), Code: pick(i+k+1, text),
					Begin: when(i), End: when(k), ActualBegin: when(i + k + 2), ActualEnd: when(15 - i)})
			}
		}
		for i := 0; i < int(shape>>3)&3; i++ {
			s.Delays = append(s.Delays, Delay{SourceSeq: num(i), Code: pick(i+2, flno), Minutes: num(i + 5), Remark: pick(i+7, text)})
		}
		for k := range s.Routes {
			for i := 0; i < int(shape>>(5+k))&3; i++ {
				s.Routes[k] = append(s.Routes[k], RoutePoint{SourceSeq: num(i + 1), Airport: pick(i, text), SchedArr: when(i + 3), SchedDep: when(k + 9)})
			}
		}
		for k := range s.Services {
			for i := 0; i < int(shape>>(8+k))&3; i++ {
				s.Services[k] = append(s.Services[k], Service{SourceSeq: num(i + 2), Code: pick(i+4, text), Quantity: num(i), Remark: pick(i+6, flno)})
			}
		}
		var kids []*State
		for i := 0; i < int(shape>>13); i++ {
			kids = append(kids, &State{FLID: pick(i, flid) + string(rune('a'+i)), FLNO: pick(i+1, text)})
		}
		note := Notice{FLID: flid, Version: version, Action: flno, Cause: pick(1, text), Fields: []string{text, flid}[:int(shape)%3]}
		m := Msg{ID: version / 7, Now: when(2)}
		if got, want := NoticeDocument(note, m), noticeDocumentJSON(note, m); !bytes.Equal(got, want) {
			t.Fatalf("notice:\ngot  %s\nwant %s", got, want)
		}
		for _, zone := range zones {
			got, want := Document(s, kids, zone), documentJSON(s, kids, zone)
			if !bytes.Equal(got, want) {
				t.Fatalf("zone %v:\ngot  %s\nwant %s", zone, got, want)
			}
		}
	})
}

// BenchmarkDocument: the hand-written writer against the encoding/json form,
// on a master with two children, a gate, two counters, a delay and a route.
func BenchmarkDocument(b *testing.B) {
	at := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC)
	seq := 1
	s := &State{FLID: "100001", Status: Active, Version: 4, OperationDay: "20260301", LastMsgID: 42, CreatedAt: at, UpdatedAt: at,
		FLNO: "CA1234", AWCD: "CA", ADID: "D", FLTY: "W/Z", SODT: at, EODT: at, ACTY: "A320", ACRG: "B-1234", TERM: "T2", STAT: "SCH"}
	s.Resources[GATE] = []Resource{{SourceSeq: &seq, Code: "B12", Begin: at, End: at}}
	s.Resources[CKIC] = []Resource{{SourceSeq: &seq, Code: "C01", Begin: at, End: at}, {Code: "C02", Begin: at, End: at}}
	s.Delays = []Delay{{Code: "WX", Minutes: &seq}}
	s.Routes[ROUT] = []RoutePoint{{SourceSeq: &seq, Airport: "PEK", SchedDep: at}}
	kids := []*State{{FLID: "100003", FLNO: "MU5678"}, {FLID: "100002"}}
	for _, bc := range []struct {
		name string
		doc  func(*State, []*State, *time.Location) []byte
	}{{"writer", Document}, {"encoding-json", documentJSON}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				bc.doc(s, kids, time.UTC)
			}
		})
	}
}
