package cli_test

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/testdb"
)

// TestStorePasswordsNeverPrinted opens stores and mailboxes that cannot be
// reached, with passwords in every position a DSN has: the refusal names the
// store, and no password shows in any part.
func TestStorePasswordsNeverPrinted(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		args    []string
		secrets []string
	}{
		{"password in the query", []string{"migrate", "--store",
			"postgres://relay@127.0.0.1:1/relay?connect_timeout=2&password=Qu3ryPass"}, []string{"Qu3ryPass"}},
		{"percent-encoded @ in the URL password", []string{"migrate", "--store",
			"postgres://relay:p%40ss9w0rd@127.0.0.1:1/relay?connect_timeout=2"}, []string{"ss9w0rd", "p%40"}},
		{"raw @ in the URL password", []string{"migrate", "--store",
			"postgres://relay:p@ss9w0rd@127.0.0.1:1/relay?connect_timeout=2"}, []string{"ss9w0rd"}},
		{"keyword/value DSN", []string{"admin", "stats", "--queue", "q", "--store",
			"host=127.0.0.1 port=1 user=relay password='Kw0rd Pass' connect_timeout=2"}, []string{"Kw0rd"}},
		{"msgx store", []string{"msgx", "migrate", "--store",
			"postgresql://relay@127.0.0.1:1/relay?sslpassword=Ssl9Pass&connect_timeout=2"}, []string{"Ssl9Pass"}},
		{"raw @ in a MySQL password", []string{"msgx", "simulate", "--mailbox",
			"relay:s3c@ret9w@tcp(127.0.0.1:1)/aodb?timeout=2s"}, []string{"s3c@", "ret9w"}},
		{"MySQL source DSN that does not parse", []string{"serve", "--store", filepath.Join(t.TempDir(), "x.db"),
			"--source-driver", "mysql", "--source-dsn", "relay:S0urcePw@tcp(127.0.0.1:1"}, []string{"S0urcePw"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, err := run(t, c.args...)
			require.Error(t, err, out)
			for _, s := range c.secrets {
				require.NotContains(t, err.Error(), s)
				require.NotContains(t, out, s)
			}
		})
	}
}

// inEmptyDir runs the test in a fresh working directory and returns a check
// that lists what was created there.
func inEmptyDir(t *testing.T) func() []string {
	dir := t.TempDir()
	t.Chdir(dir)
	return func() []string {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	}
}

// TestKeywordStoreIsPostgres: a PostgreSQL keyword/value DSN opens PostgreSQL
// (it once became a SQLite file named after the DSN, password and all).
func TestKeywordStoreIsPostgres(t *testing.T) {
	created := inEmptyDir(t)
	schemaURL := testdb.PGSchema(t)
	cfg, err := pgconn.ParseConfig(schemaURL)
	require.NoError(t, err)
	password := cmp.Or(cfg.Password, "unused by trust auth @ all")
	kw := fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable search_path=%s password='%s'",
		cfg.Host, cfg.Port, cfg.User, cfg.Database, cfg.RuntimeParams["search_path"],
		strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(password))

	out, err := run(t, "migrate", "--store", kw)
	require.NoError(t, err, out)
	require.Contains(t, out, "applied engine/001_engine")
	require.NotContains(t, out, password)
	require.Empty(t, created(), "no file may be created for a PostgreSQL DSN")
	// The same schema through its URL: already migrated.
	out, err = run(t, "migrate", "--store", schemaURL)
	require.NoError(t, err, out)
	require.Contains(t, out, "schema up to date (0 applied)")
}

// TestUnknownStoreRefused: a string in none of the accepted forms is refused
// with those forms named, and no file is created for it.
func TestUnknownStoreRefused(t *testing.T) {
	created := inEmptyDir(t)
	for _, store := range []string{"relay", "localhost/relay", "dbname relay", "mysql://relay@db1/relay"} {
		out, err := run(t, "migrate", "--store", store)
		require.Error(t, err, out)
		for _, form := range []string{"postgres://", "keyword/value DSN", "sqlite:PATH", "./"} {
			require.ErrorContains(t, err, form)
		}
	}
	out, err := run(t, "demo", "--store", "relay-demo")
	require.Error(t, err, out)
	require.ErrorContains(t, err, "not a store")
	require.Empty(t, created())
}

// TestSQLiteStoreForms: SQLite by an explicit path or the sqlite: prefix, as
// before.
func TestSQLiteStoreForms(t *testing.T) {
	created := inEmptyDir(t)
	for _, c := range []struct{ store, want string }{
		{"./relay.db", "applied engine/001_engine"},
		{"relay.db", "schema up to date (0 applied)"}, // the same file
		{"sqlite:plain", "applied engine/001_engine"},
		{"sqlite:./plain", "schema up to date (0 applied)"},
		{"store.sqlite", "applied engine/001_engine"},
	} {
		out, err := run(t, "migrate", "--store", c.store)
		require.NoError(t, err, c.store)
		require.Contains(t, out, c.want, c.store)
	}
	names := created()
	for _, f := range []string{"relay.db", "plain", "store.sqlite"} {
		require.Contains(t, names, f)
	}
}
