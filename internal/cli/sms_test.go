package cli_test

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/supplier"
	"github.com/relayhq/relay/internal/app/sms/supplier/suppliertest"
	"github.com/relayhq/relay/internal/cli"
)

// TestSmsSupplierCommand is the smoke test of `relay sms supplier`: it starts
// on a free loopback port, says where, accepts a login and a Submit, sends
// the report, records the Submit, and on cancellation (SIGINT in the binary)
// prints the final summary and exits cleanly.
func TestSmsSupplierCommand(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	record := filepath.Join(t.TempDir(), "supplier.jsonl")
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- cli.Run(runCtx, []string{"sms", "supplier", "--listen", "127.0.0.1:0", "--account", "901234:s3cret,901235:other",
			"--record", record, "--record-sync", "fsync", "--latency", "uniform:0s..1ms", "--stats", "DELIVRD=9,UNDELIV=1",
			"--seed", "5"}, &out, &out)
	}()
	listening := regexp.MustCompile(`listening on (127\.0\.0\.1:\d+)`)
	var addr string
	require.Eventually(t, func() bool {
		m := listening.FindStringSubmatch(out.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, 20*time.Second, 5*time.Millisecond, "output: %s", out.String())
	require.NotContains(t, out.String(), "s3cret")

	p, err := suppliertest.Dial(ctx, addr)
	require.NoError(t, err)
	defer p.Close()
	resp, err := p.Login("901234", "s3cret", cmpp.V30, time.Date(2026, 9, 20, 10, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Zero(t, resp.Status)
	seq, err := p.Send(suppliertest.Submit("901234", "13800138000", "smoke", 42))
	require.NoError(t, err)
	h, pkt, err := p.Read()
	require.NoError(t, err)
	require.Equal(t, cmpp.CmdSubmitResp, h.CommandID)
	require.Equal(t, seq, h.SequenceID)
	require.Zero(t, pkt.(*cmpp.SubmitResp).Result)
	msgID := pkt.(*cmpp.SubmitResp).MsgID
	h, pkt, err = p.Read()
	require.NoError(t, err)
	require.Equal(t, cmpp.CmdDeliver, h.CommandID)
	var rp cmpp.Report
	require.NoError(t, rp.Decode(pkt.(*cmpp.Deliver).MsgContent, cmpp.V30))
	require.Equal(t, msgID, rp.MsgID)
	require.NoError(t, p.Answer(h, pkt))

	stop()
	require.NoError(t, <-done, out.String())
	require.Regexp(t, `stopped after .*: conns=\d+ logins=1 login_failures=0 submits=1 accepted=1 refused=0 .*reports=1 `, out.String())
	rec, err := supplier.ReadRecord(record)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"42": 1}, rec.Counts().ByKey)
}

func TestSmsSupplierFlags(t *testing.T) {
	t.Parallel()
	for msg, args := range map[string][]string{
		"at least one --account":        {},
		"want SP_ID:SECRET":             {"--account", "901234"},
		"SourceAddr":                    {"--account", "12:x"},
		"--latency":                     {"--account", "901234:x", "--latency", "soon"},
		"--versions: \"4.0\"":           {"--account", "901234:x", "--versions", "4.0"},
		"--window-action \"sometimes\"": {"--account", "901234:x", "--window-action", "sometimes"},
		"--record-sync":                 {"--account", "901234:x", "--record-sync", "never"},
		"--stats":                       {"--account", "901234:x", "--stats", "DELIVERED"},
		"FailRate 2 outside":            {"--account", "901234:x", "--fail-rate", "2"},
		"--listen":                      {"--account", "901234:x", "--listen", "256.0.0.1:1"},
	} {
		out, err := run(t, append([]string{"sms", "supplier", "--stats-every", "0"}, args...)...)
		require.ErrorContains(t, err, msg, out)
		require.NotContains(t, err.Error(), ":x")
	}
	out, err := run(t, "sms")
	require.NoError(t, err)
	require.Contains(t, out, "supplier")
	_, err = run(t, "sms", "gateway-of-tomorrow")
	require.ErrorContains(t, err, `unknown role "gateway-of-tomorrow"`)
	out, err = run(t, "help")
	require.NoError(t, err)
	require.Contains(t, out, "sms")
}
