package sisxml_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/sisxml"
)

// TestEncodeTestdata: every example decodes, encodes and decodes back to the
// same message, and encoding the table test's expectation reproduces it.
func TestEncodeTestdata(t *testing.T) {
	t.Parallel()
	want := expected()
	files, err := filepath.Glob(filepath.Join(testdata, "*.xml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			m, err := sisxml.Decode(raw)
			require.NoError(t, err)
			out, err := sisxml.Encode(m)
			require.NoError(t, err)
			back, err := sisxml.Decode(out)
			require.NoError(t, err, "%s", out)
			require.Equal(t, m, back, "%s", out)

			out, err = sisxml.Encode(want[name])
			require.NoError(t, err)
			back, err = sisxml.Decode(out)
			require.NoError(t, err, "%s", out)
			require.Equal(t, want[name], back)
		})
	}
}

// TestEncodeFormat pins the exact output: element order, indentation, times,
// <X/> for Empty, omitted Absent elements, RCNT from the records, <ITEM/>.
func TestEncodeFormat(t *testing.T) {
	t.Parallel()
	m := &sisxml.Message{
		Meta: sisxml.Meta{SNDR: "AODB", SEQN: "7", DTTM: ts("20260301083000").Value, TYPE: "SCHD", STYP: "DNLD"},
		Kind: sisxml.KindSchd,
		Schd: &sisxml.Schedule{Subtype: "DNLD", RCNT: 99, Flights: []sisxml.Flight{{
			FLID: "1", FLNO: s("CA1"), SODT: ts("20260301093000"), TERM: sisxml.Cleared[string](),
			GATE: sisxml.Items(sisxml.Resource{SEQU: n(0), CODE: s("B12"), BTIM: ts("20260301084000")}, sisxml.Resource{}),
			VIPF: sisxml.Items[sisxml.Service](),
		}}},
	}
	out, err := sisxml.Encode(m)
	require.NoError(t, err)
	require.Equal(t, `<?xml version="1.0" encoding="UTF-8"?>
<MSG>
  <META>
    <SNDR>AODB</SNDR>
    <SEQN>7</SEQN>
    <DTTM>20260301083000</DTTM>
    <TYPE>SCHD</TYPE>
    <STYP>DNLD</STYP>
  </META>
  <SCHD>
    <RCNT>1</RCNT>
    <FLGT>
      <FLID>1</FLID>
      <FLNO>CA1</FLNO>
      <SODT>20260301093000</SODT>
      <TERM/>
      <GATE>
        <ITEM><SEQU>0</SEQU><CODE>B12</CODE><BTIM>20260301084000</BTIM></ITEM>
        <ITEM/>
      </GATE>
      <VIPF/>
    </FLGT>
  </SCHD>
</MSG>
`, string(out))

	// Ignored and unsupported kinds: the envelope alone.
	out, err = sisxml.Encode(&sisxml.Message{Meta: aodb("8", "LDM", "LDM"), Kind: sisxml.KindIgnored})
	require.NoError(t, err)
	require.Contains(t, string(out), "<RCVR>RMS</RCVR>")
	require.True(t, strings.HasSuffix(string(out), "  </META>\n</MSG>\n"), "%s", out)
}

// TestEncodeTimeWallClock: a time is written as the wall clock of its own
// location, to the second; Decode holds it in UTC.
func TestEncodeTimeWallClock(t *testing.T) {
	t.Parallel()
	shanghai := time.FixedZone("CST", 8*3600)
	m := &sisxml.Message{
		Meta:    sisxml.Meta{SNDR: "RMS", SEQN: "1", DTTM: time.Date(2026, 3, 1, 8, 30, 0, 999_000_000, shanghai), TYPE: "REQT", STYP: "SCHD"},
		Kind:    sisxml.KindRequest,
		Request: &sisxml.Request{Subtype: "SCHD", ODAY: s("20260301")},
	}
	out, err := sisxml.Encode(m)
	require.NoError(t, err)
	require.Contains(t, string(out), "<DTTM>20260301083000</DTTM>")
	back, err := sisxml.Decode(out)
	require.NoError(t, err)
	require.Equal(t, ts("20260301083000").Value, back.Meta.DTTM)
}

