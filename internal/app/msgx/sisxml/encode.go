package sisxml

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/relayhq/relay/relaytype"
)

// Encode renders m as SIS XML exactly as docs/msgx/sis-xml.md describes it:
// a UTF-8 document with one MSG root, the META envelope (RCVR omitted when "")
// and, for every kind with a body, the body element named after TYPE. Every
// time is written YYYYMMDDhhmmss, the wall clock of its own location (no zone
// conversion, sub-second part dropped); DTTM is always written, a zero time
// as 00010101000000. Presence is written as read: Absent = the element is
// omitted, Empty = an empty element (<FLNO/>, and <GATE/> for a collection),
// Set = the value or the ITEM children in order. SCHD and REFD RCNT are
// written from len(Flights) and len(Records); the RCNT fields are not read.
// Ignored and unsupported kinds are written as the envelope alone (their
// bodies are never decoded, so a decoded message holds none).
//
// Encode is the inverse of Decode: for every message Decode returns,
// Decode(Encode(m)) equals m (FuzzEncodeRoundTrip). It refuses, with an error
// naming the element, a message Decode could not have produced, rather than
// write XML that reads back differently or fails: a body that does not match
// Kind or TYPE-STYP, a lower-case TYPE/STYP, a missing required element (META
// values, FLID, RTYP, RKEY, REQT ODAY/RTYP), a FLOP that carries none of its
// subtype's elements or one of another subtype's, a Set string that is empty,
// not trimmed, not UTF-8 or holds a character XML cannot carry, a Set integer
// outside [0, 2^31-1], a time outside years 0000–9999, an ADID other than A/D,
// a Set collection without items, an invalid Presence, or a result larger than
// MaxSize (wrapping ErrTooLarge). It is safe for concurrent use.
func Encode(m *Message) ([]byte, error) {
	if m == nil {
		return nil, errors.New("sisxml: encode: nil message")
	}
	e := &encoder{}
	e.b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	e.open("MSG")
	e.meta(&m.Meta)
	e.body(m)
	e.close("MSG")
	if e.err != nil {
		return nil, e.err
	}
	if e.b.Len() > MaxSize {
		return nil, fmt.Errorf("%w: encode %s SEQN %s: %d bytes, limit %d", ErrTooLarge, m.Meta.Kind(), relaytype.QuoteValue(m.Meta.SEQN), e.b.Len(), MaxSize)
	}
	return e.b.Bytes(), nil
}

// encoder writes indented XML and keeps the first error. path names the
// element being written, for error messages.
type encoder struct {
	b     bytes.Buffer
	err   error
	depth int
	path  []string
}

func (e *encoder) fail(format string, args ...any) {
	if e.err == nil {
		where := strings.Join(e.path, "/")
		e.err = fmt.Errorf("sisxml: encode %s: %s", where, fmt.Sprintf(format, args...))
	}
}

func (e *encoder) indent() {
	for range e.depth {
		e.b.WriteString("  ")
	}
}

func (e *encoder) open(name string) { e.openAs(name, name) }

// openAs opens element name, naming it label in error paths (FLGT[2]).
func (e *encoder) openAs(name, label string) {
	e.indent()
	e.b.WriteString("<" + name + ">\n")
	e.depth++
	e.path = append(e.path, label)
}

func (e *encoder) close(name string) {
	e.depth--
	e.path = e.path[:len(e.path)-1]
	e.indent()
	e.b.WriteString("</" + name + ">\n")
}

// leaf writes <name>text</name> (or <name/> for ""), on its own line unless
// inline (inside an ITEM, which is written on one line).
func (e *encoder) leaf(name, text string, inline bool) {
	if !inline {
		e.indent()
	}
	if text == "" {
		e.b.WriteString("<" + name + "/>")
	} else {
		e.b.WriteString("<" + name + ">")
		escape(&e.b, text)
		e.b.WriteString("</" + name + ">")
	}
	if !inline {
		e.b.WriteByte('\n')
	}
}

// escape writes s as element content: & and < must be escaped, > is (so "]]>"
// cannot occur) and \r is written as a reference, since a literal one would be
// normalised to \n by every XML reader.
func escape(b *bytes.Buffer, s string) {
	for _, r := range s {
		switch r {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '\r':
			b.WriteString("&#xD;")
		default:
			b.WriteRune(r)
		}
	}
}

// checkText reports why s cannot be written as a value Decode reads back
// unchanged ("" if it can): Decode trims values and reads an empty one as
// Empty, and XML carries neither invalid UTF-8 nor most control characters.
func checkText(s string) string {
	switch {
	case s == "":
		return "empty value"
	case strings.TrimSpace(s) != s:
		return fmt.Sprintf("value %q has leading or trailing white space", s)
	case !utf8.ValidString(s):
		return fmt.Sprintf("value %q is not UTF-8", s)
	}
	for _, r := range s {
		if !xmlChar(r) {
			return fmt.Sprintf("value %q holds %U, not an XML character", s, r)
		}
	}
	return ""
}

