package cli

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/supervise"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/internal/testlog"
	"github.com/relayhq/relay/internal/weaklink"
)

// probe GETs path of srv and returns the status and the body.
func probe(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := srv.Client().Get(srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestShoreReadiness: /readyz answers 200 while the shore's PostgreSQL and
// its target database answer; 503 naming the target while the target is
// cut off (a proxy in front of the real MariaDB refuses every connection),
// 200 again once it is back; 503 naming PostgreSQL once its pool is closed;
// and 503 "stopping" once the process drains. /healthz stays 200 throughout:
// the process is alive, restarting it would not help. The body never quotes
// a driver's error.
func TestShoreReadiness(t *testing.T) {
	t.Parallel()
	d := testdb.PGDriver(t)
	_, mdsn := testdb.MariaDBWithDSN(t)
	mc, err := mysql.ParseDSN(mdsn)
	require.NoError(t, err)
	proxy, err := weaklink.New(weaklink.Config{Target: mc.Addr})
	require.NoError(t, err)
	addr, err := proxy.Start(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Stop(context.Background()) })
	mc.Addr = addr
	mc.Timeout = time.Second

	r, closeReady, err := shoreReadiness(d, mc.FormatDSN(), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer closeReady()
	srv := httptest.NewServer(r.handler(http.NotFoundHandler()))
	defer srv.Close()

	code, body := probe(t, srv, "/readyz")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "ready", body)

	proxy.SetDown(true)
	code, body = probe(t, srv, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not ready: target: ping failed", body)
	code, _ = probe(t, srv, "/healthz")
	require.Equal(t, http.StatusOK, code)

	proxy.SetDown(false)
	code, body = probe(t, srv, "/readyz")
	require.Equal(t, http.StatusOK, code, body)

	d.Close()
	code, body = probe(t, srv, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not ready: postgres: ping failed", body)

	r.stop()
	code, body = probe(t, srv, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not ready: stopping", body)
	code, _ = probe(t, srv, "/healthz")
	require.Equal(t, http.StatusOK, code)
	code, _ = probe(t, srv, "/other")
	require.Equal(t, http.StatusNotFound, code, "other paths go to the wrapped handler")
}

// TestReadinessTimeout: a database that accepts the connection and never
// answers fails the probe within the timeout, saying so.
func TestReadinessTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	r, closeReady, err := shoreReadiness(testdb.PGDriver(t), "root@tcp("+ln.Addr().String()+")/x", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	defer closeReady()
	r.timeout = 200 * time.Millisecond
	srv := httptest.NewServer(r.handler(http.NotFoundHandler()))
	defer srv.Close()
	start := time.Now()
	code, body := probe(t, srv, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not ready: target: no answer within 200ms", body)
	require.Less(t, time.Since(start), 5*time.Second)
}

// shoreWorld makes a fresh PostgreSQL schema, a MariaDB database and a
// development PKI, and returns the arguments of `relay shipsync shore` on
// them with --target and --arbiter (no --addr).
func shoreWorld(t *testing.T) []string {
	t.Helper()
	url := testdb.PGSchema(t)
	_, mdsn := testdb.MariaDBWithDSN(t)
	dir := filepath.Join(t.TempDir(), "pki")
	for _, a := range [][]string{{"init"}, {"server"}} {
		var out bytes.Buffer
		require.NoError(t, Run(t.Context(), append(append([]string{"shipsync", "pki"}, a...), "--dir", dir), &out, &out))
	}
	return []string{"shipsync", "shore", "--postgres", url, "--migrate", "--tls-cert", filepath.Join(dir, "server.crt"),
		"--tls-key", filepath.Join(dir, "server.key"), "--client-ca", filepath.Join(dir, "ca.crt"), "--target", mdsn,
		"--arbiter"}
}

// TestShipsyncShoreProbes: `relay shipsync shore --metrics-addr` serves
// /readyz, ready with its PostgreSQL and --target up, /health with every
// subsystem and the health and fleet gauges, and stops cleanly
// when its ctx ends (SIGTERM in cmd/relay).
func TestShipsyncShoreProbes(t *testing.T) {
	t.Parallel()
	args := shoreWorld(t)
	port, err := supervise.FreePort()
	require.NoError(t, err)
	metrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	var out testlog.Buffer
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, append(args, "--addr", "127.0.0.1:0", "--log-level", "warn", "--metrics-addr", metrics), &out, &out)
	}()
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "listening on") }, 20*time.Second,
		10*time.Millisecond, out.String())
	resp, err := http.Get("http://" + metrics + "/readyz")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	require.Equal(t, "ready\n", string(b))
	// /health: every subsystem of this shore (it applies: target) and the
	// same states as gauges on /metrics.
	resp, err = http.Get("http://" + metrics + "/health")
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	for _, want := range []string{`"overall":"HEALTHY"`, `"name":"receive"`, `"name":"processing"`, `"name":"downlink"`,
		`"name":"target"`} {
		require.Contains(t, string(b), want)
	}
	resp, err = http.Get("http://" + metrics + "/metrics")
	require.NoError(t, err)
	b, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.Contains(t, string(b), `relay_shipsync_shore_health{subsystem="overall"} 0`)
	require.Contains(t, string(b), `relay_shipsync_connected_nodes 0`)
	stop()
	require.NoError(t, <-done)
}

