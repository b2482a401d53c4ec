package rules

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// Bounds of template rendering.
const (
	// MaxParams is the most parameters a request may pass.
	MaxParams = 16
	// MaxParamChars is the longest parameter value, in characters.
	MaxParamChars = 64
	// MaxParamName is the longest placeholder name, in bytes.
	MaxParamName = 32
	// MaxTemplateChars is the longest template body, in characters.
	MaxTemplateChars = 500
)

// Render fills the ${name} placeholders of body with params in one pass (a
// value is never scanned for placeholders) and returns the text. Names are
// 1 to MaxParamName ASCII letters, digits or underscores.
//
// Refusals: a body that does not parse (an unclosed "${", an empty or bad
// name) or is longer than MaxTemplateChars is ReasonTemplateMalformed; more
// than MaxParams parameters, a placeholder without a parameter, a parameter
// no placeholder uses, a value longer than MaxParamChars, empty, not valid
// UTF-8, or holding a signature bracket (【】), "${" or a control character
// is ReasonTemplateParam. Errors name the parameter, never its value. The
// result is at most MaxTemplateChars + placeholders × MaxParamChars
// characters; Segments bounds it further.
func Render(body string, params map[string]string) (string, error) {
	if !utf8.ValidString(body) {
		return "", refuse(ReasonTemplateMalformed, "not valid UTF-8")
	}
	if n := utf8.RuneCountInString(body); n > MaxTemplateChars {
		return "", refuse(ReasonTemplateMalformed, "%d characters, at most %d", n, MaxTemplateChars)
	}
	if len(params) > MaxParams {
		return "", refuse(ReasonTemplateParam, "%d parameters, at most %d", len(params), MaxParams)
	}
	// Check every value first, in name order, so the error does not depend
	// on map order.
	names := make([]string, 0, len(params))
	for name := range params {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := checkParam(name, params[name]); err != nil {
			return "", err
		}
	}

	var b strings.Builder
	b.Grow(len(body) + 32)
	used := make(map[string]bool, len(params))
	rest := body
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		rest = rest[i+2:]
		j := strings.IndexByte(rest, '}')
		if j < 0 {
			return "", refuse(ReasonTemplateMalformed, "an unclosed ${")
		}
		name := rest[:j]
		if !validName(name) {
			return "", refuse(ReasonTemplateMalformed, "a placeholder name that is empty, over %d bytes or not [A-Za-z0-9_]", MaxParamName)
		}
		v, ok := params[name]
		if !ok {
			return "", refuse(ReasonTemplateParam, "parameter %s missing", name)
		}
		used[name] = true
		b.WriteString(v)
		rest = rest[j+1:]
	}
	for _, name := range names {
		if !used[name] {
			return "", refuse(ReasonTemplateParam, "parameter %s not used by the template", name)
		}
	}
	return b.String(), nil
}

// checkParam checks one parameter; its name may be shown (once known to be a
// valid name), its value never.
func checkParam(name, v string) error {
	if !validName(name) {
		return refuse(ReasonTemplateParam, "a parameter name that is empty, over %d bytes or not [A-Za-z0-9_]", MaxParamName)
	}
	if !utf8.ValidString(v) {
		return refuse(ReasonTemplateParam, "parameter %s is not valid UTF-8", name)
	}
	n := utf8.RuneCountInString(v)
	if n == 0 || n > MaxParamChars {
		return refuse(ReasonTemplateParam, "parameter %s has %d characters, want 1 to %d", name, n, MaxParamChars)
	}
	if strings.Contains(v, "${") {
		return refuse(ReasonTemplateParam, "parameter %s holds ${", name)
	}
	for _, r := range v {
		switch {
		case r == '【' || r == '】':
			return refuse(ReasonTemplateParam, "parameter %s holds a signature bracket", name)
		case r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x2028 || r == 0x2029:
			return refuse(ReasonTemplateParam, "parameter %s holds a control character", name)
		}
	}
	return nil
}

// validName reports whether s is a placeholder name.
func validName(s string) bool {
	if s == "" || len(s) > MaxParamName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
