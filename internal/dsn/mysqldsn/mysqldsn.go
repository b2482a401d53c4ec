// Package mysqldsn reads the go-sql-driver/mysql DSNs of foreign sources
// (the --mailbox, --source-dsn and --mariadb flags). It is apart from package
// dsn so that relaypgx, which uses dsn's redaction, does not link the MySQL
// driver.
package mysqldsn

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"time"

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

// scratchName is what CreateScratch accepts as a database name (it is
// quoted into SQL).
var scratchName = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// CreateScratch creates the database name (utf8mb4; [a-z0-9_] only) on the
// server of the DSN server and returns the DSN naming it and a drop that
// removes it (best effort, bounded by its own timeout). For harnesses and
// benchmarks that need a throwaway database.
func CreateScratch(ctx context.Context, server, name string) (dbDSN string, drop func(), err error) {
	if !scratchName.MatchString(name) {
		return "", nil, fmt.Errorf("scratch database name %q: want [a-z0-9_], at most 64", name)
	}
	cfg, err := Parse(server)
	if err != nil {
		return "", nil, err
	}
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return "", nil, err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4"); err != nil {
		return "", nil, fmt.Errorf("%s: create database %s: %w", dsn.Redact(server), name, dsn.Scrub(err, server))
	}
	adminDSN := cfg.FormatDSN()
	drop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if a, err := sql.Open("mysql", adminDSN); err == nil {
			_, _ = a.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
			_ = a.Close()
		}
	}
	cfg.DBName = name
	return cfg.FormatDSN(), drop, nil
}
