package cdc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"testing"
)

// referenceParseJSON is the first implementation of parseJSON, on
// encoding/json's Decoder.Token (which allocates an error for every scalar):
// kept as the reference the byte-level parser is fuzzed against.
func referenceParseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := referenceParseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

func referenceParseValue(dec *json.Decoder, depth int) (any, error) {
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
				v, err := referenceParseValue(dec, depth+1)
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
				v, err := referenceParseValue(dec, depth+1)
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

// FuzzParseJSON checks the byte-level parser against the reference on any
// input: both accept or both refuse, and what they read is the same.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[true,false,null],"c":"x\u00e9\ud83d\ude00"}`, `[]`, `{}`, `-0.5e+3`,
		`"\ud800"`, `"\ud800\u0041"`, "\"\xff\"", `{"a":1,"a":2}`, `[1,]`, `01`, `1.`, ` null `, `"\/\b\f\n\r\t"`,
		`{"k" : { "n" : [ 1 , 2 ] } }`, `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`} {
		f.Add([]byte(s))
	}
	for _, name := range []string{"schema/insert.json", "schema/update.json", "schemaless/pkchange_delete.json"} {
		if b, err := os.ReadFile("testdata/" + name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, gerr := parseJSON(data)
		want, werr := referenceParseJSON(data)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("parseJSON(%q): error %v, reference %v", data, gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("parseJSON(%q) = %#v, reference %#v", data, got, want)
		}
	})
}

// BenchmarkParseJSON compares the byte-level parser with the reference on
// a Debezium envelope with its schema.
func BenchmarkParseJSON(b *testing.B) {
	data, err := os.ReadFile("testdata/schema/update.json")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		parse func([]byte) (any, error)
	}{{"bytes", parseJSON}, {"reference", referenceParseJSON}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := c.parse(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
