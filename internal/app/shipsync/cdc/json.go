package cdc

import (
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// object is a JSON object that keeps its members' order: Go maps lose it,
// and a schema-less record key's column order is its JSON member order.
type object struct {
	keys []string
	vals map[string]any
}

// get returns the member named k and whether it is present.
func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// maxDepth bounds JSON nesting; Debezium envelopes nest a handful of levels.
const maxDepth = 32

var (
	errDepth  = errors.New("nested too deep")
	errSyntax = errors.New("invalid JSON")
)

// parseJSON reads exactly one JSON value (RFC 8259) with surrounding
// whitespace. Values are nil, bool, json.Number, string, []any or *object.
// A duplicate object member, a nesting deeper than maxDepth or trailing
// data is an error. Strings are read as encoding/json reads them: invalid
// UTF-8 and lone surrogates become U+FFFD.
//
// It reads the bytes itself rather than through encoding/json's
// Decoder.Token, which allocates an error value for every scalar it reads
// and was a quarter of the ship client's allocations.
func parseJSON(data []byte) (any, error) {
	p := jsonParser{b: data}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.b) {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

type jsonParser struct {
	b []byte
	i int
}

func (p *jsonParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// lit consumes the literal s.
func (p *jsonParser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

func (p *jsonParser) value(depth int) (any, error) {
	if p.i >= len(p.b) {
		return nil, errSyntax
	}
	switch c := p.b[p.i]; {
	case c == '{':
		if depth >= maxDepth {
			return nil, errDepth
		}
		return p.object(depth)
	case c == '[':
		if depth >= maxDepth {
			return nil, errDepth
		}
		return p.array(depth)
	case c == '"':
		return p.str()
	case c == 't':
		if p.lit("true") {
			return true, nil
		}
	case c == 'f':
		if p.lit("false") {
			return false, nil
		}
	case c == 'n':
		if p.lit("null") {
			return nil, nil
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return nil, errSyntax
}

func (p *jsonParser) object(depth int) (any, error) {
	p.i++ // {
	o := &object{vals: map[string]any{}}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return o, nil
	}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, errors.New("object key not a string")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		if _, dup := o.vals[k]; dup {
			return nil, errors.New("duplicate object member")
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, errSyntax
		}
		p.i++
		p.space()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		o.keys = append(o.keys, k)
		o.vals[k] = v
		p.space()
		if p.i >= len(p.b) {
			return nil, errSyntax
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return o, nil
		default:
			return nil, errSyntax
		}
	}
}

func (p *jsonParser) array(depth int) (any, error) {
	p.i++ // [
	a := []any{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return a, nil
	}
	for {
		p.space()
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		p.space()
		if p.i >= len(p.b) {
			return nil, errSyntax
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return a, nil
		default:
			return nil, errSyntax
		}
	}
}

// number reads a JSON number as json.Number (its text).
func (p *jsonParser) number() (any, error) {
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case p.i < len(p.b) && p.b[p.i] >= '1' && p.b[p.i] <= '9':
		p.digits()
	default:
		return nil, errSyntax
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if !p.digits() {
			return nil, errSyntax
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if !p.digits() {
			return nil, errSyntax
		}
	}
	return json.Number(p.b[start:p.i]), nil
}

// digits consumes one or more digits.
func (p *jsonParser) digits() bool {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	return p.i > start
}

// str reads a string. The common case — no escape, valid UTF-8 — is one
// conversion of the bytes.
func (p *jsonParser) str() (string, error) {
	p.i++ // "
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return string(s), nil
		case c == '\\':
			return p.strSlow(start)
		case c < 0x20:
			return "", errSyntax
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, n := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && n == 1 {
				return p.strSlow(start)
			}
			p.i += n
		}
	}
	return "", errSyntax
}

// strSlow reads the rest of a string that has escapes or invalid UTF-8,
// from start (just after the opening quote).
func (p *jsonParser) strSlow(start int) (string, error) {
	out := make([]byte, 0, p.i-start+16)
	out = append(out, p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), nil
		case c < 0x20:
			return "", errSyntax
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return "", errSyntax
			}
			e := p.b[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := p.hex4()
				if !ok {
					return "", errSyntax
				}
				if utf16.IsSurrogate(r) {
					// A pair combines; anything else is U+FFFD, and a
					// following escape is read on its own.
					save := p.i
					if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
						p.i += 2
						if r2, ok := p.hex4(); ok {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								out = utf8.AppendRune(out, dec)
								continue
							}
						}
					}
					p.i = save
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", errSyntax
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			p.i++
		default:
			r, n := utf8.DecodeRune(p.b[p.i:])
			p.i += n
			out = utf8.AppendRune(out, r) // invalid UTF-8: U+FFFD
		}
	}
	return "", errSyntax
}

// hex4 reads four hex digits.
func (p *jsonParser) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(p.b[p.i:p.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	p.i += 4
	return rune(v), true
}
