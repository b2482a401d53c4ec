package sisxml

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaytype"
)

// scanSeeds are inputs at the edges of the scanner's subset: each is either
// read by parseFast or handed to encoding/xml, and FuzzParseFastMatchesXML
// checks the two agree on all of them and on what the fuzzer derives.
var scanSeeds = []string{
	`<MSG/>`,
	` <MSG></MSG> `,
	"\t\n<?xml version=\"1.0\"?>\n<MSG><META/></MSG>\n",
	`<?xml version="1.0" encoding="utf-8"?><MSG><X><Y>t</Y></X></MSG>`,
	`<?xml version="1.0" encoding="GBK"?><MSG/>`,
	`<?xml version="1.1"?><MSG/>`,
	`<?xml version='1.0'?><MSG/>`,
	`<MSG><META><SNDR>A&amp;B&lt;&gt;&apos;&quot;</SNDR><SNDR>2</SNDR></META></MSG>`,
	`<MSG><META><SNDR>A&#38;B</SNDR></META></MSG>`,
	`<MSG><META><SNDR>A&nbsp;B</SNDR></META></MSG>`,
	`<MSG><META><SNDR>A&amp B</SNDR></META></MSG>`,
	`<MSG><META><SNDR>a]]>b</SNDR></META></MSG>`,
	`<MSG><META><SNDR>a]]&gt;b</SNDR></META></MSG>`,
	"<MSG><META><SNDR>a\rb</SNDR></META></MSG>",
	"<MSG><META><SNDR>a\x00b</SNDR></META></MSG>",
	"<MSG><META><SNDR>a\xffb</SNDR></META></MSG>",
	"<MSG><META><SNDR>\u00e9\uFFFD\U0001F600</SNDR></META></MSG>",
	"<MSG><META><SNDR>\uFFFE</SNDR></META></MSG>",
	`<MSG><META><SNDR>a<X/>b</SNDR></META></MSG>`,
	`<MSG><META><SNDR>a</SNDR ></META></MSG>`,
	`<MSG><META ><SNDR>a</SNDR></META></MSG>`,
	`<MSG><META><SNDR a="1">a</SNDR></META></MSG>`,
	`<MSG><META><x:SNDR>a</x:SNDR></META></MSG>`,
	`<MSG><META><SNDR>a</RCVR></META></MSG>`,
	`<MSG><META><SNDR>a</SNDR></META>`,
	`<MSG><META><SNDR>a`,
	`<MSG></MSG><MSG/>`,
	`<MSG></MSG>x`,
	`x<MSG></MSG>`,
	`<msg></msg>`,
	`<MSG><1A/></MSG>`,
	`<MSG><-A/></MSG>`,
	`<MSG><A.b-c_1/></MSG>`,
	`<MSG><!-- c --></MSG>`,
	`<MSG><![CDATA[x]]></MSG>`,
	`<!DOCTYPE MSG><MSG/>`,
	`<MSG><FLOP><FLGT><FLID>1</FLID><GATE> x <ITEM/> y </GATE><GATE><ITEM><CODE>A</CODE></ITEM></GATE></FLGT></FLOP></MSG>`,
	`<MSG><FLOP><FLGT><GATE>a</GATE><GATE/></FLGT></FLOP></MSG>`,
	`<MSG><FLOP><FLGT><GATE><ITEM><SEQU>1<SEQU>2</SEQU></SEQU></ITEM><ITEM><GATE><ITEM/></GATE></ITEM></GATE></FLGT></FLOP></MSG>`,
	`<MSG><SCHD><RCNT>1</RCNT><FLGT/><FLGT><FLID>2</FLID></FLGT></SCHD><SCHD/></MSG>`,
	`<MSG><REFD><REFR><RKEY>k</RKEY><RVAL>v</RVAL></REFR><REFR/></REFD><REQT><ODAY>20260301</ODAY></REQT><FDEL><FLID>1</FLID></FDEL></MSG>`,
	strings.Repeat("<A>", maxScanDepth+2) + strings.Repeat("</A>", maxScanDepth+2),
	`<MSG>` + strings.Repeat("<A>", maxScanDepth) + strings.Repeat("</A>", maxScanDepth) + `</MSG>`,
}

