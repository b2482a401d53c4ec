package cli_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
)

// TestMsgxSimulateRunVerify drives the operations path of docs/msgx/operations.md
// through the command tree: `relay msgx simulate` writes a day into a real
// MariaDB mailbox and saves the expectation, `relay msgx run` processes it into
// PostgreSQL and Kafka (kfake), `relay msgx verify` finds everything as
// expected — and fails once a mailbox mark is tampered with.
func TestMsgxSimulateRunVerify(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	store := testdb.PGSchema(t)
	mailbox, dsn := testdb.MariaDBWithDSN(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "msgx.msg", "msgx.schd"))
	require.NoError(t, err)
	defer cluster.Close()
	brokers := strings.Join(cluster.ListenAddrs(), ",")
	expect := filepath.Join(t.TempDir(), "day.json")
	fast := []string{"--param", "msgx.pipeline.poll-interval=20ms", "--param", "msgx.pipeline.max-commit-delay=1s"}

	var out lockedBuffer
	require.NoError(t, cli.Run(ctx, []string{"msgx", "simulate", "--mailbox", dsn, "--flights", "120", "--seed", "4",
		"--late-by", "200ms", "--expect", expect}, &out, &out), out.String())
	require.Contains(t, out.String(), "expectation saved")

	metricsAddr, httpAddr := freeAddr(t), freeAddr(t)

	runCtx, stop := context.WithCancel(ctx)
	runDone := make(chan error, 1)
	var runOut lockedBuffer
	go func() {
		runDone <- cli.Run(runCtx, append([]string{"msgx", "run", "--store", store, "--mailbox", dsn, "--kafka-brokers", brokers,
			"--log-level", "warn", "--metrics-addr", metricsAddr, "--http-addr", httpAddr,
			"--param", "msgx.pipeline.cutover-watermark=zero"}, fast...), &runOut, &runOut)
	}()
	var verOut lockedBuffer
	err = cli.Run(ctx, append([]string{"msgx", "verify", "--store", store, "--mailbox", dsn, "--kafka-brokers", brokers,
		"--expect", expect, "--wait", "2m"}, fast...), &verOut, &verOut)
	// seed 000 §4.1, §5.1: the metrics an operator watches are served.
	resp, herr := http.Get("http://" + metricsAddr + "/metrics")
	var metrics []byte
	if herr == nil {
		metrics, herr = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
	}
	// The compatibility entry's listener refuses what a browser page could
	// send, and writes nothing (the verification above counts every row).
	for _, c := range []struct {
		contentType, origin, host string
		want                      int
	}{
		{"text/plain", "", "", http.StatusUnsupportedMediaType},
		{"application/xml", "https://evil.example", "", http.StatusForbidden},
		{"application/xml", "", "attacker.example", http.StatusMisdirectedRequest},
	} {
		req, err := http.NewRequest(http.MethodPost, "http://"+httpAddr+"/cminmsgs/send", strings.NewReader("<SIS/>"))
		require.NoError(t, err)
		req.Header.Set("Content-Type", c.contentType)
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		if c.host != "" {
			req.Host = c.host
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, c.want, resp.StatusCode, "%+v", c)
	}
	stop()
	require.NoError(t, <-runDone, runOut.String())
	require.NoError(t, err, verOut.String())
	require.Contains(t, verOut.String(), "msgx verify: OK")
	require.NoError(t, herr)
	for _, name := range []string{"relay_backlog_oldest_unprocessed_seconds", "relay_permanent_holes_total",
		"relay_watermark_lag", "relay_ack_abandoned_total", "relay_outbox_pending"} {
		require.Contains(t, string(metrics), name)
	}

	_, err = mailbox.ExecContext(ctx, "UPDATE CMINMSGS SET PROCFLAG = 'SKIPPED' WHERE PROCFLAG = 'SUCCEEDED' ORDER BY ID LIMIT 1")
	require.NoError(t, err)
	var tampered lockedBuffer
	err = cli.Run(ctx, []string{"msgx", "verify", "--store", store, "--mailbox", dsn, "--kafka-brokers", brokers,
		"--expect", expect, "--wait", "1s"}, &tampered, &tampered)
	require.Error(t, err)
	require.Contains(t, tampered.String(), "PROCFLAG SKIPPED, want SUCCEEDED")
}

// TestMsgxHelp: `relay msgx -h` and `relay msgx mailbox -h` print their usage
// and succeed, as `relay -h` and `relay admin -h` do; an unknown role or
// mailbox action is still an error; `relay admin -h` points at msgx run's
// --admin-addr.
func TestMsgxHelp(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"-h", "--help", "help"} {
		out, err := run(t, "msgx", arg)
		require.NoError(t, err, out)
		require.Contains(t, out, "usage: relay msgx <role>")
		require.Contains(t, out, "mailbox   create the CMINMSGS/COUTMSGS")
		out, err = run(t, "msgx", "mailbox", arg)
		require.NoError(t, err, out)
		require.Contains(t, out, "usage: relay msgx mailbox create --mailbox DSN")
	}
	// relay admin's help names the flag msgx run serves the admin API on.
	out, err := run(t, "admin", "-h")
	require.NoError(t, err, out)
	require.Contains(t, out, "--admin-addr of a running 'relay serve' or 'relay msgx run'")
	require.NotContains(t, out, "--metrics-addr")
	require.Contains(t, runHelp(t, "msgx", "run"), "-admin-addr")

	_, err = run(t, "msgx")
	require.ErrorContains(t, err, "missing role")
	_, err = run(t, "msgx", "nope")
	require.ErrorContains(t, err, `unknown role "nope"`)
	_, err = run(t, "msgx", "mailbox")
	require.ErrorContains(t, err, "the only action is create")
}

// runHelp returns the -h output of a command, which must succeed.
func runHelp(t *testing.T, args ...string) string {
	t.Helper()
	out, err := run(t, append(args, "-h")...)
	require.NoError(t, err, out)
	return out
}

// TestMsgxMailboxCreate: `relay msgx mailbox create` makes the two mailbox
// tables in a fresh database (a second run changes nothing), and the tables
// take a row in the site's shape.
func TestMsgxMailboxCreate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mailbox, dsn := testdb.MariaDBWithDSN(t)
	for range 2 {
		out, err := run(t, "msgx", "mailbox", "create", "--mailbox", dsn)
		require.NoError(t, err, out)
		require.Contains(t, out, "CMINMSGS and COUTMSGS exist")
	}
	_, err := mailbox.ExecContext(ctx, "INSERT INTO CMINMSGS (MSGCONTENT, RECEIVETIME) VALUES ('<MSG/>', NOW(3))")
	require.NoError(t, err)
	_, err = mailbox.ExecContext(ctx, "INSERT INTO COUTMSGS (MSGCONTENT, CREATETIME) VALUES ('<MSG/>', NOW(3))")
	require.NoError(t, err)
	var flag *string
	require.NoError(t, mailbox.QueryRowContext(ctx, "SELECT PROCFLAG FROM CMINMSGS").Scan(&flag))
	require.Nil(t, flag, "a new row is unprocessed")

	_, err = run(t, "msgx", "mailbox", "drop", "--mailbox", dsn)
	require.ErrorContains(t, err, "the only action is create")
}
