package sisxml

import (
	"bytes"
	"unicode/utf8"
)

// scan.go holds the fast path of parse: a hand-written scanner for the subset
// of XML the AODB writes (what Encode writes, and the testdata examples), which
// fills the same rawMsg that encoding/xml's Unmarshal fills, from one pass over
// the bytes, with every leaf value a substring of one copy of the message.
//
// The subset: an optional XML declaration of one of the forms in xmlDecls,
// ASCII whitespace (space, tab, LF) around the root, elements with ASCII names
// and no attributes, no namespace prefixes, start and end tags without inner
// white space, text with the five predefined entity references and no CR, and
// at most maxScanDepth levels. Anything else — a comment, a processing
// instruction, CDATA, a DOCTYPE, a character reference, an attribute, invalid
// UTF-8, a character outside XML's range, a mismatched end tag, an early end,
// text outside the root — makes scanFast report false, and parse decodes the
// message with encoding/xml instead (parseXML). So every error, and every
// input outside the subset, keeps encoding/xml's exact outcome;
// FuzzParseFastMatchesXML checks that whatever the scanner accepts,
// encoding/xml accepts with the same rawMsg.

// xmlDecls are the XML declarations the scanner accepts; encoding/xml
// accepts each (version 1.0, UTF-8 or no encoding).
var xmlDecls = [][]byte{
	[]byte(`<?xml version="1.0" encoding="UTF-8"?>`),
	[]byte(`<?xml version="1.0" encoding="utf-8"?>`),
	[]byte(`<?xml version="1.0"?>`),
}

// maxScanDepth is the deepest element nesting the scanner reads (the schema
// needs 6: MSG/SCHD/FLGT/GATE/ITEM/SEQU); deeper input goes to encoding/xml,
// which applies its own depth limit.
const maxScanDepth = 32

// stringChunk is how many leaf values one allocation holds.
const stringChunk = 32

type scanner struct {
	raw   []byte
	s     string // raw as a string: leaf values without entities are substrings of it
	pos   int
	depth int
	strs  []string // the current chunk of leaf values (never reallocated by append)
	text  []byte   // a collection's character data, reused
}

// parseFast fills r from raw with the scanner and reports whether raw was
// inside the subset. When it reports false, r holds partial data and must be
// reset before another parse.
func parseFast(raw []byte, r *rawMsg) bool {
	sc := scanner{raw: raw}
	sc.space()
	for _, decl := range xmlDecls {
		if bytes.HasPrefix(raw[sc.pos:], decl) {
			sc.pos += len(decl)
			sc.space()
			break
		}
	}
	name, empty, ok := sc.startTag()
	if !ok || string(name) != "MSG" {
		return false
	}
	sc.s = string(raw)
	if !empty && !sc.content(name, r, nil) {
		return false
	}
	sc.space()
	return sc.pos == len(raw)
}

// space skips the white space the scanner accepts outside elements.
func (sc *scanner) space() {
	for sc.pos < len(sc.raw) {
		switch sc.raw[sc.pos] {
		case ' ', '\t', '\n':
			sc.pos++
		default:
			return
		}
	}
}

func isNameStart(b byte) bool {
	return 'A' <= b && b <= 'Z' || 'a' <= b && b <= 'z' || b == '_'
}

func isNameByte(b byte) bool {
	return isNameStart(b) || '0' <= b && b <= '9' || b == '.' || b == '-'
}

// startTag reads <NAME> or <NAME/> at pos; ok is false for anything else.
func (sc *scanner) startTag() (name []byte, empty, ok bool) {
	raw, i := sc.raw, sc.pos
	if i+1 >= len(raw) || raw[i] != '<' || !isNameStart(raw[i+1]) {
		return nil, false, false
	}
	j := i + 2
	for j < len(raw) && isNameByte(raw[j]) {
		j++
	}
	name = raw[i+1 : j]
	switch {
	case j < len(raw) && raw[j] == '>':
		sc.pos = j + 1
		return name, false, true
	case j+1 < len(raw) && raw[j] == '/' && raw[j+1] == '>':
		sc.pos = j + 2
		return name, true, true
	}
	return nil, false, false
}

// endTag reads </NAME> for the given name at pos.
func (sc *scanner) endTag(name []byte) bool {
	rest := sc.raw[sc.pos:]
	if len(rest) < len(name)+3 || rest[0] != '<' || rest[1] != '/' ||
		!bytes.Equal(rest[2:2+len(name)], name) || rest[2+len(name)] != '>' {
		return false
	}
	sc.pos += len(name) + 3
	return true
}

