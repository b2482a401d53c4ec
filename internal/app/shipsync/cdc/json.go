package cdc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
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

var errDepth = errors.New("nested too deep")

// parseJSON reads exactly one JSON value. Values are nil, bool,
// json.Number, string, []any or *object. A duplicate object member, a
// nesting deeper than maxDepth or trailing data is an error.
func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

func parseValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxDepth {
			return nil, errDepth
		}
		switch t {
		case '{':
			o := &object{vals: map[string]any{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("object key not a string")
				}
				if _, dup := o.vals[k]; dup {
					return nil, errors.New("duplicate object member")
				}
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				o.keys = append(o.keys, k)
				o.vals[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			a := []any{}
			for dec.More() {
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return a, nil
		default:
			return nil, errors.New("unexpected delimiter")
		}
	default:
		return tok, nil
	}
}
