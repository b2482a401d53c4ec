package dsn

import (
	"cmp"
	"net/url"
	"slices"
	"strings"
)

// Mask replaces every password Redact and Scrub hide.
const Mask = "xxxxx"

// secretKeys are the parameter names whose values are passwords, in a URL
// query or a keyword/value DSN (compared lowercased after percent-decoding).
var secretKeys = []string{"password", "passwd", "pass", "pwd", "sslpassword"}

// minScrubLen is the shortest secret Scrub replaces inside a message; a
// shorter one found there hides the whole message instead (replacing "pw"
// everywhere would mangle the text, leaving it would show the password).
const minScrubLen = 4

// Redact returns the connection string s with every password replaced by
// Mask, for messages and logs. It parses s in the form it has:
//
//   - scheme://… (postgres://, postgresql://, mysql://, …): the userinfo
//     password (everything between the user's first ':' and the last '@') and
//     the values of password, passwd, pass, pwd and sslpassword query
//     parameters (keys percent-decoded, any case); a query item without '=' is
//     hidden too (it may be the tail of a password with a raw '&');
//   - sqlite:PATH: unchanged;
//   - a PostgreSQL keyword/value DSN: the values of those keywords, quoted
//     or not;
//   - a string with an '@' that is a go-sql-driver/mysql DSN (read as that
//     driver's ParseDSN does: the last '@' before the database name ends the
//     user info, so user:p@ss@tcp(h)/db has the password p@ss): printed with
//     the password masked;
//   - anything else without an '@' and without an '=' (a path, a host name),
//     a path starting with /, ./ or ../, or a MySQL DSN without user info:
//     unchanged.
//
// A string that looks like one of those forms but does not parse is not
// shown at all: Redact returns a placeholder naming its form.
func Redact(s string) string {
	r, _, _ := analyze(s)
	return r
}

