package cmpp_test

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

func TestTextCodings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		f    cmpp.MsgFmt
		text string
		hex  string
	}{
		{cmpp.FmtASCII, "Hi {x}", "4869207b787d"},
		{cmpp.FmtUCS2, "你好", "4f60597d"},
		{cmpp.FmtUCS2, "a😀", "0061d83dde00"}, // U+1F600 is a surrogate pair
		{cmpp.FmtGB, "你好", "c4e3bac3"},
		{cmpp.FmtGB, "a€𠀀", "61a2e395328236"}, // € two bytes, U+20000 four
		{cmpp.FmtBinary, "\x00\xff", "00ff"},
		{cmpp.FmtSIMWrite, "\x01", "01"},
	} {
		b, err := cmpp.AppendText([]byte{0xee}, c.text, c.f)
		require.NoError(t, err)
		require.Equal(t, "ee"+c.hex, hex.EncodeToString(b), "AppendText appends (Msg_Fmt %d)", c.f)
		text, err := cmpp.DecodeText(b[1:], c.f)
		require.NoError(t, err)
		require.Equal(t, c.text, text)
	}
}

func TestTextCodingErrors(t *testing.T) {
	t.Parallel()
	_, err := cmpp.AppendText(nil, "café", cmpp.FmtASCII)
	require.ErrorIs(t, err, cmpp.ErrEncoding)
	require.Equal(t, "cmpp: Msg_Fmt 0: bad text encoding: byte 3 is not ASCII", err.Error())
	_, err = cmpp.AppendText(nil, "\xff", cmpp.FmtUCS2)
	require.ErrorIs(t, err, cmpp.ErrEncoding)
	_, err = cmpp.AppendText(nil, "\xff", cmpp.FmtGB)
	require.ErrorIs(t, err, cmpp.ErrEncoding)
	// A private-use character the GB18030 encoder would code as another
	// character (found by FuzzSplit) is refused, not sent changed.
	_, err = cmpp.AppendText(nil, "ok\ue800", cmpp.FmtGB)
	require.ErrorIs(t, err, cmpp.ErrEncoding)
	_, err = cmpp.AppendText(nil, "x", 2)
	require.ErrorIs(t, err, cmpp.ErrEncoding)

	_, err = cmpp.DecodeText([]byte{0x80}, cmpp.FmtASCII)
	require.ErrorIs(t, err, cmpp.ErrEncoding)
	_, err = cmpp.DecodeText([]byte{0x4f, 0x60, 0x59}, cmpp.FmtUCS2)
	require.ErrorIs(t, err, cmpp.ErrEncoding)
	_, err = cmpp.DecodeText(nil, 1)
	require.ErrorIs(t, err, cmpp.ErrEncoding)

	// Unpaired surrogates (a pair cut by a careless sender) become U+FFFD.
	text, err := cmpp.DecodeText([]byte{0xd8, 0x3d, 0x00, 0x61, 0xde, 0x00}, cmpp.FmtUCS2)
	require.NoError(t, err)
	require.Equal(t, "\ufffda\ufffd", text)
}

func TestChooseFmt(t *testing.T) {
	t.Parallel()
	require.Equal(t, cmpp.FmtASCII, cmpp.ChooseFmt("Your code is 1234"))
	require.Equal(t, cmpp.FmtUCS2, cmpp.ChooseFmt("验证码 1234"))
}
