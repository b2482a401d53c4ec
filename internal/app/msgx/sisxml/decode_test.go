package sisxml_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/sisxml"
	"github.com/relayhq/relay/relaytype"
)

const testdata = "../testdata"

func ts(s string) sisxml.Field[time.Time] {
	t, err := time.ParseInLocation(sisxml.TimeLayout, s, time.UTC)
	if err != nil {
		panic(err)
	}
	return sisxml.Val(t)
}

func s(v string) sisxml.Field[string] { return sisxml.Val(v) }
func n(v int) sisxml.Field[int]       { return sisxml.Val(v) }

func meta(sndr, rcvr, seqn, typ, styp string) sisxml.Meta {
	return sisxml.Meta{SNDR: sndr, RCVR: rcvr, SEQN: seqn, DTTM: ts("20260301083000").Value, TYPE: typ, STYP: styp}
}

func aodb(seqn, typ, styp string) sisxml.Meta { return meta("AODB", "RMS", seqn, typ, styp) }

func res(seq int, code string) sisxml.Resource { return sisxml.Resource{SEQU: n(seq), CODE: s(code)} }

func flop(seqn, styp string, f sisxml.Flight) *sisxml.Message {
	f.FLID = "100001"
	return &sisxml.Message{Meta: aodb(seqn, "FLOP", styp), Kind: sisxml.KindFlop, Flop: &sisxml.FlightOp{Subtype: styp, Flight: f}}
}

var sharedFlight = sisxml.Flight{
	FLID: "100002", FLNO: s("MU5678"), AWCD: s("MU"), ADID: s("D"), SODT: ts("20260301093000"),
	MAID: s("100001"), CSOP: s("MU"), CSFT: s("MU5678"),
}

