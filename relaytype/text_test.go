package relaytype_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaytype"
)

func TestBoundText(t *testing.T) {
	t.Parallel()
	require.Equal(t, "short", relaytype.BoundText("short", 5), "text that fits is returned as it is")
	require.Empty(t, relaytype.BoundText("x", 0))
	require.Empty(t, relaytype.BoundText("x", -1))

	long := strings.Repeat("a", 2<<20)
	got := relaytype.BoundText(long, relaytype.MaxErrorText)
	require.LessOrEqual(t, len(got), relaytype.MaxErrorText)
	require.Greater(t, len(got), relaytype.MaxErrorText-32, "the bound is used, not wasted")
	kept := strings.Index(got, "…")
	require.Equal(t, fmt.Sprintf("…[%d bytes cut]", len(long)-kept), got[kept:], "the marker counts the bytes cut")
	require.Equal(t, got, relaytype.BoundText(got, relaytype.MaxErrorText), "bounding twice changes nothing")

	// Every cut position through multi-byte runes stays valid UTF-8.
	for _, s := range []string{strings.Repeat("航班", 100), strings.Repeat("a😀", 100), strings.Repeat("é", 100)} {
		for limit := 1; limit <= len(s); limit++ {
			got := relaytype.BoundText(s, limit)
			require.LessOrEqual(t, len(got), limit, "limit %d", limit)
			require.True(t, utf8.ValidString(got), "limit %d: %q", limit, got)
			require.True(t, strings.HasPrefix(s, strings.SplitN(got, "…[", 2)[0]), "limit %d: %q", limit, got)
		}
	}
	// Invalid UTF-8 (a run of continuation bytes) is cut anyway.
	require.LessOrEqual(t, len(relaytype.BoundText(strings.Repeat("\x80", 100), 40)), 40)
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	require.Empty(t, relaytype.ErrorText(nil))
	require.Equal(t, "boom", relaytype.ErrorText(errors.New("boom")))
	got := relaytype.ErrorText(errors.New(strings.Repeat("p", 1<<20)))
	require.LessOrEqual(t, len(got), relaytype.MaxErrorText)
	require.Contains(t, got, "bytes cut]")
}

func TestQuoteValue(t *testing.T) {
	t.Parallel()
	require.Equal(t, `"20260301"`, relaytype.QuoteValue("20260301"))
	require.Equal(t, `"a\x00b"`, relaytype.QuoteValue("a\x00b"))
	v := strings.Repeat("9", 2<<20)
	got := relaytype.QuoteValue(v)
	require.Equal(t, `"`+strings.Repeat("9", relaytype.MaxQuotedValue)+`"… (2097152 bytes)`, got)
	for _, v := range []string{strings.Repeat("\xff", 1<<20), strings.Repeat("航", 1<<18)} {
		got := relaytype.QuoteValue(v)
		require.LessOrEqual(t, len(got), 4*relaytype.MaxQuotedValue+32)
		require.True(t, utf8.ValidString(got), got)
	}
}

func TestBoundError(t *testing.T) {
	t.Parallel()
	require.NoError(t, relaytype.BoundError(nil, 10))
	short := errors.New("short")
	require.Same(t, short, relaytype.BoundError(short, 10))
	long := fmt.Errorf("read %s: %w", strings.Repeat("x", 1<<20), io.ErrUnexpectedEOF)
	err := relaytype.BoundError(relaytype.Classify(relaytype.ClassMalformed, long), relaytype.MaxErrorText)
	require.LessOrEqual(t, len(err.Error()), relaytype.MaxErrorText)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Equal(t, relaytype.ClassMalformed, relaytype.ClassOf(err, relaytype.ClassNone))
}
