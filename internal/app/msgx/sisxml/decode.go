package sisxml

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/relayhq/relay/relaytype"
)

// MaxSize is the largest raw message Decode accepts (1 MiB); larger input is
// MALFORMED without being parsed.
const MaxSize = 1 << 20

// TimeLayout is the SIS date-time format of DTTM and every time element:
// YYYYMMDDhhmmss, a zone-less wall clock.
const TimeLayout = "20060102150405"

// FlopSubtypes lists every FLOP subtype, one per kind of dynamic change
// (docs/msgx/sis-xml.md): the base, status and master/shared field groups and
// one per collection.
var FlopSubtypes = []string{"BASE", "STAT", "SHAR", "GATE", "CKIC", "BELT", "STND", "CHUT", "BRDG", "CHOK", "DELY", "ROUT", "ERUT", "SRVT", "VIPF"}

// IgnoredTypes lists the baseline ignored message types (seed 000 §2: LDM,
// REGN, RSTA, EROR — not ERROR). Their bodies are never read.
var IgnoredTypes = []string{"LDM", "REGN", "RSTA", "EROR"}

// ErrTooLarge is wrapped by the MALFORMED error for input over MaxSize.
var ErrTooLarge = errors.New("sisxml: message larger than 1 MiB")

// ErrEmpty is wrapped by the MALFORMED error for missing raw content.
var ErrEmpty = errors.New("sisxml: raw content missing")

// Decode decodes one raw SIS XML message. It is safe for concurrent use and
// never panics. Errors carry a class (relaytype.ClassOf): MALFORMED for input
// that is not a valid message (never retried) and CODEC_ERROR for a valid
// envelope whose body this codec cannot map (retried). An unknown TYPE-STYP is
// not an error: it decodes to KindUnsupported.
func Decode(raw []byte) (*Message, error) {
	if len(raw) > MaxSize {
		return nil, malformed("%w (%d bytes)", ErrTooLarge, len(raw))
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, relaytype.Classify(relaytype.ClassMalformed, ErrEmpty)
	}
	var r rawMsg
	if err := parse(raw, &r); err != nil {
		return nil, err
	}
	if len(r.META) != 1 {
		return nil, malformed("want exactly one MSG/META, have %d", len(r.META))
	}
	st := &state{}
	meta, err := st.decodeMeta(&r.META[0])
	if err != nil {
		return nil, err
	}
	m := &Message{Meta: meta}
	m.Kind = kindOf(meta.TYPE, meta.STYP)
	switch m.Kind {
	case KindSchd:
		b, err := one(r.SCHD, "SCHD")
		if err != nil {
			return nil, err
		}
		m.Schd, err = st.decodeSchedule(meta.STYP, b)
		if err != nil {
			return nil, err
		}
	case KindFlop:
		b, err := one(r.FLOP, "FLOP")
		if err != nil {
			return nil, err
		}
		m.Flop, err = st.decodeFlightOp(meta.STYP, b)
		if err != nil {
			return nil, err
		}
	case KindFdel:
		b, err := one(r.FDEL, "FDEL")
		if err != nil {
			return nil, err
		}
		flid := text(b.FLID)
		if flid == "" {
			return nil, malformed("FDEL: FLID missing")
		}
		m.Fdel = &FlightDelete{FLID: flid}
	case KindRef:
		b, err := one(r.REFD, "REFD")
		if err != nil {
			return nil, err
		}
		m.Ref, err = decodeRef(b)
		if err != nil {
			return nil, err
		}
	case KindRequest:
		b, err := one(r.REQT, "REQT")
		if err != nil {
			return nil, err
		}
		m.Request, err = st.decodeRequest(meta.STYP, b)
		if err != nil {
			return nil, err
		}
	}
	if st.codec != nil {
		return nil, st.codec
	}
	return m, nil
}

// state carries the first CODEC_ERROR of one Decode call. Value-format
// failures are recorded and decoding goes on, so that every structural check
// runs first: a message that is both MALFORMED and unmappable is MALFORMED
// (dead at once), never retried for a codec fix that could not help it.
type state struct {
	codec error
}

func (st *state) fail(err error) {
	if st.codec == nil {
		st.codec = err
	}
}

func malformed(format string, args ...any) error {
	return relaytype.Classify(relaytype.ClassMalformed, fmt.Errorf("sisxml: "+format, args...))
}

func codecErr(format string, args ...any) error {
	return relaytype.Classify(relaytype.ClassCodec, fmt.Errorf("sisxml: "+format, args...))
}

// charsetError is returned by the CharsetReader for any declared encoding
// other than UTF-8 / US-ASCII: a codec with that charset could read the
// message, so it is CODEC_ERROR, not MALFORMED.
type charsetError struct{ label string }

