package flight

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
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
	if zone == nil {
		zone = time.UTC
	}
	w := docWriter{b: make([]byte, 0, 1024), zone: zone}
	w.b = append(w.b, `{"FLID":`...)
	w.str(s.FLID)
	w.b = append(w.b, `,"STATE":`...)
	w.str(string(s.Status))
	w.b = append(w.b, `,"STATE_VERSION":`...)
	w.b = strconv.AppendInt(w.b, s.Version, 10)
	w.b = append(w.b, `,"OPERATION_DAY":`...)
	w.null(s.OperationDay)
	w.b = append(w.b, `,"LAST_MSG_ID":`...)
	w.b = strconv.AppendInt(w.b, s.LastMsgID, 10)
	w.b = append(w.b, `,"CREATED_AT":`...)
	w.instant(s.CreatedAt)
	w.b = append(w.b, `,"UPDATED_AT":`...)
	w.instant(s.UpdatedAt)
	for _, f := range [...]struct {
		key string
		v   string
		t   time.Time
		at  bool
	}{
		{key: `,"FLNO":`, v: s.FLNO}, {key: `,"AWCD":`, v: s.AWCD}, {key: `,"ADID":`, v: s.ADID}, {key: `,"FLTY":`, v: s.FLTY},
		{key: `,"SODT":`, t: s.SODT, at: true}, {key: `,"EODT":`, t: s.EODT, at: true}, {key: `,"AODT":`, t: s.AODT, at: true},
		{key: `,"ACTY":`, v: s.ACTY}, {key: `,"ACRG":`, v: s.ACRG}, {key: `,"TERM":`, v: s.TERM},
		{key: `,"STAT":`, v: s.STAT}, {key: `,"ABST":`, v: s.ABST}, {key: `,"ABRS":`, v: s.ABRS},
		{key: `,"MAID":`, v: s.MAID}, {key: `,"CSOP":`, v: s.CSOP}, {key: `,"CSFT":`, v: s.CSFT},
	} {
		w.b = append(w.b, f.key...)
		if f.at {
			w.wall(f.t)
		} else {
			w.null(f.v)
		}
	}
	if s.MAID == "" {
		kids := slices.Clone(children)
		slices.SortFunc(kids, byFLID)
		w.b = append(w.b, `,"MAFL":[`...)
		for i, c := range kids {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, `{"FLID":`...)
			w.str(c.FLID)
			w.b = append(w.b, `,"FLNO":`...)
			w.null(c.FLNO)
			w.b = append(w.b, '}')
		}
		w.b = append(w.b, ']')
	}
	for k, r := range s.Resources {
		w.b = append(w.b, `,"`...)
		w.b = append(w.b, ResourceKind(k).String()...)
		w.b = append(w.b, `":[`...)
		for i, it := range r {
			w.item(i, it.SourceSeq)
			w.b = append(w.b, `,"CODE":`...)
			w.null(it.Code)
			w.b = append(w.b, `,"BTIM":`...)
			w.wall(it.Begin)
			w.b = append(w.b, `,"ETIM":`...)
			w.wall(it.End)
			w.b = append(w.b, `,"ABTM":`...)
			w.wall(it.ActualBegin)
			w.b = append(w.b, `,"AETM":`...)
			w.wall(it.ActualEnd)
			w.b = append(w.b, '}')
		}
		w.b = append(w.b, ']')
	}
	w.b = append(w.b, `,"DELY":[`...)
	for i, it := range s.Delays {
		w.item(i, it.SourceSeq)
		w.b = append(w.b, `,"CODE":`...)
		w.null(it.Code)
		w.b = append(w.b, `,"DURA":`...)
		w.int(it.Minutes)
		w.b = append(w.b, `,"RMRK":`...)
		w.null(it.Remark)
		w.b = append(w.b, '}')
	}
	for k, r := range s.Routes {
		w.b = append(w.b, `],"`...)
		w.b = append(w.b, RouteKind(k).String()...)
		w.b = append(w.b, `":[`...)
		for i, it := range r {
			w.item(i, it.SourceSeq)
			w.b = append(w.b, `,"APCD":`...)
			w.null(it.Airport)
			w.b = append(w.b, `,"SARR":`...)
			w.wall(it.SchedArr)
			w.b = append(w.b, `,"SDEP":`...)
			w.wall(it.SchedDep)
			w.b = append(w.b, '}')
		}
	}
	for k, r := range s.Services {
		w.b = append(w.b, `],"`...)
		w.b = append(w.b, ServiceKind(k).String()...)
		w.b = append(w.b, `":[`...)
		for i, it := range r {
			w.item(i, it.SourceSeq)
			w.b = append(w.b, `,"CODE":`...)
			w.null(it.Code)
			w.b = append(w.b, `,"QNTY":`...)
			w.int(it.Quantity)
			w.b = append(w.b, `,"RMRK":`...)
			w.null(it.Remark)
			w.b = append(w.b, '}')
		}
	}
	w.b = append(w.b, "]}"...)
	return w.b
}

