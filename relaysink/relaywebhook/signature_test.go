package relaywebhook_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
			s := secret
			if c.secret != nil {
				s = c.secret
			}
			b := body
			if c.body != nil {
				b = c.body
			}
			err := relaywebhook.VerifySignature(s, c.header, b, c.now, 5*time.Minute)
			if c.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, c.wantErr)
			if len(s) > 0 {
				require.NotContains(t, err.Error(), string(s), "an error must not show the secret")
			}
		})
	}

	// A non-positive tolerance is DefaultSignatureTolerance.
	require.NoError(t, relaywebhook.VerifySignature(secret, valid, body, at.Add(relaywebhook.DefaultSignatureTolerance), 0))
	require.ErrorIs(t, relaywebhook.VerifySignature(secret, valid, body, at.Add(relaywebhook.DefaultSignatureTolerance+time.Second), 0),
		relaywebhook.ErrSignatureExpired)
}

func unix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
