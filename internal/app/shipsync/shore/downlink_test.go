package shore_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

// shoreChange is a forwarded shore change at offset off carrying event n.
func shoreChange(off int64, n int) shore.ShoreChange {
	ev := event("shore", n)
	ev.SourceSequence = 0
	return shore.ShoreChange{Topic: "sync.cdc.shore.ops.voyage", Partition: 0, Offset: off, Event: ev}
}

// TestCommandsAndAcks: forwarded shore changes become one command per node
// syncing the rule, numbered per node; each node pages through its own
// commands by cursor over mutual TLS; acks are stored once (the first
// result kept), unknown or malformed ones refused alone, and the node's
// acknowledged prefix moves only over contiguous results.
func TestCommandsAndAcks(t *testing.T) {
	t.Parallel()
	s := serve(t, setup(t), nil)
	s.addNode(t, "ship-1")
	s.addNode(t, "ship-2")
	// ship-3 syncs another rule: it gets nothing.
	c3 := s.node(t, "ship-3", "")
	_, err := s.reg.Add(t.Context(), c3, op)
	require.NoError(t, err)
	require.NoError(t, s.reg.AllowRule(t.Context(), "ship-3", "other-rule", 1, op))
	dl := shore.NewDownlink(s.d.Pool(), s.clock)
	ctx := t.Context()

	blocked := shore.ShoreChange{Topic: "sync.cdc.shore.ops.voyage", Partition: 0, Offset: 3, Blocked: true,
		Reason: "unknown-origin", Detail: "no such event"}
	res, err := dl.Forward(ctx, []shore.ShoreChange{shoreChange(1, 101), shoreChange(2, 102), blocked, shoreChange(4, 103)})
	require.NoError(t, err)
	require.Equal(t, shore.ForwardResult{Forwarded: 3, Blocked: 1, Commands: 6}, res)
	// The same records again (a consumer restarted before committing):
	// nothing new, no gap in the numbering.
	res, err = dl.Forward(ctx, []shore.ShoreChange{shoreChange(2, 102), blocked, shoreChange(4, 103), shoreChange(5, 104)})
	require.NoError(t, err)
	require.Equal(t, shore.ForwardResult{Forwarded: 1, Commands: 2}, res)
	first, err := dl.BlockedFirst(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"sync.cdc.shore.ops.voyage/0": 3}, first)

	c := s.client(t, "node-ship-1")
	page := func(cl *http.Client, cursor string, limit int) *pb.CommandPage {
		t.Helper()
		st, b := get(t, cl, fmt.Sprintf("%s%s?cursor=%s&limit=%d", s.url, shore.PathCommands, url.QueryEscape(cursor), limit))
		require.Equal(t, http.StatusOK, st, string(b))
		var p pb.CommandPage
		require.NoError(t, proto.Unmarshal(b, &p))
		return &p
	}
	p := page(c, "", 3)
	require.True(t, p.More)
	require.Len(t, p.Commands, 3)
	p2 := page(c, p.NextCursor, 3)
	require.False(t, p2.More)
	require.Len(t, p2.Commands, 1)
	cmds := append(p.Commands, p2.Commands...)
	for i, cmd := range cmds {
		require.Equal(t, uint64(i+1), cmd.Sequence)
		require.Equal(t, uuidN(101+i), cmd.GetChange().EventId)
		require.Equal(t, cmd.Sequence, cmd.GetChange().SourceSequence)
		require.Equal(t, shore.CommandID("ship-1", uuidN(101+i)), cmd.CommandId)
	}
	require.NotEqual(t, cmds[0].CommandId, page(s.client(t, "node-ship-2"), "", 10).Commands[0].CommandId,
		"each node's command has its own id")
	require.Empty(t, page(s.client(t, "node-ship-3"), "", 10).Commands)
	st, b := get(t, c, s.url+shore.PathCommands+"?cursor=x")
	require.Equal(t, http.StatusBadRequest, st)
	require.Equal(t, pb.ErrorCode_ERROR_CODE_BAD_CURSOR, errorBody(t, b).Code)

	ack := func(cl *http.Client, node string, acks ...*pb.CommandAck) []*pb.EventStatus {
		t.Helper()
		body, err := proto.Marshal(&pb.CommandAckBatch{ProtocolVersion: "1.0", NodeId: node, Acks: acks})
		require.NoError(t, err)
		st, _, b := post(t, cl, s.url+shore.PathAcks, body)
		require.Equal(t, http.StatusOK, st, string(b))
		var r pb.CommandAckResponse
		require.NoError(t, proto.Unmarshal(b, &r))
		require.Len(t, r.Statuses, len(acks))
		return r.Statuses
	}
	applied := func(i int) *pb.CommandAck {
		return &pb.CommandAck{CommandId: cmds[i].CommandId, Result: pb.CommandResult_COMMAND_APPLIED, AckedAt: timestamppb.New(t0)}
	}
	conflict := &pb.CommandAck{CommandId: cmds[2].CommandId, Result: pb.CommandResult_COMMAND_CONFLICT_REPORTED,
		CurrentRevision: "11111111-2222-4333-8444-555555555555",
		CurrentValue:    &pb.RowImage{Columns: []*pb.ColumnValue{{Name: "note", Value: &pb.ColumnValue_StringValue{StringValue: "ship's"}}}}}
	sts := ack(c, "ship-1", applied(0), conflict,
		&pb.CommandAck{CommandId: "not-a-uuid", Result: pb.CommandResult_COMMAND_APPLIED},
		&pb.CommandAck{CommandId: uuidN(999), Result: pb.CommandResult_COMMAND_APPLIED},
		&pb.CommandAck{CommandId: cmds[3].CommandId})
	want := []struct {
		status pb.ReceiveStatus
		field  string
	}{{pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED, ""}, {pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED, ""},
		{pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED, "command_id"},
		{pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED, "command_id"},
		{pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED, "result"}}
	for i, w := range want {
		require.Equal(t, w.status, sts[i].Status, "ack %d", i)
		require.Equal(t, w.field, sts[i].Field, "ack %d", i)
	}
	// Command 2 has no result: the prefix stops at 1.
	state, err := dl.State(ctx, "ship-1")
	require.NoError(t, err)
	require.Equal(t, shore.DownlinkState{Last: 4, AckedThrough: 1}, state)

	// ship-2 cannot ack ship-1's command.
	sts = ack(s.client(t, "node-ship-2"), "ship-2", applied(1))
	require.Equal(t, pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED, sts[0].Status)
	// An ack whose node_id is not the certificate's is refused whole.
	body, err := proto.Marshal(&pb.CommandAckBatch{ProtocolVersion: "1.0", NodeId: "ship-2", Acks: []*pb.CommandAck{applied(1)}})
	require.NoError(t, err)
	st, _, b = post(t, c, s.url+shore.PathAcks, body)
	require.Equal(t, http.StatusForbidden, st)
	require.Equal(t, pb.ErrorCode_ERROR_CODE_NODE_MISMATCH, errorBody(t, b).Code)

	// The rest, and a repeat of the conflict with another result: RECEIVED,
	// the first result kept.
	again := proto.Clone(conflict).(*pb.CommandAck)
	again.Result = pb.CommandResult_COMMAND_APPLIED
	sts = ack(c, "ship-1", applied(1), applied(3), again)
	for _, s := range sts {
		require.Equal(t, pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED, s.Status)
	}
	state, err = dl.State(ctx, "ship-1")
	require.NoError(t, err)
	require.Equal(t, shore.DownlinkState{Last: 4, AckedThrough: 4}, state)
	var result, rev string
	var row []byte
	require.NoError(t, s.d.Pool().QueryRow(ctx, `SELECT result, current_revision, current_row FROM sync_downlink_command
		WHERE target_node_id = 'ship-1' AND sequence = 3`).Scan(&result, &rev, &row))
	require.Equal(t, "COMMAND_CONFLICT_REPORTED", result)
	require.Equal(t, conflict.CurrentRevision, rev)
	var img pb.RowImage
	require.NoError(t, proto.Unmarshal(row, &img))
	require.True(t, proto.Equal(conflict.CurrentValue, &img))
}

