package cli_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/admit"
	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/supplier"
	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
)

// TestSmsAll starts `relay sms all` on a seeded schema with a simulated
// supplier behind every channel: a signed request goes the whole way —
// admitted, routed, submitted, reported, completed (GET shows it delivered
// on attempt 1) — /metrics serves the stages' counters, and the process
// stops cleanly when its context ends.
func TestSmsAll(t *testing.T) {
	ctx := t.Context()
	url := testdb.PGSchema(t)
	dir := filepath.Join(t.TempDir(), "secrets")
	var out bytes.Buffer
	require.NoError(t, cli.Run(ctx, []string{"sms", "seed-data", "--postgres", url, "--migrate", "--secrets-dir", dir}, &out, &out),
		out.String())
	creds, err := os.ReadFile(filepath.Join(dir, "app-yuntong-otp.credentials"))
	require.NoError(t, err)
	key := regexp.MustCompile(`(?m)^api_key=(\S+)$`).FindSubmatch(creds)[1]
	secret, err := hex.DecodeString(string(regexp.MustCompile(`(?m)^hmac_secret=(\S+)$`).FindSubmatch(creds)[1]))
	require.NoError(t, err)
	startSuppliers(t, url)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	metrics := ln.Addr().String()
	require.NoError(t, ln.Close())
	tag := strconv.FormatInt(time.Now().UnixNano(), 36)

	runCtx, cancel := context.WithCancel(ctx)
	var log lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- cli.Run(runCtx, []string{"sms", "all", "--postgres", url, "--migrate", "--api-addr", "127.0.0.1:0",
			"--metrics-addr", metrics, "--command-stream", "t:" + tag + ":submit", "--result-stream", "t:" + tag + ":result",
			"--report-stream", "t:" + tag + ":report", "--log-level", "error", "--pools", "4,4,2,3,4"}, &log, &log)
	}()
	listening := regexp.MustCompile(`API on (http://\S+)`)
	require.Eventually(t, func() bool { return listening.MatchString(log.String()) }, 30*time.Second, 20*time.Millisecond,
		"%s", log.String())
	base := listening.FindStringSubmatch(log.String())[1]
	require.Contains(t, log.String(), "admission and routing, command and webhook publisher, gateway, callback intake and completion")

	sign := func(req *http.Request, method, path string, body []byte) {
		ts := time.Now().Unix()
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(admit.HeaderKey, string(key))
		req.Header.Set(admit.HeaderTimestamp, strconv.FormatInt(ts, 10))
		req.Header.Set(admit.HeaderSignature, admit.Sign(secret, method, path, ts, body))
	}
	body := []byte(`{"client_msg_id":"all-1","numbers":["13012345678"],"template":"otp","sign_name":"云通科技",` +
		`"params":{"code":"4321","minutes":"5"}}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/messages", bytes.NewReader(body))
	require.NoError(t, err)
	sign(req, http.MethodPost, "/v1/messages", body)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode, string(answer))
	id := regexp.MustCompile(`"message_id":(\d+)`).FindSubmatch(answer)[1]
	path := "/v1/messages/" + string(id)
	var got string
	require.Eventually(t, func() bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		require.NoError(t, err)
		sign(req, http.MethodGet, path, nil)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got = string(b)
		return strings.Contains(got, `"state":"completed"`)
	}, 30*time.Second, 50*time.Millisecond, "%s", got)
	require.Contains(t, got, `"outcome":"delivered","attempts":[{"attempt":1,"channel":"cu-a","state":"delivered"`)

	resp, err = http.Get("http://" + metrics + "/metrics")
	require.NoError(t, err)
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, name := range []string{"relay_work_claims_total", "relay_sms_completion_claims_total", "relay_sms_intake_entries_total",
		"relay_sms_gateway_submits_total"} {
		require.Contains(t, string(m), name)
	}

	cancel()
	require.NoError(t, <-done)
	require.NotContains(t, log.String(), hex.EncodeToString(secret), "the secret is never logged")
}

// startSuppliers starts one simulated supplier per channel of the schema at
// url (its SP_Id, version and secret file) on a free loopback port and
// points the channel at it.
func startSuppliers(t *testing.T, url string) {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT name, sp_id, cmpp_version, secret_ref FROM sms_channel`)
	require.NoError(t, err)
	type ch struct{ name, sp, version, ref string }
	var chans []ch
	for rows.Next() {
		var c ch
		require.NoError(t, rows.Scan(&c.name, &c.sp, &c.version, &c.ref))
		chans = append(chans, c)
	}
	require.NoError(t, rows.Err())
	for _, c := range chans {
		secret, err := os.ReadFile(strings.TrimPrefix(c.ref, "file:"))
		require.NoError(t, err)
		v := cmpp.V30
		if c.version == "2.0" {
			v = cmpp.V20
		}
		srv, err := supplier.New(supplier.Config{Accounts: []supplier.Account{{SourceAddr: c.sp,
			Secret: strings.TrimSpace(string(secret)), Versions: []cmpp.Version{v}}}, Clock: relayclock.System{}})
		require.NoError(t, err)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		sctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = srv.Serve(sctx, ln); close(done) }()
		t.Cleanup(func() { stop(); _ = srv.Close(); <-done })
		_, err = conn.Exec(ctx, `UPDATE sms_channel SET address = $1 WHERE name = $2`, ln.Addr().String(), c.name)
		require.NoError(t, err)
	}
}
