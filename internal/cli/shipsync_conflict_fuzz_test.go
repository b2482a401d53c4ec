package cli

import (
	"testing"
	"unicode/utf8"
)

// FuzzParseRow: an operator's --value file never panics the command;
// a file accepted is a row of named columns, each with a value.
func FuzzParseRow(f *testing.F) {
	for _, s := range []string{`{"id": 7, "name": "AB", "wage": 12.50, "note": null, "ok": true}`, `{}`, `[1]`, `{"a": {"b": 1}}`,
		`{"": 1}`, `{"a": 1} {"b": 2}`, `{"a":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		row, err := parseRow(data)
		if err != nil {
			if !utf8.ValidString(err.Error()) && utf8.Valid(data) {
				t.Fatalf("error text is not text: %q", err)
			}
			return
		}
		for i, c := range row.Columns {
			if c.Name == "" || c.Value == nil {
				t.Fatalf("column %d accepted without a name or value: %v", i, c)
			}
		}
	})
}