// TestEncodeEscapes: markup characters, an inner \r and \n and non-ASCII
// text survive the round trip.
func TestEncodeEscapes(t *testing.T) {
	t.Parallel()
	const v = "a<b>&c]]>d\r\ne\tf \"g' 航班"
	m := &sisxml.Message{Meta: aodb("9", "FLOP", "DELY"), Kind: sisxml.KindFlop, Flop: &sisxml.FlightOp{Subtype: "DELY",
		Flight: sisxml.Flight{FLID: "F&1", DELY: sisxml.Items(sisxml.Delay{RMRK: s(v)})}}}
	out, err := sisxml.Encode(m)
	require.NoError(t, err)
	back, err := sisxml.Decode(out)
	require.NoError(t, err, "%s", out)
	require.Equal(t, m, back)
}

func TestEncodeRejects(t *testing.T) {
	t.Parallel()
	flopWith := func(styp string, f sisxml.Flight) *sisxml.Message {
		f.FLID = "1"
		return &sisxml.Message{Meta: aodb("1", "FLOP", styp), Kind: sisxml.KindFlop, Flop: &sisxml.FlightOp{Subtype: styp, Flight: f}}
	}
	fdel := func(edit func(m *sisxml.Message)) *sisxml.Message {
		m := &sisxml.Message{Meta: aodb("1", "FDEL", "DELE"), Kind: sisxml.KindFdel, Fdel: &sisxml.FlightDelete{FLID: "1"}}
		edit(m)
		return m
	}
	huge := make([]sisxml.Flight, 0, 20000)
	for range 20000 {
		huge = append(huge, sisxml.Flight{FLID: "100001", FLNO: s("CA1234"), AWCD: s("CA"), TERM: s("T2")})
	}
	cases := []struct {
		name string
		m    *sisxml.Message
		want string
	}{
		{"nil", nil, "nil message"},
		{"kind mismatch", fdel(func(m *sisxml.Message) { m.Kind = sisxml.KindFlop }), "does not match"},
		{"body of another kind", fdel(func(m *sisxml.Message) { m.Fdel, m.Ref = nil, &sisxml.RefData{RTYP: "A"} }), "body"},
		{"two bodies", fdel(func(m *sisxml.Message) { m.Request = &sisxml.Request{} }), "body"},
		{"ignored with body", &sisxml.Message{Meta: aodb("1", "LDM", "X"), Kind: sisxml.KindIgnored, Fdel: &sisxml.FlightDelete{FLID: "1"}}, "body"},
		{"lower-case TYPE", fdel(func(m *sisxml.Message) { m.Meta.TYPE = "fdel"; m.Kind = sisxml.KindUnsupported }), "upper-case"},
		{"SEQN missing", fdel(func(m *sisxml.Message) { m.Meta.SEQN = "" }), "SEQN missing"},
		{"SNDR with separator", fdel(func(m *sisxml.Message) { m.Meta.SNDR = "A|B" }), "'|'"},
		{"RCVR not trimmed", fdel(func(m *sisxml.Message) { m.Meta.RCVR = " RMS" }), "white space"},
		{"DTTM year", fdel(func(m *sisxml.Message) { m.Meta.DTTM = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }), "DTTM"},
		{"FDEL FLID missing", fdel(func(m *sisxml.Message) { m.Fdel.FLID = "" }), "FLID missing"},
		{"FLOP carries nothing", flopWith("GATE", sisxml.Flight{}), "none of its elements"},
		{"FLOP foreign element", flopWith("GATE", sisxml.Flight{GATE: sisxml.Items[sisxml.Resource](), STND: sisxml.Items[sisxml.Resource]()}), "owned by FLOP-STND"},
		{"FLOP subtype mismatch", func() *sisxml.Message {
			m := flopWith("GATE", sisxml.Flight{GATE: sisxml.Items[sisxml.Resource]()})
			m.Flop.Subtype = "STND"
			return m
		}(), "Subtype"},
		{"Set empty string", flopWith("BASE", sisxml.Flight{FLNO: s("")}), "empty value"},
		{"Set untrimmed string", flopWith("BASE", sisxml.Flight{FLNO: s("CA1 ")}), "white space"},
		{"control character", flopWith("BASE", sisxml.Flight{FLNO: s("CA\x01")}), "not an XML character"},
		{"invalid UTF-8", flopWith("BASE", sisxml.Flight{FLNO: s("CA\xff")}), "not UTF-8"},
		{"ADID", flopWith("BASE", sisxml.Flight{ADID: s("a")}), "ADID"},
		{"negative integer", flopWith("DELY", sisxml.Flight{DELY: sisxml.Items(sisxml.Delay{DURA: n(-1)})}), "DURA"},
		{"integer overflow", flopWith("VIPF", sisxml.Flight{VIPF: sisxml.Items(sisxml.Service{QNTY: n(math.MaxInt32 + 1)})}), "QNTY"},
		{"time year", flopWith("BASE", sisxml.Flight{SODT: sisxml.Val(time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC))}), "SODT"},
		{"Set list without items", flopWith("GATE", sisxml.Flight{GATE: sisxml.List[sisxml.Resource]{Presence: sisxml.Set}}), "without items"},
		{"invalid presence", flopWith("BASE", sisxml.Flight{FLNO: sisxml.Field[string]{Presence: 7}}), "invalid presence"},
		{"REQT-SCHD ODAY missing", &sisxml.Message{Meta: aodb("1", "REQT", "SCHD"), Kind: sisxml.KindRequest, Request: &sisxml.Request{Subtype: "SCHD"}}, "ODAY missing"},
		{"REQT-SCHD ODAY format", &sisxml.Message{Meta: aodb("1", "REQT", "SCHD"), Kind: sisxml.KindRequest, Request: &sisxml.Request{Subtype: "SCHD", ODAY: s("2026-03-01")}}, "YYYYMMDD"},
		{"REQT-REFD RTYP missing", &sisxml.Message{Meta: aodb("1", "REQT", "REFD"), Kind: sisxml.KindRequest, Request: &sisxml.Request{Subtype: "REFD"}}, "RTYP missing"},
		{"REFD RKEY missing", &sisxml.Message{Meta: aodb("1", "REFD", "RESP"), Kind: sisxml.KindRef, Ref: &sisxml.RefData{RTYP: "A", Records: []sisxml.RefRecord{{}}}}, "RKEY missing"},
		{"SCHD FLID missing", &sisxml.Message{Meta: aodb("1", "SCHD", "DNLD"), Kind: sisxml.KindSchd, Schd: &sisxml.Schedule{Subtype: "DNLD", Flights: []sisxml.Flight{{}}}}, "FLGT[1]: FLID missing"},
		{"too large", &sisxml.Message{Meta: aodb("1", "SCHD", "DNLD"), Kind: sisxml.KindSchd, Schd: &sisxml.Schedule{Subtype: "DNLD", Flights: huge}}, "message too large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := sisxml.Encode(tc.m)
			require.Error(t, err)
			require.Nil(t, out)
			require.Contains(t, err.Error(), tc.want)
			// One package prefix, however the error was wrapped.
			require.NotContains(t, err.Error(), "sisxml: sisxml:")
			require.Equal(t, 1, strings.Count(err.Error(), "sisxml:"), "%s", err)
		})
	}
}

// FuzzEncodeRoundTrip: for every input Decode accepts, Encode succeeds and
// Decode(Encode(m)) equals m. Encode may refuse only a message whose encoding
// grew past MaxSize (escaping and indentation can lengthen a near-limit input).
func FuzzEncodeRoundTrip(f *testing.F) {
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
	f.Add([]byte(`<MSG><META><SNDR>a&amp;b</SNDR><SEQN>&#xD;1&#xD;x</SEQN><DTTM>00000101000000</DTTM><TYPE>ZZ</TYPE><STYP>&lt;</STYP></META></MSG>`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := sisxml.Decode(raw)
		if err != nil {
			return
		}
		out, err := sisxml.Encode(m)
		if errors.Is(err, sisxml.ErrTooLarge) {
			return
		}
		if err != nil {
			t.Fatalf("Encode of a decoded message: %v\ninput: %q", err, raw)
		}
		back, err := sisxml.Decode(out)
		if err != nil {
			t.Fatalf("Decode(Encode(m)): %v\nencoded: %s", err, out)
		}
		require.Equal(t, m, back, "encoded: %s", out)
	})
}
