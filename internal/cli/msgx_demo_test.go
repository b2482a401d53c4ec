package cli_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/cli"
	"github.com/relayhq/relay/internal/testdb"
)

// TestMsgxDemo runs `relay msgx demo` as a newcomer would (a smaller day):
// it reports the drain and ends with the verification passed.
func TestMsgxDemo(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	mariadb := testdb.MariaDBServer()
	err := cli.Run(t.Context(), []string{"msgx", "demo", "--messages", "300", "--flights", "40",
		"--postgres", testdb.PGURL(), "--mariadb", mariadb}, &out, &errOut)
	require.NoError(t, err, "stdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
	require.Contains(t, out.String(), "ok: verified against the simulator's model")
	require.Regexp(t, `mailbox:   \d+ rows written`, out.String())
	require.Contains(t, errOut.String(), "unfinished", "a progress line")
}
