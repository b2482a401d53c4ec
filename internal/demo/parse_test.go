package demo

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/relayhq/relay/relaytype"
)

// FuzzParse: the demo decoder never panics, whatever it accepts has four
// non-empty fields that round-trip, and its error text stays short.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"FLOP-UPDT|SNDR/FLOP-UPDT/1|K001|42", "LDM-INFO|ign-2|K000|0", "<garbled message 3", "", "a|b|c|d|e", "a||c|1", "a|b|c|-9223372036854775808", "a|b|c|" + strings.Repeat("9", 300)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		rec, err := parse(payload, MaxPayloadDefault)
		if err != nil {
			if len(err.Error()) > 512 {
				t.Fatalf("error text of %d bytes: %.100s", len(err.Error()), err)
			}
			return
		}
		if len(payload) > MaxPayloadDefault {
			t.Fatalf("accepted %d bytes, limit %d", len(payload), MaxPayloadDefault)
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
		if _, err := parse([]byte(bad), MaxPayloadDefault); err == nil {
			t.Errorf("parse(%q) accepted a malformed payload", bad)
		}
	}
	rec, err := parse([]byte("FLOP-UPDT|id|K1|7"), MaxPayloadDefault)
	if err != nil || rec.value != 7 || rec.key != "K1" {
		t.Fatalf("parse valid: %+v, %v", rec, err)
	}
}

// TestDecodeRefusesLargePayload: a payload over MaxPayload is MALFORMED
// unread — a 100 MiB field once became a 100 MiB error after 750 MiB of
// allocations — and a bad field under the limit is quoted by a short prefix.
// Not parallel, so the allocation count is Decode's alone.
func TestDecodeRefusesLargePayload(t *testing.T) {
	h := &Handler{Queue: "p"}
	payload := []byte("FLOP-UPDT|id|K1|" + strings.Repeat("9", 100<<20))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := h.Decode(context.Background(), &relaytype.Message{ID: 1, Payload: payload})
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) || relaytype.ClassOf(err, relaytype.ClassNone) != relaytype.ClassMalformed {
		t.Fatalf("want MALFORMED wrapping ErrTooLarge, got %.200v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 { // generous: 100 MiB were copied before
		t.Fatalf("refusing a 100 MiB payload allocated %d bytes", n)
	}
	if len(err.Error()) > 256 {
		t.Fatalf("error text of %d bytes", len(err.Error()))
	}

	// A bad field under the limit is quoted by a short prefix and its length.
	_, err = h.Decode(context.Background(), &relaytype.Message{ID: 2, Payload: []byte("FLOP-UPDT|id|K1|" + strings.Repeat("x", 3<<10))})
	if !errors.Is(err, strconv.ErrSyntax) || len(err.Error()) > 256 || !strings.Contains(err.Error(), "(3072 bytes)") {
		t.Fatalf("want a short error quoting a prefix and the length, got %d bytes: %.300v", len(err.Error()), err)
	}
}
