package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaymigrate"
)

// TestShipsyncConsoleFlags: the console refuses to start without what it
// needs, saying which flag; a users file's errors never quote a token.
func TestShipsyncConsoleFlags(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "users")
	require.NoError(t, os.WriteFile(bad, []byte("a-secret-token-0123456789 alice superuser\n"), 0o600))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"shipsync", "console"}, "--console-addr is required"},
		{[]string{"shipsync", "console", "--console-addr", "127.0.0.1:0", "--target", "root@tcp(127.0.0.1:3306)/x"},
			"needs --console-users"},
		{[]string{"shipsync", "console", "--console-addr", "127.0.0.1:0", "--console-users", bad, "--target", ""}, "needs the shore database"},
		{[]string{"shipsync", "console", "--console-addr", "127.0.0.1:0", "--console-users", bad, "--target",
			"root@tcp(127.0.0.1:3306)/x"}, "role \"superuser\""},
		{[]string{"shipsync", "demo", "--console-addr", "127.0.0.1:0"}, "--console-addr needs --both-ways"},
	} {
		var out bytes.Buffer
		args := append(c.args, "--postgres", testdb.PGSchema(t))
		if c.args[1] == "demo" {
			args = append(c.args, "--postgres", testdb.PGURL(), "--mariadb", testdb.MariaDBServer())
		}
		err := cli.Run(t.Context(), args, &out, &out)
		require.ErrorContains(t, err, c.want, c.args)
		require.NotContains(t, err.Error(), "a-secret-token")
	}
}

// TestShipsyncConsoleServes: relay shipsync console serves the API with the
// users file's tokens and the console's page, until it is stopped.
func TestShipsyncConsoleServes(t *testing.T) {
	url := testdb.PGSchema(t)
	d := testdb.PGDriverAt(t, url)
	_, err := relaymigrate.Up(t.Context(), d, relayclock.System{}, shore.MigrationLines(d)...)
	require.NoError(t, err)
	_, target := testdb.MariaDBWithDSN(t)
	users := filepath.Join(t.TempDir(), "users")
	const tok = "cli-test-token-0123456789"
	require.NoError(t, os.WriteFile(users, []byte(tok+" carla operator\n"), 0o600))

	ctx, stop := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- cli.Run(ctx, []string{"shipsync", "console", "--console-addr", "127.0.0.1:0", "--console-users", users,
			"--postgres", url, "--target", target, "--log-level", "off"}, pw, io.Discard)
		_ = pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	base := regexp.MustCompile(`http://127\.0\.0\.1:\d+`).FindString(line)
	require.NotEmpty(t, base, line)

	req, err := http.NewRequestWithContext(t.Context(), "GET", base+"/api/v1/me", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	require.JSONEq(t, `{"actor":"carla","role":"operator"}`, string(body))
	res, err = http.Get(base + "/console/")
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)

	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("shipsync console did not stop")
	}
}
