package cli_test

import (
	"bytes"
	"database/sql"
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

// TestShipsyncSnapshotReconcile: `snapshot start --window-at` records a
// window reconcile's snapshot (refused for a rule without a window or a bad
// time); `snapshot reconcile` refuses the task until it is COMPLETED, then
// deletes the shore's row outside the window, checks, prints counts,
// digests and exceptions by key hash (never key values), stores the result
// that `list` shows; a two-way rule does not delete without the approval.
func TestShipsyncSnapshotReconcile(t *testing.T) {
	t.Parallel()
	db, dsn := voyageTables(t, "(7001, '2026-11-30 00:00:00', 'a'), (7002, '2026-01-01 00:00:00', 'b')")
	ctx := t.Context()
	dir := t.TempDir()
	state := filepath.Join(dir, "client.db")
	rules := filepath.Join(dir, "rules.json")
	rule := func(direction, window string) {
		require.NoError(t, os.WriteFile(rules, []byte(`{"rules": [{"id": "voyage-log", "version": 3, "direction": "`+direction+`",
		"database": "ship", "table": "voyage", "key_columns": ["id"], "business_time_column": "at",
		"field_mappings": {"at": "sailed_at"}`+window+`}]}`), 0o600))
	}
	run := shipsyncRun(t)
	rule("UPLINK", "")
	_, err := run("snapshot", "start", "--state", state, "--rules", rules, "--rule", "voyage-log", "--window-at", "2026-12-01T12:00:00Z")
	require.ErrorContains(t, err, "--window-at: rule \"voyage-log\" has no dataset window")
	rule("UPLINK", `, "dataset_window": "30d"`)
	_, err = run("snapshot", "start", "--state", state, "--rules", rules, "--rule", "voyage-log", "--window-at", "yesterday")
	require.ErrorContains(t, err, "--window-at \"yesterday\": not an RFC 3339 time")
	out, err := run("snapshot", "start", "--state", state, "--rules", rules, "--rule", "voyage-log", "--id", "w1",
		"--window-at", "2026-12-01T12:00:00Z")
	require.NoError(t, err)
	require.Contains(t, out, "window boundary 2026-11-01T12:00:00Z (left-closed)")
	reconcile := func(extra ...string) (string, error) {
		return run(append([]string{"snapshot", "reconcile", "--state", state, "--rules", rules, "--rule", "voyage-log",
			"--task", "w1", "--ship-db", dsn, "--target-db", dsn, "--target-table", "shore_voyage"}, extra...)...)
	}
	_, err = reconcile()
	require.ErrorContains(t, err, "task w1 is PENDING: its window is reconciled once it is COMPLETED")
	_, err = run("snapshot", "reconcile", "--state", state)
	require.ErrorContains(t, err, "--task, --rule, --rules, --ship-db and --target-db are required")

	// The snapshot ran (the client's work, tested in package snapshot).
	st, err := sql.Open("sqlite", state)
	require.NoError(t, err)
	_, err = st.ExecContext(ctx, "UPDATE snapshot_task SET state = 'COMPLETED' WHERE task_id = 'w1'")
	require.NoError(t, err)
	require.NoError(t, st.Close())

	rule("BOTH", `, "dataset_window": "30d"`)
	_, err = reconcile("--delete-outside")
	require.ErrorContains(t, err, "two-way rule does not delete rows that left its window without approval")
	rule("UPLINK", `, "dataset_window": "30d"`)
	out, err = reconcile("--delete-outside")
	require.NoError(t, err)
	require.NotContains(t, out, "7002", "no key values")
	require.Contains(t, out, "boundary 2026-11-01T12:00:00Z (left-closed), outside rows: delete")
	require.Contains(t, out, "ship rows 3, inside the window 1; shore rows 1")
	require.Contains(t, out, "deleted 1, left as changed since read 0, kept 0; still to send 0, still to delete 0, orphans 0")
	require.Regexp(t, `exceptions 1\n    source key [0-9a-f]{16}: business time is NULL or unreadable\n  reconciled: true`, out)
	var n int
	require.NoError(t, db.QueryRowContext(ctx, "SELECT count(*) FROM shore_voyage WHERE id = 7002").Scan(&n))
	require.Zero(t, n, "the outside row is deleted")
	out, err = run("snapshot", "list", "--state", state)
	require.NoError(t, err)
	require.Contains(t, out, "window at 2026-12-01T12:00:00Z, exceptions 0  reconciled true (deleted 1, kept 0, exceptions 1)")

	// The shore moves away from the ship inside the window: not reconciled.
	_, err = db.ExecContext(ctx, "UPDATE shore_voyage SET _sync_revision = 'z' WHERE id = 7001")
	require.NoError(t, err)
	out, err = reconcile()
	require.ErrorContains(t, err, "the window is not reconciled: 1 row(s) inside the window still to send")
	require.Contains(t, out, "reconciled: false")
}
