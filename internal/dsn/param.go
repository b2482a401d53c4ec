package dsn

import (
	"fmt"
	"strings"
)

// WithParam returns the PostgreSQL connection string conn (URL or
// keyword/value DSN) with the parameter key set to value, appended in conn's
// own form: "?key=value" or "&key=value" (percent-encoded) on a URL,
// " key='value'" on a keyword/value DSN. pgx takes the last occurrence of a
// key, so an earlier one is overridden. Typical use: search_path, to select a
// schema.
func WithParam(conn, key, value string) (string, error) {
	st, err := ParseStore(conn)
	if err != nil {
		return "", err
	}
	if st.Kind != Postgres {
		return "", fmt.Errorf("%s: not a PostgreSQL connection string", st)
	}
	if !hasScheme(conn) {
		r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
		return conn + " " + key + "='" + r.Replace(value) + "'", nil
	}
	// The query starts at the first '?' after the userinfo (a password may
	// hold a '?'); ParseStore refused a second '@' before the path.
	_, rest, _ := strings.Cut(conn, "://")
	from := len(conn) - len(rest)
	if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
		from += i + 1
	}
	sep := "?"
	if strings.Contains(conn[from:], "?") {
		sep = "&"
		if strings.HasSuffix(conn, "?") || strings.HasSuffix(conn, "&") {
			sep = ""
		}
	}
	return conn + sep + escape(key) + "=" + escape(value), nil
}

// escape percent-encodes every byte of s but the URL unreserved ones (pgx,
// like libpq, decodes %XX and nothing else: a '+' stays a '+').
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}
