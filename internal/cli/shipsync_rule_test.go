package cli_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/testdb"
)

// TestShipsyncRuleRelease walks a release with `relay shipsync rule`:
// draft → validate (against a real MariaDB table) → approve (another actor,
// a reason) → distribute → status; a rollback without a reason and an
// expiry of a rule without a release are refused with a clear message.
func TestShipsyncRuleRelease(t *testing.T) {
	t.Parallel()
	url := testdb.PGSchema(t)
	db, target := testdb.MariaDBWithDSN(t)
	_, err := db.ExecContext(t.Context(), "CREATE TABLE voyage (id int PRIMARY KEY, name varchar(40))")
	require.NoError(t, err)
	dir := t.TempDir()
	run := shipsyncRun(t)
	for _, a := range [][]string{{"init"}, {"node", "--node", "ship-1"}} {
		_, err := run(append(append([]string{"pki"}, a...), "--dir", filepath.Join(dir, "pki"))...)
		require.NoError(t, err)
	}
	_, err = run("node", "add", "--postgres", url, "--actor", "tester", "--migrate", "--cert", filepath.Join(dir, "pki", "node-ship-1.crt"))
	require.NoError(t, err)
	_, err = run("rule", "add", "--postgres", url, "--actor", "alice", "--rule", "voyage-log", "--source-table", "voyage",
		"--target-table", "voyage", "--key", "id", "--columns", "id,name")
	require.NoError(t, err)
	ship := filepath.Join(dir, "voyage.json")
	require.NoError(t, os.WriteFile(ship, []byte(`{"id": "voyage-log", "version": 1, "direction": "UPLINK",
		"database": "ship", "table": "voyage", "key_columns": ["id"]}`), 0o600))

	rule := func(action string, args ...string) (string, error) {
		return run(append([]string{"rule", action, "--postgres", url, "--rule", "voyage-log"}, args...)...)
	}
	_, err = rule("draft", "--actor", "alice", "--ship-rule", ship)
	require.ErrorContains(t, err, "--ship-rule and --targets are required")
	out, err := rule("draft", "--actor", "alice", "--ship-rule", ship, "--targets", "ship-1")
	require.NoError(t, err)
	require.Contains(t, out, "voyage-log@1 is DRAFT (revision 1)")
	out, err = rule("edit", "--actor", "alice", "--ship-rule", ship, "--targets", "ship-1", "--expect-revision", "1")
	require.NoError(t, err)
	require.Contains(t, out, "voyage-log@1 is DRAFT (revision 2)")
	_, err = rule("validate", "--actor", "alice")
	require.ErrorContains(t, err, "--target-db is required")
	out, err = rule("validate", "--actor", "alice", "--target-db", target, "--expect-revision", "2")
	require.NoError(t, err)
	require.Contains(t, out, "is VALIDATED (revision 3)")
	_, err = rule("approve", "--actor", "alice", "--reason", "mine")
	require.ErrorIs(t, err, shore.ErrSameApprover)
	_, err = rule("approve", "--actor", "bob")
	require.ErrorIs(t, err, shore.ErrReasonRequired)
	_, err = rule("approve", "--actor", "bob", "--reason", "reviewed", "--expect-revision", "2")
	require.ErrorIs(t, err, shore.ErrStaleRelease)
	_, err = rule("approve", "--actor", "bob", "--reason", "reviewed", "--expect-revision", "3")
	require.NoError(t, err)
	out, err = rule("distribute", "--actor", "alice")
	require.NoError(t, err)
	require.Contains(t, out, "is DISTRIBUTING (revision 5)")
	out, err = rule("status")
	require.NoError(t, err)
	require.Regexp(t, regexp.MustCompile(`voyage-log\s+1\s+DISTRIBUTING\s+5\s+alice\s+bob\s+ship-1:OFFERED\s+-`), out)
	_, err = rule("rollback", "--actor", "bob")
	require.ErrorIs(t, err, shore.ErrReasonRequired)

	_, err = run("backlog", "expire", "--postgres", url, "--actor", "bob", "--node", "ship-1", "--rule", "voyage-log",
		"--captured-before", "yesterday", "--owner", "ops", "--reason", "stale")
	require.ErrorContains(t, err, "not an RFC 3339 time")
	_, err = run("backlog", "expire", "--postgres", url, "--actor", "bob", "--node", "ship-1", "--rule", "other",
		"--captured-before", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "--owner", "ops", "--reason", "stale")
	require.ErrorIs(t, err, shore.ErrUnknownRelease)
	out, err = run("backlog", "expire", "--postgres", url, "--actor", "bob", "--node", "ship-1", "--rule", "voyage-log",
		"--captured-before", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "--owner", "ops", "--reason", "stale")
	require.NoError(t, err, "the version in flight to the node names the rule's direction")
	require.Contains(t, out, "rule voyage-log@1")
	out, err = run("backlog", "expiries", "--postgres", url)
	require.NoError(t, err)
	require.Regexp(t, `ship-1\s+voyage-log@1\s+\S+\s+0 events / 0 B\s+bob\s+ops\s+not reported\s+stale`, out)
}

