package cmpp_test

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

// requireClass fails unless err wraps one of classes and its text is short
// and valid UTF-8 (so no raw input bytes leaked into it).
func requireClass(t *testing.T, err error, classes ...error) {
	t.Helper()
	for _, c := range classes {
		if errors.Is(err, c) {
			require.LessOrEqual(t, len(err.Error()), 200, err.Error())
			require.True(t, utf8.ValidString(err.Error()), "%q", err.Error())
			return
		}
	}
	t.Fatalf("error of no expected class: %v", err)
}

// wontEncode reports whether decoded packet p is one encoding refuses on
// purpose: Msg_Content past MaxContent (decoding accepts up to 255 bytes),
// or a 4-byte ConnectResp Status over 255 to be written in 2.0.
func wontEncode(p cmpp.Packet, v cmpp.Version) bool {
	switch p := p.(type) {
	case *cmpp.Submit:
		return len(p.MsgContent) > cmpp.MaxContent(p.MsgFmt)
	case *cmpp.Deliver:
		return len(p.MsgContent) > cmpp.MaxContent(p.MsgFmt)
	case *cmpp.ConnectResp:
		return v == cmpp.V20 && p.Status > 0xff
	}
	return false
}

// requireBounded checks that what a decoder allocated is bounded by its
// input, whatever the length fields said.
func requireBounded(t *testing.T, p cmpp.Packet, body []byte) {
	t.Helper()
	switch p := p.(type) {
	case *cmpp.Submit:
		require.LessOrEqual(t, len(p.MsgContent), len(body))
		require.LessOrEqual(t, len(p.DestTerminalIDs), cmpp.MaxDestUsers)
		require.LessOrEqual(t, cap(p.DestTerminalIDs), cmpp.MaxDestUsers)
	case *cmpp.Deliver:
		require.LessOrEqual(t, len(p.MsgContent), len(body))
	}
}

// checkDecode is the property every decoder keeps: no panic; an error is
// MALFORMED or UNSUPPORTED_VERSION; a packet that decoded encodes (unless
// wontEncode) and decodes again to the same value.
func checkDecode(t *testing.T, p, again cmpp.Packet, body []byte, v cmpp.Version) {
	if err := p.DecodeBody(body, v); err != nil {
		requireClass(t, err, cmpp.ErrMalformed, cmpp.ErrUnsupportedVersion)
		return
	}
	requireBounded(t, p, body)
	enc, err := cmpp.AppendPacket(nil, v, 1, p)
	if wontEncode(p, v) {
		requireClass(t, err, cmpp.ErrTooLong, cmpp.ErrInvalid)
		return
	}
	require.NoError(t, err)
	require.NoError(t, again.DecodeBody(enc[cmpp.HeaderLen:], v))
	require.Equal(t, p, again)
}

// fuzzDecode runs checkDecode on packet type P, seeded with its golden
// bodies in both versions.
func fuzzDecode[P any, PP interface {
	*P
	cmpp.Packet
}](f *testing.F) {
	cmd := PP(new(P)).Command()
	for _, c := range goldenCases() {
		if c.p.Command() == cmd {
			body := readHex(f, c.file)[cmpp.HeaderLen:]
			f.Add(uint8(cmpp.V20), body)
			f.Add(uint8(cmpp.V30), body)
		}
	}
	f.Add(uint8(cmpp.V30), []byte{})
	f.Fuzz(func(t *testing.T, v uint8, body []byte) {
		checkDecode(t, PP(new(P)), PP(new(P)), body, cmpp.Version(v))
	})
}

