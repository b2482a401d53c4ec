// Package dsn is the one place that reads the connection strings relay is
// given: it classifies a store string (ParseStore: PostgreSQL URL, PostgreSQL
// keyword/value DSN, or a SQLite file named explicitly) and hides every
// password before a connection string or an error about one is printed
// (Redact, Scrub). The go-sql-driver/mysql DSNs of foreign sources are
// checked by the subpackage mysqldsn, kept apart so that relaypgx, which uses
// this package, does not link the MySQL driver.
//
// Redaction parses; it never cuts a string at an '@'. What cannot be parsed
// is not shown at all: a malformed string is exactly the one whose password
// positions are uncertain. Every message, log line and progress line that
// names a DSN prints Redact(dsn) or Store.String, and every error of a driver
// that was handed a DSN (pgx's parse and connect errors may quote it) goes
// through Scrub before it is printed.
package dsn
