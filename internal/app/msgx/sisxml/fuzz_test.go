package sisxml_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/relaytype"
)

// FuzzDecode seeds with every testdata example and asserts that Decode never
// panics, returns exactly one of message and error, classifies every error
// MALFORMED, PROTOCOL (a package's declared count) or CODEC_ERROR, and yields a body consistent with the kind.
func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(testdata, "*.xml"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seed corpus in %s: %v", testdata, err)
	}
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Add([]byte(`<?xml version="1.0" encoding="GBK"?><MSG/>`))
	f.Add([]byte(`<!DOCTYPE MSG [<!ENTITY x "y">]><MSG>&x;</MSG>`))
	f.Add([]byte(`<MSG><!-- <a><b> --><X><![CDATA[<c>]]></X><?pi <d>?></MSG>`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		// The element limit never undercounts: one element below what
		// encoding/xml reads from raw, Decode refuses raw by that limit.
		if k := countElements(raw); k > 1 && len(raw) <= sisxml.MaxSize && len(bytes.TrimSpace(raw)) > 0 {
			if _, err := (sisxml.Limits{MaxElements: k - 1}).Decode(raw); !errors.Is(err, sisxml.ErrTooManyElements) {
				t.Fatalf("%d elements read, limit %d: %v", k, k-1, err)
			}
		}
		m, err := sisxml.Decode(raw)
		if err != nil {
			if m != nil {
				t.Fatalf("message and error both returned: %v", err)
			}
			if len(err.Error()) > relaytype.MaxErrorText+32 { // the class prefix comes on top
				t.Fatalf("error text of %d bytes", len(err.Error()))
			}
			switch c := relaytype.ClassOf(err, relaytype.ClassNone); c {
			case relaytype.ClassMalformed, relaytype.ClassProtocol, relaytype.ClassCodec:
			default:
				t.Fatalf("error class %q, want MALFORMED, PROTOCOL or CODEC_ERROR: %v", c, err)
			}
			return
		}
		if m == nil {
			t.Fatal("nil message without error")
		}
		// DTTM is required too, but 00010101000000 is a valid time equal to the
		// zero time.Time, so its presence cannot be checked here.
		if m.Meta.SNDR == "" || m.Meta.TYPE == "" || m.Meta.STYP == "" || m.Meta.SEQN == "" {
			t.Fatalf("decoded an incomplete envelope: %+v", m.Meta)
		}
		bodies := 0
		for _, set := range []bool{m.Schd != nil, m.Flop != nil, m.Fdel != nil, m.Ref != nil, m.Request != nil} {
			if set {
				bodies++
			}
		}
		want := 1
		if m.Kind == sisxml.KindIgnored || m.Kind == sisxml.KindUnsupported {
			want = 0
		}
		if bodies != want {
			t.Fatalf("kind %s with %d bodies", m.Kind, bodies)
		}
		if m.Schd != nil && m.Schd.RCNT != len(m.Schd.Flights) {
			t.Fatalf("RCNT %d with %d flights", m.Schd.RCNT, len(m.Schd.Flights))
		}
		_ = sisxml.Identity(m.Meta, true)
	})
}

// countElements counts the start elements encoding/xml reads from raw before
// its first error.
func countElements(raw []byte) int {
	d := xml.NewDecoder(bytes.NewReader(raw))
	d.CharsetReader = func(_ string, in io.Reader) (io.Reader, error) { return in, nil }
	n := 0
	for {
		tok, err := d.Token()
		if err != nil {
			return n
		}
		if _, ok := tok.(xml.StartElement); ok {
			n++
		}
	}
}