// docWriter appends Document's JSON: the same bytes encoding/json writes for
// its layout (documentJSON in the tests is that reference), without
// reflection or a value per field.
type docWriter struct {
	b    []byte
	zone *time.Location
}

// str appends s as a JSON string, escaped as encoding/json escapes it with
// HTML escaping off: printable ASCII other than '"' and '\' is copied, and
// anything else goes through encoding/json itself.
func (w *docWriter) str(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
			w.b = append(w.b, marshal(s)...)
			return
		}
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, s...)
	w.b = append(w.b, '"')
}

// null appends s, or null for "" (NULL).
func (w *docWriter) null(s string) {
	if s == "" {
		w.b = append(w.b, "null"...)
		return
	}
	w.str(s)
}

// int appends *p, or null for nil.
func (w *docWriter) int(p *int) {
	if p == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = strconv.AppendInt(w.b, int64(*p), 10)
}

// item opens the i-th (0-based) object of a collection with its ORDINAL and
// SOURCE_SEQ.
func (w *docWriter) item(i int, seq *int) {
	if i > 0 {
		w.b = append(w.b, ',')
	}
	w.b = append(w.b, `{"ORDINAL":`...)
	w.b = strconv.AppendInt(w.b, int64(i+1), 10)
	w.b = append(w.b, `,"SOURCE_SEQ":`...)
	w.int(seq)
}

// wall appends a SIS wall clock (its fields, whatever its location) read in
// the writer's zone as RFC 3339 with that zone's offset; the zero time (NULL)
// is null.
func (w *docWriter) wall(t time.Time) {
	if t.IsZero() {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, '"')
	w.b = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, w.zone).AppendFormat(w.b, time.RFC3339)
	w.b = append(w.b, '"')
}

// instant appends an instant as RFC 3339 UTC; the zero time (NULL) is null.
func (w *docWriter) instant(t time.Time) {
	if t.IsZero() {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, '"')
	w.b = t.UTC().AppendFormat(w.b, time.RFC3339)
	w.b = append(w.b, '"')
}

// NoticeDocument returns the JSON payload of a KAFKA:msg change notice
// (seed 000 §8.1): {"FLID","STATE_VERSION","ACTION","CAUSE","FIELDS","MSG_ID",
// "UPDATED_AT"} in that order, FIELDS an array ([] when empty), UPDATED_AT
// msg.Now in RFC 3339 UTC. Byte-stable like Document.
func NoticeDocument(n Notice, msg Msg) []byte {
	w := docWriter{b: make([]byte, 0, 192)}
	w.b = append(w.b, `{"FLID":`...)
	w.str(n.FLID)
	w.b = append(w.b, `,"STATE_VERSION":`...)
	w.b = strconv.AppendInt(w.b, n.Version, 10)
	w.b = append(w.b, `,"ACTION":`...)
	w.str(n.Action)
	w.b = append(w.b, `,"CAUSE":`...)
	w.str(n.Cause)
	w.b = append(w.b, `,"FIELDS":[`...)
	for i, f := range n.Fields {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		w.str(f)
	}
	w.b = append(w.b, `],"MSG_ID":`...)
	w.b = strconv.AppendInt(w.b, msg.ID, 10)
	w.b = append(w.b, `,"UPDATED_AT":`...)
	w.instant(msg.Now)
	w.b = append(w.b, '}')
	return w.b
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
