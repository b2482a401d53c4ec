package sisxml_test

import (
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/relaytype"
)

// allocated returns the bytes f allocates. Callers are not parallel tests:
// parallel tests wait while a sequential one runs, so the count is f's alone.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecodeRefusesElementFlood: 1 MiB of <ITEM/> (~150,000 elements) is
// MALFORMED by the element limit, refused before parsing; it allocated over
// 100 MiB when every element was decoded.
func TestDecodeRefusesElementFlood(t *testing.T) {
	items := (sisxml.MaxSize - 300) / len("<ITEM/>")
	raw := []byte(flopMsg("GATE", "<GATE>"+strings.Repeat("<ITEM/>", items)+"</GATE>"))
	require.LessOrEqual(t, len(raw), sisxml.MaxSize)
	var err error
	n := allocated(func() { _, err = sisxml.Decode(raw) })
	require.ErrorIs(t, err, sisxml.ErrTooManyElements)
	require.Equal(t, relaytype.ClassMalformed, relaytype.ClassOf(err, relaytype.ClassNone))
	require.Less(t, n, uint64(1<<20), "bytes allocated to refuse it")
}

// TestDecodeLimits: both limits are configurable; the zero Limits are the
// defaults; every element counts, the root included, but not markup inside
// comments and CDATA sections.
func TestDecodeLimits(t *testing.T) {
	t.Parallel()
	raw := []byte(envelope("FDEL", "DELE", `<FDEL><FLID>1</FLID></FDEL>`)) // 9 elements
	_, err := sisxml.Limits{MaxSize: len(raw)}.Decode(raw)
	require.NoError(t, err)
	_, err = sisxml.Limits{MaxSize: len(raw) - 1}.Decode(raw)
	require.ErrorIs(t, err, sisxml.ErrTooLarge)
	require.Equal(t, relaytype.ClassMalformed, relaytype.ClassOf(err, relaytype.ClassNone))

	_, err = sisxml.Limits{MaxElements: 9}.Decode(raw)
	require.NoError(t, err)
	_, err = sisxml.Limits{MaxElements: 8}.Decode(raw)
	require.ErrorIs(t, err, sisxml.ErrTooManyElements)
	require.Equal(t, relaytype.ClassMalformed, relaytype.ClassOf(err, relaytype.ClassNone))

	hidden := []byte(envelope("FDEL", "DELE", `<!-- <a><b/> --><X><![CDATA[<c><d>]]></X><FDEL><FLID>1</FLID></FDEL>`))
	_, err = sisxml.Limits{MaxElements: 10}.Decode(hidden)
	require.NoError(t, err, "comments and CDATA hold no elements")

	// A larger MaxSize admits a message the default refuses.
	big := []byte(envelope("FDEL", "DELE", `<FDEL><FLID>1</FLID><X>`+strings.Repeat("x", sisxml.MaxSize)+`</X></FDEL>`))
	_, err = sisxml.Decode(big)
	require.ErrorIs(t, err, sisxml.ErrTooLarge)
	_, err = sisxml.Limits{MaxSize: 2 * sisxml.MaxSize}.Decode(big)
	require.NoError(t, err)
}

// TestDecodeErrorTextBounded: an error about a huge value quotes a short
// prefix of it and its length, never the value; names from the input in
// syntax errors are bounded too.
func TestDecodeErrorTextBounded(t *testing.T) {
	t.Parallel()
	v := strings.Repeat("9", 2<<20) // 2 MiB, read under a raised MaxSize
	name := strings.Repeat("N", 1<<20)
	okMeta := `<META><SNDR>AODB</SNDR><SEQN>9</SEQN><DTTM>20260301083000</DTTM><TYPE>FDEL</TYPE><STYP>DELE</STYP></META>`
	fdel := `<FDEL><FLID>1</FLID></FDEL>`
	limits := sisxml.Limits{MaxSize: 8 << 20}
	cases := []struct {
		name, raw string
		class     relaytype.ErrorClass
		limit     int
	}{
		{"time value", flopMsg("BASE", `<SODT>`+v+`</SODT>`), relaytype.ClassCodec, 1 << 10},
		{"DTTM", strings.Replace(envelope("FDEL", "DELE", fdel), "20260301083000", v, 1), relaytype.ClassCodec, 1 << 10},
		{"count value", flopMsg("DELY", `<DELY><ITEM><DURA>`+v+`</DURA></ITEM></DELY>`), relaytype.ClassCodec, 1 << 10},
		{"ADID", flopMsg("BASE", `<ADID>`+v+`</ADID>`), relaytype.ClassCodec, 1 << 10},
		{"collection text", flopMsg("GATE", `<GATE>`+v+`</GATE>`), relaytype.ClassCodec, 1 << 10},
		{"RCNT", envelope("SCHD", "DNLD", `<SCHD><RCNT>`+v+`</RCNT></SCHD>`), relaytype.ClassProtocol, 1 << 10},
		{"SCHD SODT", envelope("SCHD", "ADFT", `<SCHD><RCNT>1</RCNT><FLGT><FLID>1</FLID><SODT>`+v+`</SODT></FLGT><FLGT/></SCHD>`), relaytype.ClassMalformed, 1 << 10},
		{"ODAY", envelope("REQT", "SCHD", `<REQT><ODAY>`+v+`</ODAY></REQT>`), relaytype.ClassCodec, 1 << 10},
		// encoding/xml quotes the label itself: the last guard bounds it.
		{"charset", `<?xml version="1.0" encoding="` + name + `"?><MSG>` + okMeta + fdel + `</MSG>`, relaytype.ClassCodec, relaytype.MaxErrorText + 64},
		{"root name", `<` + name + `/>`, relaytype.ClassMalformed, 1 << 10},
		{"second root", `<MSG>` + okMeta + fdel + `</MSG><` + name + `/>`, relaytype.ClassMalformed, 1 << 10},
		{"mismatched tag", `<MSG><` + name + `></MSG>`, relaytype.ClassMalformed, relaytype.MaxErrorText + 64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := limits.Decode([]byte(tc.raw))
			require.Nil(t, m)
			require.Error(t, err)
			require.Equal(t, tc.class, relaytype.ClassOf(err, relaytype.ClassNone), "%.200s", err)
			require.LessOrEqual(t, len(err.Error()), tc.limit, "%.200s", err)
		})
	}
}
