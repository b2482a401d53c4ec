package cli_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/cli"
)

// TestShipsyncSnapshotStartList: a task is created PENDING for a rule of
// the rules file, a second one of the same rule is refused while the first
// is unfinished, and the list shows it; bad flags are refused by name.
func TestShipsyncSnapshotStartList(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "client.db")
	rules := filepath.Join(dir, "rules.json")
	require.NoError(t, os.WriteFile(rules, []byte(`{"rules":[{"id":"crew","version":3,"direction":"UPLINK",`+
		`"database":"ship","table":"crew","key_columns":["id"]}]}`), 0o600))
	run := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := cli.Run(t.Context(), append([]string{"shipsync", "snapshot"}, args...), &out, &errOut)
		return out.String(), err
	}
	out, err := run("list", "--state", state)
	require.NoError(t, err)
	require.Equal(t, "no snapshot tasks\n", out)
	out, err = run("start", "--state", state, "--rules", rules, "--rule", "crew", "--id", "s1", "--lag-threshold", "5")
	require.NoError(t, err)
	require.Contains(t, out, "snapshot s1 of rule crew version 3 (ship.crew) created")
	_, err = run("start", "--state", state, "--rules", rules, "--rule", "crew")
	require.ErrorContains(t, err, "unfinished snapshot task")
	out, err = run("list", "--state", state)
	require.NoError(t, err)
	require.Contains(t, out, "s1  rule crew v3  PENDING  rows read 0 (0 chunks), events 0")
	require.Contains(t, out, "lag 0/5")
	_, err = run("start", "--state", state, "--rules", rules, "--rule", "nope")
	require.ErrorContains(t, err, "--rule: no rule")
	_, err = run("start", "--state", state, "--rules", rules)
	require.ErrorContains(t, err, "--rule and --rules are required")
	_, err = run("start", "--state", state, "--rules", rules, "--rule", "crew", "--id", "a/b")
	require.ErrorContains(t, err, "task id must be 1–64 of")
	_, err = run("start", "--state", state, "--rules", rules, "--rule", "crew", "--lag-threshold", "-1")
	require.ErrorContains(t, err, "--lag-threshold must be ≥ 0")
}
