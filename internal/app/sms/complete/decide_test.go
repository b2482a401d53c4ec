package complete_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/complete"
)

var t0 = time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)

var dl = complete.Deadlines{Result: 10 * time.Minute, Report: time.Hour}

// TestDecideResend: a segment without a result past its deadline is to be
// published again while resends are left, a deadline after the last one;
// then it is unknown.
func TestDecideResend(t *testing.T) {
	t.Parallel()
	d := complete.Deadlines{Result: 10 * time.Minute, Report: time.Hour, Resends: 1}
	v := complete.Decide(view(false, true), []complete.Fact{res(1, complete.ResultAccepted, 1)}, t0.Add(11*time.Minute), d)
	require.Equal(t, complete.AttemptQueued, v.State)
	require.Equal(t, []uint64{258}, v.Resend, "segment 2 only")
	resent := complete.Fact{ID: 9, Kind: complete.KindResend, At: t0.Add(11 * time.Minute)}
	v = complete.Decide(view(false, true), []complete.Fact{res(1, complete.ResultAccepted, 1), resent}, t0.Add(15*time.Minute), d)
	require.Equal(t, complete.AttemptQueued, v.State)
	require.Empty(t, v.Resend)
	require.Equal(t, t0.Add(21*time.Minute), v.WakeAt, "a deadline after the resend")
	v = complete.Decide(view(false, true), []complete.Fact{res(1, complete.ResultAccepted, 1), resent}, t0.Add(22*time.Minute), d)
	require.Equal(t, complete.AttemptUnknown, v.State, "no resend left")
	require.Empty(t, v.Resend)
}

func view(registered ...bool) complete.View {
	v := complete.View{CreatedAt: t0}
	for i, r := range registered {
		v.Segments = append(v.Segments, complete.Segment{SubmitID: uint64(256 + i + 1), Registered: r})
	}
	return v
}

func res(seg int, state string, at time.Duration) complete.Fact {
	return complete.Fact{Kind: complete.KindResult, Submit: uint64(256 + seg), State: state, At: t0.Add(at)}
}

func rep(seg int, stat string, at time.Duration) complete.Fact {
	return complete.Fact{Kind: complete.KindReport, Submit: uint64(256 + seg), State: stat, At: t0.Add(at)}
}

func late(seg int, code string, at time.Duration) complete.Fact {
	return complete.Fact{Kind: complete.KindLateResp, Submit: uint64(256 + seg), State: code, At: t0.Add(at)}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	const A, R, U = complete.ResultAccepted, complete.ResultRejected, complete.ResultUnknown
	per3 := view(true, true, true)
	msgLevel := view(false, false, true)
	for _, tc := range []struct {
		name      string
		v         complete.View
		facts     []complete.Fact
		at        time.Duration
		want      string
		wake      time.Duration // when queued
		timedOut  bool
		conflicts int
	}{
		{"nothing yet", per3, nil, time.Minute, complete.AttemptQueued, 10 * time.Minute, false, 0},
		{"no result by the deadline", per3, nil, 11 * time.Minute, complete.AttemptUnknown, 0, true, 0},
		{"accepted, reports awaited", per3, []complete.Fact{res(1, A, 1), res(2, A, 1), res(3, A, 1)}, time.Minute,
			complete.AttemptQueued, time.Hour, false, 0},
		{"two of three delivered: not delivered", per3, []complete.Fact{res(1, A, 1), res(2, A, 1), res(3, A, 1),
			rep(1, "DELIVRD", 2), rep(2, "DELIVRD", 2)}, time.Minute, complete.AttemptQueued, time.Hour, false, 0},
		{"every segment delivered", per3, []complete.Fact{res(1, A, 1), res(2, A, 1), res(3, A, 1),
			rep(1, "DELIVRD", 2), rep(2, "DELIVRD", 2), rep(3, "DELIVRD", 3)}, time.Minute, complete.AttemptDelivered, 0, false, 0},
		{"one segment failed fails the attempt at once", per3, []complete.Fact{res(1, A, 1), res(2, A, 1), res(3, A, 1),
			rep(2, "UNDELIV", 2)}, time.Minute, complete.AttemptFailed, 0, false, 0},
		{"a rejected submit fails it", per3, []complete.Fact{res(1, A, 1), res(2, R, 1)}, time.Minute, complete.AttemptFailed, 0, false, 0},
		{"report before its result: the report decides", per3, []complete.Fact{rep(1, "DELIVRD", 1), rep(2, "DELIVRD", 1),
			rep(3, "DELIVRD", 1)}, time.Minute, complete.AttemptDelivered, 0, false, 0},
		{"message level: the last segment's report decides", msgLevel, []complete.Fact{res(1, A, 1), res(2, A, 1), res(3, A, 1),
			rep(3, "DELIVRD", 2)}, time.Minute, complete.AttemptDelivered, 0, false, 0},
		{"message level: waiting for the one report", msgLevel, []complete.Fact{res(1, A, 1), res(2, A, 1), res(3, A, 1)},
			time.Minute, complete.AttemptQueued, time.Hour, false, 0},
		{"unknown outcome waits for the report", view(true), []complete.Fact{res(1, U, 1)}, time.Minute,
			complete.AttemptQueued, time.Hour, false, 0},
		{"unknown outcome resolved by its report", view(true), []complete.Fact{res(1, U, 1), rep(1, "DELIVRD", 5)}, time.Minute,
			complete.AttemptDelivered, 0, false, 0},
		{"unknown outcome past the report deadline", view(true), []complete.Fact{res(1, U, 1)}, 2 * time.Hour,
			complete.AttemptUnknown, 0, true, 0},
		{"a late SubmitResp refusing it", view(true), []complete.Fact{res(1, U, 1), late(1, "8", 2)}, time.Minute,
			complete.AttemptFailed, 0, false, 0},
		{"a late SubmitResp accepting it: the report is awaited", view(true), []complete.Fact{res(1, U, 1), late(1, "0", 2)},
			time.Minute, complete.AttemptQueued, time.Hour, false, 0},
		{"a contradicting second report is kept, not used", view(true), []complete.Fact{res(1, A, 1), rep(1, "DELIVRD", 2),
			rep(1, "EXPIRED", 3)}, time.Minute, complete.AttemptDelivered, 0, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := complete.Decide(tc.v, tc.facts, t0.Add(tc.at), dl)
			require.Equal(t, tc.want, got.State, got)
			if tc.want == complete.AttemptQueued {
				require.Equal(t, t0.Add(tc.wake), got.WakeAt)
			} else {
				require.True(t, got.WakeAt.IsZero())
			}
			require.Equal(t, tc.timedOut, got.TimedOut)
			require.Len(t, got.Conflicts, tc.conflicts)
			require.Len(t, got.Segments, len(tc.v.Segments))
		})
	}
}

// TestDecideOrderFree: the verdict does not depend on the order the facts
// are listed in (two receipts of one message arriving at once, in either
// order, decide alike).
func TestDecideOrderFree(t *testing.T) {
	t.Parallel()
	facts := []complete.Fact{res(1, complete.ResultAccepted, 1), res(2, complete.ResultAccepted, 1),
		rep(1, "DELIVRD", 2), rep(2, "UNDELIV", 2)}
	a := complete.Decide(view(true, true), facts, t0.Add(time.Minute), dl)
	b := complete.Decide(view(true, true), []complete.Fact{facts[3], facts[2], facts[1], facts[0]}, t0.Add(time.Minute), dl)
	require.Equal(t, a, b)
	require.Equal(t, complete.AttemptFailed, a.State)
}
