package relaydrivertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// Conformance of acknowledgement write-back bookkeeping (seed 000 §6;
// docs/ack.md).

var ackCases = []struct {
	name string
	fn   func(t *testing.T, b *bundle)
}{
	{"AckScanPredicate", testAckScanPredicate},
	{"AckScanOrderAndLimit", testAckScanOrderAndLimit},
	{"AckScanArchivedNever", testAckScanArchivedNever},
	{"AckDoneOnlyOwed", testAckDoneOnlyOwed},
	{"AckRetryIncrements", testAckRetryIncrements},
	{"AckAbandonNotAcknowledged", testAckAbandon},
	{"AckReopen", testAckReopen},
}

func init() { cases = append(cases, ackCases...) }

// ackR is the forced-write window the conformance scans use.
const ackR = time.Hour

// finish moves a message to a terminal state with the acknowledgement intent
// (AckNextAt = b.now).
func (b *bundle) finish(queue string, id int64, state relaytype.State) {
	b.t.Helper()
	require.NoError(b.t, b.ex.MessageComplete(b.ctx, &relaydriver.MessageCompleteParams{
		Queue: queue, ID: id, State: state, AckIntent: true, Now: b.now,
	}))
}

// ackScan scans at now with window ackR.
func (b *bundle) ackScan(queue string, now time.Time, limit int) []int64 {
	b.t.Helper()
	ms, err := b.ex.AckScan(b.ctx, &relaydriver.AckScanParams{Queue: queue, Now: now, R: ackR, Limit: limit})
	require.NoError(b.t, err)
	return ids(ms)
}

func (b *bundle) ackRetry(queue string, id int64, next time.Time) {
	b.t.Helper()
	require.NoError(b.t, b.ex.AckRetry(b.ctx, &relaydriver.AckRetryParams{Queue: queue, ID: id, NextAt: next, Now: b.now}))
}

func (b *bundle) ackAbandon(queue string, id int64, reason string) {
	b.t.Helper()
	require.NoError(b.t, b.ex.AckAbandon(b.ctx, &relaydriver.AckAbandonParams{Queue: queue, ID: id, Reason: reason, Now: b.now}))
}

func (b *bundle) ackDone(queue string, ids ...int64) int {
	b.t.Helper()
	n, err := b.ex.AckDone(b.ctx, &relaydriver.AckDoneParams{Queue: queue, IDs: ids, Now: b.now})
	require.NoError(b.t, err)
	return n
}

// The scan takes terminal rows only, not confirmed, not abandoned, and due: by
// a NULL ack_next_at, by an elapsed backoff, or by an enqueue time before
// Now−R even when the backoff lies in the future (seed 000 §6.1, §6.3).
func testAckScanPredicate(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4, 5, 6, 7, 8, 9)
	b.insert("other", 1)
	b.now = at(time.Second)
	b.finish("p", 1, relaytype.StateSucceeded)
	b.complete("p", 2, relaytype.StateSkipped, "", "ignored:X") // no intent: ack_next_at NULL
	b.finish("p", 3, relaytype.StateDead)
	b.fail("p", 5, relaytype.ClassInfra, at(time.Minute)) // 4 PENDING, 5 FAILED
	b.finish("p", 6, relaytype.StateSucceeded)
	require.Equal(t, 1, b.ackDone("p", 6))
	b.finish("p", 7, relaytype.StateSucceeded)
	b.ackAbandon("p", 7, relaydriver.AckReasonMissingRow)
	b.finish("p", 8, relaytype.StateSucceeded)
	b.ackRetry("p", 8, at(100*time.Hour)) // backoff far in the future
	b.finish("p", 9, relaytype.StateSucceeded)
	b.ackRetry("p", 9, at(20*time.Second))
	b.finish("other", 1, relaytype.StateSucceeded)

	require.Equal(t, []int64{2}, b.ackScan("p", at(500*time.Millisecond), 100),
		"before the intent's time only the NULL ack_next_at row is due")
	require.Equal(t, []int64{1, 2, 3}, b.ackScan("p", at(10*time.Second), 100))
	require.Equal(t, []int64{1, 2, 3, 9}, b.ackScan("p", at(20*time.Second), 100), "backoff elapsed (<=)")
	require.Equal(t, []int64{1, 2, 3, 9}, b.ackScan("p", t0.Add(ackR), 100),
		"enqueued exactly Now−R is not yet past the window (strict <)")
	require.Equal(t, []int64{1, 2, 3, 8, 9}, b.ackScan("p", t0.Add(ackR+time.Microsecond), 100),
		"enqueued before Now−R: due despite its future backoff; order attempts, then id")
}

