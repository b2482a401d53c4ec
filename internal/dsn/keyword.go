package dsn

import "strings"

// keywordPair is one keyword = value of a PostgreSQL keyword/value DSN;
// start:end is the value as written (quotes and escapes included).
type keywordPair struct {
	key, value string
	start, end int
}

// splitKeywords splits a keyword/value DSN the way libpq (and pgx) do:
// pairs separated by whitespace, blanks allowed around '=', a value either
// single-quoted (with \' and \\ escapes) or running to the next blank (with
// backslash escapes). ok is false for anything else — a missing '=', an
// unterminated quote — since a password's extent is then uncertain.
func splitKeywords(s string) (pairs []keywordPair, ok bool) {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' }
	i := 0
	skip := func() {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
	}
	for {
		skip()
		if i == len(s) {
			return pairs, true
		}
		keyStart := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		key := s[keyStart:i]
		skip()
		if i == len(s) || s[i] != '=' || key == "" {
			return nil, false
		}
		i++
		skip()
		p := keywordPair{key: key, start: i}
		var v strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			for {
				if i == len(s) {
					return nil, false // unterminated quote
				}
				c := s[i]
				i++
				if c == '\'' {
					break
				}
				if c == '\\' {
					if i == len(s) {
						return nil, false
					}
					c = s[i]
					i++
				}
				v.WriteByte(c)
			}
		} else {
			for i < len(s) && !isSpace(s[i]) {
				c := s[i]
				i++
				if c == '\\' && i < len(s) {
					c = s[i]
					i++
				}
				v.WriteByte(c)
			}
		}
		p.end, p.value = i, v.String()
		pairs = append(pairs, p)
	}
}
