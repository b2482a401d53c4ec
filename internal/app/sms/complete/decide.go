package complete

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Kinds of facts (sms_event.kind).
const (
	KindResult   = "result"
	KindReport   = "report"
	KindLateResp = "late_resp"
	KindTimeout  = "timeout"
	KindResend   = "resend"
)

// Submit result states, as the gateway writes them.
const (
	ResultAccepted = "ACCEPTED"
	ResultRejected = "REJECTED"
	ResultUnknown  = "UNKNOWN"
)

// StatDelivered is the report Stat of a delivered segment.
const StatDelivered = "DELIVRD"

// Attempt states (sms_attempt.state).
const (
	AttemptQueued    = "queued"
	AttemptDelivered = "delivered"
	AttemptFailed    = "failed"
	AttemptUnknown   = "unknown"
)

// Fact is one stored event about an attempt (an sms_event row).
type Fact struct {
	ID     int64 // the log's order
	Kind   string
	Submit uint64 // the segment's submitId; 0 for a timeout
	State  string // result: ACCEPTED/REJECTED/UNKNOWN; report: Stat; late_resp: the result code
	At     time.Time
}

// Segment is one submit of an attempt.
type Segment struct {
	SubmitID   uint64
	Registered bool // a status report was asked for
}

// View is what Decide needs of an attempt.
type View struct {
	Segments  []Segment
	CreatedAt time.Time
}

// Deadlines are the timeout rule: an attempt without a submit result for
// a segment by CreatedAt + Result, or without an asked-for report by
// CreatedAt + Report, has that segment's outcome unknown. Never a resend.
type Deadlines struct {
	Result time.Duration
	Report time.Duration
	// Resends is how many times the commands of segments still without a
	// submit result are published again, one result deadline apart, before
	// they are unknown (0: never). Safe because the gateway dedupes by
	// submitId: a command it never claimed (lost on its way, say in a Redis
	// that restarted without its data) is submitted; one it claimed is
	// answered from its row.
	Resends int
}

// Segment states, as Decide rolls them up.
const (
	SegPending   = "pending"   // no submit result yet
	SegAccepted  = "accepted"  // accepted, no report asked for (a message-level channel's earlier segments)
	SegAwaiting  = "awaiting"  // accepted (or outcome unknown), its report not here yet
	SegDelivered = "delivered" // reported delivered
	SegFailed    = "failed"    // rejected by the supplier, or reported not delivered
	SegUnknown   = "unknown"   // the deadline passed without a definite answer
)

// SegmentVerdict is one segment's facts rolled up.
type SegmentVerdict struct {
	SubmitID uint64
	State    string
	Result   string // the submit result as finally known ("" none)
	Stat     string // the report's Stat ("" none)
}

// Verdict is Decide's answer for one attempt.
type Verdict struct {
	// State is queued (not decided yet), delivered, failed or unknown.
	State string
	// Detail says why, in a few words: a Stat, a result, a timeout. Never
	// a number or content.
	Detail string
	// WakeAt, while queued, is the next deadline (zero: none).
	WakeAt time.Time
	// TimedOut is true when the verdict is unknown because a deadline
	// passed (the coordinator records a timeout fact for it).
	TimedOut bool
	// Resend lists, while queued, the segments whose result deadline passed
	// with resends left: their commands are to be published again, and
	// WakeAt is the next result deadline.
	Resend []uint64
	// Conflicts lists facts that contradict the ones used (a second report
	// of a segment with another Stat, a result after a report said
	// otherwise): kept for audit, never acted on.
	Conflicts []string
	Segments  []SegmentVerdict
}