func expected() map[string]*sisxml.Message {
	gate := res(1, "B12")
	gate.BTIM, gate.ETIM = ts("20260301084000"), ts("20260301091500")
	c1, c2 := res(1, "C01"), res(2, "C02")
	c1.BTIM, c1.ETIM, c2.BTIM, c2.ETIM = ts("20260301070000"), ts("20260301085000"), ts("20260301070000"), ts("20260301085000")
	full := sisxml.Flight{
		FLID: "100001", FLNO: s("CA1234"), AWCD: s("CA"), ADID: s("D"), FLTY: s("W/Z"),
		SODT: ts("20260301093000"), EODT: ts("20260301094500"), ACTY: s("A320"), ACRG: s("B-1234"), TERM: s("T2"),
		STAT: s("SCH"),
		GATE: sisxml.Items(gate),
		CKIC: sisxml.Items(c1, c2),
		STND: sisxml.Items(res(1, "215")),
		CHUT: sisxml.Items(sisxml.Resource{CODE: s("CH7")}),
		ROUT: sisxml.Items(
			sisxml.RoutePoint{SEQU: n(1), APCD: s("PEK"), SDEP: ts("20260301093000")},
			sisxml.RoutePoint{SEQU: n(2), APCD: s("SHA"), SARR: ts("20260301113000")}),
		SRVT: sisxml.Items(sisxml.Service{CODE: s("WCHR"), QNTY: n(2)}),
		VIPF: sisxml.Items[sisxml.Service](),
	}
	g1, g2 := res(1, "B14"), res(1, "B14")
	g1.BTIM, g1.ETIM, g2.ABTM = ts("20260301085000"), ts("20260301092000"), ts("20260301085500")
	belt := res(1, "07")
	belt.ABTM, belt.AETM = ts("20260301114000"), ts("20260301120500")
	stnd := res(1, "216")
	stnd.BTIM, stnd.ETIM = ts("20260301080000"), ts("20260301094000")
	brdg := res(1, "BR12")
	brdg.ABTM, brdg.AETM = ts("20260301084500"), ts("20260301092800")
	ignored := func(seqn, typ, styp string) *sisxml.Message {
		return &sisxml.Message{Meta: aodb(seqn, typ, styp), Kind: sisxml.KindIgnored}
	}
	return map[string]*sisxml.Message{
		"schd_dnld.xml": {Meta: aodb("1001", "SCHD", "DNLD"), Kind: sisxml.KindSchd,
			Schd: &sisxml.Schedule{Subtype: "DNLD", RCNT: 2, Flights: []sisxml.Flight{full, sharedFlight}}},
		"schd_resp.xml": {Meta: aodb("1002", "SCHD", "RESP"), Kind: sisxml.KindSchd,
			Schd: &sisxml.Schedule{Subtype: "RESP", RQSQ: s("77"), RCNT: 1, Flights: []sisxml.Flight{sharedFlight}}},
		"schd_adft.xml": {Meta: aodb("1003", "SCHD", "ADFT"), Kind: sisxml.KindSchd,
			Schd: &sisxml.Schedule{Subtype: "ADFT", RCNT: 1, Flights: []sisxml.Flight{{
				FLID: "100003", FLNO: s("CA9999"), ADID: s("A"), SODT: ts("20260301230000"), TERM: sisxml.Cleared[string](),
			}}}},
		"flop_base.xml": flop("2001", "BASE", sisxml.Flight{EODT: ts("20260301100000"), ACRG: s("B-5678"), FLTY: sisxml.Cleared[string]()}),
		"flop_stat.xml": flop("2002", "STAT", sisxml.Flight{STAT: s("DLY"), ABST: s("DELAY"), ABRS: s("WX")}),
		"flop_shar.xml": flop("2003", "SHAR", sisxml.Flight{MAID: sisxml.Cleared[string](), CSOP: sisxml.Cleared[string](), CSFT: sisxml.Cleared[string]()}),
		"flop_gate.xml": flop("2004", "GATE", sisxml.Flight{GATE: sisxml.Items(g1, g2)}),
		"flop_ckic.xml": flop("2005", "CKIC", sisxml.Flight{CKIC: sisxml.Items[sisxml.Resource]()}),
		"flop_belt.xml": flop("2006", "BELT", sisxml.Flight{BELT: sisxml.Items(belt)}),
		"flop_stnd.xml": flop("2007", "STND", sisxml.Flight{STND: sisxml.Items(stnd)}),
		"flop_chut.xml": flop("2008", "CHUT", sisxml.Flight{CHUT: sisxml.Items(res(1, "CH3"), res(2, "CH4"))}),
		"flop_brdg.xml": flop("2009", "BRDG", sisxml.Flight{BRDG: sisxml.Items(brdg)}),
		"flop_chok.xml": flop("2010", "CHOK", sisxml.Flight{CHOK: sisxml.Items(sisxml.Resource{ABTM: ts("20260301084200"), AETM: ts("20260301093100")})}),
		"flop_dely.xml": flop("2011", "DELY", sisxml.Flight{DELY: sisxml.Items(
			sisxml.Delay{SEQU: n(1), CODE: s("WX"), DURA: n(35), RMRK: s("thunderstorm")},
			sisxml.Delay{SEQU: n(2), CODE: s("ATC"), DURA: n(10)})}),
		"flop_rout.xml": flop("2012", "ROUT", sisxml.Flight{ROUT: sisxml.Items(
			sisxml.RoutePoint{SEQU: n(1), APCD: s("PEK"), SDEP: ts("20260301093000")},
			sisxml.RoutePoint{SEQU: n(2), APCD: s("CTU"), SARR: ts("20260301120000"), SDEP: ts("20260301130000")},
			sisxml.RoutePoint{SEQU: n(3), APCD: s("SHA"), SARR: ts("20260301150000")})}),
		"flop_erut.xml": flop("2013", "ERUT", sisxml.Flight{ERUT: sisxml.Items(
			sisxml.RoutePoint{SEQU: n(1), APCD: s("PEK")}, sisxml.RoutePoint{SEQU: n(2), APCD: s("SHA")})}),
		"flop_srvt.xml": flop("2014", "SRVT", sisxml.Flight{SRVT: sisxml.Items(
			sisxml.Service{SEQU: n(1), CODE: s("WCHR"), QNTY: n(1)},
			sisxml.Service{SEQU: n(2), CODE: s("UMNR"), QNTY: n(3), RMRK: s("group")})}),
		"flop_vipf.xml": flop("2015", "VIPF", sisxml.Flight{VIPF: sisxml.Items(
			sisxml.Service{SEQU: n(1), CODE: s("VIP"), QNTY: n(2), RMRK: s("lounge 3")})}),
		"fdel_dele.xml": {Meta: aodb("3001", "FDEL", "DELE"), Kind: sisxml.KindFdel, Fdel: &sisxml.FlightDelete{FLID: "100002"}},
		"ldm.xml":       ignored("4001", "LDM", "LDM"),
		"regn.xml":      ignored("4002", "REGN", "CHNG"),
		"rsta.xml":      ignored("4003", "RSTA", "STND"),
		"eror.xml":      ignored("4004", "EROR", "FDEL"),
		"refd_resp.xml": {Meta: aodb("5001", "REFD", "RESP"), Kind: sisxml.KindRef, Ref: &sisxml.RefData{
			RTYP: "AIRLINE", RQSQ: s("78"), RCNT: 2, Records: []sisxml.RefRecord{
				{RKEY: "CA", RVAL: s("Air China")}, {RKEY: "MU", RVAL: s("China Eastern")}}}},
		"reqt_schd.xml": {Meta: meta("RMS", "AODB", "77", "REQT", "SCHD"), Kind: sisxml.KindRequest,
			Request: &sisxml.Request{Subtype: "SCHD", ODAY: s("20260301")}},
		"reqt_refd.xml": {Meta: meta("RMS", "AODB", "78", "REQT", "REFD"), Kind: sisxml.KindRequest,
			Request: &sisxml.Request{Subtype: "REFD", RTYP: s("AIRLINE")}},
	}
}

