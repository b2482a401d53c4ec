package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
)

// TestSmsSeedData runs `relay sms seed-data` twice on a fresh schema of the
// machine's PostgreSQL (it fails when the server is absent): the first run
// migrates and creates the fixture and the secret files (mode 0600 in a
// 0700 directory), the second creates nothing and rewrites no file, and no
// secret is ever printed.
func TestSmsSeedData(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := testdb.PGSchema(t)
	dir := filepath.Join(t.TempDir(), "secrets")

	var out bytes.Buffer
	err := cli.Run(ctx, []string{"sms", "seed-data", "--postgres", url, "--migrate", "--secrets-dir", dir}, &out, &out)
	require.NoError(t, err, out.String())
	first := out.String()
	require.Contains(t, first, "sms seed-data: 121 rows created")
	require.Contains(t, first, "carriers: 3, number segments: 40, channels: 6, enterprises: 2, apps: 3, routes: 10")
	require.Contains(t, first, "yuntong  balance 500.000 CNY, frozen 0.000 CNY")
	require.Contains(t, first, "price per segment: mobile 0.045 CNY, telecom 0.045 CNY, unicom 0.045 CNY")
	require.Equal(t, 3, strings.Count(first, "— created; HMAC secret in "))

	st, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 9, "six channel secrets, three app credentials")
	secrets := map[string]string{}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		info, err := os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), e.Name())
		body, err := os.ReadFile(path)
		require.NoError(t, err)
		secrets[e.Name()] = string(body)
		for _, line := range strings.Split(string(body), "\n") {
			secret := strings.TrimSpace(strings.TrimPrefix(line, "hmac_secret="))
			if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "api_key=") || secret == "" {
				continue
			}
			require.NotContains(t, first, secret, "%s: a secret was printed", e.Name())
		}
	}
	require.Contains(t, secrets["app-yuntong-otp.credentials"], "hmac_secret=")

	out.Reset()
	err = cli.Run(ctx, []string{"sms", "seed-data", "--postgres", url, "--secrets-dir", dir}, &out, &out)
	require.NoError(t, err, out.String())
	require.Contains(t, out.String(), "sms seed-data: 0 rows created")
	require.Equal(t, 3, strings.Count(out.String(), "— existed; its secret is unchanged"))
	for name, body := range secrets {
		now, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, body, string(now), "%s rewritten", name)
	}
}

func TestSmsSeedDataRefuses(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	open := filepath.Join(t.TempDir(), "open")
	require.NoError(t, os.Mkdir(open, 0o755))
	require.NoError(t, os.Chmod(open, 0o755))
	var out bytes.Buffer
	err := cli.Run(ctx, []string{"sms", "seed-data", "--postgres", testdb.PGSchema(t), "--secrets-dir", open}, &out, &out)
	require.ErrorContains(t, err, "others may read it")

	// an unmigrated schema is refused without --migrate
	out.Reset()
	err = cli.Run(ctx, []string{"sms", "seed-data", "--postgres", testdb.PGSchema(t), "--secrets-dir", filepath.Join(t.TempDir(), "s")}, &out, &out)
	require.ErrorContains(t, err, "--migrate")
}
