package cmpp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

// refs returns a RefFunc counting up from first.
func refs(first uint16) func() uint16 {
	next := first
	return func() uint16 { next++; return next - 1 }
}

// payloads returns each segment's payload after its UDH, checking the UDH
// and the Pk fields on the way.
func payloads(t *testing.T, segs []cmpp.Segment) [][]byte {
	t.Helper()
	var out [][]byte
	for i, s := range segs {
		require.Equal(t, uint8(len(segs)), s.PkTotal)
		require.Equal(t, uint8(i+1), s.PkNumber)
		if len(segs) == 1 {
			require.Zero(t, s.TPUDHI)
			out = append(out, s.Content)
			continue
		}
		require.Equal(t, uint8(1), s.TPUDHI)
		h, p, err := cmpp.ParseUDH(s.Content)
		require.NoError(t, err)
		require.Equal(t, uint8(len(segs)), h.Total)
		require.Equal(t, uint8(i+1), h.Seq)
		out = append(out, p)
	}
	return out
}

func TestSplitLimits(t *testing.T) {
	t.Parallel()
	han := strings.Repeat("汉", 200)
	for _, c := range []struct {
		name  string
		text  string
		f     cmpp.MsgFmt
		ref16 bool
		sizes []int // payload bytes per segment
	}{
		{"ascii single", strings.Repeat("a", 160), cmpp.FmtASCII, false, []int{160}},
		{"ascii two", strings.Repeat("a", 161), cmpp.FmtASCII, false, []int{153, 8}},
		{"ascii ref16", strings.Repeat("a", 161), cmpp.FmtASCII, true, []int{152, 9}},
		{"ascii escapes count two", strings.Repeat("{", 80), cmpp.FmtASCII, false, []int{80}},
		{"ascii escapes split", strings.Repeat("{", 81), cmpp.FmtASCII, false, []int{76, 5}},
		{"ucs2 single", han[:70*3], cmpp.FmtUCS2, false, []int{140}},
		{"ucs2 two", han[:71*3], cmpp.FmtUCS2, false, []int{134, 8}},
		{"ucs2 ref16", han[:71*3], cmpp.FmtUCS2, true, []int{132, 10}},
		{"gb single", han[:70*3], cmpp.FmtGB, false, []int{140}},
		{"gb two", han[:71*3], cmpp.FmtGB, false, []int{134, 8}},
		{"gb ascii single", strings.Repeat("a", 70), cmpp.FmtGB, false, []int{70}},
		{"gb ascii two", strings.Repeat("a", 71), cmpp.FmtGB, false, []int{67, 4}},
		{"binary single", strings.Repeat("\x00", 140), cmpp.FmtBinary, false, []int{140}},
		{"binary two", strings.Repeat("\x00", 141), cmpp.FmtBinary, false, []int{134, 7}},
		{"empty", "", cmpp.FmtASCII, false, []int{0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			segs, err := cmpp.Split(c.text, c.f, cmpp.SplitOpts{RefFunc: refs(0x1234), Ref16: c.ref16})
			require.NoError(t, err)
			var sizes []int
			var whole []byte
			for _, p := range payloads(t, segs) {
				sizes = append(sizes, len(p))
				whole = append(whole, p...)
			}
			require.Equal(t, c.sizes, sizes)
			text, err := cmpp.DecodeText(whole, c.f)
			require.NoError(t, err)
			require.Equal(t, c.text, text)
			for _, s := range segs {
				require.LessOrEqual(t, len(s.Content), cmpp.MaxContent(c.f))
			}
		})
	}
}

func TestSplitUDH(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("a", 200)
	segs, err := cmpp.Split(text, cmpp.FmtASCII, cmpp.SplitOpts{RefFunc: refs(0x1234)})
	require.NoError(t, err)
	require.Equal(t, []byte{0x05, 0x00, 0x03, 0x34, 0x02, 0x01}, segs[0].Content[:6], "8-bit: low byte of the reference")
	require.Equal(t, []byte{0x05, 0x00, 0x03, 0x34, 0x02, 0x02}, segs[1].Content[:6])

	segs, err = cmpp.Split(text, cmpp.FmtASCII, cmpp.SplitOpts{RefFunc: refs(0x1234), Ref16: true})
	require.NoError(t, err)
	require.Equal(t, []byte{0x06, 0x08, 0x04, 0x12, 0x34, 0x02, 0x01}, segs[0].Content[:7])

	// Appending to one segment never writes into the next.
	_ = append(segs[0].Content, 'X')
	require.Equal(t, byte(0x06), segs[1].Content[0])

	_, err = cmpp.Split(text, cmpp.FmtASCII, cmpp.SplitOpts{})
	require.ErrorIs(t, err, cmpp.ErrInvalid, "a long message needs RefFunc")
	_, err = cmpp.Split("short", cmpp.FmtASCII, cmpp.SplitOpts{})
	require.NoError(t, err, "a short one does not")
}

