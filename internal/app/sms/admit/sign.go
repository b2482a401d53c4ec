package admit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// The headers of a signed request.
const (
	// HeaderKey carries the app's API key (an identifier, not a secret).
	HeaderKey = "X-Sms-Key"
	// HeaderTimestamp carries the request's time in Unix seconds, decimal.
	HeaderTimestamp = "X-Sms-Timestamp"
	// HeaderSignature carries the signature: lower-case hex of
	// HMAC-SHA256(secret, Canonical(...)).
	HeaderSignature = "X-Sms-Signature"
)

// Canonical is the text a request's signature covers: the method, the path
// (as sent, escaped; no query), the timestamp header's value and the body,
// separated by "\n":
//
//	POST\n/v1/messages\n1764640800\n{"client_msg_id":…}
//
// A GET signs an empty body (the text ends with "\n").
func Canonical(method, path, timestamp string, body []byte) []byte {
	out := make([]byte, 0, len(method)+len(path)+len(timestamp)+len(body)+3)
	out = append(out, method...)
	out = append(out, '\n')
	out = append(out, path...)
	out = append(out, '\n')
	out = append(out, timestamp...)
	out = append(out, '\n')
	return append(out, body...)
}

// Sign returns the signature of a request: lower-case hex of
// HMAC-SHA256(secret, Canonical(method, path, timestamp, body)). Clients
// compute it the same way; the API compares in constant time.
func Sign(secret []byte, method, path string, unix int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(Canonical(method, path, strconv.FormatInt(unix, 10), body))
	return hex.EncodeToString(m.Sum(nil))
}

// verify reports whether sig (hex) is the signature of the request.
func verify(secret []byte, method, path, timestamp string, body []byte, sig string) bool {
	got, err := hex.DecodeString(sig)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	m := hmac.New(sha256.New, secret)
	m.Write(Canonical(method, path, timestamp, body))
	return hmac.Equal(got, m.Sum(nil))
}

// Verify reports whether sig (the X-Sms-Signature value, hex) is the
// signature of the request, comparing in constant time: the check the API
// makes, for clients and test servers that must judge a signature as the
// API would. timestamp is the X-Sms-Timestamp value as sent; the skew is not
// judged here.
func Verify(secret []byte, method, path, timestamp string, body []byte, sig string) bool {
	return verify(secret, method, path, timestamp, body, sig)
}
