package cli_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
)

// TestSmsGatewayDemo runs `relay sms gateway --demo` on the machine's Redis
// and PostgreSQL (it fails when either is absent): every command reaches the
// simulator once, the duplicate is re-emitted, not resubmitted, and nothing
// is left pending.
func TestSmsGatewayDemo(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := cli.Run(ctx, []string{"sms", "gateway", "--demo", "40", "--postgres", testdb.PGURL()}, &out, &out)
	require.NoError(t, err, out.String())
	require.Contains(t, out.String(), "supplier:  40 submits, 40 distinct submit keys, 0 submitted twice")
	require.Contains(t, out.String(), "results:   41 written, 40 distinct event ids, 40 accepted")
	require.Contains(t, out.String(), "pending:   0 unacked commands")
	require.Contains(t, out.String(), "ok: ")
}

func TestSmsGatewayFlags(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	secretFile := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secretFile, []byte("topsecret-value\n"), 0o600))
	for _, args := range [][]string{
		{"--channel", "cm=127.0.0.1:7890,4.0,901234," + secretFile},
		{"--channel", "cm=127.0.0.1:7890,3.0,901234," + secretFile + ",zero"},
		{"--channel", "cm=127.0.0.1:7890"},
		{"--channel", "cm=127.0.0.1:7890,3.0,901234,/nonexistent/secret"},
		{},
	} {
		var out bytes.Buffer
		err := cli.Run(ctx, append([]string{"sms", "gateway"}, args...), &out, &out)
		require.Error(t, err, "%v", args)
		require.NotContains(t, err.Error()+out.String(), "topsecret")
	}
}

// TestSmsGatewayServes runs `relay sms gateway` as an operator would — a
// channel to a running `relay sms supplier`, its own streams, --migrate on a
// fresh schema, --metrics-addr — pushes commands onto its command stream and
// reads their results back through the stream and /metrics.
func TestSmsGatewayServes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	supCtx, stopSup := context.WithCancel(ctx)
	defer stopSup()
	var supOut lockedBuffer
	supDone := make(chan error, 1)
	go func() {
		supDone <- cli.Run(supCtx, []string{"sms", "supplier", "--listen", "127.0.0.1:0", "--account", "901234:s3cr3t-gw",
			"--stats-every", "0"}, &supOut, &supOut)
	}()
	listening := regexp.MustCompile(`listening on (127\.0\.0\.1:\d+)`)
	var supAddr string
	require.Eventually(t, func() bool {
		if m := listening.FindStringSubmatch(supOut.String()); m != nil {
			supAddr = m[1]
		}
		return supAddr != ""
	}, 20*time.Second, 5*time.Millisecond, "output: %s", supOut.String())

	secretFile := filepath.Join(t.TempDir(), "cm.secret")
	require.NoError(t, os.WriteFile(secretFile, []byte("s3cr3t-gw\n"), 0o600))
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", DisableIdentity: true})
	defer rdb.Close()
	prefix := "test:cli-gw:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	defer rdb.Del(context.WithoutCancel(ctx), prefix+"submit", prefix+"result", prefix+"report")
	metrics := freeAddr(t)
	gwCtx, stopGw := context.WithCancel(ctx)
	var gwOut lockedBuffer
	gwDone := make(chan error, 1)
	go func() {
		gwDone <- cli.Run(gwCtx, []string{"sms", "gateway", "--channel", "cm=" + supAddr + ",3.0,901234," + secretFile + ",2",
			"--postgres", testdb.PGSchema(t), "--migrate", "--consumer", "gw-test",
			"--command-stream", prefix + "submit", "--result-stream", prefix + "result", "--report-stream", prefix + "report",
			"--metrics-addr", metrics}, &gwOut, &gwOut)
	}()
	for id := uint64(1); id <= 5; id++ {
		c := gateway.Command{SubmitID: id, Channel: "cm", SrcID: "10690001", Dests: []string{"13900000000"},
			MsgFmt: cmpp.FmtASCII, Content: []byte("hello"), PkTotal: 1, PkNumber: 1}
		require.NoError(t, rdb.XAdd(ctx, &redis.XAddArgs{Stream: prefix + "submit", Values: c.Values()}).Err())
	}
	require.Eventually(t, func() bool {
		n, err := rdb.XLen(ctx, prefix+"result").Result()
		return err == nil && n == 5
	}, 30*time.Second, 10*time.Millisecond, "gateway output: %s", gwOut.String())
	var body string
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return strings.Contains(body, `relay_sms_gateway_outcomes_total{outcome="accepted"} 5`)
	}, 10*time.Second, 10*time.Millisecond, "metrics: %s", body)
	stopGw()
	require.NoError(t, <-gwDone, gwOut.String())
	require.Contains(t, gwOut.String(), "accepted=5")
	require.NotContains(t, gwOut.String()+supOut.String(), "s3cr3t")
	stopSup()
	require.NoError(t, <-supDone)
}
