package relaywebhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"

	"github.com/relayhq/relay/relaysink"
)

// Signature headers. The sink sends both by default (Config.DisableV1Signature
// drops the first); receivers should check HeaderSignatureV2 (VerifySignatureV2
// or a Receiver) and keep HeaderSignature only while they migrate.
const (
	// HeaderSignature carries the v1 signature,
	// "t=<unix seconds>,v1=<hex HMAC-SHA256>", over the timestamp and the body
	// only: it does not bind the event id, type, key, sequence or topic.
	HeaderSignature = "Relay-Signature"
	// HeaderSignatureV2 carries the v2 signature,
	// "t=<unix seconds>,v2=<hex HMAC-SHA256>", over the timestamp, event id,
	// type, key, sequence, topic and body (see SignV2 for the exact bytes).
	HeaderSignatureV2 = "Relay-Signature-V2"
)

// DefaultSignatureTolerance is how far a signature's timestamp may be from the
// receiver's clock when VerifySignature or VerifySignatureV2 is given a
// non-positive tolerance, and a Receiver's default.
const DefaultSignatureTolerance = 5 * time.Minute

// Errors VerifySignature, VerifySignatureV2 and Receiver.Verify return (test
// with errors.Is).
var (
	// ErrSignatureMalformed: the header is not "t=<unix>,vN=<hex>[,vN=<hex>…]",
	// the secret is empty, or (v2) the request lacks a signed field or
	// carries one that does not parse.
	ErrSignatureMalformed = errors.New("malformed signature header")
	// ErrSignatureMismatch: no signature of the header's version matches the
	// signed fields under the secret (a tampered body or field, a wrong
	// secret, a forged request).
	ErrSignatureMismatch = errors.New("signature mismatch")
	// ErrSignatureExpired: the signed timestamp is further from now than the
	// tolerance (a replayed or badly delayed request, or a skewed clock).
	ErrSignatureExpired = errors.New("signature timestamp outside tolerance")
)

// Sign returns the v1 HeaderSignature value for body signed at ts under
// secret: "t=<ts unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>".
// It binds neither the event id nor the key, type, sequence or topic; see
// SignV2. Receivers may use it in their own tests.
func Sign(secret []byte, ts time.Time, body []byte) string {
	t := strconv.FormatInt(ts.Unix(), 10)
	return "t=" + t + ",v1=" + hex.EncodeToString(mac(secret, t, body))
}

// mac is HMAC-SHA256(secret, t + "." + body), the v1 MAC.
func mac(secret []byte, t string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(t))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// v2Tag opens every v2 signed string, so that a v2 MAC is never a MAC of any
// other message signed with the same secret (a v1 string starts with digits
// and a '.').
const v2Tag = "relay-webhook-v2"

// SignV2 returns the HeaderSignatureV2 value for ev signed at ts under secret:
// "t=<ts unix seconds>,v2=<hex HMAC-SHA256(secret, signed string)>". The
// signed string is the netstring (decimal byte length, ':', the bytes, ',')
// of each of these, in this order:
//
//	"relay-webhook-v2", t, ev.ID, ev.Type, ev.Key, ev.Seq in decimal, ev.Topic, body
//
// where body is ev.Payload, or empty for a Tombstone (what the sink sends).
// The length prefixes make the encoding injective: no byte of one field can
// pass for another field's, so two different events never share a signed
// string. The sink calls SignV2 for every request; receivers may use it in
// their own tests.
func SignV2(secret []byte, ts time.Time, ev relaysink.Event) string {
	t := strconv.FormatInt(ts.Unix(), 10)
	return "t=" + t + ",v2=" + hex.EncodeToString(macV2(secret, t, ev))
}

// macV2 is the v2 MAC of ev signed at t (see SignV2).
func macV2(secret []byte, t string, ev relaysink.Event) []byte {
	m := hmac.New(sha256.New, secret)
	for _, field := range []string{v2Tag, t, ev.ID, string(ev.Type), ev.Key, strconv.FormatInt(ev.Seq, 10), ev.Topic} {
		writeNetstring(m, []byte(field))
	}
	writeNetstring(m, bodyOf(ev))
	return m.Sum(nil)
}