// Scrub returns err with a message that shows no secret of conn, the
// connection string err came from: conn itself is replaced by Redact(conn),
// and every password in it (raw and decoded) by Mask. When conn cannot be
// parsed, or a password is too short to replace safely and occurs in the
// message, the whole message is hidden. Unwrap returns err, so errors.Is and
// errors.As still see the driver's error — whose own text must then not be
// printed. Scrub(nil, conn) is nil.
func Scrub(err error, conn string) error {
	if err == nil {
		return nil
	}
	return &scrubbedError{msg: scrubText(err.Error(), conn), err: err}
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrubText hides conn's secrets in msg (see Scrub).
func scrubText(msg, conn string) string {
	redacted, secrets, known := analyze(conn)
	if !known {
		return "(details hidden: the connection string does not parse, so its password cannot be told apart)"
	}
	if conn != "" && conn != redacted {
		msg = strings.ReplaceAll(msg, conn, redacted)
	}
	// Longest first, so a secret that contains another is replaced whole.
	slices.SortFunc(secrets, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	for _, sec := range secrets {
		if sec == "" || !strings.Contains(msg, sec) {
			continue
		}
		if len(sec) < minScrubLen {
			return "(details hidden: they would show part of the password)"
		}
		msg = strings.ReplaceAll(msg, sec, Mask)
	}
	return msg
}

// analyze parses s and returns it redacted, the secrets it holds (each raw and
// decoded, and for a password with a raw '@' each part of it, since a parser
// that cuts at the first '@' sees only a part), and whether those secrets are
// known. A string that does not parse gets a placeholder for redacted; its
// secrets are unknown (known is false) unless its form bounds them.
func analyze(s string) (redacted string, secrets []string, known bool) {
	switch {
	case s == "":
		return "", nil, true
	case hasScheme(s):
		return analyzeURL(s)
	case strings.HasPrefix(s, "sqlite:"):
		return s, nil, true
	case keywordStart.MatchString(s):
		return analyzeKeyword(s)
	case strings.Contains(s, "@"):
		return analyzeMySQL(s)
	case !strings.Contains(s, "="), strings.HasPrefix(s, "/"), strings.HasPrefix(s, "./"), strings.HasPrefix(s, "../"):
		// No '@' and no keyword: no password position (a path, a host name).
		return s, nil, true
	}
	if strings.Contains(s, "/") {
		return s, nil, true // a MySQL DSN without user info, such as tcp(h)/db?parseTime=true
	}
	return "(connection string hidden: it is in no form relay parses)", nil, false
}

// analyzeURL redacts scheme://[user[:password]@]host…[?query].
func analyzeURL(s string) (string, []string, bool) {
	scheme, rest, _ := strings.Cut(s, "://")
	var b strings.Builder
	var secrets []string
	b.WriteString(scheme + "://")
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		userinfo := rest[:at]
		rest = rest[at+1:]
		user, pass, hasPass := strings.Cut(userinfo, ":")
		if strings.ContainsAny(user, "/?#&=") {
			// The last '@' is not the userinfo's end (it sits in a path or a
			// query value, or the password holds a '/', '?' or '&'): hide all
			// before it rather than guess where the password is.
			b.WriteString(Mask)
			secrets = append(secrets, withParts(userinfo)...)
		} else {
			b.WriteString(user)
			if hasPass {
				b.WriteString(":" + Mask)
				secrets = append(secrets, withParts(pass)...)
			}
		}
		b.WriteByte('@')
	}
	base, query, hasQuery := strings.Cut(rest, "?")
	b.WriteString(base)
	if !hasQuery {
		return b.String(), secrets, true
	}
	b.WriteByte('?')
	for i, item := range strings.Split(query, "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		k, v, hasEq := strings.Cut(item, "=")
		switch {
		case item == "":
		case !hasEq:
			b.WriteString(Mask)
			secrets = append(secrets, withParts(item)...)
		case isSecretKey(unescape(k)):
			b.WriteString(k + "=" + Mask)
			secrets = append(secrets, withParts(v)...)
		default:
			b.WriteString(item)
		}
	}
	return b.String(), secrets, true
}

// analyzeKeyword redacts a PostgreSQL keyword/value DSN.
func analyzeKeyword(s string) (string, []string, bool) {
	pairs, ok := splitKeywords(s)
	if !ok {
		return "(PostgreSQL keyword/value DSN hidden: it does not parse)", nil, false
	}
	var b strings.Builder
	var secrets []string
	last := 0
	for _, p := range pairs {
		if !isSecretKey(p.key) {
			continue
		}
		b.WriteString(s[last:p.start])
		b.WriteString(Mask)
		last = p.end
		secrets = append(secrets, s[p.start:p.end], p.value)
	}
	b.WriteString(s[last:])
	return b.String(), secrets, true
}

// analyzeMySQL redacts a go-sql-driver/mysql DSN,
// [user[:password]@][net[(addr)]]/dbname[?params], the way that driver's
// ParseDSN reads it: the user info ends at the last '@' before the last '/',
// and the password is everything after the user's first ':' — so it may hold
// '@' and ':'. Everything but the password is printed as given. (The split is
// written out here rather than taken from mysql.ParseDSN so that this package,
// which relaypgx imports, does not link the MySQL driver; TestRedactMySQLAsDriver
// holds it to the driver's reading.)
func analyzeMySQL(s string) (string, []string, bool) {
	slash := strings.LastIndex(s, "/")
	at := strings.LastIndex(s[:max(slash, 0)], "@")
	if slash < 0 || at < 0 {
		// The password, if any, lies before the last '@': hide the string, but
		// know every piece there as a secret, so that a parser's complaint
		// (which quotes no user info) can still be shown.
		userinfo := s[:strings.LastIndex(s, "@")]
		secrets := append(withParts(userinfo), strings.FieldsFunc(userinfo, func(r rune) bool { return r == ':' || r == '@' })...)
		return "(DSN hidden: it does not parse as a go-sql-driver/mysql DSN)", secrets, true
	}
	user, pass, hasPass := strings.Cut(s[:at], ":")
	if !hasPass || pass == "" {
		return s, nil, true
	}
	return user + ":" + Mask + s[at:], withParts(pass), true
}

// withParts returns raw, its percent-decoded form and, when raw holds an '@',
// each part between them.
func withParts(raw string) []string {
	out := []string{raw}
	if dec := unescape(raw); dec != raw {
		out = append(out, dec)
	}
	if strings.Contains(raw, "@") {
		out = append(out, strings.Split(raw, "@")...)
	}
	return out
}

// unescape percent-decodes s, or returns it as is when it is not valid
// percent-encoding.
func unescape(s string) string {
	if d, err := url.PathUnescape(s); err == nil {
		return d
	}
	return s
}

func isSecretKey(k string) bool {
	return slices.Contains(secretKeys, strings.ToLower(strings.TrimSpace(k)))
}
