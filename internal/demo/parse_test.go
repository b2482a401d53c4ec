package demo

import (
	"strings"
	"testing"
)

// FuzzParse: the demo decoder never panics, and whatever it accepts has four
// non-empty fields that round-trip.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"FLOP-UPDT|SNDR/FLOP-UPDT/1|K001|42", "LDM-INFO|ign-2|K000|0", "<garbled message 3", "", "a|b|c|d|e", "a||c|1", "a|b|c|-9223372036854775808"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		rec, err := parse(payload)
		if err != nil {
			return
		}
		if rec.kind == "" || rec.identity == "" || rec.key == "" {
			t.Fatalf("accepted empty field: %+v", rec)
		}
		if n := strings.Count(string(payload), "|"); n != 3 {
			t.Fatalf("accepted %d separators", n)
		}
	})
}

func TestParseClassifies(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "x", "a|b|c", "a|b|c|notanumber", "|b|c|1"} {
		if _, err := parse([]byte(bad)); err == nil {
			t.Errorf("parse(%q) accepted a malformed payload", bad)
		}
	}
	rec, err := parse([]byte("FLOP-UPDT|id|K1|7"))
	if err != nil || rec.value != 7 || rec.key != "K1" {
		t.Fatalf("parse valid: %+v, %v", rec, err)
	}
}