func TestDecodeTestdata(t *testing.T) {
	t.Parallel()
	want := expected()
	files, err := filepath.Glob(filepath.Join(testdata, "*.xml"))
	require.NoError(t, err)
	require.Len(t, files, len(want), "every testdata file has an expectation and vice versa")
	for _, path := range files {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			exp, ok := want[name]
			require.True(t, ok, "no expectation for %s", name)
			got, err := sisxml.Decode(raw)
			require.NoError(t, err)
			require.Equal(t, exp, got)
		})
	}
}

func TestDecodeEveryFlopSubtypeHasAnExample(t *testing.T) {
	t.Parallel()
	for _, st := range sisxml.FlopSubtypes {
		_, err := os.Stat(filepath.Join(testdata, "flop_"+strings.ToLower(st)+".xml"))
		require.NoError(t, err, "FLOP-%s", st)
	}
}

// envelope wraps body in a valid FLOP-<styp> message for flight 1.
func envelope(typ, styp, body string) string {
	return `<MSG><META><SNDR>AODB</SNDR><SEQN>9</SEQN><DTTM>20260301083000</DTTM><TYPE>` + typ +
		`</TYPE><STYP>` + styp + `</STYP></META>` + body + `</MSG>`
}

func flopMsg(styp, fields string) string {
	return envelope("FLOP", styp, `<FLOP><FLGT><FLID>1</FLID>`+fields+`</FLGT></FLOP>`)
}