// TestShipsyncRuleWindowPlan: `relay shipsync rule window-plan` compares a
// ship table with its shore table under the rule's window and prints counts
// and digests, never key values; after the shore caught up it says
// reconciled.
func TestShipsyncRuleWindowPlan(t *testing.T) {
	t.Parallel()
	db, dsn := voyageTables(t, "(7002, '2026-01-01 00:00:00', 'b')")
	ctx := t.Context()
	rules := filepath.Join(t.TempDir(), "rules.json")
	require.NoError(t, os.WriteFile(rules, []byte(`{"rules": [{"id": "voyage-log", "version": 3, "direction": "UPLINK",
		"database": "ship", "table": "voyage", "key_columns": ["id"], "business_time_column": "at",
		"field_mappings": {"at": "sailed_at"}, "dataset_window": "30d"}]}`), 0o600))
	run := shipsyncRun(t)
	plan := func() string {
		out, err := run("rule", "window-plan", "--rule", "voyage-log", "--rules", rules, "--ship-db", dsn, "--target-db", dsn,
			"--target-table", "shore_voyage", "--now", "2026-12-01T12:00:00Z")
		require.NoError(t, err)
		require.NotContains(t, out, "7001", "no key values")
		return out
	}
	out := plan()
	require.Contains(t, out, "window reconcile of voyage-log@3: boundary 2026-11-01T12:00:00Z")
	require.Contains(t, out, "ship rows 3, inside the window 1; shore rows 1")
	require.Contains(t, out, "send 1, delete 0, keep 1 outside, orphans 0 (reported only), exceptions 1")
	require.Contains(t, out, "source: business time is NULL or unreadable: 1")
	require.Contains(t, out, "reconciled: false")

	_, err := db.ExecContext(ctx, "INSERT INTO shore_voyage VALUES (7001, '2026-11-30 00:00:00', 'a')")
	require.NoError(t, err)
	require.Contains(t, plan(), "reconciled: true")

	_, err = run("rule", "window-plan", "--rule", "nope", "--rules", rules, "--ship-db", dsn, "--target-db", dsn)
	require.ErrorContains(t, err, "--rule: no rule")
}

// voyageTables is a MariaDB database with a ship table voyage of three rows
// (7001 inside a 30-day window at 2026-12-01T12:00Z, 7002 outside, 7003
// with a NULL time) and a shore table shore_voyage holding shoreRows (SQL
// VALUES tuples of id, sailed_at, _sync_revision).
func voyageTables(t *testing.T, shoreRows string) (*sql.DB, string) {
	t.Helper()
	db, dsn := testdb.MariaDBWithDSN(t)
	for _, q := range []string{
		"CREATE TABLE voyage (id int PRIMARY KEY, at datetime, _sync_revision char(36))",
		"CREATE TABLE shore_voyage (id int PRIMARY KEY, sailed_at datetime, _sync_revision char(36))",
		"INSERT INTO voyage VALUES (7001, '2026-11-30 00:00:00', 'a'), (7002, '2026-01-01 00:00:00', 'b'), (7003, NULL, 'c')",
		"INSERT INTO shore_voyage VALUES " + shoreRows,
	} {
		_, err := db.ExecContext(t.Context(), q)
		require.NoError(t, err)
	}
	return db, dsn
}
