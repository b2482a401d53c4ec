package relaywebhook_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaysink/relaywebhook"
)

func TestVerifySignature(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	body := []byte(`{"order":7}`)
	valid := relaywebhook.Sign(secret, at, body)
	require.Regexp(t, `^t=\d+,v1=[0-9a-f]{64}$`, valid)
	other := relaywebhook.Sign([]byte("another secret"), at, body)
	_, v1Other, _ := strings.Cut(other, ",")
	_, v1, _ := strings.Cut(valid, ",")

	for _, c := range []struct {
		name    string
		secret  []byte
		header  string
		body    []byte
		now     time.Time
		wantErr error
	}{
		{name: "valid", header: valid, now: at},
		{name: "valid within tolerance", header: valid, now: at.Add(4 * time.Minute)},
		{name: "valid slightly ahead", header: valid, now: at.Add(-4 * time.Minute)},
		{name: "rotating secrets", header: "t=" + unix(at) + "," + v1Other + "," + v1, now: at},
		{name: "unknown entries ignored", header: valid + ",v0=abc", now: at},
		{name: "spaces", header: "t=" + unix(at) + ", " + v1, now: at},
		{name: "tampered body", header: valid, body: []byte(`{"order":8}`), now: at, wantErr: relaywebhook.ErrSignatureMismatch},
		{name: "wrong secret", secret: []byte("wrong"), header: valid, now: at, wantErr: relaywebhook.ErrSignatureMismatch},
		{name: "tampered timestamp", header: "t=" + unix(at.Add(time.Second)) + "," + v1, now: at, wantErr: relaywebhook.ErrSignatureMismatch},
		{name: "too old", header: valid, now: at.Add(5*time.Minute + time.Second), wantErr: relaywebhook.ErrSignatureExpired},
		{name: "from the future", header: valid, now: at.Add(-6 * time.Minute), wantErr: relaywebhook.ErrSignatureExpired},
		{name: "empty header", header: "", now: at, wantErr: relaywebhook.ErrSignatureMalformed},
		{name: "garbage", header: "garbage", now: at, wantErr: relaywebhook.ErrSignatureMalformed},
		{name: "no timestamp", header: v1, now: at, wantErr: relaywebhook.ErrSignatureMalformed},
		{name: "no signature", header: "t=" + unix(at), now: at, wantErr: relaywebhook.ErrSignatureMalformed},
		{name: "timestamp not a number", header: "t=noon," + v1, now: at, wantErr: relaywebhook.ErrSignatureMalformed},
		{name: "two timestamps", header: "t=1,t=2," + v1, now: at, wantErr: relaywebhook.ErrSignatureMalformed},
		{name: "signature not hex", header: "t=" + unix(at) + ",v1=zz", now: at, wantErr: relaywebhook.ErrSignatureMalformed},
		{name: "signature too short", header: "t=" + unix(at) + ",v1=abcd", now: at, wantErr: relaywebhook.ErrSignatureMalformed},
		{name: "empty secret", secret: []byte{}, header: valid, now: at, wantErr: relaywebhook.ErrSignatureMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := body
			if c.body != nil {
				b = c.body
			}
			requireVerified(t, relaywebhook.VerifySignature(secretOr(c.secret), c.header, b, c.now, 5*time.Minute), c.wantErr)
		})
	}

	// A non-positive tolerance is DefaultSignatureTolerance.
	require.NoError(t, relaywebhook.VerifySignature(secret, valid, body, at.Add(relaywebhook.DefaultSignatureTolerance), 0))
	require.ErrorIs(t, relaywebhook.VerifySignature(secret, valid, body, at.Add(relaywebhook.DefaultSignatureTolerance+time.Second), 0),
		relaywebhook.ErrSignatureExpired)
}

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// Two tombstones of different keys and ids signed in the same second: v1
// signs the same bytes for both (the timestamp and an empty body), so either
// request's signature passes for the other; v2 binds the event and tells
// them apart.
func TestSignV2SameSecondTombstones(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	a := relaysink.Event{ID: "e-1", Topic: "orders", Key: "order-7", Seq: 3, Type: relaysink.Tombstone}
	b := relaysink.Event{ID: "e-2", Topic: "orders", Key: "order-8", Seq: 3, Type: relaysink.Tombstone}

	require.Equal(t, relaywebhook.Sign(secret, at, nil), relaywebhook.Sign(secret, at, nil), "v1: the weakness v2 fixes")
	sigA, sigB := relaywebhook.SignV2(secret, at, a), relaywebhook.SignV2(secret, at, b)
	require.NotEqual(t, sigA, sigB)
	require.NoError(t, relaywebhook.VerifySignatureV2(secret, sigA, a, at, 0))
	require.ErrorIs(t, relaywebhook.VerifySignatureV2(secret, sigA, b, at, 0), relaywebhook.ErrSignatureMismatch)
	require.ErrorIs(t, relaywebhook.VerifySignatureV2(secret, sigB, a, at, 0), relaywebhook.ErrSignatureMismatch)
}