// xmlChar is the XML 1.0 Char production (encoding/xml rejects anything else).
func xmlChar(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D || r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
}

// required writes a required string element (META values, FLID, RTYP, RKEY).
func (e *encoder) required(name, v string) {
	if v == "" {
		e.fail("%s missing", name)
		return
	}
	if why := checkText(v); why != "" {
		e.fail("%s: %s", name, why)
		return
	}
	e.leaf(name, v, false)
}

func formatString(v string) (string, string) { return v, checkText(v) }

func formatTime(t time.Time) (string, string) {
	if y := t.Year(); y < 0 || y > 9999 {
		return "", fmt.Sprintf("time %s outside years 0000-9999", t)
	}
	return t.Format(TimeLayout), ""
}

func formatCount(n int) (string, string) {
	if n < 0 || n > math.MaxInt32 {
		return "", fmt.Sprintf("integer %d outside [0, %d]", n, math.MaxInt32)
	}
	return strconv.Itoa(n), ""
}

func formatADID(v string) (string, string) {
	if v != "A" && v != "D" {
		return "", fmt.Sprintf("ADID %q: want A or D", v)
	}
	return v, ""
}

// field writes a presence-aware scalar: nothing, an empty element or the
// formatted value. format returns the text or why it cannot be written.
func encodeField[T any](e *encoder, name string, f Field[T], inline bool, format func(T) (string, string)) {
	switch f.Presence {
	case Absent:
	case Empty:
		e.leaf(name, "", inline)
	case Set:
		text, why := format(f.Value)
		if why != "" {
			e.fail("%s: %s", name, why)
			return
		}
		e.leaf(name, text, inline)
	default:
		e.fail("%s: invalid presence %d", name, f.Presence)
	}
}

// list writes a presence-aware collection: nothing, <NAME/>, or the ITEMs in
// order, one per line.
func encodeList[T any](e *encoder, name string, l List[T], item func(*encoder, *T)) {
	switch l.Presence {
	case Absent:
	case Empty:
		e.leaf(name, "", false)
	case Set:
		if len(l.Items) == 0 {
			e.fail("%s: Set collection without items (an empty collection is Empty)", name)
			return
		}
		e.open(name)
		for i := range l.Items {
			e.path = append(e.path, fmt.Sprintf("ITEM[%d]", i+1))
			e.indent()
			e.b.WriteString("<ITEM>")
			n := e.b.Len()
			item(e, &l.Items[i])
			if e.b.Len() == n {
				// No item element carried: <ITEM/>, a real (empty) item.
				e.b.Truncate(n - len("<ITEM>"))
				e.b.WriteString("<ITEM/>\n")
			} else {
				e.b.WriteString("</ITEM>\n")
			}
			e.path = e.path[:len(e.path)-1]
		}
		e.close(name)
	default:
		e.fail("%s: invalid presence %d", name, l.Presence)
	}
}

func (e *encoder) meta(m *Meta) {
	e.open("META")
	for _, v := range []struct{ name, v string }{{"SNDR", m.SNDR}, {"TYPE", m.TYPE}, {"STYP", m.STYP}, {"SEQN", m.SEQN}} {
		// seed 000 §2: the identity joins these with '|'.
		if strings.ContainsRune(v.v, '|') {
			e.fail("%s %q contains '|', the identity separator", v.name, v.v)
		}
	}
	for _, v := range []struct{ name, v string }{{"TYPE", m.TYPE}, {"STYP", m.STYP}} {
		if strings.ToUpper(v.v) != v.v {
			e.fail("%s %q is not upper-case (Decode upper-cases it)", v.name, v.v)
		}
	}
	e.required("SNDR", m.SNDR)
	if m.RCVR != "" {
		e.required("RCVR", m.RCVR)
	}
	e.required("SEQN", m.SEQN)
	dttm, why := formatTime(m.DTTM)
	if why != "" {
		e.fail("DTTM: %s", why)
	}
	e.leaf("DTTM", dttm, false)
	e.required("TYPE", m.TYPE)
	e.required("STYP", m.STYP)
	e.close("META")
}

