package shore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

// keyEvent is event(node, n) on record 1: every one the same key, sequence n.
func keyEvent(node string, n int) *pb.ChangeEvent {
	ev := event(node, n)
	ev.PrimaryKey = []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: 1}}}
	return ev
}

// released returns the source sequences of the events released to the
// apply queue, in queue order.
func released(t *testing.T, b *bundle) []int {
	t.Helper()
	rows, err := b.d.Pool().Query(t.Context(), `SELECT e.source_sequence::int FROM relay_message m
		JOIN sync_inbox_event e ON e.id = convert_from(m.payload, 'UTF8')::bigint
		WHERE m.queue = $1 ORDER BY m.id`, shore.ApplyQueue)
	require.NoError(t, err)
	var out []int
	for rows.Next() {
		var n int
		require.NoError(t, rows.Scan(&n))
		out = append(out, n)
	}
	require.NoError(t, rows.Err())
	return out
}

// inboxOf registers node and returns an inbox on b's schema.
func inboxOf(t *testing.T, b *bundle, node string) *shore.Inbox {
	t.Helper()
	b.addNode(t, node)
	codec, err := wire.NewCodec(wire.Config{})
	require.NoError(t, err)
	in, err := shore.NewInbox(b.d, codec, b.clock)
	require.NoError(t, err)
	return in
}

// receiveAt stores evs as batch uuidN(batch) of node and returns each
// event's status/reason/field.
func receiveAt(t *testing.T, in *shore.Inbox, node string, batch int, evs ...*pb.ChangeEvent) []string {
	t.Helper()
	resp, _, err := in.Receive(t.Context(), node, &wire.Batch{NodeID: node, BatchID: uuidN(batch), Sequence: 1,
		CreatedAt: t0, Events: evs})
	require.NoError(t, err)
	var out []string
	for _, st := range resp.Statuses {
		out = append(out, st.Status.String()+"/"+st.Reason.String()+"/"+st.Field)
	}
	return out
}

type streamRow struct {
	Next, Held int
	Gap        bool
}

func stream(t *testing.T, b *bundle, node string) streamRow {
	t.Helper()
	var r streamRow
	require.NoError(t, b.d.Pool().QueryRow(t.Context(), `SELECT next_sequence::int, held, gap_since IS NOT NULL
		FROM sync_stream WHERE origin_node_id = $1`, node).Scan(&r.Next, &r.Held, &r.Gap))
	return r
}

// TestStreamReleasesInSequenceOrder: events past a gap are held; the event
// that fills it releases them, and the apply queue gets the stream in
// sequence order whatever order the batches came in (seed 004 §10.4).
func TestStreamReleasesInSequenceOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := inboxOf(t, b, "ship-1")
	receive := func(batch int, evs ...*pb.ChangeEvent) []string { return receiveAt(t, in, "ship-1", batch, evs...) }
	ok := "RECEIVE_STATUS_RECEIVED/REJECT_REASON_UNSPECIFIED/"

	require.Equal(t, []string{ok, ok}, receive(100, keyEvent("ship-1", 4), keyEvent("ship-1", 3)))
	require.Empty(t, released(t, b), "1 and 2 are missing: nothing may run")
	require.Equal(t, streamRow{Next: 1, Held: 2, Gap: true}, stream(t, b, "ship-1"))

	require.Equal(t, []string{ok}, receive(101, keyEvent("ship-1", 1)))
	require.Equal(t, []int{1}, released(t, b))
	require.Equal(t, streamRow{Next: 2, Held: 2, Gap: true}, stream(t, b, "ship-1"))

	// The gap filled, with a resend of 1 in the same batch: 2, 3, 4 go, in order.
	require.Equal(t, []string{ok, ok}, receive(102, keyEvent("ship-1", 2), keyEvent("ship-1", 1)))
	require.Equal(t, []int{1, 2, 3, 4}, released(t, b))
	require.Equal(t, streamRow{Next: 5, Held: 0, Gap: false}, stream(t, b, "ship-1"))

	// Another event claiming sequence 3 contradicts the stream: refused,
	// not stored; the next one in line goes.
	other := keyEvent("ship-1", 3)
	other.EventId = uuidN(3000)
	require.Equal(t, []string{"RECEIVE_STATUS_PERMANENT_REJECTED/REJECT_REASON_INCONSISTENT_FIELDS/source_sequence", ok},
		receive(103, other, keyEvent("ship-1", 5)))
	require.Equal(t, []int{1, 2, 3, 4, 5}, released(t, b))
	require.Equal(t, 5, countRows(t, b, "SELECT count(*) FROM sync_inbox_event WHERE released_at IS NOT NULL"))

	// Two streams in one batch, one with a gap: only the other moves.
	p2 := func(n int) *pb.ChangeEvent {
		ev := keyEvent("ship-1", n)
		ev.EventId, ev.SourcePartition = uuidN(5000+n), "ship.cdc.ops.voyage/1"
		return ev
	}
	require.Equal(t, []string{ok, ok}, receive(104, p2(2), keyEvent("ship-1", 6)))
	require.Equal(t, []int{1, 2, 3, 4, 5, 6}, released(t, b))
	require.Equal(t, []string{ok}, receive(105, p2(1)))
	require.Equal(t, []int{1, 2, 3, 4, 5, 6, 1, 2}, released(t, b))
}

