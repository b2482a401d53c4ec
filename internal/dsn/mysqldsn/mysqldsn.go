// Package mysqldsn reads the go-sql-driver/mysql DSNs of foreign sources
// (the --mailbox, --source-dsn and --mariadb flags). It is apart from package
// dsn so that relaypgx, which uses dsn's redaction, does not link the MySQL
// driver.
package mysqldsn

import (
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/relayhq/relay/internal/dsn"
)

// Form names the DSN form Parse accepts, for refusals and flag help.
const Form = "a go-sql-driver/mysql DSN: [user[:password]@][net[(addr)]]/dbname[?param=value&…], " +
	"e.g. relay:secret@tcp(127.0.0.1:3306)/aodb"

// Parse parses the go-sql-driver/mysql DSN s (a --mailbox, --source-dsn
// or --mariadb flag) with mysql.ParseDSN. The password is everything between
// the user's ':' and the last '@' before the database name, so it may hold
// '@'. Errors show s only through dsn.Redact.
func Parse(s string) (*mysql.Config, error) {
	if s == "" {
		return nil, fmt.Errorf("empty: give %s", Form)
	}
	cfg, err := mysql.ParseDSN(s)
	if err != nil {
		return nil, fmt.Errorf("%s: not %s: %w", dsn.Redact(s), Form, dsn.Scrub(err, s))
	}
	return cfg, nil
}
