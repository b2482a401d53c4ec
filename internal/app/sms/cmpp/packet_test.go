package cmpp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

func submit(dests ...string) *cmpp.Submit {
	return &cmpp.Submit{PkTotal: 1, PkNumber: 1, ServiceID: "MXT0001", MsgSrc: "901234", SrcID: "106900001",
		DestTerminalIDs: dests, MsgContent: []byte("hi")}
}

func TestCommandAndVersionNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, "SUBMIT", cmpp.CmdSubmit.String())
	require.Equal(t, "DELIVER_RESP", cmpp.CmdDeliverResp.String())
	require.Equal(t, "0x9", cmpp.CommandID(9).String())
	require.Equal(t, "0x80000003", cmpp.CommandID(0x80000003).String())
	require.Equal(t, cmpp.CmdSubmitResp, cmpp.CmdSubmit.Response())
	require.True(t, cmpp.CmdActiveTestResp.IsResponse())
	require.False(t, cmpp.CmdActiveTest.IsResponse())
	require.Equal(t, "2.0", cmpp.V20.String())
	require.Equal(t, "3.0", cmpp.V30.String())
	require.Equal(t, "0x21", cmpp.Version(0x21).String())
}

func TestUnsupportedVersion(t *testing.T) {
	t.Parallel()
	for _, c := range goldenCases() {
		_, err := c.p.AppendBody(nil, 0x21)
		require.ErrorIs(t, err, cmpp.ErrUnsupportedVersion, c.file)
		require.ErrorIs(t, c.p.DecodeBody(nil, 0), cmpp.ErrUnsupportedVersion, c.file)
	}
	var r cmpp.Report
	require.ErrorIs(t, r.Decode(nil, 0x31), cmpp.ErrUnsupportedVersion)
}

func TestNewPacketUnknown(t *testing.T) {
	t.Parallel()
	_, err := cmpp.NewPacket(0x00000009) // FWD: between gateways, not implemented
	require.ErrorIs(t, err, cmpp.ErrUnknownCommand)
	require.Equal(t, "cmpp: unknown command: Command_Id 0x9", err.Error())
}

func TestEncodeErrorsLeaveBufferAndHideValues(t *testing.T) {
	t.Parallel()
	dst := []byte("prefix")
	long := submit("13800138000123456789012") // 23 bytes: over 2.0's 21, within 3.0's 32
	out, err := cmpp.AppendPacket(dst, cmpp.V20, 5, long)
	require.ErrorIs(t, err, cmpp.ErrTooLong)
	require.Equal(t, "prefix", string(out))
	require.Equal(t, "cmpp: encode SUBMIT 2.0: too long: Dest_terminal_Id has 23 bytes, field width 21", err.Error())
	require.NotContains(t, err.Error(), "138001")
	_, err = cmpp.AppendPacket(nil, cmpp.V30, 5, long)
	require.NoError(t, err)

	_, err = cmpp.AppendPacket(nil, cmpp.V30, 1, &cmpp.Connect{SourceAddr: "9012345"})
	require.ErrorIs(t, err, cmpp.ErrTooLong)
}

func TestSubmitDestinationCount(t *testing.T) {
	t.Parallel()
	_, err := cmpp.AppendPacket(nil, cmpp.V30, 1, submit())
	require.ErrorIs(t, err, cmpp.ErrInvalid)

	dests := make([]string, cmpp.MaxDestUsers)
	for i := range dests {
		dests[i] = "13800138000"
	}
	b, err := cmpp.AppendPacket(nil, cmpp.V30, 1, submit(dests...))
	require.NoError(t, err)
	require.Len(t, b, 163+32*cmpp.MaxDestUsers+2, "Total_Length = 163 + 32n + L")
	require.LessOrEqual(t, len(b), cmpp.MaxPacket)

	_, err = cmpp.AppendPacket(nil, cmpp.V30, 1, submit(append(dests, "13800138000")...))
	require.ErrorIs(t, err, cmpp.ErrInvalid)

	// A body announcing 100 destinations is malformed before any is read.
	body := b[cmpp.HeaderLen:]
	const destCountAt = 128 // 3.0 body offset of DestUsr_tl
	require.Equal(t, byte(cmpp.MaxDestUsers), body[destCountAt])
	body[destCountAt] = 100
	var s cmpp.Submit
	require.ErrorIs(t, s.DecodeBody(body, cmpp.V30), cmpp.ErrMalformed)
	body[destCountAt] = 0
	require.ErrorIs(t, s.DecodeBody(body, cmpp.V30), cmpp.ErrMalformed)
}