func (e *encoder) body(m *Message) {
	if k := kindOf(m.Meta.TYPE, m.Meta.STYP); k != m.Kind {
		e.fail("Kind %q does not match %s (%s)", m.Kind, m.Meta.Kind(), k)
		return
	}
	bodies := 0
	for _, set := range []bool{m.Schd != nil, m.Flop != nil, m.Fdel != nil, m.Ref != nil, m.Request != nil} {
		if set {
			bodies++
		}
	}
	want, has := 1, false
	switch m.Kind {
	case KindSchd:
		has = m.Schd != nil
	case KindFlop:
		has = m.Flop != nil
	case KindFdel:
		has = m.Fdel != nil
	case KindRef:
		has = m.Ref != nil
	case KindRequest:
		has = m.Request != nil
	default: // KindIgnored, KindUnsupported: the envelope alone
		want, has = 0, true
	}
	if bodies != want || !has {
		e.fail("kind %s needs exactly %d body, the one its kind names; have %d", m.Kind, want, bodies)
		return
	}
	switch m.Kind {
	case KindSchd:
		e.schedule(m.Meta.STYP, m.Schd)
	case KindFlop:
		e.flightOp(m.Meta.STYP, m.Flop)
	case KindFdel:
		e.open("FDEL")
		e.required("FLID", m.Fdel.FLID)
		e.close("FDEL")
	case KindRef:
		e.ref(m.Ref)
	case KindRequest:
		e.request(m.Meta.STYP, m.Request)
	}
}

func (e *encoder) schedule(styp string, s *Schedule) {
	e.open("SCHD")
	if s.Subtype != styp {
		e.fail("Subtype %q, STYP %q", s.Subtype, styp)
	}
	e.leaf("RCNT", strconv.Itoa(len(s.Flights)), false)
	encodeField(e, "RQSQ", s.RQSQ, false, formatString)
	for i := range s.Flights {
		e.flight(&s.Flights[i], fmt.Sprintf("FLGT[%d]", i+1))
	}
	e.close("SCHD")
}

func (e *encoder) flightOp(styp string, op *FlightOp) {
	e.open("FLOP")
	if op.Subtype != styp {
		e.fail("Subtype %q, STYP %q", op.Subtype, styp)
	}
	// Decode: a FLOP carries at least one element of its subtype (else
	// MALFORMED) and none of another (else CODEC_ERROR).
	owned := 0
	for _, el := range flightElements(&op.Flight) {
		switch {
		case !el.carried:
		case el.group == styp:
			owned++
		default:
			e.fail("FLOP-%s carries %s, owned by FLOP-%s", styp, el.name, el.group)
		}
	}
	if owned == 0 {
		e.fail("FLOP-%s carries none of its elements", styp)
	}
	e.flight(&op.Flight, "FLGT")
	e.close("FLOP")
}

// flightElements mirrors rawFlight.elements for a decoded Flight: every
// element but FLID, its owning FLOP subtype and whether it is carried.
func flightElements(f *Flight) []element {
	return []element{
		{"FLNO", "BASE", f.FLNO.Carried()}, {"AWCD", "BASE", f.AWCD.Carried()}, {"ADID", "BASE", f.ADID.Carried()},
		{"FLTY", "BASE", f.FLTY.Carried()}, {"SODT", "BASE", f.SODT.Carried()}, {"EODT", "BASE", f.EODT.Carried()},
		{"AODT", "BASE", f.AODT.Carried()}, {"ACTY", "BASE", f.ACTY.Carried()}, {"ACRG", "BASE", f.ACRG.Carried()},
		{"TERM", "BASE", f.TERM.Carried()},
		{"STAT", "STAT", f.STAT.Carried()}, {"ABST", "STAT", f.ABST.Carried()}, {"ABRS", "STAT", f.ABRS.Carried()},
		{"MAID", "SHAR", f.MAID.Carried()}, {"CSOP", "SHAR", f.CSOP.Carried()}, {"CSFT", "SHAR", f.CSFT.Carried()},
		{"GATE", "GATE", f.GATE.Carried()}, {"CKIC", "CKIC", f.CKIC.Carried()}, {"BELT", "BELT", f.BELT.Carried()},
		{"STND", "STND", f.STND.Carried()}, {"CHUT", "CHUT", f.CHUT.Carried()}, {"BRDG", "BRDG", f.BRDG.Carried()},
		{"CHOK", "CHOK", f.CHOK.Carried()}, {"DELY", "DELY", f.DELY.Carried()}, {"ROUT", "ROUT", f.ROUT.Carried()},
		{"ERUT", "ERUT", f.ERUT.Carried()}, {"SRVT", "SRVT", f.SRVT.Carried()}, {"VIPF", "VIPF", f.VIPF.Carried()},
	}
}

