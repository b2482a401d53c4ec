package arbiter_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/arbiter"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

var now = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

func rowAt(at any) *pb.RowImage {
	c := &pb.ColumnValue{Name: "updated_at"}
	switch v := at.(type) {
	case time.Time:
		c.Value = &pb.ColumnValue_TimestampValue{TimestampValue: timestamppb.New(v)}
	case string:
		c.Value = &pb.ColumnValue_StringValue{StringValue: v}
	case nil:
		c.Value = &pb.ColumnValue_Null{Null: true}
	}
	return &pb.RowImage{Columns: []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: 1}}, c}}
}

func dispute(policy string, shoreAt, nodeAt any) arbiter.Dispute {
	r := &shore.Rule{ID: "crew", Conflict: shore.ConflictPolicy{Policy: policy, TimeColumn: "updated_at", MaxSkew: time.Minute}}
	return arbiter.Dispute{Rule: r, EvidenceShore: "rev-s",
		Shore: arbiter.Version{Node: "shore", Revision: "rev-s", Exists: true, Row: rowAt(shoreAt)},
		Node:  arbiter.Version{Node: "ship-1", Revision: "rev-n", Exists: true, Row: rowAt(nodeAt)}}
}

// TestJudge covers each rule of the policies, one case per rule.
func TestJudge(t *testing.T) {
	t.Parallel()
	early, late := now.Add(-time.Hour), now.Add(-time.Minute)
	lww := shore.PolicyLastWriterWins
	cases := []struct {
		name    string
		d       arbiter.Dispute
		outcome arbiter.Outcome
		winner  string
		reason  string
	}{
		{"manual policy", dispute(shore.PolicyManual, early, late), arbiter.Manual, "", "MANUAL"},
		{"shore wins", dispute(shore.PolicyShoreWins, early, late), arbiter.Decide, arbiter.WinnerShore, "SHORE_WINS"},
		{"shore changed since the evidence", func() arbiter.Dispute {
			d := dispute(shore.PolicyShoreWins, early, late)
			d.Shore.Revision = "rev-s2"
			return d
		}(), arbiter.Expire, "", "changed"},
		{"shore row gone since the evidence", func() arbiter.Dispute {
			d := dispute(lww, early, late)
			d.Shore.Exists, d.Shore.Row = false, nil
			return d
		}(), arbiter.Expire, "", "changed"},
		{"lww node later", dispute(lww, early, late), arbiter.Decide, arbiter.WinnerNode, "node's change is later"},
		{"lww shore later", dispute(lww, late, early), arbiter.Decide, arbiter.WinnerShore, "shore's change is later"},
		{"lww MariaDB text time", dispute(lww, "2026-12-03 08:59:00.000000", early), arbiter.Decide, arbiter.WinnerShore, "later"},
		{"lww node deleted", func() arbiter.Dispute {
			d := dispute(lww, early, late)
			d.Node.Exists, d.Node.Row = false, nil
			return d
		}(), arbiter.Manual, "", "node's record is deleted"},
		{"lww shore time NULL", dispute(lww, nil, late), arbiter.Manual, "", "updated_at is NULL"},
		{"lww node time unreadable", dispute(lww, early, "yesterday"), arbiter.Manual, "", "not a readable time"},
		{"lww node time beyond skew", dispute(lww, early, now.Add(2*time.Minute)), arbiter.Manual, "", "clock skew"},
		{"lww node time within skew", dispute(lww, early, now.Add(30*time.Second)), arbiter.Decide, arbiter.WinnerNode, "later"},
		{"lww tie, lower node id wins", dispute(lww, early, early), arbiter.Decide, arbiter.WinnerNode, "node id order"},
		{"lww tie, higher node id wins", func() arbiter.Dispute {
			d := dispute(lww, early, early)
			d.Rule.Conflict.TieDescending = true
			return d
		}(), arbiter.Decide, arbiter.WinnerShore, "node id order"},
	}
	for _, c := range cases {
		v := arbiter.Judge(c.d, now)
		require.Equal(t, c.outcome, v.Outcome, c.name)
		require.Equal(t, c.winner, v.Winner, c.name)
		require.Contains(t, v.Reason, c.reason, c.name)
	}
}