func scanCorpus(tb testing.TB) [][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "*.xml"))
	require.NoError(tb, err)
	require.NotEmpty(tb, files)
	var out [][]byte
	for _, path := range files {
		raw, err := os.ReadFile(path)
		require.NoError(tb, err)
		out = append(out, raw)
	}
	for _, s := range scanSeeds {
		out = append(out, []byte(s))
	}
	return out
}

// checkFastMatchesXML: whatever parseFast accepts, encoding/xml accepts with
// the same rawMsg; and Decode gives the same message or the same error
// (text and class) with the scanner as with encoding/xml alone.
func checkFastMatchesXML(t *testing.T, raw []byte) (fast bool) {
	var fr, xr rawMsg
	fast = parseFast(raw, &fr)
	xerr := parseXML(raw, &xr)
	if fast {
		if xerr != nil {
			t.Fatalf("scanner accepted what encoding/xml refuses (%v): %q", xerr, raw)
		}
		if !reflect.DeepEqual(fr, xr) {
			t.Fatalf("scanner and encoding/xml differ on %q:\nscanner  %+v\nxml      %+v", raw, fr, xr)
		}
	}
	m1, err1 := Limits{}.decode(raw, parse)
	m2, err2 := Limits{}.decode(raw, parseXML)
	if (err1 == nil) != (err2 == nil) || err1 != nil && (err1.Error() != err2.Error() ||
		relaytype.ClassOf(err1, relaytype.ClassNone) != relaytype.ClassOf(err2, relaytype.ClassNone)) {
		t.Fatalf("Decode errors differ on %q: %v / %v", raw, err1, err2)
	}
	if !reflect.DeepEqual(m1, m2) {
		t.Fatalf("Decode results differ on %q:\n%+v\n%+v", raw, m1, m2)
	}
	return fast
}

// TestParseFastMatchesXML runs the differential check on the corpus, and
// checks the scanner reads every testdata example (the AODB's own form)
// itself, so the fast path is the one taken in production.
func TestParseFastMatchesXML(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "*.xml"))
	require.NoError(t, err)
	for _, path := range files {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		require.True(t, checkFastMatchesXML(t, raw), "%s is inside the scanner's subset", path)
		m, err := Decode(raw)
		require.NoError(t, err, path)
		enc, err := Encode(m)
		require.NoError(t, err, path)
		require.True(t, checkFastMatchesXML(t, enc), "Encode's output of %s is inside the scanner's subset", path)
	}
	for _, s := range scanSeeds {
		checkFastMatchesXML(t, []byte(s))
	}
}

// FuzzParseFastMatchesXML is the differential fuzz test of the scanner
// against encoding/xml (checkFastMatchesXML).
func FuzzParseFastMatchesXML(f *testing.F) {
	for _, raw := range scanCorpus(f) {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > MaxSize {
			return
		}
		checkFastMatchesXML(t, raw)
	})
}

// BenchmarkDecode decodes every testdata example once per iteration, with
// the scanner (parse) and with encoding/xml alone (parseXML).
func BenchmarkDecode(b *testing.B) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "*.xml"))
	require.NoError(b, err)
	var msgs [][]byte
	for _, path := range files {
		raw, err := os.ReadFile(path)
		require.NoError(b, err)
		msgs = append(msgs, raw)
	}
	for _, bc := range []struct {
		name  string
		parse func([]byte, *rawMsg) error
	}{{"scanner", parse}, {"encoding-xml", parseXML}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, raw := range msgs {
					if _, err := (Limits{}).decode(raw, bc.parse); err != nil && relaytype.ClassOf(err, relaytype.ClassNone) == relaytype.ClassNone {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs))/1000, "µs/msg")
		})
	}
}