func TestContentLimits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		f   cmpp.MsgFmt
		max int
	}{{cmpp.FmtASCII, 160}, {cmpp.FmtUCS2, 140}, {cmpp.FmtGB, 140}, {cmpp.FmtBinary, 140}} {
		require.Equal(t, c.max, cmpp.MaxContent(c.f))
		s := submit("13800138000")
		s.MsgFmt = c.f
		s.MsgContent = make([]byte, c.max)
		_, err := cmpp.AppendPacket(nil, cmpp.V20, 1, s)
		require.NoError(t, err)
		s.MsgContent = make([]byte, c.max+1)
		_, err = cmpp.AppendPacket(nil, cmpp.V20, 1, s)
		require.ErrorIs(t, err, cmpp.ErrTooLong, "Msg_Fmt %d", c.f)

		d := &cmpp.Deliver{MsgFmt: c.f, MsgContent: make([]byte, c.max+1)}
		_, err = cmpp.AppendPacket(nil, cmpp.V30, 1, d)
		require.ErrorIs(t, err, cmpp.ErrTooLong, "Msg_Fmt %d", c.f)
	}
}

func TestDecodeLengthMismatch(t *testing.T) {
	t.Parallel()
	for _, c := range goldenCases() {
		body := readHex(t, c.file)[cmpp.HeaderLen:]
		p, err := cmpp.NewPacket(c.p.Command())
		require.NoError(t, err)
		if _, ok := p.(*cmpp.ActiveTestResp); !ok && len(body) > 0 {
			err = p.DecodeBody(body[:len(body)-1], c.v)
			require.ErrorIs(t, err, cmpp.ErrMalformed, c.file)
			require.True(t, strings.HasPrefix(err.Error(), "cmpp: decode "+c.p.Command().String()), err.Error())
		}
		require.ErrorIs(t, p.DecodeBody(append(body, 0), c.v), cmpp.ErrMalformed, c.file)
	}
	// The other version's layout never fits.
	var s cmpp.Submit
	require.ErrorIs(t, s.DecodeBody(readHex(t, "submit_v30.hex")[cmpp.HeaderLen:], cmpp.V20), cmpp.ErrMalformed)
	var d cmpp.Deliver
	require.ErrorIs(t, d.DecodeBody(readHex(t, "deliver_v20.hex")[cmpp.HeaderLen:], cmpp.V30), cmpp.ErrMalformed)
}

func TestMsgLengthPastBody(t *testing.T) {
	t.Parallel()
	b := readHex(t, "deliver_v30.hex")[cmpp.HeaderLen:]
	const msgLengthAt = 8 + 21 + 10 + 3 + 32 + 2 // 3.0 Deliver body offset of Msg_Length
	require.Equal(t, byte(4), b[msgLengthAt])
	b[msgLengthAt] = 255
	var d cmpp.Deliver
	err := d.DecodeBody(b, cmpp.V30)
	require.ErrorIs(t, err, cmpp.ErrMalformed)
	require.Equal(t, "cmpp: decode DELIVER 3.0: malformed: body has 101 bytes, field at offset 77 needs 255", err.Error())
}