// Fair order: attempts ascending, then id; Limit cuts (seed 000 §6.1).
func testAckScanOrderAndLimit(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4)
	for _, id := range []int64{1, 2, 3, 4} {
		b.finish("p", id, relaytype.StateSucceeded)
	}
	b.ackRetry("p", 1, b.now)
	b.ackRetry("p", 1, b.now)
	b.ackRetry("p", 2, b.now)
	require.Equal(t, []int64{3, 4, 2, 1}, b.ackScan("p", b.now, 100))
	require.Equal(t, []int64{3, 4}, b.ackScan("p", b.now, 2))
	require.Equal(t, 2, b.get("p", 1).AckAttempts)
}

// ARCHIVED rows are never scanned, however old (seed 000 §9.3).
func testAckScanArchivedNever(t *testing.T, b *bundle) {
	b.insert("p", 1, 2)
	b.finish("p", 1, relaytype.StateDead)
	b.finish("p", 2, relaytype.StateDead)
	n, err := b.ex.Exec(b.ctx, "UPDATE relay_message SET state = $1 WHERE queue = $2 AND id = $3",
		string(relaytype.StateArchived), "p", int64(1))
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Equal(t, []int64{2}, b.ackScan("p", at(10*ackR), 100))
}

// AckDone stamps only rows still owing an acknowledgement; an earlier AckAt is
// kept.
func testAckDoneOnlyOwed(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4)
	b.finish("p", 1, relaytype.StateSucceeded)
	b.finish("p", 3, relaytype.StateSkipped)
	b.finish("p", 4, relaytype.StateDead)
	b.ackAbandon("p", 3, relaydriver.AckReasonTransientDeadline)
	require.Equal(t, 1, b.ackDone("p", 4))
	first := b.now
	b.now = at(time.Minute)
	require.Equal(t, 1, b.ackDone("p", 1, 2, 3, 4, 99), "2 is PENDING, 3 abandoned, 4 done, 99 unknown")
	requireTime(t, b.now, b.get("p", 1).AckAt, "AckAt of 1")
	requireTime(t, time.Time{}, b.get("p", 2).AckAt, "AckAt of a PENDING row")
	requireTime(t, time.Time{}, b.get("p", 3).AckAt, "AckAt of an abandoned row")
	requireTime(t, first, b.get("p", 4).AckAt, "an earlier AckAt is kept")
	require.Empty(t, b.ackScan("p", b.now, 100))
	n, err := b.ex.AckDone(b.ctx, &relaydriver.AckDoneParams{Queue: "p", Now: b.now})
	require.NoError(t, err)
	require.Zero(t, n, "no ids: no-op")
}

// AckRetry increments attempts and moves the next try; a row not owing an
// acknowledgement is refused.
func testAckRetryIncrements(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3)
	b.finish("p", 1, relaytype.StateSucceeded)
	b.finish("p", 3, relaytype.StateSucceeded)
	b.ackRetry("p", 1, at(time.Second))
	b.ackRetry("p", 1, at(5*time.Second))
	m := b.get("p", 1)
	require.Equal(t, 2, m.AckAttempts)
	requireTime(t, at(5*time.Second), m.AckNextAt, "AckNextAt")
	requireTime(t, time.Time{}, m.AckAt, "AckAt")
	requireTime(t, time.Time{}, m.AckAbandonedAt, "AckAbandonedAt")

	err := b.ex.AckRetry(b.ctx, &relaydriver.AckRetryParams{Queue: "p", ID: 2, NextAt: b.now, Now: b.now})
	require.ErrorIs(t, err, relaytype.ErrConflict, "PENDING owes nothing yet")
	require.ErrorIs(t, b.ex.AckRetry(b.ctx, &relaydriver.AckRetryParams{Queue: "p", ID: 99, NextAt: b.now, Now: b.now}),
		relaytype.ErrNotFound)
	require.Equal(t, 1, b.ackDone("p", 3))
	require.ErrorIs(t, b.ex.AckRetry(b.ctx, &relaydriver.AckRetryParams{Queue: "p", ID: 3, NextAt: b.now, Now: b.now}),
		relaytype.ErrConflict, "already acknowledged")
	require.Zero(t, b.get("p", 3).AckAttempts)
}

