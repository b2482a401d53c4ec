package shore

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/relaytype"
)

// Command page sizes and the most acks one request may carry.
const (
	CommandPageDefault = 500
	CommandPageMax     = 1000
	AckBatchMax        = 1000
)

// ErrBadCommandCursor: a commands cursor or limit this shore does not accept.
var ErrBadCommandCursor = errors.New("shore: malformed commands cursor")

// commandNamespace makes command ids: UUIDv5 of the target node and the
// shore event, so a change forwarded again after a crash has the same id.
var commandNamespace = uuid.MustParse("6f2b9a4e-55d1-4c1e-9a67-3c0f8d2e7b15")

// CommandID is the id of the command carrying shore event eventID to node.
func CommandID(node, eventID string) string {
	return uuid.NewSHA1(commandNamespace, []byte(strconv.Itoa(len(node))+":"+node+"/"+strings.ToLower(eventID))).String()
}

// Downlink is the shore's store of downlink commands (PostgreSQL): the
// shore's own changes forwarded to the nodes that sync their rule, served
// to each node by cursor in its sequence order, and the nodes' terminal
// results. Safe for concurrent use.
type Downlink struct {
	pool  *pgxpool.Pool
	clock relaytype.Clock
}

// NewDownlink returns the downlink store over pool.
func NewDownlink(pool *pgxpool.Pool, clock relaytype.Clock) *Downlink {
	return &Downlink{pool: pool, clock: clock}
}

// ShoreChange is one captured change of the shore database that needs a
// durable row: an event to forward (Event set), or a record that cannot be
// forwarded (Blocked, with Reason and Detail; Event set when it got that
// far).
type ShoreChange struct {
	Topic     string
	Partition int32
	Offset    int64
	Event     *pb.ChangeEvent
	Blocked   bool
	// Rule of the change, when known.
	RuleID      string
	RuleVersion uint64
	// Reason and Detail of a block (payload-free).
	Reason, Detail string
}

// ForwardResult counts what Forward stored.
type ForwardResult struct {
	// Forwarded and Blocked count the changes stored now (a change stored
	// by an earlier run is not counted again).
	Forwarded, Blocked int
	// Commands is how many commands were created.
	Commands int
}

// Forward stores changes (in queue order) in one transaction: each
// forwarded change with one command per active node that syncs its rule,
// numbered in each node's command stream; each blocked one with its
// reason. A change whose position was stored before is left as it is (it
// was handled before a crash), so forwarding the same records again
// creates nothing. When it returns nil every change is durable.
func (d *Downlink) Forward(ctx context.Context, changes []ShoreChange) (ForwardResult, error) {
	var res ForwardResult
	if len(changes) == 0 {
		return res, nil
	}
	now := d.clock.Now()
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		res = ForwardResult{}
		var rules []string
		for _, c := range changes {
			if !c.Blocked && c.Event != nil && !slices.Contains(rules, c.Event.RuleId) {
				rules = append(rules, c.Event.RuleId)
			}
		}
		targets, err := downlinkTargets(ctx, tx, rules)
		if err != nil {
			return err
		}
		var topic, result, reason, detail, rule []string
		var part, count []int32
		var off, version []int64
		var event []*string
		for _, c := range changes {
			r := "FORWARDED"
			var id *string
			if c.Event != nil {
				id = &c.Event.EventId
			}
			n := 0
			if c.Blocked {
				r = "BLOCKED"
			} else {
				if c.Event == nil {
					return fmt.Errorf("shore: forward %s/%d@%d: no event", c.Topic, c.Partition, c.Offset)
				}
				n = len(targets[c.Event.RuleId])
			}
			topic, part, off, event = append(topic, c.Topic), append(part, c.Partition), append(off, c.Offset), append(event, id)
			rule, version = append(rule, cmp.Or(c.RuleID, c.Event.GetRuleId())), append(version, int64(max(c.RuleVersion, c.Event.GetRuleVersion())))
			result, reason, detail, count = append(result, r), append(reason, wire.Bound(c.Reason, 64)), append(detail, wire.Bound(c.Detail, 200)), append(count, int32(n))
		}
		rows, err := tx.Query(ctx, stmts["ShoreEventInsertMany"], topic, part, off, event, rule, version, result,
			reason, detail, count, now)
		if err != nil {
			return fmt.Errorf("%w: forward: %w", ErrStore, err)
		}
		fresh := map[position]bool{}
		var t string
		var p int32
		var o int64
		if _, err := pgx.ForEachRow(rows, []any{&t, &p, &o}, func() error {
			fresh[position{t, p, o}] = true
			return nil
		}); err != nil {
			return fmt.Errorf("%w: forward: %w", ErrStore, err)
		}
		// The new forwarded changes' commands, per node in queue order.
		perNode := map[string][]queued{}
		for _, c := range changes {
			if !fresh[position{c.Topic, c.Partition, c.Offset}] {
				continue
			}
			if c.Blocked {
				res.Blocked++
				continue
			}
			res.Forwarded++
			for _, node := range targets[c.Event.RuleId] {
				ev := c.Event
				perNode[node] = append(perNode[node], queued{kind: "change", id: CommandID(node, ev.EventId),
					sourceEvent: &ev.EventId, rule: ev.RuleId, body: func(seq int64) *pb.Command {
						e := proto.Clone(ev).(*pb.ChangeEvent)
						e.SourceSequence = uint64(seq)
						return &pb.Command{Body: &pb.Command_Change{Change: e}}
					}})
			}
		}
		n, err := enqueue(ctx, tx, perNode, now)
		if err != nil {
			return err
		}
		res.Commands = n
		return followHeads(ctx, tx, changes, fresh, now)
	})
	if err != nil && !errors.Is(err, ErrStore) {
		err = fmt.Errorf("%w: forward: %w", ErrStore, err)
	}
	return res, err
}

