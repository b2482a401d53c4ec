package rules_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/relayhq/relay/internal/app/sms/rules"
)

// FuzzRender: any body and parameters either render or are refused with a
// template reason; never a panic, never an error quoting a value, and the
// output is bounded and holds a parameter's characters only where a
// placeholder was.
func FuzzRender(f *testing.F) {
	f.Add("您的验证码是${code}，${minutes}分钟内有效。", "code", "4821", "minutes", "5")
	f.Add("${a}${a}${b}", "a", "$", "b", "{b}")
	f.Add("${", "a", "x", "b", "y")
	f.Add("${}", "", "x", "b", "y")
	f.Add("plain", "a", "【假】", "b", "${a}")
	f.Add("${a", "a", "\xff", "b", "\n")
	f.Fuzz(func(t *testing.T, body, k1, v1, k2, v2 string) {
		params := map[string]string{k1: v1, k2: v2}
		out, err := rules.Render(body, params)
		if err != nil {
			r, ok := rules.ReasonOf(err)
			if !ok || (r != rules.ReasonTemplateParam && r != rules.ReasonTemplateMalformed) {
				t.Fatalf("unclassified error %v", err)
			}
			for _, v := range []string{v1, v2} {
				if len(v) >= 8 && strings.Contains(err.Error(), v) {
					t.Fatalf("error %q quotes a value", err)
				}
			}
			return
		}
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out of a valid template")
		}
		placeholders := strings.Count(body, "${")
		if n := utf8.RuneCountInString(out); n > rules.MaxTemplateChars+placeholders*rules.MaxParamChars {
			t.Fatalf("output of %d characters", n)
		}
		if strings.ContainsAny(out, "【】") && !strings.ContainsAny(body, "【】") {
			t.Fatalf("a parameter brought a signature bracket")
		}
		if placeholders == 0 && out != body {
			t.Fatalf("a body without placeholders changed")
		}
	})
}

// FuzzNormalizeNumber: any input is refused with ReasonBadNumber (never
// quoting it) or becomes an 11-digit mobile number made of the input's own
// digits, and normalising that again changes nothing.
func FuzzNormalizeNumber(f *testing.F) {
	for _, s := range []string{"13912345678", "+86 139-1234-5678", "008613912345678", "8613912345678", "+1", "", "++", "1391234567８"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := rules.NormalizeNumber(raw)
		if err != nil {
			if r, ok := rules.ReasonOf(err); !ok || r != rules.ReasonBadNumber {
				t.Fatalf("unclassified error %v", err)
			}
			if len(raw) >= 6 && strings.Contains(err.Error(), raw) {
				t.Fatalf("error %q quotes the input", err)
			}
			return
		}
		if !rules.IsMobile(got) {
			t.Fatalf("%q is not a mobile number", got)
		}
		digits := strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, raw)
		if !strings.HasSuffix(digits, got) {
			t.Fatalf("%q is not the input's digits", got)
		}
		again, err := rules.NormalizeNumber(got)
		if err != nil || again != got {
			t.Fatalf("not idempotent: %q → %q, %v", got, again, err)
		}
	})
}

// FuzzSplitSignature: the signature found is valid and the text rebuilt
// from it holds the body.
func FuzzSplitSignature(f *testing.F) {
	for _, s := range []string{"【云通科技】您的验证码是1234", "hi【AB】", "【A】", "【AB】x【AB】", "【】", "【AB】x【CD】"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		sig, body, err := rules.SplitSignature(content)
		if err != nil {
			if r, ok := rules.ReasonOf(err); !ok || (r != rules.ReasonSignatureMissing && r != rules.ReasonSignatureInvalid) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if rules.CheckSignatureText(sig) != nil {
			t.Fatalf("invalid signature %q accepted", sig)
		}
		if !strings.Contains(content, "【"+sig+"】") || !strings.Contains(content, body) {
			t.Fatalf("signature or body not from the content")
		}
	})
}
