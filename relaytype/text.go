package relaytype

import (
	"strconv"
	"unicode/utf8"
)

// Error text reaches the store (a message's LastError, an outbox event's or a
// latest-state row's last error), the logs and the admin API. A failure that
// quoted its whole input would carry a payload into all three, so error text
// is bounded where it is made (decoders quote at most MaxQuotedValue bytes of
// an offending value, with QuoteValue), where it is stored (every driver
// writes at most MaxErrorText bytes) and where it is logged or shown
// (ErrorText, BoundText).

// MaxErrorText is the most bytes of error text relay stores per failure,
// logs per attribute or shows per row of an admin listing: 4 KiB. Longer
// text is cut by BoundText, marker included.
const MaxErrorText = 4 << 10

// MaxQuotedValue is the most bytes of an offending input value an error
// message quotes (QuoteValue): 64.
const MaxQuotedValue = 64

// BoundText returns s when it has at most max bytes. Otherwise it returns a
// prefix of s cut on a UTF-8 boundary, followed by a marker of how many bytes
// were cut ("…[2093056 bytes cut]"), the whole at most max bytes; when max is
// too small for the marker, the prefix alone. BoundText(BoundText(s, n), n)
// equals BoundText(s, n). It returns "" for max <= 0.
func BoundText(s string, max int) string {
	switch {
	case len(s) <= max:
		return s
	case max <= 0:
		return ""
	}
	// The marker is reserved for the largest count it can show (len(s)), so
	// the real one, for fewer bytes, fits too.
	reserve := len(cutMarker(len(s)))
	if reserve >= max {
		return s[:runeBoundary(s, max)]
	}
	n := runeBoundary(s, max-reserve)
	return s[:n] + cutMarker(len(s)-n)
}

func cutMarker(n int) string { return "…[" + strconv.Itoa(n) + " bytes cut]" }

// runeBoundary returns n when s[n] starts a rune, else the start of the rune
// s[n] continues, so that s[:result] ends on a rune boundary. It looks back at
// most utf8.UTFMax-1 bytes: in invalid UTF-8 it returns n. It needs n < len(s).
func runeBoundary(s string, n int) int {
	for i := n; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			return i
		}
	}
	return n
}

// ErrorText returns the text of err bounded to MaxErrorText bytes
// (BoundText), or "" for a nil err. It is the form in which error text is
// stored and logged.
func ErrorText(err error) string {
	if err == nil {
		return ""
	}
	return BoundText(err.Error(), MaxErrorText)
}

// QuoteValue quotes an offending input value for an error message: v as
// strconv.Quote gives it when v has at most MaxQuotedValue bytes; otherwise
// its quoted first MaxQuotedValue bytes (cut on a UTF-8 boundary), an
// ellipsis and v's length, as in `"2026030199…"… (2097152 bytes)`. The result
// is at most 4×MaxQuotedValue+32 bytes and printable ASCII or valid UTF-8
// whatever v holds.
func QuoteValue(v string) string {
	if len(v) <= MaxQuotedValue {
		return strconv.Quote(v)
	}
	return strconv.Quote(v[:runeBoundary(v, MaxQuotedValue)]) + "… (" + strconv.Itoa(len(v)) + " bytes)"
}

// BoundError returns err with its text bounded to max bytes (BoundText):
// errors.Is and errors.As still see err and its chain. It returns err itself
// when its text fits, and nil for a nil err. Decoders use it as the last
// guard of an error that names parts of their input.
func BoundError(err error, max int) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	if len(text) <= max {
		return err
	}
	return &boundedError{text: BoundText(text, max), err: err}
}

// boundedError is an error whose text was cut by BoundError.
type boundedError struct {
	text string
	err  error
}

func (e *boundedError) Error() string { return e.text }
func (e *boundedError) Unwrap() error { return e.err }