// A v2 signature over one event fails for the event with any one signed
// field changed, and for another timestamp.
func TestSignV2BindsEveryField(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ev := relaysink.Event{ID: "e-1", Topic: "orders", Key: "order-7", Seq: 3, Type: relaysink.Upsert, Payload: []byte(`{"total":10}`)}
	sig := relaywebhook.SignV2(secret, at, ev)
	require.Regexp(t, `^t=\d+,v2=[0-9a-f]{64}$`, sig)
	require.NoError(t, relaywebhook.VerifySignatureV2(secret, sig, ev, at, 0))

	for name, change := range map[string]func(*relaysink.Event){
		"id":         func(e *relaysink.Event) { e.ID = "e-2" },
		"type":       func(e *relaysink.Event) { e.Type, e.Payload = relaysink.Tombstone, nil },
		"key":        func(e *relaysink.Event) { e.Key = "order-8" },
		"seq":        func(e *relaysink.Event) { e.Seq = 4 },
		"topic":      func(e *relaysink.Event) { e.Topic = "payments" },
		"body":       func(e *relaysink.Event) { e.Payload = []byte(`{"total":11}`) },
		"empty body": func(e *relaysink.Event) { e.Payload = []byte{} },
	} {
		t.Run(name, func(t *testing.T) {
			changed := ev
			change(&changed)
			err := relaywebhook.VerifySignatureV2(secret, sig, changed, at, 0)
			require.ErrorIs(t, err, relaywebhook.ErrSignatureMismatch)
			require.NotContains(t, err.Error(), "total", "an error must not show the body")
		})
	}
	t.Run("timestamp", func(t *testing.T) {
		_, v2, _ := strings.Cut(sig, ",")
		err := relaywebhook.VerifySignatureV2(secret, "t="+unix(at.Add(time.Second))+","+v2, ev, at, 0)
		require.ErrorIs(t, err, relaywebhook.ErrSignatureMismatch)
	})
	t.Run("headers are not signed", func(t *testing.T) {
		withHeaders := ev
		withHeaders.Headers = map[string]string{"x-tenant": "t-42"}
		require.NoError(t, relaywebhook.VerifySignatureV2(secret, sig, withHeaders, at, 0))
	})
}

// The signed string is exactly the documented one (docs/security.md), and
// its length prefixes keep events apart that a separator-joined string
// would confuse.
func TestSignV2Canonical(t *testing.T) {
	t.Parallel()
	at := time.Unix(1767268800, 0)
	tomb := relaysink.Event{ID: "e2", Topic: "orders", Key: "order-7", Seq: 2, Type: relaysink.Tombstone}
	want := hmacHex("16:relay-webhook-v2,10:1767268800,2:e2,9:TOMBSTONE,7:order-7,1:2,6:orders,0:,")
	require.Equal(t, "t=1767268800,v2="+want, relaywebhook.SignV2(secret, at, tomb))
	up := relaysink.Event{ID: "e1", Topic: "orders", Key: "order-7", Seq: 1, Type: relaysink.Upsert, Payload: []byte(`{"total":10}`)}
	want = hmacHex(`16:relay-webhook-v2,10:1767268800,2:e1,6:UPSERT,7:order-7,1:1,6:orders,12:{"total":10},`)
	require.Equal(t, "t=1767268800,v2="+want, relaywebhook.SignV2(secret, at, up))
	// A tombstone's payload is not sent, so not signed either.
	tomb.Payload = []byte("ignored")
	require.Equal(t, "t=1767268800,v2="+hmacHex("16:relay-webhook-v2,10:1767268800,2:e2,9:TOMBSTONE,7:order-7,1:2,6:orders,0:,"),
		relaywebhook.SignV2(secret, at, tomb))

	// Pairs whose fields joined by a separator (',', ':', '.', '\n') read
	// the same.
	base := relaysink.Event{ID: "x", Topic: "t", Key: "k", Seq: 1, Type: relaysink.Upsert, Payload: []byte("p")}
	for name, pair := range map[string][2]func(*relaysink.Event){
		"id/key comma": {func(e *relaysink.Event) { e.ID, e.Key = "x", "y,z" }, func(e *relaysink.Event) { e.ID, e.Key = "x,y", "z" }},
		"key/topic netstring": {
			func(e *relaysink.Event) { e.Key, e.Topic = "a,1:b", "c" },
			func(e *relaysink.Event) { e.Key, e.Topic = "a", "b,1:c" },
		},
		"topic/body dot": {func(e *relaysink.Event) { e.Topic, e.Payload = "t.a", []byte("b") }, func(e *relaysink.Event) { e.Topic, e.Payload = "t", []byte("a.b") }},
		"empty key":      {func(e *relaysink.Event) { e.ID, e.Key = "x\n", "" }, func(e *relaysink.Event) { e.ID, e.Key = "x", "\n" }},
		"seq digits":     {func(e *relaysink.Event) { e.Key, e.Seq = "k1", 2 }, func(e *relaysink.Event) { e.Key, e.Seq = "k", 12 }},
	} {
		a, b := base, base
		pair[0](&a)
		pair[1](&b)
		require.NotEqual(t, relaywebhook.SignV2(secret, at, a), relaywebhook.SignV2(secret, at, b), name)
	}
}