func countRows(t *testing.T, b *bundle, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.d.Pool().QueryRow(t.Context(), q, args...).Scan(&n))
	return n
}

// TestGapAskedForAfterGrace: a gap younger than the grace is left alone (it
// usually fills by itself); an older one is asked for once, again only after
// the repeat interval, and never once it is filled.
func TestGapAskedForAfterGrace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := inboxOf(t, b, "ship-1")
	receive := func(batch int, evs ...*pb.ChangeEvent) { receiveAt(t, in, "ship-1", batch, evs...) }
	ask := func() []shore.Resend {
		rs, err := in.AskResends(t.Context(), time.Minute, 10*time.Minute)
		require.NoError(t, err)
		return rs
	}
	receive(100, keyEvent("ship-1", 1), keyEvent("ship-1", 4), keyEvent("ship-1", 5))
	require.Empty(t, ask(), "a fresh gap is not asked for")
	b.clock.Advance(2 * time.Minute)
	want := shore.Resend{Node: "ship-1", Connector: "dbz-1", Partition: "ship.cdc.ops.voyage/0", From: 2, To: 3, At: b.clock.Now()}
	require.Equal(t, []shore.Resend{want}, ask())
	require.Empty(t, ask(), "asked already")
	b.clock.Advance(11 * time.Minute)
	require.Len(t, ask(), 1, "asked again after the repeat interval")
	// Half filled: a new gap (3), timed afresh.
	receive(101, keyEvent("ship-1", 2))
	require.Empty(t, ask())
	b.clock.Advance(2 * time.Minute)
	got := ask()
	require.Len(t, got, 1)
	require.Equal(t, [2]uint64{3, 3}, [2]uint64{got[0].From, got[0].To})
	receive(102, keyEvent("ship-1", 3))
	b.clock.Advance(time.Hour)
	require.Empty(t, ask(), "no gap left")
	all, err := in.Resends(t.Context(), "ship-1")
	require.NoError(t, err)
	require.Len(t, all, 3)
	require.Equal(t, []int{1, 2, 3, 4, 5}, released(t, b))
}

// TestHeldLimitRefusesForNow: a stream holding its limit of events past a
// gap answers further would-be-held events RETRYABLE_FAILURE (not stored),
// while the event that fills the gap and resends are received; after the
// gap is filled the refused events are taken.
func TestHeldLimitRefusesForNow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := inboxOf(t, b, "ship-1")
	in.LimitHeld(2)
	ok := "RECEIVE_STATUS_RECEIVED/REJECT_REASON_UNSPECIFIED/"
	later := "RECEIVE_STATUS_RETRYABLE_FAILURE/REJECT_REASON_OVERLOADED/source_sequence"
	require.Equal(t, []string{ok, ok}, receiveAt(t, in, "ship-1", 100, keyEvent("ship-1", 3), keyEvent("ship-1", 4)))
	require.Equal(t, []string{later, ok, later}, receiveAt(t, in, "ship-1", 101, keyEvent("ship-1", 5), keyEvent("ship-1", 3),
		keyEvent("ship-1", 5)), "at the limit: 5 waits, 3 is a resend")
	require.Equal(t, 2, countRows(t, b, "SELECT count(*) FROM sync_inbox_event"))
	require.Equal(t, []string{ok, ok}, receiveAt(t, in, "ship-1", 102, keyEvent("ship-1", 1), keyEvent("ship-1", 2)))
	require.Equal(t, []int{1, 2, 3, 4}, released(t, b))
	require.Equal(t, []string{ok}, receiveAt(t, in, "ship-1", 103, keyEvent("ship-1", 5)))
	require.Equal(t, []int{1, 2, 3, 4, 5}, released(t, b))
}

// TestStalledStreamCountsHeld: batches past a gap that stays open keep the
// stream's held count exact (it is not read back from the held events for
// every batch), and filling the gap releases them all.
func TestStalledStreamCountsHeld(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := inboxOf(t, b, "ship-1")
	for batch := range 5 {
		n := 2 + batch*3
		receiveAt(t, in, "ship-1", 200+batch, keyEvent("ship-1", n), keyEvent("ship-1", n+1), keyEvent("ship-1", n+2))
		require.Equal(t, streamRow{Next: 1, Held: 3 * (batch + 1), Gap: true}, stream(t, b, "ship-1"))
	}
	receiveAt(t, in, "ship-1", 300, keyEvent("ship-1", 8)) // a resend of a held event
	require.Equal(t, streamRow{Next: 1, Held: 15, Gap: true}, stream(t, b, "ship-1"))
	receiveAt(t, in, "ship-1", 301, keyEvent("ship-1", 1))
	require.Equal(t, streamRow{Next: 17, Held: 0, Gap: false}, stream(t, b, "ship-1"))
	want := make([]int, 16)
	for i := range want {
		want[i] = i + 1
	}
	require.Equal(t, want, released(t, b))
}

