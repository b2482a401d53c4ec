package dsn_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/dsn"
)

// TestRedact: every password position of every form is masked, a password with
// an '@' is masked whole, and what does not parse is not shown at all.
func TestRedact(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, in, want string
		secrets        []string // none of these may appear in the output
	}{
		{"url userinfo", "postgres://relay:Pa55word@db1:5432/relay?sslmode=disable",
			"postgres://relay:xxxxx@db1:5432/relay?sslmode=disable", []string{"Pa55word"}},
		{"url query password", "postgres://relay@db1/relay?sslmode=disable&password=Qu3ryPass",
			"postgres://relay@db1/relay?sslmode=disable&password=xxxxx", []string{"Qu3ryPass"}},
		{"url query sslpassword, passwd, pass, pwd", "postgresql://db1/r?sslpassword=Ssl9pw&passwd=Pwd9a&pass=Pss9b&PWD=Pwd9c",
			"postgresql://db1/r?sslpassword=xxxxx&passwd=xxxxx&pass=xxxxx&PWD=xxxxx", []string{"Ssl9pw", "Pwd9a", "Pss9b", "Pwd9c"}},
		{"url percent-encoded key", "postgres://db1/r?pass%77ord=Enc0ded9",
			"postgres://db1/r?pass%77ord=xxxxx", []string{"Enc0ded9"}},
		{"url percent-encoded @ in password", "postgres://relay:p%40ss%3Aw0rd@db1/relay",
			"postgres://relay:xxxxx@db1/relay", []string{"p%40ss", "w0rd", "p@ss"}},
		{"url raw @ in password", "postgres://relay:p@ssw0rd@db1/relay",
			"postgres://relay:xxxxx@db1/relay", []string{"ssw0rd"}},
		{"url query item without =", "postgres://db1/r?password=ab&cd3f9&sslmode=disable",
			"postgres://db1/r?password=xxxxx&xxxxx&sslmode=disable", []string{"cd3f9"}},
		{"url @ past the path", "postgres://db1/r?application_name=a@b",
			"postgres://xxxxx@b", nil},
		{"url without password", "postgres://relay@db1/relay", "postgres://relay@db1/relay", nil},
		{"keyword", "host=db1 user=relay password=Kw0rdPass dbname=relay",
			"host=db1 user=relay password=xxxxx dbname=relay", []string{"Kw0rdPass"}},
		{"keyword quoted, blanks around =", `host=db1 password = 'p@ss w\'0rd' sslpassword=Ssl9x`,
			"host=db1 password = xxxxx sslpassword=xxxxx", []string{"p@ss", `w\'0rd`, "w'0rd", "Ssl9x"}},
		{"keyword broken", "host=db1 password=hunter2 tail9x dbname=relay",
			"(PostgreSQL keyword/value DSN hidden: it does not parse)", []string{"hunter2", "tail9x"}},
		{"keyword unterminated quote", "host=db1 password='hunter2",
			"(PostgreSQL keyword/value DSN hidden: it does not parse)", []string{"hunter2"}},
		{"mysql raw @ in password", "relay:s3c@ret9@tcp(127.0.0.1:3306)/aodb?parseTime=true",
			"relay:xxxxx@tcp(127.0.0.1:3306)/aodb?parseTime=true", []string{"s3c", "ret9"}},
		{"mysql without password", "root@tcp(127.0.0.1:3306)/", "root@tcp(127.0.0.1:3306)/", nil},
		{"mysql without user info", "tcp(127.0.0.1:3306)/aodb?parseTime=true", "tcp(127.0.0.1:3306)/aodb?parseTime=true", nil},
		{"mysql broken", "relay:s3cret9@tcp(127.0.0.1:3306",
			"(DSN hidden: it does not parse as a go-sql-driver/mysql DSN)", []string{"s3cret9"}},
		{"sqlite prefix", "sqlite:/var/lib/relay/a=b.db", "sqlite:/var/lib/relay/a=b.db", nil},
		{"path", "/var/lib/relay/relay.db", "/var/lib/relay/relay.db", nil},
		{"relative path", "./relay.db", "./relay.db", nil},
		{"bare word", "relay", "relay", nil},
		{"garbage with =", "my store password=Garb4ge",
			"(connection string hidden: it is in no form relay parses)", []string{"Garb4ge"}},
		{"empty", "", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := dsn.Redact(c.in)
			require.Equal(t, c.want, got)
			for _, s := range c.secrets {
				require.NotContains(t, got, s)
			}
		})
	}
}

// TestScrub: an error that quotes a connection string (as pgx's may) is
// printed without its passwords, and still unwraps to the driver's error.
func TestScrub(t *testing.T) {
	t.Parallel()
	conn := "host=db1 password = 'Sc4rub me' dbname=relay"
	cause := fmt.Errorf("cannot parse `%s`: something (%w)", conn, context.DeadlineExceeded)
	err := dsn.Scrub(cause, conn)
	require.Equal(t, "cannot parse `host=db1 password = xxxxx dbname=relay`: something (context deadline exceeded)", err.Error())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, dsn.Scrub(nil, conn))

	// The password alone, decoded, in the middle of a message.
	err = dsn.Scrub(errors.New("auth failed for p@ss9word"), "postgres://u:p%40ss9word@db1/r")
	require.Equal(t, "auth failed for xxxxx", err.Error())

	// A short password cannot be replaced safely: the message goes.
	err = dsn.Scrub(errors.New("bad value pw in password"), "postgres://u:pw@db1/r")
	require.NotContains(t, err.Error(), "pw ")
	require.Contains(t, err.Error(), "details hidden")

	// A connection string that does not parse: its passwords are unknown.
	err = dsn.Scrub(errors.New(`missing "=" after "tail9x"`), "host=db1 password=hunter2 tail9x")
	require.NotContains(t, err.Error(), "tail9x")
}