func TestDecodePresence(t *testing.T) {
	t.Parallel()
	decodeFlight := func(t *testing.T, styp, fields string) sisxml.Flight {
		t.Helper()
		m, err := sisxml.Decode([]byte(flopMsg(styp, fields)))
		require.NoError(t, err)
		return m.Flop.Flight
	}
	t.Run("scalar", func(t *testing.T) {
		t.Parallel()
		f := decodeFlight(t, "BASE", `<FLNO>CA1</FLNO><AWCD/><ACTY>  </ACTY><SODT></SODT>`)
		require.Equal(t, s("CA1"), f.FLNO)
		require.Equal(t, sisxml.Cleared[string](), f.AWCD, "<AWCD/> clears")
		require.Equal(t, sisxml.Empty, f.ACTY.Presence, "whitespace-only is empty")
		require.Equal(t, sisxml.Cleared[time.Time](), f.SODT, "<SODT></SODT> clears")
		require.Equal(t, sisxml.Absent, f.TERM.Presence, "missing = not carried")
		require.False(t, f.TERM.Carried())
		require.True(t, f.AWCD.Carried())
	})
	t.Run("collection", func(t *testing.T) {
		t.Parallel()
		f := decodeFlight(t, "GATE", `<GATE/>`)
		require.Equal(t, sisxml.Empty, f.GATE.Presence, "<GATE/> clears")
		require.Empty(t, f.GATE.Items)
		f = decodeFlight(t, "GATE", `<GATE>
		  </GATE>`)
		require.Equal(t, sisxml.Empty, f.GATE.Presence, "whitespace-only collection clears")
		f = decodeFlight(t, "GATE", `<GATE><ITEM><CODE>A1</CODE></ITEM><ITEM/></GATE>`)
		require.Equal(t, sisxml.Items(sisxml.Resource{CODE: s("A1")}, sisxml.Resource{}), f.GATE)
		require.Equal(t, sisxml.Absent, f.STND.Presence, "missing = not carried")
		require.False(t, f.ROUT.Carried())
	})
	t.Run("item fields", func(t *testing.T) {
		t.Parallel()
		f := decodeFlight(t, "DELY", `<DELY><ITEM><SEQU/><CODE>WX</CODE><DURA>0</DURA></ITEM></DELY>`)
		require.Equal(t, sisxml.Items(sisxml.Delay{SEQU: sisxml.Cleared[int](), CODE: s("WX"), DURA: n(0)}), f.DELY)
	})
	t.Run("route kinds independent", func(t *testing.T) {
		t.Parallel()
		m, err := sisxml.Decode([]byte(envelope("SCHD", "DNLD", `<SCHD><RCNT>1</RCNT><FLGT><FLID>1</FLID>
		  <ROUT><ITEM><SEQU>1</SEQU><APCD>PEK</APCD></ITEM></ROUT><ERUT><ITEM><SEQU>1</SEQU><APCD>TSN</APCD></ITEM></ERUT>
		  </FLGT></SCHD>`)))
		require.NoError(t, err)
		f := m.Schd.Flights[0]
		require.Equal(t, sisxml.Items(sisxml.RoutePoint{SEQU: n(1), APCD: s("PEK")}), f.ROUT)
		require.Equal(t, sisxml.Items(sisxml.RoutePoint{SEQU: n(1), APCD: s("TSN")}), f.ERUT)
	})
}

func TestDecodeNormalises(t *testing.T) {
	t.Parallel()
	m, err := sisxml.Decode([]byte(`<?xml version="1.0" encoding="us-ascii"?>
<!-- mailbox row 7 --><!DOCTYPE MSG>
<MSG xmlns="urn:sis"><META><SNDR> AODB </SNDR><SEQN>9</SEQN><DTTM>20260301083000</DTTM><TYPE>flop</TYPE><STYP>Gate</STYP></META>
<FLOP><FLGT><FLID>1</FLID><GATE/><UNKNOWN>kept out</UNKNOWN></FLGT></FLOP><EXTRA/></MSG>
<!-- trailing comment -->`))
	require.NoError(t, err)
	require.Equal(t, "AODB", m.Meta.SNDR)
	require.Equal(t, "FLOP-GATE", m.Meta.Kind())
	require.Equal(t, sisxml.KindFlop, m.Kind)
	require.Equal(t, sisxml.Empty, m.Flop.Flight.GATE.Presence)
}

func TestDecodeUnsupported(t *testing.T) {
	t.Parallel()
	for _, k := range [][2]string{{"SCHD", "XXXX"}, {"FLOP", "MAFL"}, {"FDEL", "ALL"}, {"ABCD", "EFGH"}, {"ERROR", "X"}, {"REQT", "FLOP"}} {
		m, err := sisxml.Decode([]byte(envelope(k[0], k[1], `<BODY/>`)))
		require.NoError(t, err, k)
		require.Equal(t, sisxml.KindUnsupported, m.Kind, k)
		require.Nil(t, m.Schd)
		require.Nil(t, m.Flop)
	}
	m, err := sisxml.Decode([]byte(envelope("LDM", "ANY", `<LDM><<<not read>`)))
	require.Error(t, err, "the whole message must still be well-formed")
	require.Nil(t, m)
	m, err = sisxml.Decode([]byte(envelope("Eror", "x", `<EROR><FLNO>2</FLNO></EROR>`)))
	require.NoError(t, err)
	require.Equal(t, sisxml.KindIgnored, m.Kind)
	require.Equal(t, "EROR-X", m.Meta.Kind())
}

