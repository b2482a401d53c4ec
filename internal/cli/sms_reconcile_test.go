package cli_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/internal/testdb"
)

// TestSmsReconcile runs `relay sms reconcile` on a freshly seeded schema of
// the machine's PostgreSQL (nothing sent: every check passes), then after an
// engine message of sms-admit lost its inbox row (the command fails and
// names the check).
func TestSmsReconcile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var b [6]byte
	_, _ = rand.Read(b[:])
	app := "cli_reconcile_" + hex.EncodeToString(b[:])
	url, err := dsn.WithParam(testdb.PGSchema(t), "application_name", app)
	require.NoError(t, err)
	d := testdb.PGDriverAt(t, url) // the engine's tables
	var out bytes.Buffer
	err = cli.Run(ctx, []string{"sms", "seed-data", "--postgres", url, "--migrate", "--secrets-dir", filepath.Join(t.TempDir(), "s")}, &out, &out)
	require.NoError(t, err, out.String())

	args := []string{"sms", "reconcile", "--postgres", url, "--application-name", app}
	out.Reset()
	err = cli.Run(ctx, args, &out, &out)
	require.NoError(t, err, out.String())
	require.Contains(t, out.String(), "CHECK")
	require.Contains(t, out.String(), "no-message-lost")
	require.Contains(t, out.String(), "not checked: Redis streams")
	require.Contains(t, out.String(), "reconcile: ok (6 checks)")

	_, err = d.Pool().Exec(ctx, `INSERT INTO relay_message (queue, id, state, enqueued_at, updated_at)
		VALUES ('sms-admit', 42, 'SUCCEEDED', $1, $1)`, time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	out.Reset()
	err = cli.Run(ctx, args, &out, &out)
	require.ErrorContains(t, err, "failed checks: no-message-lost")
	require.Contains(t, out.String(), "1 engine messages of sms-admit have no sms_message row (e.g. 42)")

	out.Reset()
	err = cli.Run(ctx, append(args, "--in-flight", "extra"), &out, &out)
	require.ErrorContains(t, err, "unexpected argument")
}