func (e *charsetError) Error() string { return "unsupported charset " + strconv.Quote(e.label) }

// parse checks well-formedness and unmarshals the single MSG root into r.
// Text before or any element after the root is MALFORMED.
func parse(raw []byte, r *rawMsg) error {
	d := xml.NewDecoder(bytes.NewReader(raw))
	d.Strict = true
	d.CharsetReader = func(label string, in io.Reader) (io.Reader, error) {
		if strings.EqualFold(label, "us-ascii") || strings.EqualFold(label, "ascii") {
			return in, nil
		}
		return nil, &charsetError{label: label}
	}
	var start *xml.StartElement
	for start == nil {
		tok, err := d.Token()
		if err != nil {
			var ce *charsetError
			if errors.As(err, &ce) {
				return relaytype.Classify(relaytype.ClassCodec, fmt.Errorf("sisxml: %w", err))
			}
			if errors.Is(err, io.EOF) {
				return malformed("no root element")
			}
			return malformed("not well-formed XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			start = &t
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return malformed("text before the root element")
			}
		}
	}
	if start.Name.Local != "MSG" {
		return malformed("root element is <%s>, want <MSG>", start.Name.Local)
	}
	if err := d.DecodeElement(r, start); err != nil {
		return malformed("not well-formed XML: %w", err)
	}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return malformed("not well-formed XML after </MSG>: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			return malformed("second root element <%s>", t.Name.Local)
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return malformed("text after the root element")
			}
		}
	}
}

func (st *state) decodeMeta(r *rawMeta) (Meta, error) {
	m := Meta{
		SNDR: text(r.SNDR),
		RCVR: text(r.RCVR),
		SEQN: text(r.SEQN),
		TYPE: strings.ToUpper(text(r.TYPE)),
		STYP: strings.ToUpper(text(r.STYP)),
	}
	for _, f := range []struct{ name, v string }{{"SNDR", m.SNDR}, {"TYPE", m.TYPE}, {"STYP", m.STYP}, {"SEQN", m.SEQN}} {
		if f.v == "" {
			return Meta{}, malformed("META/%s missing", f.name)
		}
		// The identity joins these with '|' (seed 000 §2); a '|' inside one
		// would make two different envelopes share an identity.
		if strings.ContainsRune(f.v, '|') {
			return Meta{}, malformed("META/%s contains '|'", f.name)
		}
	}
	dttm := text(r.DTTM)
	if dttm == "" {
		return Meta{}, malformed("META/DTTM missing")
	}
	t, err := parseTime(dttm)
	if err != nil {
		st.fail(codecErr("META/DTTM %q: %w", dttm, err))
	}
	m.DTTM = t
	return m, nil
}

func kindOf(typ, styp string) MsgKind {
	switch typ {
	case "SCHD":
		switch styp {
		case "DNLD", "RESP", "ADFT":
			return KindSchd
		}
	case "FLOP":
		for _, s := range FlopSubtypes {
			if s == styp {
				return KindFlop
			}
		}
	case "FDEL":
		if styp == "DELE" {
			return KindFdel
		}
	case "REFD":
		if styp == "RESP" {
			return KindRef
		}
	case "REQT":
		if styp == "SCHD" || styp == "REFD" {
			return KindRequest
		}
	default:
		for _, t := range IgnoredTypes {
			if t == typ {
				return KindIgnored
			}
		}
	}
	return KindUnsupported
}

func one[T any](bodies []T, name string) (*T, error) {
	if len(bodies) != 1 {
		return nil, malformed("want exactly one <%s> body, have %d", name, len(bodies))
	}
	return &bodies[0], nil
}

func decodeCount(p *string, have int, where string) (int, error) {
	s := text(p)
	if s == "" {
		return 0, malformed("%s/RCNT missing", where)
	}
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil {
		return 0, malformed("%s/RCNT %q is not a count", where, s)
	}
	if int(n) != have {
		return 0, malformed("%s/RCNT declares %d records, have %d", where, n, have)
	}
	return int(n), nil
}

func (st *state) decodeSchedule(styp string, r *rawSchd) (*Schedule, error) {
	s := &Schedule{Subtype: styp, RQSQ: str(r.RQSQ)}
	var err error
	if s.RCNT, err = decodeCount(r.RCNT, len(r.FLGT), "SCHD"); err != nil {
		return nil, err
	}
	for i := range r.FLGT {
		if text(r.FLGT[i].FLID) == "" {
			return nil, malformed("SCHD/FLGT[%d]/FLID missing", i+1)
		}
	}
	s.Flights = make([]Flight, 0, len(r.FLGT))
	for i := range r.FLGT {
		f, err := st.decodeFlight(&r.FLGT[i], fmt.Sprintf("SCHD/FLGT[%d]", i+1))
		if err != nil {
			return nil, err
		}
		s.Flights = append(s.Flights, f)
	}
	return s, nil
}

