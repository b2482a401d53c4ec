package relaywebhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// HeaderSignature is the request header that carries the signature:
// "t=<unix seconds>,v1=<hex HMAC-SHA256>".
const HeaderSignature = "Relay-Signature"

// DefaultSignatureTolerance is how far a signature's timestamp may be from the
// receiver's clock when VerifySignature is given a non-positive tolerance.
const DefaultSignatureTolerance = 5 * time.Minute

// Errors VerifySignature returns (test with errors.Is).
var (
	// ErrSignatureMalformed: the header is not "t=<unix>,v1=<hex>[,v1=<hex>…]"
	// or the secret is empty.
	ErrSignatureMalformed = errors.New("malformed signature header")
	// ErrSignatureMismatch: no v1 signature matches the body under the
	// secret (a tampered body, a wrong secret, a forged request).
	ErrSignatureMismatch = errors.New("signature mismatch")
	// ErrSignatureExpired: the signed timestamp is further from now than the
	// tolerance (a replayed or badly delayed request, or a skewed clock).
	ErrSignatureExpired = errors.New("signature timestamp outside tolerance")
)

// Sign returns the HeaderSignature value for body signed at ts under secret:
// "t=<ts unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>". The
// sink calls it for every request; receivers may use it in their own tests.
func Sign(secret []byte, ts time.Time, body []byte) string {
	t := strconv.FormatInt(ts.Unix(), 10)
	return "t=" + t + ",v1=" + hex.EncodeToString(mac(secret, t, body))
}

// mac is HMAC-SHA256(secret, t + "." + body).
func mac(secret []byte, t string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(t))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// VerifySignature checks a HeaderSignature value against the raw request body:
// the header must be well formed, one of its v1 signatures must be the
// HMAC-SHA256 of t + "." + body under secret (compared in constant time), and
// t must be within tolerance of now, either way (a non-positive tolerance
// means DefaultSignatureTolerance). Several v1 entries are accepted so that a
// sender may sign with an old and a new secret while the secret rotates;
// unknown entries are ignored. It returns nil for a valid signature, else an
// error wrapping ErrSignatureMalformed, ErrSignatureMismatch or
// ErrSignatureExpired. Safe for concurrent use.
func VerifySignature(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if len(secret) == 0 {
		return fmt.Errorf("relaywebhook: verify signature: %w: empty secret", ErrSignatureMalformed)
	}
	if tolerance <= 0 {
		tolerance = DefaultSignatureTolerance
	}
	var (
		t    string
		sigs [][]byte
	)
	for part := range strings.SplitSeq(header, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("relaywebhook: verify signature: %w: entry without '='", ErrSignatureMalformed)
		}
		switch name {
		case "t":
			if t != "" {
				return fmt.Errorf("relaywebhook: verify signature: %w: more than one t", ErrSignatureMalformed)
			}
			if value == "" {
				return fmt.Errorf("relaywebhook: verify signature: %w: empty t", ErrSignatureMalformed)
			}
			t = value
		case "v1":
			sig, err := hex.DecodeString(value)
			if err != nil || len(sig) != sha256.Size {
				return fmt.Errorf("relaywebhook: verify signature: %w: v1 is not a hex SHA-256 MAC", ErrSignatureMalformed)
			}
			sigs = append(sigs, sig)
		}
	}
	if t == "" || len(sigs) == 0 {
		return fmt.Errorf("relaywebhook: verify signature: %w: want t=<unix>,v1=<hex>", ErrSignatureMalformed)
	}
	unix, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return fmt.Errorf("relaywebhook: verify signature: %w: t is not unix seconds", ErrSignatureMalformed)
	}
	want := mac(secret, t, body)
	matched := false
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			matched = true
		}
	}
	if !matched {
		return fmt.Errorf("relaywebhook: verify signature: %w", ErrSignatureMismatch)
	}
	// Checked after the MAC, so an unauthenticated timestamp never decides
	// the answer; the age is compared in seconds, the header's precision.
	if age := now.Unix() - unix; age > int64(tolerance/time.Second) || -age > int64(tolerance/time.Second) {
		return fmt.Errorf("relaywebhook: verify signature: %w: signed %ds from now, tolerance %v", ErrSignatureExpired, age, tolerance)
	}
	return nil
}
