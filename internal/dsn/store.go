package dsn

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Kind is the store a connection string names.
type Kind string

const (
	// Postgres is PostgreSQL through pgx.
	Postgres Kind = "postgres"
	// SQLite is a SQLite file through modernc.org/sqlite.
	SQLite Kind = "sqlite"
)

// Forms names the store strings ParseStore accepts; refusals and flag help
// quote it.
const Forms = "a PostgreSQL URL (postgres://… or postgresql://…), a PostgreSQL keyword/value DSN " +
	"(host=… dbname=… user=…), sqlite:PATH, or a SQLite file path that starts with /, ./ or ../ " +
	"or ends in .db, .sqlite or .sqlite3"

// ErrNotAStore is the refusal of a store string in none of the Forms.
var ErrNotAStore = errors.New("not a store: give " + Forms)

// Store is a classified store string.
type Store struct {
	// Kind is the store.
	Kind Kind
	// Conn is what the driver opens: for Postgres the connection string
	// exactly as given (URL or keyword/value; pgx parses both), for SQLite the
	// file path without its sqlite: prefix.
	Conn string
}

// String returns the store string with every password hidden (Redact), for
// messages and logs.
func (s Store) String() string {
	if s.Kind == SQLite {
		return s.Conn
	}
	return Redact(s.Conn)
}

// keywordStart matches the start of a PostgreSQL keyword/value DSN: a keyword,
// optional blanks, '='.
var keywordStart = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_]*\s*=`)

// sqliteSuffixes are the file name endings that name a SQLite file without a
// sqlite: prefix or a path prefix.
var sqliteSuffixes = []string{".db", ".sqlite", ".sqlite3"}

// ParseStore classifies the store string s (a --store flag). It accepts:
//
//   - postgres://… or postgresql://… : PostgreSQL. pgx must parse it; a user
//     or password with a raw '@' is refused (percent-encode it as %40: the
//     URL would otherwise be cut at the wrong '@').
//   - a keyword/value DSN ("host=db1 dbname=relay user=relay password=…",
//     recognised by a leading keyword=): PostgreSQL. pgx must parse it.
//   - sqlite:PATH : the SQLite file PATH (created if absent).
//   - a path that starts with /, ./ or ../, or ends in .db, .sqlite or
//     .sqlite3 : that SQLite file.
//
// Anything else — another scheme, a bare word, a string with '=' that is not
// a keyword/value DSN — is refused with ErrNotAStore, so a misspelt DSN never
// becomes a new SQLite file named after it. Errors show s only through
// Redact.
func ParseStore(s string) (Store, error) {
	switch {
	case s == "":
		return Store{}, fmt.Errorf("empty: give %s", Forms)
	case hasScheme(s):
		scheme, rest, _ := strings.Cut(s, "://")
		if scheme != "postgres" && scheme != "postgresql" {
			return Store{}, fmt.Errorf("%s: unsupported scheme %q: %w", Redact(s), scheme, ErrNotAStore)
		}
		authority, _, _ := strings.Cut(rest, "/")
		if strings.Count(authority, "@") > 1 {
			return Store{}, fmt.Errorf("%s: the user or password holds a raw '@': percent-encode it as %%40", Redact(s))
		}
		return parsePostgres(s)
	case strings.HasPrefix(s, "sqlite:"):
		path := strings.TrimPrefix(s, "sqlite:")
		if path == "" {
			return Store{}, errors.New("sqlite: without a path: give sqlite:PATH")
		}
		return Store{Kind: SQLite, Conn: path}, nil
	case keywordStart.MatchString(s):
		return parsePostgres(s)
	case isExplicitPath(s):
		return Store{Kind: SQLite, Conn: s}, nil
	}
	return Store{}, fmt.Errorf("%s: %w", Redact(s), ErrNotAStore)
}

// parsePostgres accepts s if pgx's own parser (with the pool's settings such
// as pool_max_conns) does.
func parsePostgres(s string) (Store, error) {
	if !hasScheme(s) {
		if _, ok := splitKeywords(s); !ok {
			// pgx's complaint would quote the item after the bad one, which
			// may be the rest of a password with a blank in it.
			return Store{}, fmt.Errorf("%s: not a valid PostgreSQL keyword/value DSN: every item is keyword=value, "+
				"and a value with blanks or quotes is single-quoted ('…', with \\' and \\\\ inside)", Redact(s))
		}
	}
	if _, err := pgxpool.ParseConfig(s); err != nil {
		msg := scrubText(err.Error(), s)
		// pgx quotes the string (redacted its own way); Redact(s) is shown already.
		if rest, ok := strings.CutPrefix(msg, "cannot parse `"); ok {
			if _, reason, ok := strings.Cut(rest, "`: "); ok {
				msg = reason
			}
		}
		return Store{}, fmt.Errorf("%s: not a valid PostgreSQL connection string: %s", Redact(s), msg)
	}
	return Store{Kind: Postgres, Conn: s}, nil
}

// hasScheme reports whether s starts with a URL scheme and "://".
func hasScheme(s string) bool {
	scheme, _, ok := strings.Cut(s, "://")
	if !ok || scheme == "" {
		return false
	}
	for i, c := range scheme {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}

// isExplicitPath reports whether s names a file unmistakably: by a path
// prefix, or by a SQLite file name ending without any '=' (a keyword/value
// DSN is never a file name).
func isExplicitPath(s string) bool {
	if strings.HasPrefix(s, "/") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") {
		return true
	}
	if strings.Contains(s, "=") {
		return false
	}
	for _, suf := range sqliteSuffixes {
		if strings.HasSuffix(s, suf) && len(s) > len(suf) {
			return true
		}
	}
	return false
}
