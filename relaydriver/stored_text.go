package relaydriver

import (
	"strings"
	"unicode/utf8"

	"github.com/relayhq/relay/relaytype"
)

// StoredText is the error text a driver writes for s (the LastError of
// MessageCompleteParams and MessageFailParams, the Error of OutboxFailParams
// and LatestFailParams): at most relaytype.MaxErrorText bytes, cut on a UTF-8
// boundary with a marker of what was cut (relaytype.BoundText), and valid
// UTF-8 without NUL, each bad byte replaced by U+FFFD. PostgreSQL's text
// refuses NUL and invalid UTF-8, and a failure that cannot be recorded would
// be attempted again without ever counting. Every driver writes error text
// through StoredText, so no caller can put more into a row.
func StoredText(s string) string {
	s = relaytype.BoundText(s, relaytype.MaxErrorText)
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
	return relaytype.BoundText(s, relaytype.MaxErrorText)
}
