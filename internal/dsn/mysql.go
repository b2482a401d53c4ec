package dsn

import (
	"fmt"

	"github.com/go-sql-driver/mysql"
)

// MySQLForm names the DSN form ParseMySQL accepts, for refusals and flag help.
const MySQLForm = "a go-sql-driver/mysql DSN: [user[:password]@][net[(addr)]]/dbname[?param=value&…], " +
	"e.g. relay:secret@tcp(127.0.0.1:3306)/aodb"

// ParseMySQL parses the go-sql-driver/mysql DSN s (a --mailbox, --source-dsn
// or --mariadb flag) with mysql.ParseDSN. The password is everything between
// the user's ':' and the last '@' before the database name, so it may hold
// '@'. Errors show s only through Redact.
func ParseMySQL(s string) (*mysql.Config, error) {
	if s == "" {
		return nil, fmt.Errorf("empty: give %s", MySQLForm)
	}
	cfg, err := mysql.ParseDSN(s)
	if err != nil {
		return nil, fmt.Errorf("%s: not %s: %s", Redact(s), MySQLForm, scrubText(err.Error(), s))
	}
	return cfg, nil
}