// TestShipsyncProbe: the probe command passes on 2xx, fails naming the
// status and the body's first bytes otherwise, and refuses a URL that is
// not http(s).
func TestShipsyncProbe(t *testing.T) {
	t.Parallel()
	r := newReadiness(slog.New(slog.DiscardHandler), time.Second)
	srv := httptest.NewServer(r.handler(http.NotFoundHandler()))
	defer srv.Close()
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := Run(t.Context(), append([]string{"shipsync", "probe"}, args...), &out, &out)
		return out.String(), err
	}
	got, err := run(srv.URL + "/readyz")
	require.NoError(t, err)
	require.Equal(t, "ready\n", got)
	r.stop()
	_, err = run("--timeout", "2s", srv.URL+"/readyz")
	require.EqualError(t, err, `shipsync probe: HTTP 503 "not ready: stopping"`)
	_, err = run("ftp://x/readyz")
	require.ErrorContains(t, err, "is not an http(s) URL")
	_, err = run()
	require.ErrorContains(t, err, "one URL expected")
}

// TestEnvFile: a connection string may come from the file NAME_FILE names
// (a container secret); the variable itself wins; an unreadable file stops
// every command with an error naming the variable; other *_FILE variables
// are not read.
func TestEnvFile(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "target-dsn")
	require.NoError(t, os.WriteFile(secret, []byte("app:pw@tcp(db:3306)/ops\n"), 0o600))
	t.Setenv("SHIPSYNC_TARGET_DSN", "")
	t.Setenv("SHIPSYNC_TARGET_DSN_FILE", secret)
	t.Setenv("SSL_CERT_FILE", filepath.Join(dir, "absent"))
	require.Equal(t, "app:pw@tcp(db:3306)/ops", envOr("SHIPSYNC_TARGET_DSN", "def"))
	require.NoError(t, checkEnvFiles(), "SSL_CERT_FILE is not one of the secret variables")
	t.Setenv("SHIPSYNC_TARGET_DSN", "direct")
	require.Equal(t, "direct", envOr("SHIPSYNC_TARGET_DSN", "def"))

	t.Setenv("SHIPSYNC_TARGET_DSN", "")
	t.Setenv("SHIPSYNC_TARGET_DSN_FILE", filepath.Join(dir, "absent"))
	var out bytes.Buffer
	err := Run(t.Context(), []string{"shipsync", "probe", "http://127.0.0.1:1/readyz"}, &out, &out)
	require.ErrorContains(t, err, "$SHIPSYNC_TARGET_DSN_FILE: open ")
	require.NotContains(t, err.Error(), "pw@")
}

// TestShipsyncShoreFailsWithoutHanging: when the data API cannot listen
// (its address is taken), the shore returns the error — the arbiter it had
// started is stopped and gives its leases up rather than being waited for
// until a signal that never comes.
func TestShipsyncShoreFailsWithoutHanging(t *testing.T) {
	t.Parallel()
	args := shoreWorld(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	done := make(chan error, 1)
	go func() {
		var out testlog.Buffer
		done <- Run(t.Context(), append(args, "--addr", taken.Addr().String(), "--log-level", "off"), &out, &out)
	}()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "address already in use")
	case <-time.After(30 * time.Second):
		t.Fatal("the shore did not return after failing to listen")
	}
}

// TestHelpMasksEnvPasswords: -h shows a flag's default, which may be a
// connection string taken from the environment or a secret file; its
// password is masked.
func TestHelpMasksEnvPasswords(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "dsn")
	require.NoError(t, os.WriteFile(secret, []byte("app:s3cretpw@tcp(db:3306)/ops"), 0o600))
	t.Setenv("DATABASE_URL", "postgres://shipsync:s3cretpw@pg:5432/shipsync")
	t.Setenv("SHIPSYNC_TARGET_DSN", "")
	t.Setenv("SHIPSYNC_TARGET_DSN_FILE", secret)
	var out bytes.Buffer
	require.NoError(t, Run(t.Context(), []string{"shipsync", "shore", "-h"}, &out, &out))
	require.NotContains(t, out.String(), "s3cretpw")
	require.Contains(t, out.String(), "postgres://shipsync:xxxxx@pg:5432/shipsync")
	require.Contains(t, out.String(), "app:xxxxx@tcp(db:3306)/ops")
}
