package arbiter

import (
	"strings"
	"time"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

// Version is one side's version of a conflicting record: whose it is, the
// revision, and the row (Exists false: the record is deleted on that side;
// Row is then nil).
type Version struct {
	Node     string
	Revision string
	Exists   bool
	Row      *pb.RowImage
}

// Dispute is what the arbiter judges: the rule, the shore's version as the
// shore database holds it now, the shore revision the evidence was
// recorded against, and the node's version from the latest evidence.
type Dispute struct {
	Rule *shore.Rule
	// Shore is the shore's row as read now.
	Shore Version
	// EvidenceShore is the shore revision the evidence holds ("" : no row
	// then).
	EvidenceShore string
	Node          Version
}

// Outcome is what Judge concluded.
type Outcome int

// Outcomes.
const (
	// Decide: Winner's version is the decision.
	Decide Outcome = iota + 1
	// Manual: an operator must decide (Reason says why).
	Manual
	// Expire: the shore's row is no longer the one in the evidence; the
	// case expires and newer evidence opens a new one.
	Expire
)

// Winners.
const (
	WinnerShore = "SHORE"
	WinnerNode  = "NODE"
)

// Verdict is Judge's answer.
type Verdict struct {
	Outcome Outcome
	// Winner is WinnerShore or WinnerNode for Decide.
	Winner string
	// Reason is a short, payload-free explanation.
	Reason string
}

// Judge decides a dispute by its rule's policy, at now (the shore's clock):
//
//   - every policy first requires the shore's row to be the one in the
//     evidence (same revision, or absent both times); otherwise Expire;
//   - MANUAL: Manual;
//   - SHORE_WINS: the shore's version;
//   - LAST_WRITER_WINS: the later business time of the rule's time column;
//     a side without a row or without a readable time, or a time further
//     than the rule's skew ahead of now, goes to Manual; equal times go to
//     the lower node id (the higher with TieDescending).
//
// Timestamps and arrival order never decide anything else.
func Judge(d Dispute, now time.Time) Verdict {
	cur := ""
	if d.Shore.Exists {
		cur = d.Shore.Revision
	}
	if !strings.EqualFold(cur, d.EvidenceShore) {
		return Verdict{Outcome: Expire, Reason: "the shore's row changed after the conflict was recorded"}
	}
	p := d.Rule.Conflict
	switch p.Policy {
	case shore.PolicyShoreWins:
		return Verdict{Outcome: Decide, Winner: WinnerShore, Reason: "policy SHORE_WINS"}
	case shore.PolicyLastWriterWins:
	default:
		return Verdict{Outcome: Manual, Reason: "the rule's policy is MANUAL"}
	}
	st, why := businessTime(d.Shore, p.TimeColumn)
	if why != "" {
		return Verdict{Outcome: Manual, Reason: "LAST_WRITER_WINS: the shore's " + why}
	}
	nt, why := businessTime(d.Node, p.TimeColumn)
	if why != "" {
		return Verdict{Outcome: Manual, Reason: "LAST_WRITER_WINS: the node's " + why}
	}
	skew := p.MaxSkew
	if skew == 0 {
		skew = shore.MaxSkewDefault
	}
	limit := now.Add(skew)
	switch {
	case st.After(limit):
		return Verdict{Outcome: Manual, Reason: "LAST_WRITER_WINS: the shore's time is beyond the allowed clock skew"}
	case nt.After(limit):
		return Verdict{Outcome: Manual, Reason: "LAST_WRITER_WINS: the node's time is beyond the allowed clock skew"}
	case st.After(nt):
		return Verdict{Outcome: Decide, Winner: WinnerShore, Reason: "LAST_WRITER_WINS: the shore's change is later"}
	case nt.After(st):
		return Verdict{Outcome: Decide, Winner: WinnerNode, Reason: "LAST_WRITER_WINS: the node's change is later"}
	}
	lowerWins := d.Shore.Node < d.Node.Node
	if p.TieDescending {
		lowerWins = !lowerWins
	}
	if lowerWins {
		return Verdict{Outcome: Decide, Winner: WinnerShore, Reason: "LAST_WRITER_WINS: equal times, node id order"}
	}
	return Verdict{Outcome: Decide, Winner: WinnerNode, Reason: "LAST_WRITER_WINS: equal times, node id order"}
}

// timeLayouts are the text forms a business time may take (MariaDB's
// DATETIME text, RFC 3339).
var timeLayouts = []string{"2006-01-02 15:04:05.999999999", time.RFC3339Nano, "2006-01-02T15:04:05.999999999"}

// businessTime reads column col of v as a time (UTC when it has no zone),
// or says why it cannot.
func businessTime(v Version, col string) (time.Time, string) {
	if !v.Exists {
		return time.Time{}, "record is deleted (no business time)"
	}
	var c *pb.ColumnValue
	for _, x := range v.Row.GetColumns() {
		if x.GetName() == col {
			c = x
		}
	}
	if c == nil {
		return time.Time{}, "row has no " + col
	}
	switch x := c.Value.(type) {
	case *pb.ColumnValue_TimestampValue:
		if x.TimestampValue.IsValid() {
			return x.TimestampValue.AsTime(), ""
		}
	case *pb.ColumnValue_StringValue:
		for _, l := range timeLayouts {
			if t, err := time.ParseInLocation(l, x.StringValue, time.UTC); err == nil {
				return t, ""
			}
		}
	case *pb.ColumnValue_Null:
		return time.Time{}, col + " is NULL"
	}
	return time.Time{}, col + " is not a readable time"
}