// textRun reads character data up to the next '<' and returns its span and
// whether it holds entity references. It reports false for anything outside
// the subset or encoding/xml's rules: CR, a control character, "]]>", invalid
// UTF-8, a character outside XML's range, an entity other than the five
// predefined ones, the end of input.
func (sc *scanner) textRun() (start, end int, entities, ok bool) {
	raw := sc.raw
	start = sc.pos
	i := start
	for i < len(raw) {
		b := raw[i]
		switch {
		case b == '<':
			sc.pos = i
			return start, i, entities, true
		case b == '&':
			n := entityLen(raw[i:])
			if n == 0 {
				return 0, 0, false, false
			}
			entities = true
			i += n
		case b == '>':
			if i-start >= 2 && raw[i-1] == ']' && raw[i-2] == ']' {
				return 0, 0, false, false
			}
			i++
		case b >= 0x20 && b < utf8.RuneSelf, b == '\t', b == '\n':
			i++
		case b < 0x20:
			return 0, 0, false, false // CR (rewritten by encoding/xml) or a control character
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 || !inCharacterRange(r) {
				return 0, 0, false, false
			}
			i += size
		}
	}
	return 0, 0, false, false // end of input inside an element
}

// inCharacterRange is XML's Char production, as encoding/xml applies it.
func inCharacterRange(r rune) bool {
	return r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF ||
		r >= 0xE000 && r <= 0xFFFD ||
		r >= 0x10000 && r <= 0x10FFFF
}