// position is a record's place in the capture queue.
type position struct {
	t string
	p int32
	o int64
}

// followHeads moves the record heads of the new forwarded changes, in
// queue order, so a head says what the shore database holds after the
// shore's own writes too (an upload made over an older revision is then a
// conflict with the right evidence, and one made over this one is
// written).
func followHeads(ctx context.Context, tx pgx.Tx, changes []ShoreChange, fresh map[position]bool, now time.Time) error {
	type move struct {
		ev   *pb.ChangeEvent
		hash []byte
	}
	var moves []move
	for _, c := range changes {
		if c.Blocked || !fresh[position{c.Topic, c.Partition, c.Offset}] {
			continue
		}
		hash, _, err := RecordKey(c.Event.PrimaryKey)
		if err != nil {
			return fmt.Errorf("shore: record key: %w", err)
		}
		moves = append(moves, move{c.Event, hash})
	}
	if len(moves) == 0 {
		return nil
	}
	// The heads in the order the shore applier locks them (rule, then
	// key), so the two never wait on each other in a cycle; a record's own
	// changes keep their queue order (a stable sort).
	slices.SortStableFunc(moves, func(a, b move) int {
		return cmp.Or(strings.Compare(a.ev.RuleId, b.ev.RuleId), bytes.Compare(a.hash, b.hash))
	})
	var b pgx.Batch
	for _, m := range moves {
		ev := m.ev
		b.Queue(stmts["HeadFollowShore"], ev.RuleId, m.hash, ev.ResultRevision, ev.OriginNodeId,
			ev.Operation == pb.Operation_OPERATION_DELETE, now, ev.BaseRevision)
	}
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("%w: record heads: %w", ErrStore, err)
	}
	return nil
}

// queued is one command to store for a node; body makes its body for the
// sequence number it gets (id, sequence and creation time are filled in).
type queued struct {
	kind, id, rule string
	sourceEvent    *string
	conflict       *string
	body           func(seq int64) *pb.Command
}

