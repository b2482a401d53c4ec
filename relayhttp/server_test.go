package relayhttp_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayhttp"
)

const token = "0123456789abcdef-test-token"

// ok answers 200 {"ok":true} after reading the body; a body it cannot read
// (too large, too slow) is a 413 or 400.
var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if _, err := io.ReadAll(r.Body); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			relayhttp.WriteError(w, http.StatusRequestEntityTooLarge, "too large")
			return
		}
		relayhttp.WriteError(w, http.StatusBadRequest, "read body")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`)
})

// start listens with cfg (Addr 127.0.0.1:0 and the ok handler unless set),
// serves in the background and shuts down in t.Cleanup.
func start(t *testing.T, cfg relayhttp.Config) *relayhttp.Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Handler == nil {
		cfg.Handler = ok
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := relayhttp.Listen(cfg)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
		require.NoError(t, <-served)
	})
	return s
}

// request is one HTTP request's variable parts.
type request struct {
	method, path, host, contentType, body string
	header                                map[string]string
}

// do sends r to s with client c (a plain one when nil) and returns the status
// and the decoded {"error"} of a refusal.
func do(t *testing.T, s *relayhttp.Server, c *http.Client, r request) (int, string) {
	t.Helper()
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequest(cmpOr(r.method, http.MethodGet), s.URL()+cmpOr(r.path, "/x"), strings.NewReader(r.body))
	require.NoError(t, err)
	if r.host != "" {
		req.Host = r.host
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var e struct{ Error string }
	if resp.StatusCode != http.StatusOK {
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"), "refusals are JSON: %s", raw)
		require.NoError(t, json.Unmarshal(raw, &e), "%s", raw)
	}
	return resp.StatusCode, e.Error
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func bearer(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }

// A protected listener refuses a foreign Host (DNS rebinding), a missing or
// wrong token and a cross-origin mutation, each with its own status.
func TestProtectedListenerRefusals(t *testing.T) {
	t.Parallel()
	s := start(t, relayhttp.Config{Token: relayhttp.Token(token), Hosts: []string{"relay.internal:9091"}})
	port := s.Addr().(*net.TCPAddr).Port
	auth := bearer(token)

	code, msg := do(t, s, nil, request{})
	require.Equal(t, http.StatusUnauthorized, code, "no token")
	require.Contains(t, msg, "bearer token")
	code, _ = do(t, s, nil, request{header: bearer(token + "x")})
	require.Equal(t, http.StatusUnauthorized, code, "wrong token")
	code, _ = do(t, s, nil, request{header: map[string]string{"Authorization": "Basic " + token}})
	require.Equal(t, http.StatusUnauthorized, code, "not a bearer token")
	code, _ = do(t, s, nil, request{header: map[string]string{"Authorization": "bearer " + token}})
	require.Equal(t, http.StatusOK, code, "the scheme is case-insensitive")

	for _, host := range []string{"attacker.example", fmt.Sprintf("attacker.example:%d", port), "relay.internal.evil"} {
		code, msg = do(t, s, nil, request{host: host, header: auth})
		require.Equal(t, http.StatusMisdirectedRequest, code, "Host %s", host)
		require.Contains(t, msg, "is not served here")
	}
	for _, host := range []string{fmt.Sprintf("localhost:%d", port), "LOCALHOST", "127.0.0.1", "[::1]:9",
		"10.1.2.3", "RELAY.internal:1"} {
		code, msg = do(t, s, nil, request{host: host, header: auth})
		require.Equal(t, http.StatusOK, code, "Host %s: %s", host, msg)
	}

	// Cross-origin: by Origin, and by the Sec-Fetch-Site of a modern browser.
	code, msg = do(t, s, nil, request{method: http.MethodPost, contentType: "application/json", body: "{}",
		header: map[string]string{"Authorization": auth["Authorization"], "Origin": "https://evil.example"}})
	require.Equal(t, http.StatusForbidden, code)
	require.Contains(t, msg, "cross-origin")
	code, _ = do(t, s, nil, request{method: http.MethodPost, body: "{}",
		header: map[string]string{"Authorization": auth["Authorization"], "Sec-Fetch-Site": "cross-site"}})
	require.Equal(t, http.StatusForbidden, code)
	code, _ = do(t, s, nil, request{method: http.MethodPost, body: "{}",
		header: map[string]string{"Authorization": auth["Authorization"], "Origin": s.URL()}})
	require.Equal(t, http.StatusOK, code, "same origin")
	code, _ = do(t, s, nil, request{method: http.MethodPost, body: "{}", header: auth})
	require.Equal(t, http.StatusOK, code, "a non-browser client sends no Origin")
	code, _ = do(t, s, nil, request{header: map[string]string{"Authorization": auth["Authorization"],
		"Origin": "https://evil.example"}})
	require.Equal(t, http.StatusOK, code, "a GET changes nothing and passes")
}

// Without a token a loopback listener still checks Host and origin.
func TestLoopbackWithoutToken(t *testing.T) {
	t.Parallel()
	s := start(t, relayhttp.Config{})
	code, _ := do(t, s, nil, request{})
	require.Equal(t, http.StatusOK, code)
	code, _ = do(t, s, nil, request{host: "attacker.example"})
	require.Equal(t, http.StatusMisdirectedRequest, code)
	code, _ = do(t, s, nil, request{method: http.MethodPost, contentType: "text/plain", body: "x",
		header: map[string]string{"Origin": "https://evil.example"}})
	require.Equal(t, http.StatusForbidden, code)
}

// A public listener (metrics) checks nothing of the kind.
func TestPublicListener(t *testing.T) {
	t.Parallel()
	s := start(t, relayhttp.Config{Public: true})
	code, _ := do(t, s, nil, request{host: "prometheus.example"})
	require.Equal(t, http.StatusOK, code)
}

func TestRequireContentType(t *testing.T) {
	t.Parallel()
	s := start(t, relayhttp.Config{Handler: relayhttp.RequireContentType("application/json")(ok)})
	code, msg := do(t, s, nil, request{method: http.MethodPost, contentType: "text/plain", body: "{}"})
	require.Equal(t, http.StatusUnsupportedMediaType, code)
	require.Contains(t, msg, "application/json")
	code, _ = do(t, s, nil, request{method: http.MethodPost, body: "{}"})
	require.Equal(t, http.StatusUnsupportedMediaType, code, "no Content-Type")
	code, _ = do(t, s, nil, request{method: http.MethodPut, contentType: "application/x-www-form-urlencoded", body: "a=1"})
	require.Equal(t, http.StatusUnsupportedMediaType, code)
	code, _ = do(t, s, nil, request{method: http.MethodPost, contentType: "Application/JSON; charset=utf-8", body: "{}"})
	require.Equal(t, http.StatusOK, code)
	code, _ = do(t, s, nil, request{})
	require.Equal(t, http.StatusOK, code, "a GET has no body to check")
}

// A protected listener on a non-loopback address starts only when clients
// must authenticate; an address without a host is loopback.
func TestNonLoopbackNeedsAuthentication(t *testing.T) {
	t.Parallel()
	quiet := slog.New(slog.DiscardHandler)
	for _, addr := range []string{"0.0.0.0:0", "[::]:0"} {
		_, err := relayhttp.Listen(relayhttp.Config{Name: "--admin-addr", Addr: addr, Handler: ok, Logger: quiet})
		require.ErrorContains(t, err, "--admin-addr "+addr+" is not a loopback address")
		require.ErrorContains(t, err, "token")
		require.ErrorContains(t, err, "mutual TLS")
	}
	s := start(t, relayhttp.Config{Addr: ":0"})
	require.True(t, s.Addr().(*net.TCPAddr).IP.IsLoopback(), "no host: loopback, got %s", s.Addr())
	s = start(t, relayhttp.Config{Addr: "localhost:0"})
	require.True(t, s.Addr().(*net.TCPAddr).IP.IsLoopback())

	s = start(t, relayhttp.Config{Addr: "0.0.0.0:0", Token: relayhttp.Token(token)})
	require.False(t, s.Addr().(*net.TCPAddr).IP.IsLoopback())

	var logs bytes.Buffer
	s = start(t, relayhttp.Config{Name: "metrics", Addr: "0.0.0.0:0", Public: true,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.False(t, s.Addr().(*net.TCPAddr).IP.IsLoopback())
	require.Contains(t, logs.String(), "level=WARN")
	require.Contains(t, logs.String(), "non-loopback")
	require.Contains(t, logs.String(), "listener=metrics")

	_, err := relayhttp.Listen(relayhttp.Config{Addr: "127.0.0.1:0", Handler: ok, RequestTimeout: time.Minute,
		WriteTimeout: time.Minute})
	require.ErrorContains(t, err, "WriteTimeout 1m0s must exceed Config.RequestTimeout")
}

// Mutual TLS authenticates clients as a token does: a non-loopback listener
// starts with it, and a client without a certificate is refused.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	pki := newPKI(t)
	serverTLS := &tls.Config{Certificates: []tls.Certificate{pki.server}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: pki.pool, MinVersion: tls.VersionTLS12}
	_, err := relayhttp.Listen(relayhttp.Config{Addr: "0.0.0.0:0", Handler: ok, Logger: slog.New(slog.DiscardHandler),
		TLS: &tls.Config{Certificates: []tls.Certificate{pki.server}}})
	require.ErrorContains(t, err, "is not a loopback address", "TLS without client certificates is no authentication")

	s := start(t, relayhttp.Config{Addr: "0.0.0.0:0", TLS: serverTLS})
	port := s.Addr().(*net.TCPAddr).Port
	url := fmt.Sprintf("https://127.0.0.1:%d/x", port)
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pki.pool, Certificates: certs, MinVersion: tls.VersionTLS12}}}
	}
	_, err = client().Get(url)
	require.Error(t, err, "no client certificate")
	resp, err := client(pki.client).Get(url)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// A client trickling its body is cut off once ReadTimeout has passed since
// the request began, however steadily it sends; so is one trickling its
// header after ReadHeaderTimeout.
func TestSlowClientsAreCutOff(t *testing.T) {
	t.Parallel()
	const readTimeout = 300 * time.Millisecond
	s := start(t, relayhttp.Config{ReadHeaderTimeout: 100 * time.Millisecond, ReadTimeout: readTimeout})

	trickle := func(prefix string) time.Duration {
		conn, err := net.Dial("tcp", s.Addr().String())
		require.NoError(t, err)
		defer conn.Close()
		began := time.Now()
		_, err = io.WriteString(conn, prefix)
		require.NoError(t, err)
		stop := make(chan struct{})
		defer close(stop)
		go func() { // one byte every 20 ms, far more often than any timeout
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := conn.Write([]byte("x")); err != nil {
						return
					}
				}
			}
		}()
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err = io.Copy(io.Discard, conn) // until the server closes the connection
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server must close the connection: %v", err)
		return time.Since(began)
	}

	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			took := trickle("POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
			// The server's clock starts at accept, a little before Dial returns.
			require.GreaterOrEqual(t, took, readTimeout-50*time.Millisecond, "body trickler %d", i)
			require.Less(t, took, 5*time.Second, "body trickler %d", i)
		})
	}
	wg.Go(func() {
		took := trickle("GET /x HTTP/1.1\r\nX-Slow: ")
		require.Less(t, took, 5*time.Second, "header trickler")
	})
	wg.Wait()
}

// At most MaxConns connections are served at once; the next one waits until
// one closes.
func TestConnectionLimit(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var inside atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			inside.Add(1)
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})
	s := start(t, relayhttp.Config{Handler: h, MaxConns: 2})
	fresh := func(timeout time.Duration) *http.Client {
		return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	}
	blocked := make(chan error, 2)
	for range 2 {
		go func() {
			resp, err := fresh(30 * time.Second).Get(s.URL() + "/block")
			if err == nil {
				_ = resp.Body.Close()
			}
			blocked <- err
		}()
	}
	require.Eventually(t, func() bool { return inside.Load() == 2 }, 10*time.Second, 5*time.Millisecond)

	_, err := fresh(300 * time.Millisecond).Get(s.URL() + "/free")
	require.Error(t, err, "a third connection is not served while two are open")
	close(release)
	require.NoError(t, <-blocked)
	require.NoError(t, <-blocked)
	resp, err := fresh(10 * time.Second).Get(s.URL() + "/free")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, int32(2), inside.Load())
}

// Each request's context ends after RequestTimeout; its body is bounded by
// MaxBodyBytes.
func TestRequestBounds(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/wait", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		relayhttp.WriteError(w, http.StatusServiceUnavailable, r.Context().Err().Error())
	})
	mux.Handle("/", ok)
	s := start(t, relayhttp.Config{Handler: mux, RequestTimeout: 100 * time.Millisecond, MaxBodyBytes: 10})
	code, msg := do(t, s, nil, request{path: "/wait"})
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, context.DeadlineExceeded.Error(), msg)
	code, _ = do(t, s, nil, request{method: http.MethodPost, body: strings.Repeat("x", 10)})
	require.Equal(t, http.StatusOK, code)
	code, _ = do(t, s, nil, request{method: http.MethodPost, body: strings.Repeat("x", 11)})
	require.Equal(t, http.StatusRequestEntityTooLarge, code)
}

func TestParseToken(t *testing.T) {
	t.Parallel()
	tok, err := relayhttp.ParseToken([]byte("  " + token + "\n"))
	require.NoError(t, err)
	require.Equal(t, token, string(tok))
	for _, bad := range []string{"", "short", "\n\n", strings.Repeat("x", relayhttp.TokenMaxLen+1),
		"0123456789abcdef ghijk", "0123456789abcdefé"} {
		_, err := relayhttp.ParseToken([]byte(bad))
		require.Error(t, err, "%q", bad)
		require.NotContains(t, err.Error(), "0123456789abcdef", "the error never quotes the token")
	}
	for _, f := range []string{"%v", "%s", "%x", "%q", "%#v", "%d"} {
		require.Equal(t, "[REDACTED]", fmt.Sprintf(f, tok), f)
	}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "token", tok)
	require.NotContains(t, logs.String(), token)
}

func TestInternalError(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	long := `ERROR: relation "relay_message" does not exist (SQLSTATE 42P01) ` + strings.Repeat("é", 1000)
	msg := relayhttp.InternalError(context.Background(), log, "admin: stats", errors.New(long), "queue", "q")
	require.NotContains(t, msg, "SQLSTATE")
	require.NotContains(t, msg, "relay_message")
	var line struct {
		Level, Msg, Queue string
		ErrorID           string `json:"error_id"`
		Error             string
	}
	require.NoError(t, json.NewDecoder(bufio.NewReader(&logs)).Decode(&line))
	require.Equal(t, "ERROR", line.Level)
	require.Equal(t, "q", line.Queue)
	require.Len(t, line.ErrorID, 12)
	require.Contains(t, msg, line.ErrorID)
	require.Contains(t, line.Error, "SQLSTATE 42P01", "the detail goes to the log")
	require.LessOrEqual(t, len(line.Error), relayhttp.ErrorTextMax)
	require.True(t, strings.HasSuffix(line.Error, "…"))

	require.Equal(t, "abc", relayhttp.Bound("abc", 3))
	require.Equal(t, "a…", relayhttp.Bound("abcdef", 4))
	require.Equal(t, "ab", relayhttp.Bound("abcdef", 2))
	require.Equal(t, "…", relayhttp.Bound("éé", 3), "never half a rune")
}

// pki is a throw-away CA with a server certificate for 127.0.0.1 and a
// client certificate.
type pki struct {
	pool           *x509.CertPool
	server, client tls.Certificate
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	leaf := func(serial int64, usage x509.ExtKeyUsage, ips ...net.IP) tls.Certificate {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: ips,
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		require.NoError(t, err)
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &pki{pool: pool, server: leaf(2, x509.ExtKeyUsageServerAuth, net.IPv4(127, 0, 0, 1)),
		client: leaf(3, x509.ExtKeyUsageClientAuth)}
}