// flight writes one FLGT record, elements in the order of docs/msgx/sis-xml.md §3.
func (e *encoder) flight(f *Flight, label string) {
	e.openAs("FLGT", label)
	e.required("FLID", f.FLID)
	encodeField(e, "FLNO", f.FLNO, false, formatString)
	encodeField(e, "AWCD", f.AWCD, false, formatString)
	encodeField(e, "ADID", f.ADID, false, formatADID)
	encodeField(e, "FLTY", f.FLTY, false, formatString)
	encodeField(e, "SODT", f.SODT, false, formatTime)
	if f.SODT.Presence == Absent && f.SODTUnparsed != "" {
		e.leaf("SODT", f.SODTUnparsed, false) // as received: Decode reads it back the same
	}
	encodeField(e, "EODT", f.EODT, false, formatTime)
	encodeField(e, "AODT", f.AODT, false, formatTime)
	encodeField(e, "ACTY", f.ACTY, false, formatString)
	encodeField(e, "ACRG", f.ACRG, false, formatString)
	encodeField(e, "TERM", f.TERM, false, formatString)
	encodeField(e, "STAT", f.STAT, false, formatString)
	encodeField(e, "ABST", f.ABST, false, formatString)
	encodeField(e, "ABRS", f.ABRS, false, formatString)
	encodeField(e, "MAID", f.MAID, false, formatString)
	encodeField(e, "CSOP", f.CSOP, false, formatString)
	encodeField(e, "CSFT", f.CSFT, false, formatString)
	encodeList(e, "GATE", f.GATE, encodeResource)
	encodeList(e, "CKIC", f.CKIC, encodeResource)
	encodeList(e, "BELT", f.BELT, encodeResource)
	encodeList(e, "STND", f.STND, encodeResource)
	encodeList(e, "CHUT", f.CHUT, encodeResource)
	encodeList(e, "BRDG", f.BRDG, encodeResource)
	encodeList(e, "CHOK", f.CHOK, encodeResource)
	encodeList(e, "DELY", f.DELY, encodeDelay)
	encodeList(e, "ROUT", f.ROUT, encodeRoutePoint)
	encodeList(e, "ERUT", f.ERUT, encodeRoutePoint)
	encodeList(e, "SRVT", f.SRVT, encodeService)
	encodeList(e, "VIPF", f.VIPF, encodeService)
	e.close("FLGT")
}

func encodeResource(e *encoder, r *Resource) {
	encodeField(e, "SEQU", r.SEQU, true, formatCount)
	encodeField(e, "CODE", r.CODE, true, formatString)
	encodeField(e, "BTIM", r.BTIM, true, formatTime)
	encodeField(e, "ETIM", r.ETIM, true, formatTime)
	encodeField(e, "ABTM", r.ABTM, true, formatTime)
	encodeField(e, "AETM", r.AETM, true, formatTime)
}

func encodeDelay(e *encoder, d *Delay) {
	encodeField(e, "SEQU", d.SEQU, true, formatCount)
	encodeField(e, "CODE", d.CODE, true, formatString)
	encodeField(e, "DURA", d.DURA, true, formatCount)
	encodeField(e, "RMRK", d.RMRK, true, formatString)
}

func encodeRoutePoint(e *encoder, p *RoutePoint) {
	encodeField(e, "SEQU", p.SEQU, true, formatCount)
	encodeField(e, "APCD", p.APCD, true, formatString)
	encodeField(e, "SARR", p.SARR, true, formatTime)
	encodeField(e, "SDEP", p.SDEP, true, formatTime)
}

func encodeService(e *encoder, s *Service) {
	encodeField(e, "SEQU", s.SEQU, true, formatCount)
	encodeField(e, "CODE", s.CODE, true, formatString)
	encodeField(e, "QNTY", s.QNTY, true, formatCount)
	encodeField(e, "RMRK", s.RMRK, true, formatString)
}

func (e *encoder) ref(d *RefData) {
	e.open("REFD")
	e.required("RTYP", d.RTYP)
	e.leaf("RCNT", strconv.Itoa(len(d.Records)), false)
	encodeField(e, "RQSQ", d.RQSQ, false, formatString)
	for i := range d.Records {
		e.openAs("REFR", fmt.Sprintf("REFR[%d]", i+1))
		e.required("RKEY", d.Records[i].RKEY)
		encodeField(e, "RVAL", d.Records[i].RVAL, false, formatString)
		e.close("REFR")
	}
	e.close("REFD")
}

func (e *encoder) request(styp string, q *Request) {
	e.open("REQT")
	if q.Subtype != styp {
		e.fail("Subtype %q, STYP %q", q.Subtype, styp)
	}
	switch styp {
	case "SCHD":
		if q.ODAY.Presence != Set {
			e.fail("REQT-SCHD: ODAY missing")
		} else if _, err := time.Parse("20060102", q.ODAY.Value); err != nil {
			e.fail("REQT-SCHD: ODAY %q is not YYYYMMDD", q.ODAY.Value)
		}
	case "REFD":
		if q.RTYP.Presence != Set {
			e.fail("REQT-REFD: RTYP missing")
		}
	}
	encodeField(e, "ODAY", q.ODAY, false, formatString)
	encodeField(e, "RTYP", q.RTYP, false, formatString)
	e.close("REQT")
}