func TestSplitNeverCutsACharacter(t *testing.T) {
	t.Parallel()
	// U+1F600 is a UTF-16 surrogate pair; 𠀀 (U+20000) is a 4-byte GB18030
	// sequence and a surrogate pair; 㐀 (U+3400) is a 4-byte GB18030
	// sequence inside the BMP. Shift them across every boundary.
	for _, c := range []struct {
		f    cmpp.MsgFmt
		char string
	}{{cmpp.FmtUCS2, "😀"}, {cmpp.FmtGB, "𠀀"}, {cmpp.FmtGB, "㐀"}, {cmpp.FmtGB, "汉"}} {
		for pad := range 8 {
			text := strings.Repeat("a", pad) + strings.Repeat(c.char, 100)
			segs, err := cmpp.Split(text, c.f, cmpp.SplitOpts{RefFunc: refs(1)})
			require.NoError(t, err)
			var whole []byte
			for i, p := range payloads(t, segs) {
				part, err := cmpp.DecodeText(p, c.f)
				require.NoError(t, err)
				require.NotContains(t, part, "\ufffd", "Msg_Fmt %d %q pad %d: segment %d cuts a character", c.f, c.char, pad, i+1)
				units := 0
				for _, r := range part {
					units++
					if r > 0xffff {
						units++
					}
				}
				require.LessOrEqual(t, units, 67, "segment %d", i+1)
				require.LessOrEqual(t, len(p), 134, "segment %d", i+1)
				whole = append(whole, p...)
			}
			got, err := cmpp.DecodeText(whole, c.f)
			require.NoError(t, err)
			require.Equal(t, text, got)
		}
	}
}

func TestSplitBounds(t *testing.T) {
	t.Parallel()
	segs, err := cmpp.Split(strings.Repeat("a", 153*255), cmpp.FmtASCII, cmpp.SplitOpts{RefFunc: refs(1)})
	require.NoError(t, err)
	require.Len(t, segs, 255)
	_, err = cmpp.Split(strings.Repeat("a", 153*255+1), cmpp.FmtASCII, cmpp.SplitOpts{RefFunc: refs(1)})
	require.ErrorIs(t, err, cmpp.ErrTooLong)
	_, err = cmpp.Split(strings.Repeat("a", 1<<20), cmpp.FmtASCII, cmpp.SplitOpts{RefFunc: refs(1)})
	require.ErrorIs(t, err, cmpp.ErrTooLong)
	_, err = cmpp.Split("é", cmpp.FmtASCII, cmpp.SplitOpts{})
	require.ErrorIs(t, err, cmpp.ErrEncoding)
}

// TestSplitThenReassemble runs a long message through Submit segments and
// back through the Reassembler, parts in reverse order.
func TestSplitThenReassemble(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("长短信分段测试😀", 30)
	segs, err := cmpp.Split(text, cmpp.FmtUCS2, cmpp.SplitOpts{RefFunc: refs(77), Ref16: true})
	require.NoError(t, err)
	require.Greater(t, len(segs), 3)
	r, err := cmpp.NewReassembler(cmpp.ReassemblerConfig{})
	require.NoError(t, err)
	now := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	for i := len(segs) - 1; i >= 0; i-- {
		msg, done, err := r.Add(now, cmpp.Part{SrcTerminalID: "13800138000", DestID: "106900001", MsgFmt: cmpp.FmtUCS2, Content: segs[i].Content})
		require.NoError(t, err)
		require.Equal(t, i == 0, done)
		if done {
			got, err := cmpp.DecodeText(msg.Content, msg.MsgFmt)
			require.NoError(t, err)
			require.Equal(t, text, got)
			require.Equal(t, len(segs), msg.Parts)
		}
	}
}
