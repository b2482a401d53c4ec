package flight

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"
)

// Document returns the full-state JSON of s for the compacted KAFKA:schd
// topic (key FLID, seed 000 §8.2, §12.4). Keys are fixed and in a fixed
// order: FLID, STATE, STATE_VERSION, OPERATION_DAY, LAST_MSG_ID, CREATED_AT,
// UPDATED_AT, the scalar elements FLNO … CSFT, MAFL (masters only), then the
// collections GATE CKIC BELT STND CHUT BRDG CHOK DELY ROUT ERUT SRVT VIPF as
// arrays (empty: []) of items carrying ORDINAL 1..n and SOURCE_SEQ.
//
// NULLs (empty strings, zero times, nil ints) are JSON null. Times are
// RFC 3339 at second precision. CREATED_AT and UPDATED_AT are instants, in
// UTC ("Z"). SIS times (SODT, BTIM …) are the zone-less wall clocks as
// decoded; zone is the zone they are read in (Settings.MessageLocation), and
// they are written as that wall clock with the zone's offset at that moment
// ("2026-03-01T09:30:00+08:00"), so a consumer gets the instant the AODB
// meant. A nil zone writes them as UTC.
//
// A master (MAID == "") carries "MAFL":[{"FLID":…,"FLNO":…}] built from
// children — normally Children(s, states) — ordered by FLID whatever order
// they are given in, [] when there are none; a shared flight carries its
// MAID, CSOP and CSFT and no MAFL key, and children is ignored (§11.4). The
// same state and children give identical bytes.
func Document(s *State, children []*State, zone *time.Location) []byte {
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

// NoticeDocument returns the JSON payload of a KAFKA:msg change notice
// (seed 000 §8.1): {"FLID","STATE_VERSION","ACTION","CAUSE","FIELDS","MSG_ID",
// "UPDATED_AT"} in that order, FIELDS an array ([] when empty), UPDATED_AT
// msg.Now in RFC 3339 UTC. Byte-stable like Document.
func NoticeDocument(n Notice, msg Msg) []byte {
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

type noticeJSON struct {
	FLID         string   `json:"FLID"`
	StateVersion int64    `json:"STATE_VERSION"`
	Action       string   `json:"ACTION"`
	Cause        string   `json:"CAUSE"`
	Fields       []string `json:"FIELDS"`
	MsgID        int64    `json:"MSG_ID"`
	UpdatedAt    *string  `json:"UPDATED_AT"`
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

// ts maps a time to RFC 3339 UTC, the zero time (NULL) to JSON null.
func ts(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}

// marshal encodes v without HTML escaping (payloads stay readable; the
// encoding is deterministic either way) and without a trailing newline.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("flight: marshal: " + err.Error()) // plain structs of strings, ints and slices cannot fail
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
