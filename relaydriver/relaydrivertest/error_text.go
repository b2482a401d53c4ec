package relaydrivertest

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Conformance of the error text bound (relaydriver.StoredText): whatever a
// caller passes, a row holds at most relaytype.MaxErrorText bytes of valid
// UTF-8, and an operator listing reads no more even of an older, longer row.

var errorTextCases = []struct {
	name string
	fn   func(t *testing.T, b *bundle)
}{
	{"ErrorTextBounded", testErrorTextBounded},
	{"ErrorTextStorable", testErrorTextStorable},
	{"AdminListBoundsStoredErrorText", testAdminListBoundsStoredErrorText},
}

func init() { cases = append(cases, errorTextCases...) }

// requireBounded checks that stored is long's bounded form: at most
// MaxErrorText bytes of valid UTF-8, starting with long's first bytes.
func requireBounded(t *testing.T, long, stored, what string) {
	t.Helper()
	require.LessOrEqual(t, len(stored), relaytype.MaxErrorText, what)
	require.Greater(t, len(stored), relaytype.MaxErrorText/2, "%s: the bound is used, not the text dropped", what)
	require.True(t, utf8.ValidString(stored), what)
	require.True(t, strings.HasPrefix(long, stored[:relaytype.MaxErrorText/2]), what)
	require.Contains(t, stored, "bytes cut]", what)
}

// Every write of error text — a failed attempt, a terminal completion (one and
// many), a failed outbox delivery and a failed latest-state delivery — stores
// a 2 MiB text bounded.
func testErrorTextBounded(t *testing.T, b *bundle) {
	long := strings.Repeat("航", 2<<20/3) // multi-byte, so a cut can fall inside a rune
	b.insert("p", 1, 2, 3, 4)
	_, err := b.ex.MessageFail(b.ctx, &relaydriver.MessageFailParams{Queue: "p", ID: 1,
		ErrorClass: relaytype.ClassCodec, LastError: long, NextAttemptAt: b.now, Now: b.now})
	require.NoError(t, err)
	requireBounded(t, long, b.get("p", 1).LastError, "MessageFail")
	b.complete("p", 2, relaytype.StateDead, relaytype.ClassMalformed, long)
	requireBounded(t, long, b.get("p", 2).LastError, "MessageComplete")
	require.NoError(t, b.ex.MessageCompleteMany(b.ctx, []*relaydriver.MessageCompleteParams{
		{Queue: "p", ID: 3, State: relaytype.StateSkipped, LastError: long, Now: b.now},
		{Queue: "p", ID: 4, State: relaytype.StateDead, ErrorClass: relaytype.ClassProtocol, LastError: long, Now: b.now},
	}))
	requireBounded(t, long, b.get("p", 3).LastError, "MessageCompleteMany")
	requireBounded(t, long, b.get("p", 4).LastError, "MessageCompleteMany")

	got := b.outboxAppend(ev(b, "t", "a", "x"))
	_, err = b.ex.OutboxFail(b.ctx, &relaydriver.OutboxFailParams{ID: got[0].ID, Error: long,
		NextAttemptAt: at(time.Minute), MaxAttempts: 1, Now: b.now})
	require.NoError(t, err)
	requireBounded(t, long, b.outboxAll("t")["a/1"].LastError, "OutboxFail")

	g := b.latestUpsert("t", "k", 1, "v1").Generation
	_, err = b.ex.LatestFail(b.ctx, &relaydriver.LatestFailParams{Target: "t", Key: "k", Generation: g,
		Error: long, NextAttemptAt: at(time.Minute), MaxAttempts: 1, Now: b.now})
	require.NoError(t, err)
	requireBounded(t, long, b.latestGet("t", "k").LastError, "LatestFail")
}

// Text a store's text type refuses (NUL, invalid UTF-8) is still recorded,
// with U+FFFD in place of each bad byte: a failure that could not be recorded
// would never count an attempt.
func testErrorTextStorable(t *testing.T, b *bundle) {
	b.insert("p", 1, 2)
	n, err := b.ex.MessageFail(b.ctx, &relaydriver.MessageFailParams{Queue: "p", ID: 1,
		ErrorClass: relaytype.ClassInternal, LastError: "bad\x00byte\xff", NextAttemptAt: b.now, Now: b.now})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "bad\uFFFDbyte\uFFFD", b.get("p", 1).LastError)
	b.complete("p", 2, relaytype.StateDead, relaytype.ClassMalformed, "\xc3(")
	require.Equal(t, "\uFFFD(", b.get("p", 2).LastError)
}

// MessageList reads at most MaxErrorText characters of a row's error text,
// also of a row written before error text was bounded (set here directly).
func testAdminListBoundsStoredErrorText(t *testing.T, b *bundle) {
	b.insert("p", 1)
	b.complete("p", 1, relaytype.StateDead, relaytype.ClassMalformed, "short")
	long := strings.Repeat("x", 1<<20)
	_, err := b.ex.Exec(b.ctx, "UPDATE relay_message SET last_error = $1 WHERE queue = $2 AND id = $3",
		long, "p", int64(1))
	require.NoError(t, err)
	ms, err := b.ex.MessageList(b.ctx, &relaydriver.MessageListParams{Queue: "p"})
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.LessOrEqual(t, utf8.RuneCountInString(ms[0].LastError), relaytype.MaxErrorText)
	require.True(t, strings.HasPrefix(long, ms[0].LastError))
}
