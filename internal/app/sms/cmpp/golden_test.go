package cmpp_test

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

// readHex reads a golden file of testdata/golden (format in its README).
func readHex(t testing.TB, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "golden", name))
	require.NoError(t, err)
	var out []byte
	for line := range strings.Lines(string(raw)) {
		line, _, _ = strings.Cut(line, "#")
		for _, tok := range strings.Fields(line) {
			if b, n, ok := strings.Cut(tok, "*"); ok {
				count, err := strconv.Atoi(n)
				require.NoError(t, err, "%s: %q", name, tok)
				x, err := hex.DecodeString(b)
				require.NoError(t, err, "%s: %q", name, tok)
				require.Len(t, x, 1, "%s: %q repeats one byte", name, tok)
				out = append(out, make([]byte, count)...)
				for i := len(out) - count; i < len(out); i++ {
					out[i] = x[0]
				}
				continue
			}
			x, err := hex.DecodeString(tok)
			require.NoError(t, err, "%s: %q", name, tok)
			out = append(out, x...)
		}
	}
	return out
}

// Values shared by the golden packets.
const (
	msgID7 = 0x3121e3c003e90007 // 03-02 08:30:15, gateway 1001, sequence 7
	secret = "secret"
)

var connectTime = time.Date(2026, 3, 2, 8, 30, 15, 0, time.UTC)

func authSource() [16]byte {
	return cmpp.AuthenticatorSource("901234", secret, cmpp.Timestamp(connectTime))
}

type goldenCase struct {
	file string
	v    cmpp.Version
	seq  uint32
	p    cmpp.Packet
}

// goldenCases lists every golden packet with the struct it holds. Packets
// whose layout is the same in both versions are checked in both.
func goldenCases() []goldenCase {
	connect30 := cmpp.NewConnect("901234", secret, cmpp.V30, connectTime)
	connect20 := cmpp.NewConnect("901234", secret, cmpp.V20, connectTime)
	cases := []goldenCase{
		{"connect_v30.hex", cmpp.V30, 1, &connect30},
		{"connect_v20.hex", cmpp.V20, 1, &connect20},
		{"connect_resp_v30.hex", cmpp.V30, 1, &cmpp.ConnectResp{
			Status: 0, AuthenticatorISMG: cmpp.AuthenticatorISMG(cmpp.V30, 0, authSource(), secret), Version: cmpp.V30}},
		{"connect_resp_v20.hex", cmpp.V20, 1, &cmpp.ConnectResp{
			Status: 0, AuthenticatorISMG: cmpp.AuthenticatorISMG(cmpp.V20, 0, authSource(), secret), Version: cmpp.V20}},
		{"submit_v30.hex", cmpp.V30, 0x11, &cmpp.Submit{
			PkTotal: 1, PkNumber: 1, RegisteredDelivery: 1, ServiceID: "MXT0001",
			FeeUserType: 3, FeeTerminalID: "13900139000", FeeTerminalType: 1,
			MsgFmt: cmpp.FmtASCII, MsgSrc: "901234", FeeType: "02", FeeCode: "10",
			ValidTime: "260302120000000+", SrcID: "106900001",
			DestTerminalIDs: []string{"13800138000"}, DestTerminalType: 1,
			MsgContent: []byte("hello"), LinkID: "LNK-7"}},
		{"submit_v20.hex", cmpp.V20, 0x12, &cmpp.Submit{
			PkTotal: 2, PkNumber: 1, MsgLevel: 1, ServiceID: "MXT0001",
			TPUDHI: 1, MsgFmt: cmpp.FmtUCS2, MsgSrc: "901234", FeeType: "01", FeeCode: "0",
			SrcID: "106900001", DestTerminalIDs: []string{"13800138000", "13912345678"},
			MsgContent: []byte{0x05, 0x00, 0x03, 0x2a, 0x02, 0x01, 0x4f, 0x60, 0x59, 0x7d}}},
		{"submit_resp_v30.hex", cmpp.V30, 0x11, &cmpp.SubmitResp{MsgID: msgID7}},
		{"submit_resp_v20.hex", cmpp.V20, 0x12, &cmpp.SubmitResp{MsgID: msgID7, Result: 3}},
		{"deliver_v30.hex", cmpp.V30, 0x21, &cmpp.Deliver{
			MsgID: msgID7 + 1, DestID: "106900001", ServiceID: "MXT0001", MsgFmt: cmpp.FmtGB,
			SrcTerminalID: "13800138000", MsgContent: []byte{0xc4, 0xe3, 0xba, 0xc3}, LinkID: "LNK-7"}},
		{"deliver_v20.hex", cmpp.V20, 0x22, &cmpp.Deliver{
			MsgID: msgID7 + 2, DestID: "106900001", ServiceID: "MXT0001", MsgFmt: cmpp.FmtASCII,
			SrcTerminalID: "13800138000", RegisteredDelivery: 1,
			MsgContent: report20(msgID7)}},
		{"deliver_resp_v30.hex", cmpp.V30, 0x21, &cmpp.DeliverResp{MsgID: msgID7 + 1}},
		{"deliver_resp_v20.hex", cmpp.V20, 0x22, &cmpp.DeliverResp{MsgID: msgID7 + 2, Result: 8}},
		{"cancel_resp_v30.hex", cmpp.V30, 0x41, &cmpp.CancelResp{SuccessID: 1}},
		{"cancel_resp_v20.hex", cmpp.V20, 0x41, &cmpp.CancelResp{SuccessID: 1}},
	}
	for _, v := range []cmpp.Version{cmpp.V20, cmpp.V30} {
		cases = append(cases,
			goldenCase{"terminate.hex", v, 2, &cmpp.Terminate{}},
			goldenCase{"terminate_resp.hex", v, 2, &cmpp.TerminateResp{}},
			goldenCase{"active_test.hex", v, 3, &cmpp.ActiveTest{}},
			goldenCase{"active_test_resp.hex", v, 3, &cmpp.ActiveTestResp{}},
			goldenCase{"query.hex", v, 0x31, &cmpp.Query{Time: "20260302", QueryType: 1, QueryCode: "MXT0001"}},
			goldenCase{"query_resp.hex", v, 0x31, &cmpp.QueryResp{Time: "20260302", QueryType: 1, QueryCode: "MXT0001",
				MTTLMsg: 1, MTTlusr: 2, MTScs: 3, MTWT: 4, MTFL: 5, MOScs: 6, MOWT: 7, MOFL: 8}},
			goldenCase{"cancel.hex", v, 0x41, &cmpp.Cancel{MsgID: msgID7}},
		)
	}
	return cases
}