// predefined are the entity references every XML parser knows.
var predefined = [...]struct {
	ref string
	val byte
}{{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&apos;", '\''}, {"&quot;", '"'}}

// entityLen returns the length of the predefined entity reference b starts
// with, 0 for any other.
func entityLen(b []byte) int {
	for _, e := range predefined {
		if bytes.HasPrefix(b, []byte(e.ref)) {
			return len(e.ref)
		}
	}
	return 0
}

// value returns the text of raw[start:end], its entity references replaced.
func (sc *scanner) value(start, end int, entities bool) string {
	if !entities {
		return sc.s[start:end]
	}
	out := make([]byte, 0, end-start)
	for i := start; i < end; {
		if sc.raw[i] == '&' {
			for _, e := range predefined {
				if bytes.HasPrefix(sc.raw[i:end], []byte(e.ref)) {
					out = append(out, e.val)
					i += len(e.ref)
					break
				}
			}
			continue
		}
		out = append(out, sc.raw[i])
		i++
	}
	return string(out)
}

// newString stores v in the current chunk and returns its address.
func (sc *scanner) newString(v string) *string {
	if len(sc.strs) == cap(sc.strs) {
		sc.strs = make([]string, 0, stringChunk)
	}
	sc.strs = append(sc.strs, v)
	return &sc.strs[len(sc.strs)-1]
}

// elementReader reads the child elements of one raw type.
type elementReader interface {
	// child reads the child element whose start tag, named name, was just
	// read (empty: it was <NAME/>), up to and including its end tag.
	child(sc *scanner, name []byte, empty bool) bool
}

// content reads the content of the element named name whose start tag was
// just read, up to and including its end tag: child elements go to r (nil:
// skipped), character data is appended to text (nil: dropped).
func (sc *scanner) content(name []byte, r elementReader, text *[]byte) bool {
	if sc.depth++; sc.depth > maxScanDepth {
		return false
	}
	for {
		if sc.pos < len(sc.raw) && sc.raw[sc.pos] != '<' {
			start, end, entities, ok := sc.textRun()
			if !ok {
				return false
			}
			if text != nil {
				if entities {
					*text = append(*text, sc.value(start, end, true)...)
				} else {
					*text = append(*text, sc.raw[start:end]...)
				}
			}
		}
		if sc.pos+1 < len(sc.raw) && sc.raw[sc.pos+1] == '/' {
			if !sc.endTag(name) {
				return false
			}
			sc.depth--
			return true
		}
		child, empty, ok := sc.startTag()
		if !ok {
			return false
		}
		if r != nil {
			ok = r.child(sc, child, empty)
		} else if !empty {
			ok = sc.content(child, nil, nil)
		}
		if !ok {
			return false
		}
	}
}

// skip reads an element this schema does not know; encoding/xml skips it too.
func (sc *scanner) skip(name []byte, empty bool) bool {
	return empty || sc.content(name, nil, nil)
}

// leaf reads a string element into *p: its text, "" when empty. A child
// element inside it is outside the subset (encoding/xml would drop the
// child's text but keep the text around it).
func (sc *scanner) leaf(p **string, name []byte, empty bool) bool {
	if empty {
		*p = sc.newString("")
		return true
	}
	v := ""
	if sc.pos < len(sc.raw) && sc.raw[sc.pos] != '<' {
		start, end, entities, ok := sc.textRun()
		if !ok {
			return false
		}
		v = sc.value(start, end, entities)
	}
	if !sc.endTag(name) {
		return false
	}
	*p = sc.newString(v)
	return true
}

// appendNew appends a zero T to *s and returns its address (valid until the
// next append: the caller reads the element whole before that).
func appendNew[T any](s *[]T) *T {
	var zero T
	*s = append(*s, zero)
	return &(*s)[len(*s)-1]
}

// body reads an element into a struct value *v of an elementReader type.
func body[T any, PT interface {
	*T
	elementReader
}](sc *scanner, v PT, name []byte, empty bool) bool {
	return empty || sc.content(name, v, nil)
}

func (r *rawMsg) child(sc *scanner, name []byte, empty bool) bool {
	switch string(name) {
	case "META":
		return body(sc, appendNew(&r.META), name, empty)
	case "SCHD":
		return body(sc, appendNew(&r.SCHD), name, empty)
	case "FLOP":
		return body(sc, appendNew(&r.FLOP), name, empty)
	case "FDEL":
		return body(sc, appendNew(&r.FDEL), name, empty)
	case "REFD":
		return body(sc, appendNew(&r.REFD), name, empty)
	case "REQT":
		return body(sc, appendNew(&r.REQT), name, empty)
	}
	return sc.skip(name, empty)
}

func (r *rawMeta) child(sc *scanner, name []byte, empty bool) bool {
	switch string(name) {
	case "SNDR":
		return sc.leaf(&r.SNDR, name, empty)
	case "RCVR":
		return sc.leaf(&r.RCVR, name, empty)
	case "SEQN":
		return sc.leaf(&r.SEQN, name, empty)
	case "DTTM":
		return sc.leaf(&r.DTTM, name, empty)
	case "TYPE":
		return sc.leaf(&r.TYPE, name, empty)
	case "STYP":
		return sc.leaf(&r.STYP, name, empty)
	}
	return sc.skip(name, empty)
}

func (r *rawSchd) child(sc *scanner, name []byte, empty bool) bool {
	switch string(name) {
	case "RCNT":
		return sc.leaf(&r.RCNT, name, empty)
	case "RQSQ":
		return sc.leaf(&r.RQSQ, name, empty)
	case "FLGT":
		return body(sc, appendNew(&r.FLGT), name, empty)
	}
	return sc.skip(name, empty)
}

func (r *rawFlop) child(sc *scanner, name []byte, empty bool) bool {
	if string(name) == "FLGT" {
		return body(sc, appendNew(&r.FLGT), name, empty)
	}
	return sc.skip(name, empty)
}

func (r *rawFdel) child(sc *scanner, name []byte, empty bool) bool {
	if string(name) == "FLID" {
		return sc.leaf(&r.FLID, name, empty)
	}
	return sc.skip(name, empty)
}

func (r *rawRefd) child(sc *scanner, name []byte, empty bool) bool {
	switch string(name) {
	case "RTYP":
		return sc.leaf(&r.RTYP, name, empty)
	case "RCNT":
		return sc.leaf(&r.RCNT, name, empty)
	case "RQSQ":
		return sc.leaf(&r.RQSQ, name, empty)
	case "REFR":
		return body(sc, appendNew(&r.REFR), name, empty)
	}
	return sc.skip(name, empty)
}

func (r *rawRefRec) child(sc *scanner, name []byte, empty bool) bool {
	switch string(name) {
	case "RKEY":
		return sc.leaf(&r.RKEY, name, empty)
	case "RVAL":
		return sc.leaf(&r.RVAL, name, empty)
	}
	return sc.skip(name, empty)
}

func (r *rawReqt) child(sc *scanner, name []byte, empty bool) bool {
	switch string(name) {
	case "ODAY":
		return sc.leaf(&r.ODAY, name, empty)
	case "RTYP":
		return sc.leaf(&r.RTYP, name, empty)
	}
	return sc.skip(name, empty)
}

func (r *rawResource) child(sc *scanner, name []byte, empty bool) bool {
	switch string(name) {
	case "SEQU":
		return sc.leaf(&r.SEQU, name, empty)
	case "CODE":
		return sc.leaf(&r.CODE, name, empty)
	case "BTIM":
		return sc.leaf(&r.BTIM, name, empty)
	case "ETIM":
		return sc.leaf(&r.ETIM, name, empty)
	case "ABTM":
		return sc.leaf(&r.ABTM, name, empty)
	case "AETM":
		return sc.leaf(&r.AETM, name, empty)
	}
	return sc.skip(name, empty)
}

func (r *rawDelay) child(sc *scanner, name []byte, empty bool) bool {
	switch string(name) {
	case "SEQU":
		return sc.leaf(&r.SEQU, name, empty)
	case "CODE":
		return sc.leaf(&r.CODE, name, empty)
	case "DURA":
		return sc.leaf(&r.DURA, name, empty)
	case "RMRK":
		return sc.leaf(&r.RMRK, name, empty)
	}
	return sc.skip(name, empty)
}

func (r *rawRoutePoint) child(sc *scanner, name []byte, empty bool) bool {
	switch string(name) {
	case "SEQU":
		return sc.leaf(&r.SEQU, name, empty)
	case "APCD":
		return sc.leaf(&r.APCD, name, empty)
	case "SARR":
		return sc.leaf(&r.SARR, name, empty)
	case "SDEP":
		return sc.leaf(&r.SDEP, name, empty)
	}
	return sc.skip(name, empty)
}

func (r *rawService) child(sc *scanner, name []byte, empty bool) bool {
	switch string(name) {
	case "SEQU":
		return sc.leaf(&r.SEQU, name, empty)
	case "CODE":
		return sc.leaf(&r.CODE, name, empty)
	case "QNTY":
		return sc.leaf(&r.QNTY, name, empty)
	case "RMRK":
		return sc.leaf(&r.RMRK, name, empty)
	}
	return sc.skip(name, empty)
}

// scanList reads a collection element into *p. A repeated collection element
// continues the same list, as encoding/xml does: its items are appended and
// its character data replaces the earlier occurrence's.
func scanList[T any, PT interface {
	*T
	elementReader
}](sc *scanner, p **rawList[T], name []byte, empty bool) bool {
	if *p == nil {
		*p = new(rawList[T])
	}
	l := *p
	sc.text = sc.text[:0]
	if !empty && !sc.content(name, (*itemReader[T, PT])(l), &sc.text) {
		return false
	}
	l.Text = ""
	if len(sc.text) > 0 {
		l.Text = string(sc.text)
	}
	return true
}

// itemReader reads the ITEM children of a rawList.
type itemReader[T any, PT interface {
	*T
	elementReader
}] rawList[T]

func (r *itemReader[T, PT]) child(sc *scanner, name []byte, empty bool) bool {
	if string(name) == "ITEM" {
		return body(sc, PT(appendNew(&r.ITEM)), name, empty)
	}
	return sc.skip(name, empty)
}

func (r *rawFlight) child(sc *scanner, name []byte, empty bool) bool {
	switch string(name) {
	case "FLID":
		return sc.leaf(&r.FLID, name, empty)
	case "FLNO":
		return sc.leaf(&r.FLNO, name, empty)
	case "AWCD":
		return sc.leaf(&r.AWCD, name, empty)
	case "ADID":
		return sc.leaf(&r.ADID, name, empty)
	case "FLTY":
		return sc.leaf(&r.FLTY, name, empty)
	case "SODT":
		return sc.leaf(&r.SODT, name, empty)
	case "EODT":
		return sc.leaf(&r.EODT, name, empty)
	case "AODT":
		return sc.leaf(&r.AODT, name, empty)
	case "ACTY":
		return sc.leaf(&r.ACTY, name, empty)
	case "ACRG":
		return sc.leaf(&r.ACRG, name, empty)
	case "TERM":
		return sc.leaf(&r.TERM, name, empty)
	case "STAT":
		return sc.leaf(&r.STAT, name, empty)
	case "ABST":
		return sc.leaf(&r.ABST, name, empty)
	case "ABRS":
		return sc.leaf(&r.ABRS, name, empty)
	case "MAID":
		return sc.leaf(&r.MAID, name, empty)
	case "CSOP":
		return sc.leaf(&r.CSOP, name, empty)
	case "CSFT":
		return sc.leaf(&r.CSFT, name, empty)
	case "GATE":
		return scanList(sc, &r.GATE, name, empty)
	case "CKIC":
		return scanList(sc, &r.CKIC, name, empty)
	case "BELT":
		return scanList(sc, &r.BELT, name, empty)
	case "STND":
		return scanList(sc, &r.STND, name, empty)
	case "CHUT":
		return scanList(sc, &r.CHUT, name, empty)
	case "BRDG":
		return scanList(sc, &r.BRDG, name, empty)
	case "CHOK":
		return scanList(sc, &r.CHOK, name, empty)
	case "DELY":
		return scanList(sc, &r.DELY, name, empty)
	case "ROUT":
		return scanList(sc, &r.ROUT, name, empty)
	case "ERUT":
		return scanList(sc, &r.ERUT, name, empty)
	case "SRVT":
		return scanList(sc, &r.SRVT, name, empty)
	case "VIPF":
		return scanList(sc, &r.VIPF, name, empty)
	}
	return sc.skip(name, empty)
}
