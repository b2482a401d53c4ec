package arbiter_test

import (
	"strings"
	"testing"

	"github.com/relayhq/relay/internal/app/shipsync/arbiter"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

// FuzzJudge: whatever the two versions hold (any text as a business time,
// rows present or not, equal or different revisions, any node ids), Judge
// never panics, always gives one of its outcomes with a reason, names a
// winner exactly when it decides, and never decides when the shore's row is
// not the evidence's.
func FuzzJudge(f *testing.F) {
	f.Add("2026-12-03 08:59:00.000000", "2026-12-03T08:00:00Z", true, true, "rev-s", "rev-s", "shore", "ship-1", uint8(2), false)
	f.Add("", "yesterday", false, true, "", "", "a", "b", uint8(1), true)
	f.Add("2026-12-04 09:00:00", "2026-12-03 09:00:00", true, false, "x", "y", "n1", "n1", uint8(0), false)
	f.Fuzz(func(t *testing.T, shoreAt, nodeAt string, shoreExists, nodeExists bool, cur, evidence, shoreNode, node string,
		policy uint8, desc bool) {
		pol := []string{shore.PolicyManual, shore.PolicyShoreWins, shore.PolicyLastWriterWins}[int(policy)%3]
		row := func(at string) *pb.RowImage {
			return &pb.RowImage{Columns: []*pb.ColumnValue{{Name: "updated_at", Value: &pb.ColumnValue_StringValue{StringValue: at}}}}
		}
		d := arbiter.Dispute{Rule: &shore.Rule{Conflict: shore.ConflictPolicy{Policy: pol, TimeColumn: "updated_at",
			TieDescending: desc}}, EvidenceShore: evidence,
			Shore: arbiter.Version{Node: shoreNode, Revision: cur, Exists: shoreExists},
			Node:  arbiter.Version{Node: node, Revision: "n", Exists: nodeExists}}
		if shoreExists {
			d.Shore.Row = row(shoreAt)
		}
		if nodeExists {
			d.Node.Row = row(nodeAt)
		}
		v := arbiter.Judge(d, now)
		if v.Reason == "" {
			t.Fatalf("no reason: %+v", v)
		}
		switch v.Outcome {
		case arbiter.Decide:
			if v.Winner != arbiter.WinnerShore && v.Winner != arbiter.WinnerNode {
				t.Fatalf("decided without a winner: %+v", v)
			}
			current := ""
			if shoreExists {
				current = cur
			}
			if !strings.EqualFold(current, evidence) {
				t.Fatalf("decided on a shore row that is not the evidence's: %+v", v)
			}
		case arbiter.Manual, arbiter.Expire:
			if v.Winner != "" {
				t.Fatalf("a winner without a decision: %+v", v)
			}
		default:
			t.Fatalf("unknown outcome %d", v.Outcome)
		}
	})
}
