// Package sqlfile is relay's small hand-written query layer: SQL lives in
// embedded .sql files, one statement per "-- name: QueryName" marker, parsed
// once at start-up into a name → statement map. Drivers and apps each keep one
// such file per dialect, so no SQL strings are scattered through Go code
// (STYLE.md §2).
package sqlfile

import (
	"fmt"
	"regexp"
	"strings"
)

var nameMarkerRE = regexp.MustCompile(`(?m)^--\s*name:\s*(\w+)\s*$`)

// Parse splits src at "-- name: X" markers. Comment-only lines and the trailing
// semicolon are dropped from each statement. An empty or duplicate name is an
// error.
func Parse(src string) (map[string]string, error) {
	locs := nameMarkerRE.FindAllStringSubmatchIndex(src, -1)
	out := make(map[string]string, len(locs))
	for i, loc := range locs {
		name := src[loc[2]:loc[3]]
		end := len(src)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		var lines []string
		for _, line := range strings.Split(src[loc[1]:end], "\n") {
			if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "--") {
				continue
			}
			lines = append(lines, strings.TrimRight(line, " \t\r"))
		}
		body := strings.TrimSuffix(strings.TrimSpace(strings.Join(lines, "\n")), ";")
		if body == "" {
			return nil, fmt.Errorf("sqlfile: query %q is empty", name)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("sqlfile: query %q defined twice", name)
		}
		out[name] = body
	}
	return out, nil
}

// MustParse is Parse that also requires every name in required to be present,
// panicking otherwise: a typo in a query file fails at start-up (package init),
// never at the first call. what names the file in the panic message.
func MustParse(what, src string, required ...string) map[string]string {
	m, err := Parse(src)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", what, err))
	}
	for _, name := range required {
		if _, ok := m[name]; !ok {
			panic(fmt.Sprintf("%s: lacks query %q", what, name))
		}
	}
	return m
}

// identRE is what a substituted identifier may be: an unquoted SQL identifier
// of at most 63 characters (PostgreSQL's limit).
var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// WithIdent returns stmt with every {{ident}} placeholder replaced by ident,
// after checking that ident is a plain SQL identifier. It serves statements
// whose identifiers cannot be bound as parameters (savepoint names), so nothing
// but an identifier can ever be spliced into SQL.
func WithIdent(stmt, ident string) (string, error) {
	if !identRE.MatchString(ident) {
		return "", fmt.Errorf("sqlfile: invalid identifier %q (want [A-Za-z_][A-Za-z0-9_]*, at most 63 characters)", ident)
	}
	return strings.ReplaceAll(stmt, "{{ident}}", ident), nil
}