func (st *state) decodeFlightOp(styp string, r *rawFlop) (*FlightOp, error) {
	if len(r.FLGT) != 1 {
		return nil, malformed("FLOP: want exactly one FLGT, have %d", len(r.FLGT))
	}
	raw := &r.FLGT[0]
	if text(raw.FLID) == "" {
		return nil, malformed("FLOP/FLGT/FLID missing")
	}
	owned, foreign := 0, error(nil)
	for _, e := range raw.elements() {
		if !e.carried {
			continue
		}
		if e.group != styp {
			// A combined change this codec cannot map to one subtype; a codec
			// that knows the combination could.
			if foreign == nil {
				foreign = codecErr("FLOP-%s carries %s, owned by FLOP-%s", styp, e.name, e.group)
			}
			continue
		}
		owned++
	}
	if owned == 0 {
		return nil, malformed("FLOP-%s carries none of its elements", styp)
	}
	if foreign != nil {
		st.fail(foreign)
	}
	f, err := st.decodeFlight(raw, "FLOP/FLGT")
	if err != nil {
		return nil, err
	}
	return &FlightOp{Subtype: styp, Flight: f}, nil
}

func decodeRef(r *rawRefd) (*RefData, error) {
	d := &RefData{RTYP: text(r.RTYP), RQSQ: str(r.RQSQ)}
	if d.RTYP == "" {
		return nil, malformed("REFD/RTYP missing")
	}
	var err error
	if d.RCNT, err = decodeCount(r.RCNT, len(r.REFR), "REFD"); err != nil {
		return nil, err
	}
	for i, rec := range r.REFR {
		k := text(rec.RKEY)
		if k == "" {
			return nil, malformed("REFD/REFR[%d]/RKEY missing", i+1)
		}
		d.Records = append(d.Records, RefRecord{RKEY: k, RVAL: str(rec.RVAL)})
	}
	return d, nil
}

func (st *state) decodeRequest(styp string, r *rawReqt) (*Request, error) {
	q := &Request{Subtype: styp, ODAY: str(r.ODAY), RTYP: str(r.RTYP)}
	switch styp {
	case "SCHD":
		if q.ODAY.Presence != Set {
			return nil, malformed("REQT-SCHD: ODAY missing")
		}
		if _, err := time.Parse("20060102", q.ODAY.Value); err != nil {
			st.fail(codecErr("REQT-SCHD: ODAY %q: %w", q.ODAY.Value, err))
		}
	case "REFD":
		if q.RTYP.Presence != Set {
			return nil, malformed("REQT-REFD: RTYP missing")
		}
	}
	return q, nil
}

// text returns the trimmed content of an optional element ("" when absent).
func text(p *string) string {
	if p == nil {
		return ""
	}
	return strings.TrimSpace(*p)
}

// str maps an optional element to a presence-aware string.
func str(p *string) Field[string] {
	if p == nil {
		return Field[string]{}
	}
	if s := strings.TrimSpace(*p); s != "" {
		return Val(s)
	}
	return Cleared[string]()
}

func parseTime(s string) (time.Time, error) {
	if len(s) != len(TimeLayout) {
		return time.Time{}, fmt.Errorf("want %d digits YYYYMMDDhhmmss", len(TimeLayout))
	}
	return time.ParseInLocation(TimeLayout, s, time.UTC)
}

// fieldDecoder maps the value formats of one record, recording a failure
// in the Decode call's state, so the mapping code stays a flat list of
// assignments.
type fieldDecoder struct {
	where string
	st    *state
}

func (d *fieldDecoder) time(p *string, name string) Field[time.Time] {
	f := str(p)
	if f.Presence != Set {
		return Field[time.Time]{Presence: f.Presence}
	}
	t, err := parseTime(f.Value)
	if err != nil {
		d.fail(name, f.Value, err)
		return Field[time.Time]{}
	}
	return Val(t)
}

func (d *fieldDecoder) count(p *string, name string) Field[int] {
	f := str(p)
	if f.Presence != Set {
		return Field[int]{Presence: f.Presence}
	}
	n, err := strconv.ParseUint(f.Value, 10, 31)
	if err != nil {
		d.fail(name, f.Value, errors.New("want a non-negative integer"))
		return Field[int]{}
	}
	return Val(int(n))
}