func FuzzDecodeConnect(f *testing.F)        { fuzzDecode[cmpp.Connect](f) }
func FuzzDecodeConnectResp(f *testing.F)    { fuzzDecode[cmpp.ConnectResp](f) }
func FuzzDecodeSubmit(f *testing.F)         { fuzzDecode[cmpp.Submit](f) }
func FuzzDecodeSubmitResp(f *testing.F)     { fuzzDecode[cmpp.SubmitResp](f) }
func FuzzDecodeDeliver(f *testing.F)        { fuzzDecode[cmpp.Deliver](f) }
func FuzzDecodeDeliverResp(f *testing.F)    { fuzzDecode[cmpp.DeliverResp](f) }
func FuzzDecodeQuery(f *testing.F)          { fuzzDecode[cmpp.Query](f) }
func FuzzDecodeQueryResp(f *testing.F)      { fuzzDecode[cmpp.QueryResp](f) }
func FuzzDecodeCancel(f *testing.F)         { fuzzDecode[cmpp.Cancel](f) }
func FuzzDecodeCancelResp(f *testing.F)     { fuzzDecode[cmpp.CancelResp](f) }
func FuzzDecodeActiveTestResp(f *testing.F) { fuzzDecode[cmpp.ActiveTestResp](f) }

// FuzzDecodePacket covers every Command_Id, the bodiless packets included,
// through NewPacket.
func FuzzDecodePacket(f *testing.F) {
	for _, c := range goldenCases() {
		b := readHex(f, c.file)
		f.Add(uint32(c.p.Command()), uint8(c.v), b[cmpp.HeaderLen:])
	}
	f.Fuzz(func(t *testing.T, cmd uint32, v uint8, body []byte) {
		p, err := cmpp.NewPacket(cmpp.CommandID(cmd))
		if err != nil {
			requireClass(t, err, cmpp.ErrUnknownCommand)
			return
		}
		again, err := cmpp.NewPacket(cmpp.CommandID(cmd))
		require.NoError(t, err)
		checkDecode(t, p, again, body, cmpp.Version(v))
	})
}

func FuzzDecodeReport(f *testing.F) {
	f.Add(uint8(cmpp.V30), readHex(f, "report_v30.hex"))
	f.Add(uint8(cmpp.V20), readHex(f, "deliver_v20.hex")[cmpp.HeaderLen+8+21+10+3+21+2:][:60])
	f.Fuzz(func(t *testing.T, vb uint8, content []byte) {
		v := cmpp.Version(vb)
		var r cmpp.Report
		if err := r.Decode(content, v); err != nil {
			requireClass(t, err, cmpp.ErrMalformed, cmpp.ErrUnsupportedVersion)
			return
		}
		enc, err := r.AppendTo(nil, v)
		require.NoError(t, err)
		var again cmpp.Report
		require.NoError(t, again.Decode(enc, v))
		require.Equal(t, r, again)
	})
}

// FuzzReadFrame reads packets off an arbitrary stream: every error is an
// end of stream or a refused length, and no body exceeds MaxPacket.
func FuzzReadFrame(f *testing.F) {
	var all []byte
	for _, c := range goldenCases() {
		b := readHex(f, c.file)
		f.Add(b)
		all = append(all, b...)
	}
	f.Add(all)
	f.Add(cmpp.Header{TotalLength: 0xffffffff, CommandID: cmpp.CmdDeliver}.AppendTo(nil))
	f.Fuzz(func(t *testing.T, stream []byte) {
		fr := cmpp.NewFrameReader(bytes.NewReader(stream))
		for {
			h, body, err := fr.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					requireClass(t, err, cmpp.ErrMalformed, cmpp.ErrTooLong)
				}
				return
			}
			require.Len(t, body, int(h.TotalLength)-cmpp.HeaderLen)
			require.LessOrEqual(t, int(h.TotalLength), cmpp.MaxPacket)
			if p, err := cmpp.NewPacket(h.CommandID); err == nil {
				for _, v := range []cmpp.Version{cmpp.V20, cmpp.V30} {
					if err := p.DecodeBody(body, v); err != nil {
						requireClass(t, err, cmpp.ErrMalformed)
					}
				}
			}
		}
	})
}

