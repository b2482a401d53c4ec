package sisxml

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/relayhq/relay/relaytype"
)

// MaxSize is the largest raw message Decode accepts by default (1 MiB,
// Limits.MaxSize); larger input is MALFORMED without being parsed.
const MaxSize = 1 << 20

// MaxElementsDefault is the most XML elements Decode accepts in one message
// by default (Limits.MaxElements): 65,536, above the ~54,000 of a 1 MiB
// message of nothing but full resource items, below the ~150,000 of 1 MiB of
// <ITEM/>. The elements are counted in the raw bytes before anything is
// parsed, so a message past the limit is refused without allocating.
const MaxElementsDefault = 1 << 16

// Limits bound what one Decode call reads. The zero value means the defaults;
// Limits is a plain value, safe to share.
type Limits struct {
	// MaxSize is the largest raw message in bytes (<= 0: MaxSize).
	MaxSize int
	// MaxElements is the most XML elements one message may hold, the root
	// and every nested element counted (<= 0: MaxElementsDefault).
	MaxElements int
}

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

// ErrTooLarge is wrapped by the MALFORMED error for input over
// Limits.MaxSize.
var ErrTooLarge = errors.New("sisxml: message too large")

// ErrTooManyElements is wrapped by the MALFORMED error for a message with
// more XML elements than Limits.MaxElements.
var ErrTooManyElements = errors.New("sisxml: too many XML elements")

// ErrEmpty is wrapped by the MALFORMED error for missing raw content.
var ErrEmpty = errors.New("sisxml: raw content missing")

// Decode decodes one raw SIS XML message. It is safe for concurrent use and
// never panics. Errors carry a class (relaytype.ClassOf): MALFORMED for input
// that is not a valid message (never retried), PROTOCOL for a package whose
// declared record count is wrong (never retried; structural MALFORMED checks
// win) and CODEC_ERROR for a valid envelope whose body this codec cannot map
// (retried). An unknown TYPE-STYP is not an error: it decodes to
// KindUnsupported. It applies the default Limits. Error text quotes at most
// relaytype.MaxQuotedValue bytes of any value and is at most
// relaytype.MaxErrorText bytes long.
func Decode(raw []byte) (*Message, error) { return Limits{}.Decode(raw) }

// Decode is the package's Decode under the limits l: input over l.MaxSize is
// MALFORMED (ErrTooLarge) without being parsed, and a message with more than
// l.MaxElements elements is MALFORMED (ErrTooManyElements) before it is parsed.
func (l Limits) Decode(raw []byte) (*Message, error) { return l.decode(raw, parse) }