// Decide rolls an attempt's facts up into its outcome at now. It is pure:
// the same view and facts give the same verdict, so a worker that
// recomputes after a crash, or a second worker after a takeover, decides as
// the first one did.
//
// A segment is decided by its first report when one came (a report means
// the supplier had the segment: DELIVRD is delivered, any other Stat
// failed); otherwise by its submit result: REJECTED is failed, ACCEPTED is
// accepted when no report was asked for and awaiting otherwise, UNKNOWN is
// awaiting too (a late SubmitResp turns it into ACCEPTED, code 0, or
// REJECTED). Awaiting past the report deadline, or without a result past
// the result deadline, is unknown.
//
// The attempt: any failed segment fails it; every segment delivered or
// accepted (at least one delivered) delivers it — so a per-segment channel
// needs every segment's report, a message-level channel the one report it
// asked for; any segment still pending or awaiting keeps it queued (WakeAt
// the earliest deadline); what is left is unknown.
func Decide(v View, facts []Fact, now time.Time, dl Deadlines) Verdict {
	facts = slices.Clone(facts)
	slices.SortStableFunc(facts, func(a, b Fact) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID))
	})
	var out Verdict
	// Each resend gives the segments without a result another deadline.
	resends, lastSent := 0, v.CreatedAt
	for _, f := range facts {
		if f.Kind == KindResend {
			resends++
			if f.At.After(lastSent) {
				lastSent = f.At
			}
		}
	}
	resultBy := lastSent.Add(dl.Result)
	reportBy := v.CreatedAt.Add(dl.Report)
	var wake []time.Time
	var failedWhy, unknownWhy string
	delivered, ok, waiting, failed := 0, 0, 0, 0
	for _, s := range v.Segments {
		sv := SegmentVerdict{SubmitID: s.SubmitID}
		var late string
		for _, f := range facts {
			if f.Submit != s.SubmitID {
				continue
			}
			switch f.Kind {
			case KindResult:
				if sv.Result == "" {
					sv.Result = f.State
				} else if f.State != sv.Result {
					out.Conflicts = append(out.Conflicts, fmt.Sprintf("submit %d: result %s after %s", s.SubmitID, f.State, sv.Result))
				}
			case KindLateResp:
				if late == "" {
					late = f.State
				}
			case KindReport:
				if sv.Stat == "" {
					sv.Stat = f.State
				} else if f.State != sv.Stat {
					out.Conflicts = append(out.Conflicts, fmt.Sprintf("submit %d: report %s after %s", s.SubmitID, f.State, sv.Stat))
				}
			}
		}
		if late != "" && (sv.Result == ResultUnknown || sv.Result == "") {
			if late == "0" {
				sv.Result = ResultAccepted
			} else {
				sv.Result = ResultRejected
			}
		}
		switch {
		case sv.Stat != "":
			if sv.Stat == StatDelivered {
				sv.State = SegDelivered
			} else {
				sv.State = SegFailed
				failedWhy = cmp.Or(failedWhy, "report "+sv.Stat)
			}
			if sv.Result == ResultRejected {
				out.Conflicts = append(out.Conflicts, fmt.Sprintf("submit %d: report %s for a rejected submit", s.SubmitID, sv.Stat))
			}
		case sv.Result == ResultRejected:
			sv.State = SegFailed
			failedWhy = cmp.Or(failedWhy, "submit rejected")
		case sv.Result == ResultAccepted && !s.Registered:
			sv.State = SegAccepted
		case sv.Result == ResultAccepted || sv.Result == ResultUnknown:
			if now.Before(reportBy) {
				sv.State = SegAwaiting
				wake = append(wake, reportBy)
			} else {
				sv.State = SegUnknown
				unknownWhy = cmp.Or(unknownWhy, "no report by the deadline")
				out.TimedOut = true
			}
		default:
			switch {
			case now.Before(resultBy):
				sv.State = SegPending
				wake = append(wake, resultBy)
			case resends < dl.Resends:
				sv.State = SegPending
				out.Resend = append(out.Resend, s.SubmitID)
				wake = append(wake, now.Add(dl.Result))
			default:
				sv.State = SegUnknown
				unknownWhy = cmp.Or(unknownWhy, "no submit result by the deadline")
				out.TimedOut = true
			}
		}
		switch sv.State {
		case SegDelivered:
			delivered++
			ok++
		case SegAccepted:
			ok++
		case SegPending, SegAwaiting:
			waiting++
		case SegFailed:
			failed++
		}
		out.Segments = append(out.Segments, sv)
	}
	if failed > 0 || waiting == 0 {
		out.Resend = nil // decided: nothing to publish again
	}
	switch {
	case failed > 0:
		out.State, out.Detail, out.TimedOut = AttemptFailed, failedWhy, false
	case ok == len(v.Segments) && delivered > 0:
		out.State, out.Detail, out.TimedOut = AttemptDelivered, StatDelivered, false
	case waiting > 0:
		out.State, out.TimedOut = AttemptQueued, false
		out.WakeAt = slices.MinFunc(wake, func(a, b time.Time) int { return a.Compare(b) })
	default:
		out.State, out.Detail = AttemptUnknown, cmp.Or(unknownWhy, "no report asked for")
	}
	return out
}