func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	const (
		M = relaytype.ClassMalformed
		C = relaytype.ClassCodec
		P = relaytype.ClassProtocol
	)
	okMeta := `<META><SNDR>AODB</SNDR><SEQN>9</SEQN><DTTM>20260301083000</DTTM><TYPE>FDEL</TYPE><STYP>DELE</STYP></META>`
	fdel := `<FDEL><FLID>1</FLID></FDEL>`
	metaWithout := func(elem string) string {
		i := strings.Index(okMeta, "<"+elem+">")
		j := strings.Index(okMeta, "</"+elem+">") + len(elem) + 3
		return "<MSG>" + okMeta[:i] + okMeta[j:] + fdel + "</MSG>"
	}
	schd := func(rcnt string, n int) string {
		return envelope("SCHD", "DNLD", `<SCHD>`+rcnt+strings.Repeat(`<FLGT><FLID>1</FLID></FLGT>`, n)+`</SCHD>`)
	}
	cases := []struct {
		name  string
		raw   string
		class relaytype.ErrorClass
	}{
		{"raw missing", "", M},
		{"raw blank", " \n\t ", M},
		{"too large", "<MSG>" + strings.Repeat(" ", sisxml.MaxSize) + "</MSG>", M},
		{"not xml", "hello", M},
		{"truncated", `<MSG><META><SNDR>AODB</SNDR>`, M},
		{"mismatched tag", `<MSG><META></MSG></META>`, M},
		{"undefined entity", `<!DOCTYPE MSG [<!ENTITY x SYSTEM "file:///etc/passwd">]><MSG>&x;</MSG>`, M},
		{"text before root", `junk<MSG>` + okMeta + fdel + `</MSG>`, M},
		{"second root", `<MSG>` + okMeta + fdel + `</MSG><MSG/>`, M},
		{"text after root", `<MSG>` + okMeta + fdel + `</MSG>junk`, M},
		{"wrong root", `<MESSAGE>` + okMeta + fdel + `</MESSAGE>`, M},
		{"xml 1.1", `<?xml version="1.1"?><MSG>` + okMeta + fdel + `</MSG>`, M},
		{"invalid utf-8", "<MSG>" + okMeta + "<FDEL><FLID>\xff</FLID></FDEL></MSG>", M},
		{"META missing", `<MSG>` + fdel + `</MSG>`, M},
		{"two METAs", `<MSG>` + okMeta + okMeta + fdel + `</MSG>`, M},
		{"SNDR missing", metaWithout("SNDR"), M},
		{"SEQN missing", metaWithout("SEQN"), M},
		{"TYPE missing", metaWithout("TYPE"), M},
		{"STYP missing", metaWithout("STYP"), M},
		{"DTTM missing", metaWithout("DTTM"), M},
		{"SNDR empty", strings.Replace(`<MSG>`+okMeta+fdel+`</MSG>`, "<SNDR>AODB</SNDR>", "<SNDR/>", 1), M},
		{"SEQN with separator", strings.Replace(`<MSG>`+okMeta+fdel+`</MSG>`, "<SEQN>9</SEQN>", "<SEQN>9|1</SEQN>", 1), M},
		{"body missing", `<MSG>` + okMeta + `</MSG>`, M},
		{"body of another type", `<MSG>` + okMeta + `<FLOP/></MSG>`, M},
		{"two bodies", `<MSG>` + okMeta + fdel + fdel + `</MSG>`, M},
		{"FDEL FLID missing", `<MSG>` + okMeta + `<FDEL><FLID/></FDEL></MSG>`, M},
		{"RCNT missing", schd("", 1), P},
		{"RCNT not a number", schd("<RCNT>one</RCNT>", 1), P},
		{"RCNT negative", schd("<RCNT>-1</RCNT>", 0), P},
		{"RCNT too small", schd("<RCNT>1</RCNT>", 2), P},
		{"RCNT too large", schd("<RCNT>3</RCNT>", 2), P},
		{"SCHD FLID missing", envelope("SCHD", "RESP", `<SCHD><RCNT>1</RCNT><FLGT><FLNO>X</FLNO></FLGT></SCHD>`), M},
		{"FLOP without FLGT", envelope("FLOP", "GATE", `<FLOP/>`), M},
		{"FLOP two FLGT", envelope("FLOP", "GATE", `<FLOP><FLGT><FLID>1</FLID><GATE/></FLGT><FLGT><FLID>2</FLID><GATE/></FLGT></FLOP>`), M},
		{"FLOP carries nothing", flopMsg("GATE", ``), M},
		{"FLOP FLID missing", envelope("FLOP", "GATE", `<FLOP><FLGT><GATE/></FLGT></FLOP>`), M},
		{"REFD RCNT mismatch", envelope("REFD", "RESP", `<REFD><RTYP>A</RTYP><RCNT>2</RCNT><REFR><RKEY>1</RKEY></REFR></REFD>`), P},
		{"REFD RTYP missing", envelope("REFD", "RESP", `<REFD><RCNT>0</RCNT></REFD>`), M},
		{"REFD RKEY missing", envelope("REFD", "RESP", `<REFD><RTYP>A</RTYP><RCNT>1</RCNT><REFR/></REFD>`), M},
		{"REQT-SCHD ODAY missing", envelope("REQT", "SCHD", `<REQT/>`), M},
		{"REQT-REFD RTYP missing", envelope("REQT", "REFD", `<REQT/>`), M},

		// MALFORMED wins: every structural check runs before a value format is judged.
		{"bad DTTM and body missing", strings.Replace(`<MSG>`+okMeta+`</MSG>`, "20260301083000", "x", 1), M},
		{"foreign element and FLID missing", envelope("FLOP", "GATE", `<FLOP><FLGT><GATE/><STND/></FLGT></FLOP>`), M},
		{"bad value then FLID missing", envelope("SCHD", "DNLD", `<SCHD><RCNT>2</RCNT><FLGT><FLID>1</FLID><SODT>x</SODT></FLGT><FLGT/></SCHD>`), M},
		{"RCNT mismatch and FLID missing", envelope("SCHD", "DNLD", `<SCHD><RCNT>3</RCNT><FLGT><FLID>1</FLID></FLGT><FLGT/></SCHD>`), M},
		{"REFD RCNT mismatch and RKEY missing", envelope("REFD", "RESP", `<REFD><RTYP>A</RTYP><RCNT>2</RCNT><REFR/></REFD>`), M},
		// PROTOCOL (dead at once) wins over a value format (retried).
		{"bad value and RCNT mismatch", envelope("SCHD", "DNLD", `<SCHD><RCNT>2</RCNT><FLGT><FLID>1</FLID><EODT>x</EODT></FLGT></SCHD>`), P},

		{"charset", `<?xml version="1.0" encoding="GBK"?><MSG>` + okMeta + fdel + `</MSG>`, C},
		{"DTTM format", strings.Replace(`<MSG>`+okMeta+fdel+`</MSG>`, "20260301083000", "2026-03-01T08:30:00", 1), C},
		{"DTTM invalid date", strings.Replace(`<MSG>`+okMeta+fdel+`</MSG>`, "20260301083000", "20261301083000", 1), C},
		{"SODT format", flopMsg("BASE", `<SODT>2026-03-01 09:30</SODT>`), C},
		{"ADID value", flopMsg("BASE", `<ADID>X</ADID>`), C},
		{"SEQU not a number", flopMsg("GATE", `<GATE><ITEM><SEQU>a</SEQU></ITEM></GATE>`), C},
		{"DURA negative", flopMsg("DELY", `<DELY><ITEM><DURA>-5</DURA></ITEM></DELY>`), C},
		{"QNTY overflow", flopMsg("VIPF", `<VIPF><ITEM><QNTY>99999999999999999999</QNTY></ITEM></VIPF>`), C},
		{"route time format", flopMsg("ROUT", `<ROUT><ITEM><SARR>noon</SARR></ITEM></ROUT>`), C},
		{"collection as text", flopMsg("GATE", `<GATE>B12</GATE>`), C},
		{"FLOP foreign element", flopMsg("GATE", `<GATE/><STND/>`), C},
		{"FLOP base in status", flopMsg("STAT", `<STAT>DLY</STAT><FLNO>CA1</FLNO>`), C},
		{"SCHD record value", envelope("SCHD", "DNLD", `<SCHD><RCNT>1</RCNT><FLGT><FLID>1</FLID><EODT>x</EODT></FLGT></SCHD>`), C},
		{"REQT-SCHD ODAY format", envelope("REQT", "SCHD", `<REQT><ODAY>2026-03-01</ODAY></REQT>`), C},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m, err := sisxml.Decode([]byte(tc.raw))
			require.Error(t, err)
			require.Nil(t, m)
			require.Equal(t, tc.class, relaytype.ClassOf(err, relaytype.ClassNone), "%v", err)
			require.Equal(t, 1, strings.Count(err.Error(), "sisxml:"), "one package prefix: %v", err)
		})
	}
}

