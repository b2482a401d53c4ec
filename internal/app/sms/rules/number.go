package rules

import "strings"

// maxNumberInput bounds the raw number NormalizeNumber looks at: longer
// input is refused before it is scanned.
const maxNumberInput = 32

// NormalizeNumber returns the 11-digit mainland mobile number raw stands
// for: spaces and hyphens are dropped, a +86, 0086 or 86 country prefix is
// removed, and what is left must be 11 digits starting 13–19. Any other
// input is ReasonBadNumber; the error never quotes the input.
func NormalizeNumber(raw string) (string, error) {
	if len(raw) > maxNumberInput {
		return "", refuse(ReasonBadNumber, "longer than %d bytes", maxNumberInput)
	}
	var b [maxNumberInput]byte
	n := 0
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c >= '0' && c <= '9':
			b[n] = c
			n++
		case c == '+' && n == 0 && i == strings.IndexByte(raw, '+'):
			// a leading +, before any digit
		case c == ' ' || c == '-':
		default:
			return "", refuse(ReasonBadNumber, "holds a character other than digits, +, space or -")
		}
	}
	d := string(b[:n])
	plus := strings.Contains(raw, "+")
	switch {
	case plus && strings.HasPrefix(d, "86") && len(d) == 13:
		d = d[2:]
	case plus:
		return "", refuse(ReasonBadNumber, "a + number must be +86 and 11 digits")
	case strings.HasPrefix(d, "0086") && len(d) == 15:
		d = d[4:]
	case strings.HasPrefix(d, "86") && len(d) == 13:
		d = d[2:]
	}
	if !IsMobile(d) {
		return "", refuse(ReasonBadNumber, "not an 11-digit mobile number starting 13-19 (%d digits)", len(d))
	}
	return d, nil
}

// IsMobile reports whether s is exactly 11 ASCII digits starting 13–19.
func IsMobile(s string) bool {
	if len(s) != 11 || s[0] != '1' || s[1] < '3' || s[1] > '9' {
		return false
	}
	for i := 2; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
