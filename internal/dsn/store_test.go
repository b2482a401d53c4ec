package dsn_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/dsn"
)

// TestParseStore: PostgreSQL by URL or keyword/value DSN, SQLite only by
// sqlite: or an explicit path; everything else refused with the accepted
// forms named and without any password.
func TestParseStore(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		kind dsn.Kind
		conn string
	}{
		{"postgres://relay:pw@db1:5432/relay?sslmode=disable", dsn.Postgres, "postgres://relay:pw@db1:5432/relay?sslmode=disable"},
		{"postgresql://db1/relay?password=p%40ss", dsn.Postgres, "postgresql://db1/relay?password=p%40ss"},
		{"host=db1 port=5432 dbname=relay user=relay password='p@ss word'", dsn.Postgres, "host=db1 port=5432 dbname=relay user=relay password='p@ss word'"},
		{" dbname = relay", dsn.Postgres, " dbname = relay"},
		{"sqlite:relay", dsn.SQLite, "relay"},
		{"sqlite:/tmp/my store.db", dsn.SQLite, "/tmp/my store.db"},
		{"/var/lib/relay/relay.db", dsn.SQLite, "/var/lib/relay/relay.db"},
		{"./relay", dsn.SQLite, "./relay"},
		{"../data/relay", dsn.SQLite, "../data/relay"},
		{"relay.db", dsn.SQLite, "relay.db"},
		{"data/relay.sqlite", dsn.SQLite, "data/relay.sqlite"},
		{"relay.sqlite3", dsn.SQLite, "relay.sqlite3"},
	} {
		st, err := dsn.ParseStore(c.in)
		require.NoError(t, err, c.in)
		require.Equal(t, dsn.Store{Kind: c.kind, Conn: c.conn}, st, c.in)
	}

	for _, c := range []struct {
		in, want string
		secrets  []string
	}{
		{"", "empty: give a PostgreSQL URL", nil},
		{"relay", "relay: not a store: give a PostgreSQL URL (postgres://… or postgresql://…), a PostgreSQL keyword/value DSN", nil},
		{"localhost:5432/relay", "not a store", nil},
		{"my store password=Garb4ge", "not a store", []string{"Garb4ge"}},
		{"mysql://relay:My5qlPw@db1/relay", `mysql://relay:xxxxx@db1/relay: unsupported scheme "mysql"`, []string{"My5qlPw"}},
		{"sqlite://relay.db", `unsupported scheme "sqlite"`, nil},
		{"sqlite:", "sqlite: without a path", nil},
		{"postgres://relay:p@ssw0rd@db1/relay", "postgres://relay:xxxxx@db1/relay: the user or password holds a raw '@': percent-encode it as %40", []string{"ssw0rd"}},
		{"host=db1 password=hunter2 tail9x", "not a valid PostgreSQL keyword/value DSN", []string{"hunter2", "tail9x"}},
		{"host=db1 password='hunter2", "not a valid PostgreSQL keyword/value DSN", []string{"hunter2"}},
		{"postgres://relay:Po0lPass@db1/relay?pool_max_conns=many", "cannot parse pool_max_conns", []string{"Po0lPass"}},
		{"host=db1 password=Po0lPass pool_max_conns=many", "cannot parse pool_max_conns", []string{"Po0lPass"}},
	} {
		_, err := dsn.ParseStore(c.in)
		require.Error(t, err, c.in)
		require.Contains(t, err.Error(), c.want, c.in)
		for _, s := range c.secrets {
			require.NotContains(t, err.Error(), s, c.in)
		}
	}
}

// TestStoreString shows a PostgreSQL store redacted and a SQLite path as is.
func TestStoreString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "host=db1 password=xxxxx", dsn.Store{Kind: dsn.Postgres, Conn: "host=db1 password=Str1ngPw"}.String())
	require.Equal(t, "/tmp/a b.db", dsn.Store{Kind: dsn.SQLite, Conn: "/tmp/a b.db"}.String())
}

// TestWithParam appends a parameter in the string's own form, and pgx reads it.
func TestWithParam(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"postgres://db1/relay", "postgres://db1/relay?search_path=t_1"},
		{"postgres://db1/relay?sslmode=disable", "postgres://db1/relay?sslmode=disable&search_path=t_1"},
		{"postgres://u:p%3Fw@db1/relay", "postgres://u:p%3Fw@db1/relay?search_path=t_1"},
		{"postgres://u:p?w@db1/relay", "postgres://u:p?w@db1/relay?search_path=t_1"},
		{"host=db1 dbname=relay", "host=db1 dbname=relay search_path='t_1'"},
	} {
		got, err := dsn.WithParam(c.in, "search_path", "t_1")
		require.NoError(t, err, c.in)
		require.Equal(t, c.want, got, c.in)
	}
	got, err := dsn.WithParam("host=db1", "application_name", `it's a \ test`)
	require.NoError(t, err)
	require.Equal(t, `host=db1 application_name='it\'s a \\ test'`, got)
	_, err = dsn.WithParam("/tmp/relay.db", "search_path", "x")
	require.ErrorContains(t, err, "not a PostgreSQL connection string")
}