// TestForwardFollowsHeads: the shore's own changes move a record's head
// along their chain of revisions (so an upload made over the shore's
// latest revision is written, and one made over an older one conflicts
// with the right evidence); a change made over another revision than the
// head's leaves it alone.
func TestForwardFollowsHeads(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dl := shore.NewDownlink(b.d.Pool(), b.clock)
	ctx := t.Context()
	change := func(off int64, base, result string, op pb.Operation) shore.ShoreChange {
		c := shoreChange(off, 500+int(off))
		c.Event.PrimaryKey = []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: 7}}}
		c.Event.Operation, c.Event.BaseRevision, c.Event.ResultRevision = op, base, result
		return c
	}
	head := func() (rev string, tomb bool) {
		t.Helper()
		require.NoError(t, b.d.Pool().QueryRow(ctx, "SELECT current_revision, tombstone FROM sync_record_head").Scan(&rev, &tomb))
		return rev, tomb
	}
	_, err := dl.Forward(ctx, []shore.ShoreChange{change(1, "", "rev-1", pb.Operation_OPERATION_INSERT),
		change(2, "rev-1", "rev-2", pb.Operation_OPERATION_UPDATE)})
	require.NoError(t, err)
	rev, tomb := head()
	require.Equal(t, "rev-2", rev)
	require.False(t, tomb)
	_, err = dl.Forward(ctx, []shore.ShoreChange{change(3, "rev-other", "rev-3", pb.Operation_OPERATION_UPDATE)})
	require.NoError(t, err)
	rev, _ = head()
	require.Equal(t, "rev-2", rev, "a change over another revision leaves the head")
	_, err = dl.Forward(ctx, []shore.ShoreChange{change(4, "rev-2", "tomb-4", pb.Operation_OPERATION_DELETE),
		change(5, "", "rev-5", pb.Operation_OPERATION_INSERT)})
	require.NoError(t, err)
	rev, tomb = head()
	require.Equal(t, "rev-5", rev, "deleted, then inserted again")
	require.False(t, tomb)
}