// TestRefusedNumberDoesNotHoldTheStream: a valid, numbered event whose rule
// the node may not use is refused for good, and its sequence number is
// given up — recorded, and walked over by the stream's release — so the
// stream's later events are not held behind it; a number given up past a
// gap waits like a held event (and bounds the gap asked for); a refusal at
// a number another event holds gives nothing up.
func TestRefusedNumberDoesNotHoldTheStream(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := inboxOf(t, b, "ship-1")
	ok := "RECEIVE_STATUS_RECEIVED/REJECT_REASON_UNSPECIFIED/"
	refused := "RECEIVE_STATUS_PERMANENT_REJECTED/REJECT_REASON_RULE_NOT_AUTHORIZED/rule_id"
	unauthorised := func(n int) *pb.ChangeEvent {
		ev := keyEvent("ship-1", n)
		ev.RuleVersion = 2 // the node may use version 1 only
		return ev
	}
	skips := func() int { return countRows(t, b, "SELECT count(*) FROM sync_stream_skip") }
	waiting := func() int { return countRows(t, b, "SELECT count(*) FROM sync_stream_skip WHERE passed_at IS NULL") }

	require.Equal(t, []string{ok, refused, ok}, receiveAt(t, in, "ship-1", 100, keyEvent("ship-1", 1), unauthorised(2),
		keyEvent("ship-1", 3)))
	require.Equal(t, []int{1, 3}, released(t, b), "3 is not held behind the refused 2")
	require.Equal(t, streamRow{Next: 4, Held: 0, Gap: false}, stream(t, b, "ship-1"))
	require.Equal(t, 1, skips())
	require.Zero(t, waiting())

	// Past a gap: 6 is held, the refused 5 waits with it, 4 releases both.
	require.Equal(t, []string{ok}, receiveAt(t, in, "ship-1", 101, keyEvent("ship-1", 6)))
	require.Equal(t, []string{refused}, receiveAt(t, in, "ship-1", 102, unauthorised(5)))
	require.Equal(t, streamRow{Next: 4, Held: 2, Gap: true}, stream(t, b, "ship-1"))
	require.Equal(t, 1, waiting())
	require.Equal(t, []string{refused}, receiveAt(t, in, "ship-1", 103, unauthorised(5)), "a resend of the refused event")
	require.Equal(t, streamRow{Next: 4, Held: 2, Gap: true}, stream(t, b, "ship-1"), "counted once")
	require.Equal(t, []string{ok}, receiveAt(t, in, "ship-1", 104, keyEvent("ship-1", 4)))
	require.Equal(t, []int{1, 3, 4, 6}, released(t, b))
	require.Equal(t, streamRow{Next: 7, Held: 0, Gap: false}, stream(t, b, "ship-1"))
	require.Zero(t, waiting())
	require.Equal(t, []string{refused}, receiveAt(t, in, "ship-1", 105, unauthorised(2)), "long passed")
	require.Equal(t, 2, skips())

	// The gap asked for ends below the lowest waiting given-up number.
	require.Equal(t, []string{refused}, receiveAt(t, in, "ship-1", 106, unauthorised(9)))
	require.Equal(t, []string{ok}, receiveAt(t, in, "ship-1", 107, keyEvent("ship-1", 10)))
	b.clock.Advance(time.Hour)
	rs, err := in.AskResends(t.Context(), time.Minute, 10*time.Minute)
	require.NoError(t, err)
	require.Len(t, rs, 1)
	require.Equal(t, [2]uint64{7, 8}, [2]uint64{rs[0].From, rs[0].To})

	// A refusal at a number another event holds (10) gives nothing up.
	taken := unauthorised(10)
	taken.EventId = uuidN(9010)
	require.Equal(t, []string{refused}, receiveAt(t, in, "ship-1", 108, taken))
	require.Equal(t, 3, skips())
	require.Equal(t, []string{ok, ok}, receiveAt(t, in, "ship-1", 109, keyEvent("ship-1", 7), keyEvent("ship-1", 8)))
	require.Equal(t, []int{1, 3, 4, 6, 7, 8, 10}, released(t, b))
	require.Equal(t, streamRow{Next: 11, Held: 0, Gap: false}, stream(t, b, "ship-1"))
	require.Zero(t, waiting())
}