// report20 is the status report inside deliver_v20.hex, as bytes written
// from its own golden lines so the Deliver case does not depend on
// Report.AppendTo.
func report20(id uint64) []byte {
	b := []byte{byte(id >> 56), byte(id >> 48), byte(id >> 40), byte(id >> 32), byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
	b = append(b, "DELIVRD2603020830260302083113800138000"...)
	b = append(b, make([]byte, 10)...)
	return append(b, 0x00, 0x00, 0xab, 0xcd)
}

func TestGoldenEncode(t *testing.T) {
	t.Parallel()
	for _, c := range goldenCases() {
		t.Run(c.file+"/"+c.v.String(), func(t *testing.T) {
			want := readHex(t, c.file)
			prefix := []byte("keep")
			got, err := cmpp.AppendPacket(prefix, c.v, c.seq, c.p)
			require.NoError(t, err)
			require.Equal(t, "keep", string(got[:4]), "AppendPacket appends")
			require.Equal(t, hex.EncodeToString(want), hex.EncodeToString(got[4:]))
		})
	}
}

func TestGoldenDecode(t *testing.T) {
	t.Parallel()
	cases := goldenCases()
	for _, c := range cases {
		t.Run(c.file+"/"+c.v.String(), func(t *testing.T) {
			b := readHex(t, c.file)
			h, err := cmpp.ParseHeader(b)
			require.NoError(t, err)
			require.Equal(t, cmpp.Header{TotalLength: uint32(len(b)), CommandID: c.p.Command(), SequenceID: c.seq}, h)

			fresh, err := cmpp.NewPacket(h.CommandID)
			require.NoError(t, err)
			require.NoError(t, fresh.DecodeBody(b[cmpp.HeaderLen:], c.v))
			require.Equal(t, c.p, fresh)

			// Decoding into a struct that holds another packet of the same
			// command overwrites every field.
			for _, other := range cases {
				if other.p.Command() != c.p.Command() || other.file == c.file {
					continue
				}
				reused, err := cmpp.NewPacket(h.CommandID)
				require.NoError(t, err)
				require.NoError(t, reused.DecodeBody(readHex(t, other.file)[cmpp.HeaderLen:], other.v))
				require.NoError(t, reused.DecodeBody(b[cmpp.HeaderLen:], c.v))
				require.Equal(t, c.p, reused, "after %s", other.file)
			}
		})
	}
}

func TestGoldenReport(t *testing.T) {
	t.Parallel()
	want30 := cmpp.Report{MsgID: msgID7, Stat: "UNDELIV", SubmitTime: "2603020830", DoneTime: "2603020930",
		DestTerminalID: "13800138000", SMSCSequence: 1}
	want20 := cmpp.Report{MsgID: msgID7, Stat: "DELIVRD", SubmitTime: "2603020830", DoneTime: "2603020831",
		DestTerminalID: "13800138000", SMSCSequence: 0xabcd}

	golden30 := readHex(t, "report_v30.hex")
	require.Len(t, golden30, cmpp.ReportLen(cmpp.V30))
	got, err := want30.AppendTo(nil, cmpp.V30)
	require.NoError(t, err)
	require.Equal(t, golden30, got)
	var r cmpp.Report
	require.NoError(t, r.Decode(golden30, cmpp.V30))
	require.Equal(t, want30, r)

	// The 2.0 report is the Msg_Content of deliver_v20.hex.
	var d cmpp.Deliver
	require.NoError(t, d.DecodeBody(readHex(t, "deliver_v20.hex")[cmpp.HeaderLen:], cmpp.V20))
	require.True(t, d.IsReport())
	require.Len(t, d.MsgContent, cmpp.ReportLen(cmpp.V20))
	require.NoError(t, r.Decode(d.MsgContent, cmpp.V20))
	require.Equal(t, want20, r)
	got, err = want20.AppendTo(nil, cmpp.V20)
	require.NoError(t, err)
	require.Equal(t, d.MsgContent, got)

	// A report in the other version's length is malformed.
	require.ErrorIs(t, r.Decode(golden30, cmpp.V20), cmpp.ErrMalformed)
	require.ErrorIs(t, r.Decode(d.MsgContent, cmpp.V30), cmpp.ErrMalformed)
}