func TestIdentity(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(testdata, "flop_gate.xml"))
	require.NoError(t, err)
	m, err := sisxml.Decode(raw)
	require.NoError(t, err)
	require.Equal(t, "AODB|FLOP|GATE|2004", sisxml.Identity(m.Meta, false))
	require.Equal(t, "AODB|FLOP|GATE|2004|20260301", sisxml.Identity(m.Meta, true))
	require.Equal(t, "FLOP-GATE", m.Meta.Kind())

	// The same SEQN on the next day: one identity without the day boundary, two with it.
	next := m.Meta
	next.DTTM = next.DTTM.Add(24 * time.Hour)
	require.Equal(t, sisxml.Identity(m.Meta, false), sisxml.Identity(next, false))
	require.NotEqual(t, sisxml.Identity(m.Meta, true), sisxml.Identity(next, true))
}

// TestDecodeSchdSODTUnparsed: in a SCHD record an unparseable SODT is no
// decode error (seed 000 §12.3: an ADFT then creates the flight without an
// operating day; a plan is the domain's PROTOCOL); in a FLOP it stays
// CODEC_ERROR.
func TestDecodeSchdSODTUnparsed(t *testing.T) {
	t.Parallel()
	for _, styp := range []string{"ADFT", "DNLD", "RESP"} {
		m, err := sisxml.Decode([]byte(envelope("SCHD", styp,
			`<SCHD><RCNT>1</RCNT><FLGT><FLID>7</FLID><FLNO>CA7</FLNO><SODT>2026-03-01 09:30</SODT></FLGT></SCHD>`)))
		require.NoError(t, err, styp)
		f := m.Schd.Flights[0]
		require.Equal(t, sisxml.Absent, f.SODT.Presence, styp)
		require.Equal(t, "2026-03-01 09:30", f.SODTUnparsed, styp)
		require.Equal(t, "CA7", f.FLNO.Value, styp)
	}
	m, err := sisxml.Decode([]byte(envelope("SCHD", "ADFT",
		`<SCHD><RCNT>1</RCNT><FLGT><FLID>7</FLID><SODT>20260301093000</SODT></FLGT></SCHD>`)))
	require.NoError(t, err)
	require.Empty(t, m.Schd.Flights[0].SODTUnparsed)
	require.Equal(t, sisxml.Set, m.Schd.Flights[0].SODT.Presence)

	_, err = sisxml.Decode([]byte(envelope("FLOP", "BASE",
		`<FLOP><FLGT><FLID>7</FLID><SODT>2026-03-01 09:30</SODT></FLGT></FLOP>`)))
	require.Equal(t, relaytype.ClassCodec, relaytype.ClassOf(err, relaytype.ClassNone))
}