// decode is Decode with the parser given: parse, or parseXML in the test that
// compares the two.
func (l Limits) decode(raw []byte, parse func([]byte, *rawMsg) error) (*Message, error) {
	if maxSize := cmp.Or(max(l.MaxSize, 0), MaxSize); len(raw) > maxSize {
		return nil, relaytype.Classify(relaytype.ClassMalformed,
			fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(raw), maxSize))
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, relaytype.Classify(relaytype.ClassMalformed, ErrEmpty)
	}
	if maxElements := cmp.Or(max(l.MaxElements, 0), MaxElementsDefault); elementsOver(raw, maxElements) {
		return nil, relaytype.Classify(relaytype.ClassMalformed,
			fmt.Errorf("%w: more than %d", ErrTooManyElements, maxElements))
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

// malformed and codecErr make every error Decode returns. Values are quoted
// with relaytype.QuoteValue where they are formatted; the bound here is the
// last guard for names from the input (an element name in a syntax error).
func malformed(format string, args ...any) error {
	return relaytype.Classify(relaytype.ClassMalformed,
		relaytype.BoundError(fmt.Errorf("sisxml: "+format, args...), relaytype.MaxErrorText))
}

func protocolErr(format string, args ...any) error {
	return relaytype.Classify(relaytype.ClassProtocol,
		relaytype.BoundError(fmt.Errorf("sisxml: "+format, args...), relaytype.MaxErrorText))
}

func codecErr(format string, args ...any) error {
	return relaytype.Classify(relaytype.ClassCodec,
		relaytype.BoundError(fmt.Errorf("sisxml: "+format, args...), relaytype.MaxErrorText))
}

// charsetError is returned by the CharsetReader for any declared encoding
// other than UTF-8 / US-ASCII: a codec with that charset could read the
// message, so it is CODEC_ERROR, not MALFORMED.
type charsetError struct{ label string }

func (e *charsetError) Error() string { return "unsupported charset " + relaytype.QuoteValue(e.label) }

// elementsOver reports whether raw holds more than limit start tags ('<'
// followed by anything but '/', '!' or '?') outside comments and CDATA
// sections, which it skips as encoding/xml does. In well-formed XML (UTF-8 or
// ASCII, the only encodings Decode reads) that is the number of elements; in
// other input it can only overcount, making a message that is MALFORMED
// anyway MALFORMED sooner. It reads raw once and allocates nothing.
func elementsOver(raw []byte, limit int) bool {
	n := 0
	for i := 0; i < len(raw); {
		j := bytes.IndexByte(raw[i:], '<')
		if j < 0 {
			return false
		}
		i += j + 1
		rest := raw[i:]
		switch {
		case bytes.HasPrefix(rest, commentOpen):
			i += skipSection(rest, commentOpen, commentEnd)
		case bytes.HasPrefix(rest, cdataOpen):
			i += skipSection(rest, cdataOpen, cdataEnd)
		case len(rest) > 0 && rest[0] != '/' && rest[0] != '!' && rest[0] != '?':
			if n++; n > limit {
				return true
			}
		}
	}
	return false
}

var (
	commentOpen, commentEnd = []byte("!--"), []byte("-->")
	cdataOpen, cdataEnd     = []byte("![CDATA["), []byte("]]>")
)

// skipSection returns the length of the section that b starts with: open,
// its content and the first end after open (all of b when end is missing).
func skipSection(b, open, end []byte) int {
	if k := bytes.Index(b[len(open):], end); k >= 0 {
		return len(open) + k + len(end)
	}
	return len(b)
}

// parse checks well-formedness and unmarshals the single MSG root into r.
// Text before or any element after the root is MALFORMED. Messages inside the
// scanner's subset (scan.go: what an AODB writes) are read by parseFast;
// everything else, every malformed message included, by parseXML.
func parse(raw []byte, r *rawMsg) error {
	if parseFast(raw, r) {
		return nil
	}
	*r = rawMsg{}
	return parseXML(raw, r)
}

// parseXML is parse with encoding/xml: the reference for parseFast.
func parseXML(raw []byte, r *rawMsg) error {
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
				return codecErr("%w", err)
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
		return malformed("root element is %s, want <MSG>", relaytype.QuoteValue(start.Name.Local))
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
			return malformed("second root element %s", relaytype.QuoteValue(t.Name.Local))
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
	dttm := trim(r.DTTM)
	if dttm == "" {
		return Meta{}, malformed("META/DTTM missing")
	}
	t, err := parseTime(dttm)
	if err != nil {
		st.fail(codecErr("META/DTTM %s: %w", relaytype.QuoteValue(dttm), err))
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

// decodeCount checks a package's declared record count. A wrong count is a
// whole-package check (seed 000 §7.1 step 2: the declared record count is
// among the checks that end DEAD(PROTOCOL)), so it is classified PROTOCOL, not
// MALFORMED. The caller returns it only after the package's structural
// checks, so a package that is also malformed is MALFORMED.
func decodeCount(p *string, have int, where string) (int, error) {
	s := trim(p)
	if s == "" {
		return 0, protocolErr("%s/RCNT missing", where)
	}
	n, err := strconv.ParseUint(s, 10, 31)
	if err != nil {
		return 0, protocolErr("%s/RCNT %s is not a count", where, relaytype.QuoteValue(s))
	}
	if int(n) != have {
		return 0, protocolErr("%s/RCNT declares %d records, have %d", where, n, have)
	}
	return int(n), nil
}

func (st *state) decodeSchedule(styp string, r *rawSchd) (*Schedule, error) {
	s := &Schedule{Subtype: styp, RQSQ: str(r.RQSQ)}
	for i := range r.FLGT {
		if trim(r.FLGT[i].FLID) == "" {
			return nil, malformed("SCHD/FLGT[%d]/FLID missing", i+1)
		}
	}
	var err error
	if s.RCNT, err = decodeCount(r.RCNT, len(r.FLGT), "SCHD"); err != nil {
		return nil, err
	}
	s.Flights = make([]Flight, 0, len(r.FLGT))
	for i := range r.FLGT {
		f, err := st.decodeFlight(&r.FLGT[i], "SCHD/FLGT", i+1, true)
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
	if trim(raw.FLID) == "" {
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
	f, err := st.decodeFlight(raw, "FLOP/FLGT", 0, false)
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
	for i, rec := range r.REFR {
		k := text(rec.RKEY)
		if k == "" {
			return nil, malformed("REFD/REFR[%d]/RKEY missing", i+1)
		}
		d.Records = append(d.Records, RefRecord{RKEY: k, RVAL: str(rec.RVAL)})
	}
	var err error
	if d.RCNT, err = decodeCount(r.RCNT, len(r.REFR), "REFD"); err != nil {
		return nil, err
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
		if _, err := parseDay(q.ODAY.Value); err != nil {
			st.fail(codecErr("REQT-SCHD: ODAY %s: %w", relaytype.QuoteValue(q.ODAY.Value), err))
		}
	case "REFD":
		if q.RTYP.Presence != Set {
			return nil, malformed("REQT-REFD: RTYP missing")
		}
	}
	return q, nil
}

// trim returns the trimmed content of an optional element ("" when absent),
// for checks and parsing: with the scanner it is a substring of the whole
// message.
func trim(p *string) string {
	if p == nil {
		return ""
	}
	return strings.TrimSpace(*p)
}

// text is trim as its own string, for a value the decoded message keeps: a
// value kept in a flight state (the flight cache) must not keep the whole
// message it came from alive.
func text(p *string) string { return strings.Clone(trim(p)) }

// field maps an optional element to a presence-aware string, for parsing
// (a substring, like trim).
func field(p *string) Field[string] {
	if p == nil {
		return Field[string]{}
	}
	if s := strings.TrimSpace(*p); s != "" {
		return Val(s)
	}
	return Cleared[string]()
}

// str is field with the value as its own string (see text).
func str(p *string) Field[string] {
	f := field(p)
	f.Value = strings.Clone(f.Value)
	return f
}

// parseDay parses an operating day, YYYYMMDD. The length is checked first:
// time's errors quote the whole value.
func parseDay(s string) (time.Time, error) {
	const layout = "20060102"
	if len(s) != len(layout) {
		return time.Time{}, fmt.Errorf("want %d digits YYYYMMDD", len(layout))
	}
	return time.Parse(layout, s)
}

func parseTime(s string) (time.Time, error) {
	if len(s) != len(TimeLayout) {
		return time.Time{}, fmt.Errorf("want %d digits YYYYMMDDhhmmss", len(TimeLayout))
	}
	return time.ParseInLocation(TimeLayout, s, time.UTC)
}

// fieldDecoder maps the value formats of one record, recording a failure
// in the Decode call's state, so the mapping code stays a flat list of
// assignments. The record's path for error text is built only on a failure.
type fieldDecoder struct {
	st    *state
	where string // the flight record's path: "FLOP/FLGT", "SCHD/FLGT"
	index int    // the flight's 1-based position under where (0: the only one)
	list  string // the collection of an ITEM record ("": the flight itself)
	item  int    // the ITEM's 1-based position in list
}

// path is the record's path in error text, e.g. "SCHD/FLGT[2]/GATE/ITEM[1]".
func (d *fieldDecoder) path() string {
	p := d.where
	if d.index > 0 {
		p = fmt.Sprintf("%s[%d]", p, d.index)
	}
	if d.list != "" {
		p = fmt.Sprintf("%s/%s/ITEM[%d]", p, d.list, d.item)
	}
	return p
}

func (d *fieldDecoder) time(p *string, name string) Field[time.Time] {
	f := field(p)
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
	f := field(p)
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
	f := field(p)
	if f.Presence != Set {
		return f
	}
	v := strings.ToUpper(f.Value)
	for _, a := range allowed {
		if v == a {
			return Val(a) // the constant: keeps nothing of the message
		}
	}
	d.fail(name, f.Value, fmt.Errorf("want one of %v", allowed))
	return Field[string]{}
}

func (d *fieldDecoder) fail(name, v string, err error) {
	if d.st.codec == nil { // only the first failure is kept
		d.st.fail(codecErr("%s/%s %s: %w", d.path(), name, relaytype.QuoteValue(v), err))
	}
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
	sub := &fieldDecoder{st: d.st, where: d.where, index: d.index, list: name}
	for i := range l.ITEM {
		sub.item = i + 1
		out.Items = append(out.Items, item(sub, &l.ITEM[i]))
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

func (st *state) decodeFlight(r *rawFlight, where string, index int, schd bool) (Flight, error) {
	d := &fieldDecoder{st: st, where: where, index: index}
	flid := text(r.FLID)
	if flid == "" {
		return Flight{}, malformed("%s/FLID missing", d.path())
	}
	var sodt Field[time.Time]
	var sodtUnparsed string
	if f := str(r.SODT); schd && f.Presence == Set {
		// seed 000 §12.3, §7.1: in a SCHD record an unparseable SODT is the
		// domain's case (ADFT: no OPERATION_DAY; a plan: PROTOCOL), not a
		// codec error that would be retried while the queue waits.
		if t, err := parseTime(f.Value); err == nil {
			sodt = Val(t)
		} else {
			sodtUnparsed = f.Value
		}
	} else {
		sodt = d.time(r.SODT, "SODT")
	}
	f := Flight{
		FLID:         flid,
		SODTUnparsed: sodtUnparsed,
		FLNO:         str(r.FLNO),
		AWCD:         str(r.AWCD),
		ADID:         d.oneOf(r.ADID, "ADID", "A", "D"),
		FLTY:         str(r.FLTY),
		SODT:         sodt,
		EODT:         d.time(r.EODT, "EODT"),
		AODT:         d.time(r.AODT, "AODT"),
		ACTY:         str(r.ACTY),
		ACRG:         str(r.ACRG),
		TERM:         str(r.TERM),
		STAT:         str(r.STAT),
		ABST:         str(r.ABST),
		ABRS:         str(r.ABRS),
		MAID:         str(r.MAID),
		CSOP:         str(r.CSOP),
		CSFT:         str(r.CSFT),
		GATE:         list(d, r.GATE, "GATE", resource),
		CKIC:         list(d, r.CKIC, "CKIC", resource),
		BELT:         list(d, r.BELT, "BELT", resource),
		STND:         list(d, r.STND, "STND", resource),
		CHUT:         list(d, r.CHUT, "CHUT", resource),
		BRDG:         list(d, r.BRDG, "BRDG", resource),
		CHOK:         list(d, r.CHOK, "CHOK", resource),
		DELY:         list(d, r.DELY, "DELY", delay),
		ROUT:         list(d, r.ROUT, "ROUT", routePoint),
		ERUT:         list(d, r.ERUT, "ERUT", routePoint),
		SRVT:         list(d, r.SRVT, "SRVT", service),
		VIPF:         list(d, r.VIPF, "VIPF", service),
	}
	return f, nil
}
