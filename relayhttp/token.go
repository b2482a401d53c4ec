package relayhttp

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
)

// TokenMinLen is the shortest token ParseToken accepts.
const TokenMinLen = 16

// TokenMaxLen is the longest token ParseToken accepts.
const TokenMaxLen = 1024

// Token is a bearer token. It never shows itself: String, GoString,
// LogValue and every fmt verb give "[REDACTED]".
type Token []byte

// Format writes "[REDACTED]" whatever the verb (%x or %d would otherwise
// print the bytes).
func (Token) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, "[REDACTED]") }

// String returns "[REDACTED]".
func (Token) String() string { return "[REDACTED]" }

// GoString returns "[REDACTED]".
func (Token) GoString() string { return "[REDACTED]" }

// LogValue returns "[REDACTED]".
func (Token) LogValue() slog.Value { return slog.StringValue("[REDACTED]") }

// ParseToken returns the token held in b, the content of a token file: b
// without surrounding white space (a trailing newline is usual). It must be
// TokenMinLen to TokenMaxLen visible ASCII characters, which a header
// carries unchanged. The error never quotes b.
func ParseToken(b []byte) (Token, error) {
	t := strings.TrimSpace(string(b))
	switch {
	case len(t) < TokenMinLen:
		return nil, fmt.Errorf("token has %d characters; at least %d are needed (e.g. `openssl rand -hex 32`)",
			len(t), TokenMinLen)
	case len(t) > TokenMaxLen:
		return nil, fmt.Errorf("token has %d characters; at most %d", len(t), TokenMaxLen)
	}
	for i := range len(t) {
		if t[i] < '!' || t[i] > '~' {
			return nil, errors.New("token holds a character that is not visible ASCII")
		}
	}
	return Token(t), nil
}

// requireToken refuses a request that does not carry "Authorization: Bearer
// <want>" with 401. Both sides are hashed before the constant-time compare,
// so not even the token's length leaks through timing.
func requireToken(want Token, next http.Handler) http.Handler {
	wantSum := sha256.Sum256(want)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		gotSum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(gotSum[:], wantSum[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="relay"`)
			WriteError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}