func (d *fieldDecoder) oneOf(p *string, name string, allowed ...string) Field[string] {
	f := str(p)
	if f.Presence != Set {
		return f
	}
	v := strings.ToUpper(f.Value)
	for _, a := range allowed {
		if v == a {
			return Val(v)
		}
	}
	d.fail(name, f.Value, fmt.Errorf("want one of %v", allowed))
	return Field[string]{}
}

func (d *fieldDecoder) fail(name, v string, err error) {
	d.st.fail(codecErr("%s/%s %q: %w", d.where, name, v, err))
}

// list maps a collection element: absent, empty (no ITEM: clear) or items.
// Text directly inside a collection element (<GATE>B12</GATE>) is a value
// format this codec does not know — CODEC_ERROR rather than a silent clear.
func list[R, T any](d *fieldDecoder, l *rawList[R], name string, item func(*fieldDecoder, *R) T) List[T] {
	if l == nil {
		return List[T]{}
	}
	if strings.TrimSpace(l.Text) != "" {
		d.fail(name, l.Text, errors.New("collection holds text, want ITEM children"))
		return List[T]{}
	}
	if len(l.ITEM) == 0 {
		return List[T]{Presence: Empty}
	}
	out := List[T]{Presence: Set, Items: make([]T, 0, len(l.ITEM))}
	for i := range l.ITEM {
		sub := &fieldDecoder{where: fmt.Sprintf("%s/%s/ITEM[%d]", d.where, name, i+1), st: d.st}
		v := item(sub, &l.ITEM[i])
		out.Items = append(out.Items, v)
	}
	return out
}

func resource(d *fieldDecoder, r *rawResource) Resource {
	return Resource{
		SEQU: d.count(r.SEQU, "SEQU"),
		CODE: str(r.CODE),
		BTIM: d.time(r.BTIM, "BTIM"),
		ETIM: d.time(r.ETIM, "ETIM"),
		ABTM: d.time(r.ABTM, "ABTM"),
		AETM: d.time(r.AETM, "AETM"),
	}
}

func delay(d *fieldDecoder, r *rawDelay) Delay {
	return Delay{SEQU: d.count(r.SEQU, "SEQU"), CODE: str(r.CODE), DURA: d.count(r.DURA, "DURA"), RMRK: str(r.RMRK)}
}

func routePoint(d *fieldDecoder, r *rawRoutePoint) RoutePoint {
	return RoutePoint{SEQU: d.count(r.SEQU, "SEQU"), APCD: str(r.APCD), SARR: d.time(r.SARR, "SARR"), SDEP: d.time(r.SDEP, "SDEP")}
}

func service(d *fieldDecoder, r *rawService) Service {
	return Service{SEQU: d.count(r.SEQU, "SEQU"), CODE: str(r.CODE), QNTY: d.count(r.QNTY, "QNTY"), RMRK: str(r.RMRK)}
}

func (st *state) decodeFlight(r *rawFlight, where string) (Flight, error) {
	flid := text(r.FLID)
	if flid == "" {
		return Flight{}, malformed("%s/FLID missing", where)
	}
	d := &fieldDecoder{where: where, st: st}
	f := Flight{
		FLID: flid,
		FLNO: str(r.FLNO),
		AWCD: str(r.AWCD),
		ADID: d.oneOf(r.ADID, "ADID", "A", "D"),
		FLTY: str(r.FLTY),
		SODT: d.time(r.SODT, "SODT"),
		EODT: d.time(r.EODT, "EODT"),
		AODT: d.time(r.AODT, "AODT"),
		ACTY: str(r.ACTY),
		ACRG: str(r.ACRG),
		TERM: str(r.TERM),
		STAT: str(r.STAT),
		ABST: str(r.ABST),
		ABRS: str(r.ABRS),
		MAID: str(r.MAID),
		CSOP: str(r.CSOP),
		CSFT: str(r.CSFT),
		GATE: list(d, r.GATE, "GATE", resource),
		CKIC: list(d, r.CKIC, "CKIC", resource),
		BELT: list(d, r.BELT, "BELT", resource),
		STND: list(d, r.STND, "STND", resource),
		CHUT: list(d, r.CHUT, "CHUT", resource),
		BRDG: list(d, r.BRDG, "BRDG", resource),
		CHOK: list(d, r.CHOK, "CHOK", resource),
		DELY: list(d, r.DELY, "DELY", delay),
		ROUT: list(d, r.ROUT, "ROUT", routePoint),
		ERUT: list(d, r.ERUT, "ERUT", routePoint),
		SRVT: list(d, r.SRVT, "SRVT", service),
		VIPF: list(d, r.VIPF, "VIPF", service),
	}
	return f, nil
}
