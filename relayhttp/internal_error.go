package relayhttp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"unicode/utf8"
)

// ErrorTextMax bounds the error text InternalError logs, in bytes.
const ErrorTextMax = 512

// InternalError logs err at ERROR level under msg and a new random error id,
// with attrs (never payloads or secrets) and the error text cut to
// ErrorTextMax bytes, and returns what to tell the client instead:
// "internal error (error id 1a2b3c4d5e6f); the server log has the detail".
// Use it for every answer whose cause is a store or system error: a
// database's error text (SQLSTATE codes, table and column names, values)
// never reaches a client, and the id finds the log line.
func InternalError(ctx context.Context, log *slog.Logger, msg string, err error, attrs ...any) string {
	id := ErrorID()
	text := "<nil>"
	if err != nil {
		text = Bound(err.Error(), ErrorTextMax)
	}
	log.ErrorContext(ctx, msg, append(attrs, "error_id", id, "error", text)...)
	return "internal error (error id " + id + "); the server log has the detail"
}

// ErrorID returns a new random id of 12 hex digits that ties an answer to a
// log line.
func ErrorID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// Bound returns s cut to at most n bytes on a rune boundary, ending in "…"
// when cut (if n leaves room for it). relayhttp imports only the standard
// library, so it keeps this short cut for its own answers and logs; other
// packages bound text with relaytype.BoundText, ErrorText and QuoteValue.
func Bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ell = "…"
	cut, tail := n-len(ell), ell
	if cut < 0 {
		cut, tail = max(n, 0), ""
	}
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + tail
}
