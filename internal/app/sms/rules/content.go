package rules

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
)

// MaxContentChars bounds a message's content, signature included, in
// characters: beyond it a request is ReasonContentTooLong before the text
// is coded (ten UCS2 segments hold 670).
const MaxContentChars = 670

// Money is an amount in li (厘), 0.001 CNY: 0.045 CNY is 45. Money is never
// a float.
type Money int64

// String shows m in CNY with three decimals ("0.045 CNY").
func (m Money) String() string {
	sign := ""
	v := int64(m)
	if v < 0 {
		sign, v = "-", -v
	}
	return fmt.Sprintf("%s%d.%03d CNY", sign, v/1000, v%1000)
}

// Coding returns the Msg_Fmt a text goes out in: ASCII when every character
// is ASCII, UCS2 otherwise (cmpp.ChooseFmt).
func Coding(text string) cmpp.MsgFmt { return cmpp.ChooseFmt(text) }

// Segments returns how many CMPP segments text needs in coding f, counted by
// the splitter the gateway's commands are built with (cmpp.Split, 8-bit
// reference UDH), so what is priced is what is sent. A text over
// MaxContentChars or past 255 segments is ReasonContentTooLong, one f cannot
// carry ReasonContentEncoding.
func Segments(text string, f cmpp.MsgFmt) (int, error) {
	if n := utf8.RuneCountInString(text); n > MaxContentChars {
		return 0, refuse(ReasonContentTooLong, "%d characters, at most %d", n, MaxContentChars)
	}
	segs, err := cmpp.Split(text, f, cmpp.SplitOpts{RefFunc: func() uint16 { return 0 }})
	switch {
	case errors.Is(err, cmpp.ErrTooLong):
		return 0, refuse(ReasonContentTooLong, "more segments than a message may have")
	case errors.Is(err, cmpp.ErrEncoding):
		return 0, refuse(ReasonContentEncoding, "Msg_Fmt %d cannot carry the content", f)
	case err != nil:
		return 0, fmt.Errorf("sms: count segments (Msg_Fmt %d): %w", f, err)
	}
	return len(segs), nil
}

// Price returns segments × unit. Both must be positive (a zero price would
// hide the billing path); an overflow is an error.
func Price(segments int, unit Money) (Money, error) {
	if segments < 1 || unit < 1 {
		return 0, fmt.Errorf("sms: price: %d segments at %d li: both must be positive", segments, unit)
	}
	if int64(unit) > math.MaxInt64/int64(segments) {
		return 0, fmt.Errorf("sms: price: %d segments at %d li overflows", segments, unit)
	}
	return Money(int64(segments) * int64(unit)), nil
}

// Signature brackets.
const (
	sigOpen  = "【"
	sigClose = "】"
)

// The bounds of a signature's text, in characters.
const (
	MinSignatureChars = 2
	MaxSignatureChars = 20
)

// SplitSignature finds the 【signature】 of content, at its start or at its
// end (spaces around it ignored), and returns the signature's text and the
// body without it. The same signature at both ends is taken once from the
// start; two different ones are ReasonSignatureInvalid, none
// ReasonSignatureMissing, a malformed one (length, brackets or spaces
// inside) ReasonSignatureInvalid.
func SplitSignature(content string) (sig, body string, err error) {
	s := strings.TrimSpace(content)
	var head, tail string
	headBody, tailBody := s, s
	if rest, ok := strings.CutPrefix(s, sigOpen); ok {
		if i := strings.Index(rest, sigClose); i >= 0 {
			head, headBody = rest[:i], rest[i+len(sigClose):]
		}
	}
	if rest, ok := strings.CutSuffix(s, sigClose); ok {
		if i := strings.LastIndex(rest, sigOpen); i >= 0 && !strings.Contains(rest[i:], sigClose) {
			tail, tailBody = rest[i+len(sigOpen):], rest[:i]
		}
	}
	switch {
	case head == "" && tail == "":
		return "", "", refuse(ReasonSignatureMissing, "no 【signature】 at the start or end of the content")
	case head != "" && tail != "" && head != tail:
		return "", "", refuse(ReasonSignatureInvalid, "two different signatures, at the start and the end")
	case head != "" && tail != "" && len(headBody) >= len(tail)+len(sigOpen)+len(sigClose):
		// the same signature at both ends: the body lies between them
		sig, body = head, headBody[:len(headBody)-len(tail)-len(sigOpen)-len(sigClose)]
	case head != "":
		sig, body = head, headBody
	default:
		sig, body = tail, tailBody
	}
	if err := CheckSignatureText(sig); err != nil {
		return "", "", err
	}
	return sig, strings.TrimSpace(body), nil
}

// CheckSignatureText checks a signature's text: MinSignatureChars to
// MaxSignatureChars characters, valid UTF-8, no brackets (【】[]), spaces or
// control characters.
func CheckSignatureText(sig string) error {
	if !utf8.ValidString(sig) {
		return refuse(ReasonSignatureInvalid, "not valid UTF-8")
	}
	n := utf8.RuneCountInString(sig)
	if n < MinSignatureChars || n > MaxSignatureChars {
		return refuse(ReasonSignatureInvalid, "%d characters, want %d to %d", n, MinSignatureChars, MaxSignatureChars)
	}
	for _, r := range sig {
		switch {
		case r == '【' || r == '】' || r == '[' || r == ']':
			return refuse(ReasonSignatureInvalid, "holds a bracket")
		case r <= ' ' || r == 0x7f || r == 0x3000 || (r >= 0x80 && r < 0xa0):
			return refuse(ReasonSignatureInvalid, "holds a space or control character")
		}
	}
	return nil
}
