package cmpp

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/encoding/simplifiedchinese"
)

// MsgFmt is Msg_Fmt, the coding of Msg_Content.
type MsgFmt uint8

// The Msg_Fmt values of the standard.
const (
	// FmtASCII: ASCII text; the ISMG sends it in the GSM 7-bit alphabet.
	FmtASCII MsgFmt = 0
	// FmtSIMWrite: a SIM-card write operation (binary).
	FmtSIMWrite MsgFmt = 3
	// FmtBinary: binary data.
	FmtBinary MsgFmt = 4
	// FmtUCS2: UCS2, carried as UTF-16 big-endian (so a character outside the
	// BMP takes a surrogate pair).
	FmtUCS2 MsgFmt = 8
	// FmtGB: text containing Chinese in a GB code; encoded here as GB18030,
	// which agrees with GBK on every character GBK has.
	FmtGB MsgFmt = 15
)

// MaxContent returns the most Msg_Content bytes a packet may carry for f:
// 160 for FmtASCII, 140 for the others.
func MaxContent(f MsgFmt) int {
	if f == FmtASCII {
		return 160
	}
	return 140
}

// ChooseFmt returns FmtASCII when text is plain ASCII and FmtUCS2 otherwise:
// the coding a channel without a GB preference should use.
func ChooseFmt(text string) MsgFmt {
	for i := 0; i < len(text); i++ {
		if text[i] >= utf8.RuneSelf {
			return FmtUCS2
		}
	}
	return FmtASCII
}

// AppendText appends text (UTF-8) coded as f to dst: FmtASCII refuses any
// byte over 0x7F, FmtUCS2 writes UTF-16BE, FmtGB writes GB18030, FmtBinary
// and FmtSIMWrite copy the bytes as they are. Invalid UTF-8 is refused for
// the text codings. Errors wrap ErrEncoding and never quote the text.
func AppendText(dst []byte, text string, f MsgFmt) ([]byte, error) {
	switch f {
	case FmtBinary, FmtSIMWrite:
		return append(dst, text...), nil
	case FmtASCII:
		for i := 0; i < len(text); i++ {
			if text[i] >= utf8.RuneSelf {
				return dst, textErr(f, "byte %d is not ASCII", i)
			}
		}
		return append(dst, text...), nil
	case FmtUCS2:
		if !utf8.ValidString(text) {
			return dst, textErr(f, "text is not valid UTF-8")
		}
		for _, r := range text {
			dst = appendUTF16BE(dst, r)
		}
		return dst, nil
	case FmtGB:
		if !utf8.ValidString(text) {
			return dst, textErr(f, "text is not valid UTF-8")
		}
		b, err := simplifiedchinese.GB18030.NewEncoder().String(text)
		if err != nil {
			return dst, textErr(f, "GB18030 encoder refused the text")
		}
		// The encoder maps some private-use characters (U+E000–U+E864) to
		// codes that decode as other characters; a handset would show the
		// wrong text, so such text is refused rather than sent changed.
		if back, err := simplifiedchinese.GB18030.NewDecoder().String(b); err != nil || back != text {
			return dst, textErr(f, "text has a character without an exact GB18030 code (send it as UCS2)")
		}
		return append(dst, b...), nil
	}
	return dst, textErr(f, "no text coding")
}

// DecodeText returns the text of message bytes coded as f: the inverse of
// AppendText. FmtUCS2 needs an even number of bytes; an unpaired surrogate
// becomes U+FFFD, as do GB18030 sequences that do not decode. FmtASCII
// refuses bytes over 0x7F. FmtBinary and FmtSIMWrite return the bytes as
// they are.
func DecodeText(b []byte, f MsgFmt) (string, error) {
	switch f {
	case FmtBinary, FmtSIMWrite:
		return string(b), nil
	case FmtASCII:
		for i, c := range b {
			if c >= utf8.RuneSelf {
				return "", textErr(f, "byte %d is not ASCII", i)
			}
		}
		return string(b), nil
	case FmtUCS2:
		if len(b)%2 != 0 {
			return "", textErr(f, "odd length %d", len(b))
		}
		out := make([]byte, 0, len(b)+len(b)/2)
		for i := 0; i < len(b); i += 2 {
			r := rune(b[i])<<8 | rune(b[i+1])
			if utf16.IsSurrogate(r) && i+3 < len(b) {
				if p := utf16.DecodeRune(r, rune(b[i+2])<<8|rune(b[i+3])); p != utf8.RuneError {
					out = utf8.AppendRune(out, p)
					i += 2
					continue
				}
			}
			out = utf8.AppendRune(out, r) // a lone surrogate appends U+FFFD
		}
		return string(out), nil
	case FmtGB:
		out, err := simplifiedchinese.GB18030.NewDecoder().Bytes(b)
		if err != nil {
			return "", textErr(f, "GB18030 decoder refused %d bytes", len(b))
		}
		return string(out), nil
	}
	return "", textErr(f, "no text coding")
}

// appendUTF16BE appends r as UTF-16 big-endian: two bytes, or four (a
// surrogate pair) outside the BMP.
func appendUTF16BE(dst []byte, r rune) []byte {
	if r >= 0x10000 {
		hi, lo := utf16.EncodeRune(r)
		return append(dst, byte(hi>>8), byte(hi), byte(lo>>8), byte(lo))
	}
	return append(dst, byte(r>>8), byte(r))
}

func textErr(f MsgFmt, format string, args ...any) error {
	return fmt.Errorf("cmpp: Msg_Fmt %d: %w: "+format, append([]any{f, ErrEncoding}, args...)...)
}
