package mysqldsn_test

import (
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
)

// TestParse: the password is cut at the last '@' before the database name,
// and a refusal names the form without showing the password.
func TestParse(t *testing.T) {
	t.Parallel()
	cfg, err := mysqldsn.Parse("relay:s3c@ret9@tcp(127.0.0.1:3306)/aodb")
	require.NoError(t, err)
	require.Equal(t, "s3c@ret9", cfg.Passwd)
	require.Equal(t, "127.0.0.1:3306", cfg.Addr)

	_, err = mysqldsn.Parse("relay:s3cret9@tcp(127.0.0.1:3306)")
	require.ErrorContains(t, err, "not a go-sql-driver/mysql DSN")
	require.ErrorContains(t, err, "missing the slash")
	require.NotContains(t, err.Error(), "s3cret9")
	_, err = mysqldsn.Parse("")
	require.ErrorContains(t, err, "empty: give a go-sql-driver/mysql DSN")
}

// TestRedactMySQLAsDriver holds dsn.Redact's own reading of MySQL DSNs to the
// driver's: the part it masks is exactly the password mysql.ParseDSN finds,
// and the rest is printed as given.
func TestRedactMySQLAsDriver(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"relay:s3cret9@tcp(127.0.0.1:3306)/aodb",
		"relay:s3c@ret9@tcp(127.0.0.1:3306)/aodb?parseTime=true",
		"relay:a:b@c@unix(/tmp/my.sock)/db",
		"u:p/w@d@tcp(h:1)/db?x=y",
		"root:pw@/db",
		"relay:@x@tcp(h)/db",
	} {
		cfg, err := mysql.ParseDSN(s)
		require.NoError(t, err, s)
		got := dsn.Redact(s)
		if cfg.Passwd == "" {
			require.Equal(t, s, got, s)
			continue
		}
		require.NotContains(t, got, cfg.Passwd, s)
		require.Equal(t, s, strings.Replace(got, cfg.User+":"+dsn.Mask, cfg.User+":"+cfg.Passwd, 1), s)
	}
}