func TestConnectAuthentication(t *testing.T) {
	t.Parallel()
	c := cmpp.NewConnect("901234", secret, cmpp.V30, connectTime)
	require.Equal(t, uint32(302083015), c.Timestamp)
	require.True(t, c.Verify(secret))
	require.False(t, c.Verify("Secret"))
	c.Timestamp++
	require.False(t, c.Verify(secret), "the timestamp is inside the hash")

	// January keeps its leading zero in the hashed digits.
	jan := time.Date(2026, 1, 9, 7, 5, 3, 0, time.UTC)
	require.Equal(t, uint32(109070503), cmpp.Timestamp(jan))
	require.NotEqual(t,
		cmpp.AuthenticatorSource("901234", secret, cmpp.Timestamp(jan)),
		cmpp.AuthenticatorSource("901234", secret, cmpp.Timestamp(jan.Add(time.Second))))

	src := authSource()
	for _, v := range []cmpp.Version{cmpp.V20, cmpp.V30} {
		r := cmpp.ConnectResp{Status: cmpp.ConnectOK, AuthenticatorISMG: cmpp.AuthenticatorISMG(v, 0, src, secret), Version: v}
		require.True(t, r.Verify(v, src, secret))
		require.False(t, r.Verify(v, src, "other"))
	}
	require.NotEqual(t, cmpp.AuthenticatorISMG(cmpp.V20, 0, src, secret), cmpp.AuthenticatorISMG(cmpp.V30, 0, src, secret),
		"Status is hashed in its wire width")
}

func TestConnectRespEitherStatusWidth(t *testing.T) {
	t.Parallel()
	// A 2.0 ISMG answers a 3.0 Connect in the 2.0 layout: version too high.
	b, err := cmpp.AppendPacket(nil, cmpp.V20, 1, &cmpp.ConnectResp{Status: cmpp.ConnectVersionTooHigh, Version: cmpp.V20})
	require.NoError(t, err)
	var r cmpp.ConnectResp
	require.NoError(t, r.DecodeBody(b[cmpp.HeaderLen:], cmpp.V30))
	require.Equal(t, cmpp.ConnectResp{Status: cmpp.ConnectVersionTooHigh, Version: cmpp.V20}, r)

	_, err = cmpp.AppendPacket(nil, cmpp.V20, 1, &cmpp.ConnectResp{Status: 256})
	require.ErrorIs(t, err, cmpp.ErrInvalid)
	_, err = cmpp.AppendPacket(nil, cmpp.V20, 1, &cmpp.SubmitResp{Result: 300})
	require.ErrorIs(t, err, cmpp.ErrInvalid)
	_, err = cmpp.AppendPacket(nil, cmpp.V30, 1, &cmpp.SubmitResp{Result: 300})
	require.NoError(t, err)
}

func TestActiveTestRespWithoutReservedByte(t *testing.T) {
	t.Parallel()
	r := cmpp.ActiveTestResp{Reserved: 7}
	require.NoError(t, r.DecodeBody(nil, cmpp.V30))
	require.Equal(t, cmpp.ActiveTestResp{}, r)
}

func TestVersionOnlyFieldsDropIn20(t *testing.T) {
	t.Parallel()
	s := submit("13800138000")
	s.FeeTerminalType, s.DestTerminalType, s.LinkID = 1, 1, "LNK"
	b, err := cmpp.AppendPacket(nil, cmpp.V20, 1, s)
	require.NoError(t, err)
	require.Len(t, b, 138+21+2)
	var got cmpp.Submit
	require.NoError(t, got.DecodeBody(b[cmpp.HeaderLen:], cmpp.V20))
	s.FeeTerminalType, s.DestTerminalType, s.LinkID = 0, 0, ""
	require.Equal(t, s, &got)
}

func TestParseHeaderBounds(t *testing.T) {
	t.Parallel()
	_, err := cmpp.ParseHeader([]byte{0, 0, 0})
	require.ErrorIs(t, err, cmpp.ErrMalformed)
	h, err := cmpp.ParseHeader(cmpp.Header{TotalLength: 11, CommandID: cmpp.CmdSubmit, SequenceID: 9}.AppendTo(nil))
	require.ErrorIs(t, err, cmpp.ErrMalformed)
	require.Equal(t, cmpp.CmdSubmit, h.CommandID, "the header comes back with the error")
	_, err = cmpp.ParseHeader(cmpp.Header{TotalLength: cmpp.MaxPacket + 1, CommandID: cmpp.CmdSubmit}.AppendTo(nil))
	require.ErrorIs(t, err, cmpp.ErrTooLong)
	_, err = cmpp.ParseHeader(cmpp.Header{TotalLength: cmpp.MaxPacket}.AppendTo(nil))
	require.NoError(t, err)
}
