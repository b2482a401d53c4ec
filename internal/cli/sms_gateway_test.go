package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