// writeNetstring writes len(b) in decimal, ':', b and ','.
func writeNetstring(h hash.Hash, b []byte) {
	h.Write(strconv.AppendInt(nil, int64(len(b)), 10))
	h.Write([]byte{':'})
	h.Write(b)
	h.Write([]byte{','})
}

// VerifySignature checks a v1 HeaderSignature value against the raw request
// body: the header must be well formed, one of its v1 signatures must be the
// HMAC-SHA256 of t + "." + body under secret (compared in constant time), and
// t must be within tolerance of now, either way (a non-positive tolerance
// means DefaultSignatureTolerance). Several v1 entries are accepted so that a
// sender may sign with an old and a new secret while the secret rotates;
// unknown entries are ignored. It returns nil for a valid signature, else an
// error wrapping ErrSignatureMalformed, ErrSignatureMismatch or
// ErrSignatureExpired. Safe for concurrent use.
//
// v1 does not bind the event id, key, type, sequence or topic: a captured
// request verifies again under other such headers within the tolerance.
// Prefer VerifySignatureV2 or a Receiver.
func VerifySignature(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	_, err := verify("v1", secret, header, now, tolerance, func(t string) []byte { return mac(secret, t, body) })
	return err
}

// VerifySignatureV2 checks a HeaderSignatureV2 value against the event the
// request carries (its id, type, key, sequence, topic and body, as SignV2
// signs them; a Receiver reads them from the request): the header must be
// well formed, one of its v2 signatures must match (compared in constant
// time), and t must be within tolerance of now, either way (a non-positive
// tolerance means DefaultSignatureTolerance). Several v2 entries are
// accepted, for secret rotation; unknown entries (v1 among them) are
// ignored. It returns nil for a valid signature, else an error wrapping
// ErrSignatureMalformed, ErrSignatureMismatch or ErrSignatureExpired. It does
// not remember what it verified: a Receiver adds the replay check. Safe for
// concurrent use.
func VerifySignatureV2(secret []byte, header string, ev relaysink.Event, now time.Time, tolerance time.Duration) error {
	_, err := verify("v2", secret, header, now, tolerance, func(t string) []byte { return macV2(secret, t, ev) })
	return err
}

// verify parses header as "t=<unix>,<version>=<hex>[,…]", checks that one of
// its signatures of that version is want(t) and that t is within tolerance of
// now, and returns t in unix seconds.
func verify(version string, secret []byte, header string, now time.Time, tolerance time.Duration, want func(t string) []byte) (int64, error) {
	prefix := "relaywebhook: verify signature " + version
	if len(secret) == 0 {
		return 0, fmt.Errorf("%s: %w: empty secret", prefix, ErrSignatureMalformed)
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
			return 0, fmt.Errorf("%s: %w: entry without '='", prefix, ErrSignatureMalformed)
		}
		switch name {
		case "t":
			if t != "" {
				return 0, fmt.Errorf("%s: %w: more than one t", prefix, ErrSignatureMalformed)
			}
			if value == "" {
				return 0, fmt.Errorf("%s: %w: empty t", prefix, ErrSignatureMalformed)
			}
			t = value
		case version:
			sig, err := hex.DecodeString(value)
			if err != nil || len(sig) != sha256.Size {
				return 0, fmt.Errorf("%s: %w: %s is not a hex SHA-256 MAC", prefix, ErrSignatureMalformed, version)
			}
			sigs = append(sigs, sig)
		}
	}
	if t == "" || len(sigs) == 0 {
		return 0, fmt.Errorf("%s: %w: want t=<unix>,%s=<hex>", prefix, ErrSignatureMalformed, version)
	}
	unix, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w: t is not unix seconds", prefix, ErrSignatureMalformed)
	}
	expected := want(t)
	matched := false
	for _, sig := range sigs {
		if hmac.Equal(sig, expected) {
			matched = true
		}
	}
	if !matched {
		return 0, fmt.Errorf("%s: %w", prefix, ErrSignatureMismatch)
	}
	// Checked after the MAC, so an unauthenticated timestamp never decides
	// the answer; the age is compared in seconds, the header's precision.
	if age := now.Unix() - unix; age > int64(tolerance/time.Second) || -age > int64(tolerance/time.Second) {
		return 0, fmt.Errorf("%s: %w: signed %ds from now, tolerance %v", prefix, ErrSignatureExpired, age, tolerance)
	}
	return unix, nil
}
