package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
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