func FuzzParseUDH(f *testing.F) {
	f.Add([]byte{0x05, 0x00, 0x03, 0x2a, 0x02, 0x01, 'h', 'i'})
	f.Add([]byte{0x06, 0x08, 0x04, 0x12, 0x34, 0x03, 0x03})
	f.Add([]byte{0x04, 0x04, 0x02, 0x0b, 0x84, 'x'})
	f.Add([]byte{0x0a, 0x00, 0x03, 0x01, 0x02, 0x01, 0x08, 0x04, 0x00, 0x01, 0x02, 0x01})
	f.Fuzz(func(t *testing.T, content []byte) {
		h, payload, err := cmpp.ParseUDH(content)
		if err != nil {
			requireClass(t, err, cmpp.ErrBadUDH)
			return
		}
		require.True(t, bytes.HasSuffix(content, payload))
		require.Less(t, len(payload), len(content), "the header takes at least its length byte")
		if h.Total == 0 {
			require.Zero(t, h.Seq)
			return
		}
		require.GreaterOrEqual(t, h.Seq, uint8(1))
		require.LessOrEqual(t, h.Seq, h.Total)
		if !h.Ref16 {
			require.LessOrEqual(t, h.Ref, uint16(0xff))
		}
		h2, p2, err := cmpp.ParseUDH(append(h.AppendTo(nil), payload...))
		require.NoError(t, err)
		require.Equal(t, h, h2)
		require.Equal(t, payload, p2)
	})
}

// FuzzReassemble feeds a stream of parts to a small Reassembler: every
// refusal is classified, the bounds always hold, and Expire empties it.
// Each part in the input is: sender byte, length byte, content.
func FuzzReassemble(f *testing.F) {
	var seed []byte
	for seq := uint8(1); seq <= 3; seq++ {
		c := cmpp.UDH{Ref: 9, Total: 3, Seq: seq}.AppendTo(nil)
		c = append(c, "part"...)
		seed = append(seed, 'A', byte(len(c)))
		seed = append(seed, c...)
	}
	f.Add(seed)
	f.Add(append(seed, seed...))
	f.Fuzz(func(t *testing.T, in []byte) {
		const maxEntries, maxBytes = 4, 4096
		r, err := cmpp.NewReassembler(cmpp.ReassemblerConfig{MaxEntries: maxEntries, MaxBytes: maxBytes, TTL: time.Minute})
		require.NoError(t, err)
		now := t0
		for len(in) >= 2 {
			src, n := in[0], int(in[1])
			in = in[2:]
			n = min(n, len(in))
			content := in[:n]
			in = in[n:]
			now = now.Add(time.Duration(src&0x0f) * 5 * time.Second)
			msg, done, err := r.Add(now, cmpp.Part{SrcTerminalID: string(rune('A' + src>>4)), MsgFmt: cmpp.MsgFmt(src & 1), Content: content})
			if err != nil {
				requireClass(t, err, cmpp.ErrBadUDH, cmpp.ErrConflict, cmpp.ErrReassemblyFull)
			}
			if done {
				require.GreaterOrEqual(t, msg.Parts, 1)
				require.LessOrEqual(t, len(msg.Content), msg.Parts*255)
			}
			entries, bytes := r.Len()
			require.LessOrEqual(t, entries, maxEntries)
			require.LessOrEqual(t, bytes, maxBytes)
			require.GreaterOrEqual(t, bytes, 0)
		}
		r.Expire(now.Add(time.Minute))
		entries, bytes := r.Len()
		require.Zero(t, entries)
		require.Zero(t, bytes)
	})
}

// FuzzSplit splits arbitrary text: every segment fits a Submit, and the
// payloads joined decode to the text.
func FuzzSplit(f *testing.F) {
	f.Add("hello", uint8(0), false)
	f.Add("长短信分段测试😀𠀀㐀", uint8(2), true)
	f.Add("a{b}c", uint8(0), true)
	f.Fuzz(func(t *testing.T, text string, fb uint8, ref16 bool) {
		f := [...]cmpp.MsgFmt{cmpp.FmtASCII, cmpp.FmtUCS2, cmpp.FmtGB, cmpp.FmtBinary}[fb%4]
		segs, err := cmpp.Split(text, f, cmpp.SplitOpts{RefFunc: refs(1), Ref16: ref16})
		if err != nil {
			requireClass(t, err, cmpp.ErrEncoding, cmpp.ErrTooLong)
			return
		}
		var whole []byte
		for _, p := range payloads(t, segs) {
			whole = append(whole, p...)
		}
		for _, s := range segs {
			require.LessOrEqual(t, len(s.Content), cmpp.MaxContent(f))
		}
		got, err := cmpp.DecodeText(whole, f)
		require.NoError(t, err)
		require.Equal(t, text, got)
	})
}