// AckAbandon stops retries without acknowledging: AckAt stays NULL (seed 000
// §6.2).
func testAckAbandon(t *testing.T, b *bundle) {
	b.insert("p", 1, 2)
	b.finish("p", 1, relaytype.StateSucceeded)
	b.finish("p", 2, relaytype.StateSucceeded)
	b.now = at(time.Minute)
	b.ackAbandon("p", 1, relaydriver.AckReasonMissingRow)
	m := b.get("p", 1)
	requireTime(t, b.now, m.AckAbandonedAt, "AckAbandonedAt")
	require.Equal(t, relaydriver.AckReasonMissingRow, m.AckAbandonReason)
	requireTime(t, time.Time{}, m.AckAt, "abandoned is not acknowledged")
	require.Equal(t, []int64{2}, b.ackScan("p", at(10*ackR), 100), "abandoned rows are not scanned, however old")

	err := b.ex.AckAbandon(b.ctx, &relaydriver.AckAbandonParams{Queue: "p", ID: 1, Reason: relaydriver.AckReasonTransientDeadline, Now: b.now})
	require.ErrorIs(t, err, relaytype.ErrConflict, "already abandoned: the first reason stays")
	require.Equal(t, relaydriver.AckReasonMissingRow, b.get("p", 1).AckAbandonReason)
	require.Error(t, b.ex.AckAbandon(b.ctx, &relaydriver.AckAbandonParams{Queue: "p", ID: 2, Reason: "WHATEVER", Now: b.now}))
}

// AckReopen clears abandonments by ids or by reason; the rows are due at once
// and keep their attempt count.
func testAckReopen(t *testing.T, b *bundle) {
	b.insert("p", 1, 2, 3, 4)
	for _, id := range []int64{1, 2, 3, 4} {
		b.finish("p", id, relaytype.StateSucceeded)
	}
	b.ackRetry("p", 2, at(time.Hour))
	b.ackAbandon("p", 1, relaydriver.AckReasonMissingRow)
	b.ackAbandon("p", 2, relaydriver.AckReasonTransientDeadline)
	b.ackAbandon("p", 3, relaydriver.AckReasonTransientDeadline)
	require.Equal(t, []int64{4}, b.ackScan("p", b.now, 100))

	b.now = at(time.Minute)
	n, err := b.ex.AckReopen(b.ctx, &relaydriver.AckReopenParams{Queue: "p", IDs: []int64{1, 4}, Now: b.now})
	require.NoError(t, err)
	require.Equal(t, 1, n, "4 was not abandoned")
	m := b.get("p", 1)
	requireTime(t, time.Time{}, m.AckAbandonedAt, "AckAbandonedAt after reopen")
	require.Empty(t, m.AckAbandonReason)
	requireTime(t, b.now, m.AckNextAt, "due at once")

	n, err = b.ex.AckReopen(b.ctx, &relaydriver.AckReopenParams{Queue: "p", Reason: relaydriver.AckReasonTransientDeadline, Now: b.now})
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, 1, b.get("p", 2).AckAttempts, "attempts are kept")
	require.Equal(t, []int64{1, 3, 4, 2}, b.ackScan("p", b.now, 100))

	_, err = b.ex.AckReopen(b.ctx, &relaydriver.AckReopenParams{Queue: "p", Now: b.now})
	require.Error(t, err, "neither ids nor reason")
}