// hmacHex is the hex HMAC-SHA256 of s under the test secret, computed here
// and not by the package.
func hmacHex(s string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(s))
	return hex.EncodeToString(m.Sum(nil))
}

// VerifySignatureV2 parses the header as VerifySignature does, with v2
// entries; a v1-only header does not pass for v2.
func TestVerifySignatureV2(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ev := relaysink.Event{ID: "e-1", Topic: "orders", Key: "order-7", Seq: 3, Type: relaysink.Upsert, Payload: []byte("{}")}
	valid := relaywebhook.SignV2(secret, at, ev)
	_, v2, _ := strings.Cut(valid, ",")
	_, v2Other, _ := strings.Cut(relaywebhook.SignV2([]byte("another secret"), at, ev), ",")
	_, v1, _ := strings.Cut(relaywebhook.Sign(secret, at, ev.Payload), ",")
	for _, c := range []struct {
		name    string
		secret  []byte
		header  string
		now     time.Time
		wantErr error
	}{
		{name: "valid", header: valid, now: at},
		{name: "edge of tolerance", header: valid, now: at.Add(5 * time.Minute)},
		{name: "ahead within tolerance", header: valid, now: at.Add(-5 * time.Minute)},
		{name: "rotating secrets", header: "t=" + unix(at) + "," + v2Other + "," + v2, now: at},
		{name: "v1 entry ignored", header: valid + "," + v1, now: at},
		{name: "only v1", header: "t=" + unix(at) + "," + v1, now: at, wantErr: relaywebhook.ErrSignatureMalformed},
		{name: "v1 value as v2", header: "t=" + unix(at) + ",v2=" + strings.TrimPrefix(v1, "v1="), now: at, wantErr: relaywebhook.ErrSignatureMismatch},
		{name: "wrong secret", secret: []byte("wrong"), header: valid, now: at, wantErr: relaywebhook.ErrSignatureMismatch},
		{name: "too old", header: valid, now: at.Add(5*time.Minute + time.Second), wantErr: relaywebhook.ErrSignatureExpired},
		{name: "from the future", header: valid, now: at.Add(-5*time.Minute - time.Second), wantErr: relaywebhook.ErrSignatureExpired},
		{name: "empty header", header: "", now: at, wantErr: relaywebhook.ErrSignatureMalformed},
		{name: "v2 not hex", header: "t=" + unix(at) + ",v2=zz", now: at, wantErr: relaywebhook.ErrSignatureMalformed},
		{name: "empty secret", secret: []byte{}, header: valid, now: at, wantErr: relaywebhook.ErrSignatureMalformed},
	} {
		t.Run(c.name, func(t *testing.T) {
			requireVerified(t, relaywebhook.VerifySignatureV2(secretOr(c.secret), c.header, ev, c.now, 5*time.Minute), c.wantErr)
		})
	}
}

// secretOr is s, or the test secret for nil (an empty s stays empty).
func secretOr(s []byte) []byte {
	if s == nil {
		return secret
	}
	return s
}

// requireVerified checks err against wantErr (nil: verified) and that an
// error does not show the test secret.
func requireVerified(t *testing.T, err, wantErr error) {
	t.Helper()
	if wantErr == nil {
		require.NoError(t, err)
		return
	}
	require.ErrorIs(t, err, wantErr)
	require.NotContains(t, err.Error(), string(secret), "an error must not show the secret")
}

// FuzzVerifySignatureV2: any header and event is answered with nil or one
// of the three errors, never a panic, and the error text stays short.
func FuzzVerifySignatureV2(f *testing.F) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Add(relaywebhook.SignV2(secret, at, relaysink.Event{ID: "e", Topic: "t", Type: relaysink.Upsert}), "e", "k", []byte("body"))
	f.Add("t=1,v2=00,v1=11", "", "", []byte(nil))
	f.Add("t=,,=,v2", "id", "k,1:", []byte("x"))
	f.Fuzz(func(t *testing.T, header, id, key string, body []byte) {
		ev := relaysink.Event{ID: id, Topic: "t", Key: key, Seq: 1, Type: relaysink.Upsert, Payload: body}
		err := relaywebhook.VerifySignatureV2(secret, header, ev, at, 0)
		if err == nil {
			return
		}
		require.True(t, errors.Is(err, relaywebhook.ErrSignatureMalformed) || errors.Is(err, relaywebhook.ErrSignatureMismatch) ||
			errors.Is(err, relaywebhook.ErrSignatureExpired), err)
		require.Less(t, len(err.Error()), 200)
	})
}