// enqueue stores each node's commands in order, numbered in the node's
// stream, in tx. Nodes are locked in sorted order (one lock order for every
// writer of node streams). It returns how many it stored.
func enqueue(ctx context.Context, tx pgx.Tx, perNode map[string][]queued, now time.Time) (int, error) {
	nodes := make([]string, 0, len(perNode))
	for n := range perNode {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	var cn, ck, cr, ci []string
	var cs []int64
	var ce, cf []*string
	var cb [][]byte
	for _, node := range nodes {
		qs := perNode[node]
		var first int64
		if err := tx.QueryRow(ctx, stmts["DownlinkAllocate"], node, len(qs), now).Scan(&first); err != nil {
			return 0, fmt.Errorf("%w: allocate commands: %w", ErrStore, err)
		}
		for i, q := range qs {
			seq := first + int64(i)
			cmd := q.body(seq)
			cmd.CommandId, cmd.Sequence, cmd.CreatedAt = q.id, uint64(seq), timestamppb.New(now)
			body, err := proto.Marshal(cmd)
			if err != nil {
				return 0, fmt.Errorf("shore: command body: %w", err)
			}
			cn, cs, ci, ck = append(cn, node), append(cs, seq), append(ci, q.id), append(ck, q.kind)
			ce, cr, cb, cf = append(ce, q.sourceEvent), append(cr, q.rule), append(cb, body), append(cf, q.conflict)
		}
	}
	if len(cn) == 0 {
		return 0, nil
	}
	if _, err := tx.Exec(ctx, stmts["CommandInsertMany"], cn, cs, ci, ck, ce, cr, cb, cf, now); err != nil {
		return 0, fmt.Errorf("%w: store commands: %w", ErrStore, err)
	}
	return len(cn), nil
}

// EnqueueDecision stores conflict conflictID's decision d as a command for
// node, in tx, and returns the command's id and sequence number.
func EnqueueDecision(ctx context.Context, tx pgx.Tx, node, conflictID string, d *pb.ConflictDecision, now time.Time) (string, error) {
	id := CommandID(node, d.DecisionId)
	_, err := enqueue(ctx, tx, map[string][]queued{node: {{kind: "decision", id: id, rule: d.RuleId, conflict: &conflictID,
		body: func(int64) *pb.Command { return &pb.Command{Body: &pb.Command_Decision{Decision: d}} }}}}, now)
	return id, err
}

// downlinkTargets returns, per rule id, the active nodes syncing it.
func downlinkTargets(ctx context.Context, tx pgx.Tx, rules []string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(rules) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, stmts["DownlinkTargets"], rules)
	if err != nil {
		return nil, fmt.Errorf("%w: command targets: %w", ErrStore, err)
	}
	var r, n string
	_, err = pgx.ForEachRow(rows, []any{&r, &n}, func() error {
		out[r] = append(out[r], n)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: command targets: %w", ErrStore, err)
	}
	return out, nil
}

// BlockedFirst returns the first blocked position of each partition that
// has one ("topic/partition" → offset): a consumer commits no position
// past it.
func (d *Downlink) BlockedFirst(ctx context.Context) (map[string]int64, error) {
	rows, err := d.pool.Query(ctx, stmts["ShoreBlockedFirst"])
	if err != nil {
		return nil, fmt.Errorf("%w: blocked positions: %w", ErrStore, err)
	}
	out := map[string]int64{}
	var t string
	var p int32
	var o int64
	_, err = pgx.ForEachRow(rows, []any{&t, &p, &o}, func() error {
		out[t+"/"+strconv.Itoa(int(p))] = o
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: blocked positions: %w", ErrStore, err)
	}
	return out, nil
}

// Commands returns up to limit (1–CommandPageMax; 0: CommandPageDefault)
// of node's commands after cursor ("" for the first page) in sequence
// order, and the cursor of the next page. Every command after the cursor
// is served whether the node answered it or not: the node stores a page
// before it moves its cursor. An error wraps ErrBadCommandCursor or
// ErrStore.
func (d *Downlink) Commands(ctx context.Context, node, cursor string, limit int) (*pb.CommandPage, error) {
	if limit == 0 {
		limit = CommandPageDefault
	}
	if limit < 1 || limit > CommandPageMax {
		return nil, fmt.Errorf("%w: limit must be 1–%d", ErrBadCommandCursor, CommandPageMax)
	}
	after := int64(0)
	if cursor != "" {
		n, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || n < 0 || len(cursor) > 19 {
			return nil, ErrBadCommandCursor
		}
		after = n
	}
	rows, err := d.pool.Query(ctx, stmts["CommandPage"], node, after, limit+1)
	if err != nil {
		return nil, fmt.Errorf("%w: commands: %w", ErrStore, err)
	}
	page := &pb.CommandPage{NextCursor: cursor}
	var seq int64
	var body []byte
	n := 0
	_, err = pgx.ForEachRow(rows, []any{&seq, &body}, func() error {
		n++
		if n > limit {
			page.More = true
			return nil
		}
		var c pb.Command
		if err := proto.Unmarshal(body, &c); err != nil {
			return fmt.Errorf("command %d of %s: stored body unreadable: %w", seq, node, err)
		}
		page.Commands = append(page.Commands, &c)
		page.NextCursor = strconv.FormatInt(seq, 10)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: commands: %w", ErrStore, err)
	}
	return page, nil
}

// commandResults are the results a node may answer with.
var commandResults = map[pb.CommandResult]string{
	pb.CommandResult_COMMAND_APPLIED:           "COMMAND_APPLIED",
	pb.CommandResult_COMMAND_ALREADY_APPLIED:   "COMMAND_ALREADY_APPLIED",
	pb.CommandResult_COMMAND_CONFLICT_REPORTED: "COMMAND_CONFLICT_REPORTED",
	pb.CommandResult_COMMAND_REJECTED:          "COMMAND_REJECTED",
}

// Ack stores node's terminal results for its commands, in one
// transaction, and moves the node's acknowledged prefix. It answers per
// ack, in order: RECEIVED when the result is stored now or was before (the
// first result received is kept: a command's result never changes),
// PERMANENT_REJECTED with the field at fault for an ack that is not valid
// or names no command of the node. Only an infrastructure failure is an
// error (nothing was stored; the node retries).
func (d *Downlink) Ack(ctx context.Context, node string, acks []*pb.CommandAck) ([]*pb.EventStatus, error) {
	out := make([]*pb.EventStatus, len(acks))
	var ids, results, reasons, revs []string
	var rowsArg [][]byte
	var ats []time.Time
	idx := make([]int, 0, len(acks))
	for i, a := range acks {
		st := &pb.EventStatus{EventId: wire.Bound(a.GetCommandId(), 64), Status: pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED,
			Reason: pb.RejectReason_REJECT_REASON_INVALID_FIELD}
		out[i] = st
		id, err := uuid.Parse(a.GetCommandId())
		res, known := commandResults[a.GetResult()]
		switch {
		case err != nil || len(a.GetCommandId()) != 36:
			st.Field = "command_id"
			continue
		case !known:
			st.Field = "result"
			continue
		case len(a.GetCurrentRevision()) > 64:
			st.Field = "current_revision"
			continue
		}
		var row []byte
		if a.CurrentValue != nil {
			if row, err = proto.Marshal(a.CurrentValue); err != nil {
				st.Field = "current_value"
				continue
			}
		}
		at := d.clock.Now()
		if a.AckedAt != nil && a.AckedAt.IsValid() {
			at = a.AckedAt.AsTime()
		}
		reason := ""
		if a.Reason != pb.RejectReason_REJECT_REASON_UNSPECIFIED {
			reason = a.Reason.String()
		}
		ids, results, reasons, revs = append(ids, id.String()), append(results, res), append(reasons, reason),
			append(revs, a.GetCurrentRevision())
		rowsArg, ats, idx = append(rowsArg, row), append(ats, at), append(idx, i)
	}
	if len(ids) == 0 {
		return out, nil
	}
	now := d.clock.Now()
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, stmts["CommandAckMany"], node, ids, results, reasons, revs, rowsArg, ats, now)
		if err != nil {
			return err
		}
		known := map[string]bool{}
		var id string
		if _, err := pgx.ForEachRow(rows, []any{&id}, func() error {
			known[id] = true
			return nil
		}); err != nil {
			return err
		}
		for j, i := range idx {
			if known[ids[j]] {
				out[i].Status, out[i].Reason = pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED, pb.RejectReason_REJECT_REASON_UNSPECIFIED
			} else {
				out[i].Field = "command_id"
			}
		}
		_, err = tx.Exec(ctx, stmts["DownlinkAdvance"], node, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%w: command acks: %w", ErrStore, err)
	}
	return out, nil
}

// DownlinkState is a node's command stream as the shore sees it.
type DownlinkState struct {
	// Last is the last sequence number given (0: none yet).
	Last int64
	// AckedThrough: every command up to it has a terminal result.
	AckedThrough int64
}

// State returns node's command stream state.
func (d *Downlink) State(ctx context.Context, node string) (DownlinkState, error) {
	var s DownlinkState
	err := d.pool.QueryRow(ctx, stmts["DownlinkState"], node).Scan(&s.Last, &s.AckedThrough)
	if errors.Is(err, pgx.ErrNoRows) {
		return DownlinkState{}, nil
	}
	if err != nil {
		return s, fmt.Errorf("%w: downlink state: %w", ErrStore, err)
	}
	return s, nil
}

// AppliedChange tells what the platform wrote to the shore database under
// the id it stamped into a row's _sync_event_id: an uplink event of origin
// (the applier's write) or a conflict decision (the arbiter's), as the
// operation and the revision the row got. found is false when the id names
// neither. The shore's CDC consumer uses it to recognise the platform's own
// writes.
func (d *Downlink) AppliedChange(ctx context.Context, origin, id string) (op pb.Operation, revision string, found bool, err error) {
	u, err := uuid.Parse(id)
	if err != nil {
		return 0, "", false, nil
	}
	var raw []byte
	err = d.pool.QueryRow(ctx, stmts["InboxEventGet"], origin, u.String()).Scan(&raw)
	if err == nil {
		var ev pb.ChangeEvent
		if err := proto.Unmarshal(raw, &ev); err != nil {
			return 0, "", false, fmt.Errorf("shore: inbox event %s: stored body unreadable: %w", u, err)
		}
		return ev.Operation, ev.ResultRevision, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, "", false, fmt.Errorf("%w: inbox event: %w", ErrStore, err)
	}
	var tomb bool
	err = d.pool.QueryRow(ctx, stmts["DecisionApplied"], u.String()).Scan(&tomb, &revision)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, "", false, nil
	case err != nil:
		return 0, "", false, fmt.Errorf("%w: conflict decision: %w", ErrStore, err)
	case tomb:
		return pb.Operation_OPERATION_DELETE, revision, true, nil
	}
	return pb.Operation_OPERATION_UPDATE, revision, true, nil
}
