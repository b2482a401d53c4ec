package remote

import (
	"cmp"
	"context"
	_ "embed" // queries.sql
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaytype"
)

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("remote/queries.sql", queriesSQL, "TableColumns")

// ShoreNodeIDDefault is Config.ShoreNodeID's default.
const ShoreNodeIDDefault = "shore"

// Config configures an Applier.
type Config struct {
	// Target is the ship's business database (apply.OpenTarget on the
	// ship's DSN), its ledger created (Target.EnsureLedger). Required.
	Target *apply.Target
	// Rules are the node's rules: a command's rule id names the ship table
	// it writes (the command's database and table are the shore's and are
	// ignored). Only revisioned DOWNLINK and BOTH rules take commands.
	// Required.
	Rules *normalize.RuleSet
	// Clock stamps acks and _sync_updated_at. Required.
	Clock relaytype.Clock
	// ShoreNodeID is the shore's node id: the _sync_origin a decision's
	// write carries when the decision names no origin (default
	// ShoreNodeIDDefault).
	ShoreNodeID string
	// Logger (default: discard).
	Logger *slog.Logger
}

// Applier applies downlink commands to the ship's database. Safe for
// concurrent use, though commands are meant to be applied one at a time in
// their sequence order (the client does).
type Applier struct {
	cfg Config
	log *slog.Logger
	mu  sync.Mutex
	// tables are the rules' ship tables by rule id, their Columns the
	// table's columns the rule carries.
	tables map[string]*apply.Table
}

// New returns an Applier on cfg.
func New(cfg Config) (*Applier, error) {
	switch {
	case cfg.Target == nil:
		return nil, errors.New("remote: Config.Target is nil")
	case cfg.Rules == nil:
		return nil, errors.New("remote: Config.Rules is nil")
	case cfg.Clock == nil:
		return nil, errors.New("remote: Config.Clock is nil")
	}
	cfg.ShoreNodeID = cmp.Or(cfg.ShoreNodeID, ShoreNodeIDDefault)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Applier{cfg: cfg, log: log, tables: map[string]*apply.Table{}}, nil
}

// Intent is what applying cmd writes, known before it runs: the operation
// and the result revision its row will carry (for a DELETE the tombstone
// revision). The client records it in applied_command before the write,
// because the ship's capture may see the write — and the normaliser look
// the command up by the id it stamps — before Apply returns. ok is false
// for a command that writes nothing (a resend request, a body missing).
func (a *Applier) Intent(cmd *pb.Command) (normalize.AppliedCommand, bool) {
	switch b := cmd.GetBody().(type) {
	case *pb.Command_Change:
		if b.Change == nil {
			return normalize.AppliedCommand{}, false
		}
		return normalize.AppliedCommand{Operation: b.Change.Operation, ResultRevision: b.Change.ResultRevision}, true
	case *pb.Command_Decision:
		d := b.Decision
		if d == nil {
			return normalize.AppliedCommand{}, false
		}
		return normalize.AppliedCommand{Operation: decisionOp(d), ResultRevision: d.DecidedRevision}, true
	}
	return normalize.AppliedCommand{}, false
}

// decisionOp is the operation a decision applies: a tombstone deletes, a
// decided value updates the row the decision was made against, or inserts
// it when there was none.
func decisionOp(d *pb.ConflictDecision) pb.Operation {
	switch {
	case d.GetTombstone():
		return pb.Operation_OPERATION_DELETE
	case d.ExpectedLocalRevision == "":
		return pb.Operation_OPERATION_INSERT
	}
	return pb.Operation_OPERATION_UPDATE
}

// uuidText is a UUID in its text form, any case.
var uuidText = regexp.MustCompile(`^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$`)

// plan is how one command is applied.
type plan struct {
	write    apply.Conditional
	decision bool
	// absentDone: a tombstone decided for a record that had no row here;
	// nothing is written, and no row is the decided state.
	absentDone bool
}

// Apply applies cmd and returns its ack (acked_at on the applier's clock).
// An error is an infrastructure failure — the database unreachable, a
// table or column missing that the operator must add — with nothing
// decided: apply the same command again later. Bad input is never an
// error and never a panic: it is a COMMAND_REJECTED ack. ctx governs the
// database round trips.
func (a *Applier) Apply(ctx context.Context, cmd *pb.Command) (*pb.CommandAck, error) {
	id := cmd.GetCommandId()
	p, err := a.plan(ctx, cmd)
	if rj := (*rejection)(nil); errors.As(err, &rj) {
		return a.reject(id, rj.reason, rj.detail), nil
	}
	if err != nil {
		return nil, err
	}
	ws := []apply.Conditional{p.write}
	// The ledger first: with no record head to tell a repeat, an insert
	// applied before and deleted since would be written again. (Were two
	// processes to race past this check, the second write's ledger row
	// would clash and Apply write nothing: an error, retried.)
	done, err := a.cfg.Target.Applied(ctx, ws)
	if err != nil {
		return nil, fmt.Errorf("remote: command %s: %w", id, err)
	}
	if done[0] {
		return a.done(&pb.CommandAck{CommandId: id, Result: pb.CommandResult_COMMAND_ALREADY_APPLIED}), nil
	}
	if !p.absentDone {
		changed, refused, err := a.cfg.Target.Apply(ctx, ws, a.cfg.Clock.Now())
		if err != nil {
			a.forget(cmd)
			return nil, fmt.Errorf("remote: command %s: write: %w", id, err)
		}
		switch {
		case refused[0] != nil:
			a.log.Warn("shipsync remote: the ship database refuses a command's value", "command", id, "err", refused[0])
			return a.reject(id, pb.RejectReason_REJECT_REASON_TARGET_REFUSED, refused[0].Error()), nil
		case changed[0]:
			faultpoint.Hit(faultpoint.ShipsyncRemoteAfterWrite)
			return a.done(&pb.CommandAck{CommandId: id, Result: pb.CommandResult_COMMAND_APPLIED}), nil
		}
	}
	fs, err := a.cfg.Target.Inspect(ctx, ws)
	if err != nil {
		return nil, fmt.Errorf("remote: command %s: %w", id, err)
	}
	f := fs[0]
	switch {
	case f.Applied, p.absentDone && !f.Exists:
		return a.done(&pb.CommandAck{CommandId: id, Result: pb.CommandResult_COMMAND_ALREADY_APPLIED}), nil
	case f.Exists && f.Revision == p.write.Stamp.Revision:
		// The row holds the version the command writes: this very
		// command's write (the ledger row of an earlier attempt is the
		// usual witness; this is the other), or the same revision brought
		// by another command — a decision that sent the shore's row
		// before the change that made it arrived (the arbiter reads the
		// shore's row, the shore's CDC consumer may lag behind it). A
		// revision names one version: nothing conflicts.
		return a.done(&pb.CommandAck{CommandId: id, Result: pb.CommandResult_COMMAND_ALREADY_APPLIED}), nil
	}
	ack := &pb.CommandAck{CommandId: id, Result: pb.CommandResult_COMMAND_CONFLICT_REPORTED, CurrentRevision: f.Revision,
		CurrentValue: f.Row}
	if p.decision {
		// seed 004 §11.6: the shore expires the case and opens one on this
		// evidence.
		ack.Reason = pb.RejectReason_REJECT_REASON_DECISION_STALE
	}
	return a.done(ack), nil
}

// done stamps ack with the applier's clock.
func (a *Applier) done(ack *pb.CommandAck) *pb.CommandAck {
	ack.AckedAt = timestamppb.New(a.cfg.Clock.Now())
	return ack
}

// reject is a COMMAND_REJECTED ack; detail (payload-free) goes to the log.
func (a *Applier) reject(id string, r pb.RejectReason, detail string) *pb.CommandAck {
	a.log.Warn("shipsync remote: command rejected", "command", id, "reason", r.String(), "detail", detail)
	return a.done(&pb.CommandAck{CommandId: id, Result: pb.CommandResult_COMMAND_REJECTED, Reason: r})
}

// rejection is a command the ship cannot apply: its ack is
// COMMAND_REJECTED with reason; detail is payload-free, for the log.
type rejection struct {
	reason pb.RejectReason
	detail string
}

func (r *rejection) Error() string { return r.reason.String() + ": " + r.detail }

func reject(r pb.RejectReason, format string, args ...any) error {
	return &rejection{reason: r, detail: fmt.Sprintf(format, args...)}
}

// plan checks cmd and builds its write. A *rejection is a command that
// cannot be applied; another error an infrastructure failure.
func (a *Applier) plan(ctx context.Context, cmd *pb.Command) (plan, error) {
	if !uuidText.MatchString(cmd.GetCommandId()) {
		return plan{}, reject(pb.RejectReason_REJECT_REASON_INVALID_FIELD, "command_id is not a UUID")
	}
	switch b := cmd.GetBody().(type) {
	case *pb.Command_Change:
		return a.planChange(ctx, cmd, b.Change)
	case *pb.Command_Decision:
		return a.planDecision(ctx, cmd, b.Decision)
	case *pb.Command_Resend:
		// Not supported yet: the ship resends what the shore has not
		// received by itself; a resend of events the shore lost needs the
		// ship to read them again from its queue, which is still to build.
		return plan{}, reject(pb.RejectReason_REJECT_REASON_INVALID_FIELD,
			"resend: resend requests are not supported by this client yet")
	}
	return plan{}, reject(pb.RejectReason_REJECT_REASON_MISSING_FIELD, "body: no change, decision or resend")
}

// planChange plans a shore change.
func (a *Applier) planChange(ctx context.Context, cmd *pb.Command, ev *pb.ChangeEvent) (plan, error) {
	missing, invalid := pb.RejectReason_REJECT_REASON_MISSING_FIELD, pb.RejectReason_REJECT_REASON_INVALID_FIELD
	switch op := ev.GetOperation(); {
	case ev == nil:
		return plan{}, reject(missing, "change: empty")
	case ev.OriginNodeId == "":
		return plan{}, reject(missing, "change.origin_node_id is empty")
	case ev.ResultRevision == "":
		return plan{}, reject(missing, "change.result_revision is empty")
	case op != pb.Operation_OPERATION_INSERT && op != pb.Operation_OPERATION_UPDATE &&
		op != pb.Operation_OPERATION_DELETE && op != pb.Operation_OPERATION_SNAPSHOT:
		return plan{}, reject(invalid, "change.operation is not INSERT, UPDATE, DELETE or SNAPSHOT")
	case (op == pb.Operation_OPERATION_UPDATE || op == pb.Operation_OPERATION_DELETE) && ev.BaseRevision == "":
		return plan{}, reject(missing, "change.base_revision is empty")
	case op == pb.Operation_OPERATION_INSERT && ev.BaseRevision != "":
		return plan{}, reject(pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS, "change.base_revision is set on an INSERT")
	case op != pb.Operation_OPERATION_DELETE && ev.After == nil:
		return plan{}, reject(missing, "change.after is absent")
	}
	t, err := a.resolve(ctx, ev.RuleId, ev.PrimaryKey, ev.GetAfter().GetColumns(), "change.primary_key", "change.after.columns")
	if err != nil {
		return plan{}, err
	}
	return plan{write: apply.ChangeWrite(t, ev, apply.OpFor(ev), cmd.CommandId, ref(cmd))}, nil
}

// planDecision plans a conflict's decision (seed 004 §11.6): written only
// where the row is still at the revision it was decided against.
func (a *Applier) planDecision(ctx context.Context, cmd *pb.Command, d *pb.ConflictDecision) (plan, error) {
	switch {
	case d == nil:
		return plan{}, reject(pb.RejectReason_REJECT_REASON_MISSING_FIELD, "decision: empty")
	case d.DecidedRevision == "":
		return plan{}, reject(pb.RejectReason_REJECT_REASON_MISSING_FIELD, "decision.decided_revision is empty")
	case d.GetDecidedValue() == nil && !d.GetTombstone():
		return plan{}, reject(pb.RejectReason_REJECT_REASON_MISSING_FIELD, "decision: no decided_value and no tombstone")
	}
	t, err := a.resolve(ctx, d.RuleId, d.RecordKey, d.GetDecidedValue().GetColumns(), "decision.record_key",
		"decision.decided_value.columns")
	if err != nil {
		return plan{}, err
	}
	op := map[pb.Operation]apply.Op{pb.Operation_OPERATION_DELETE: apply.OpDelete,
		pb.Operation_OPERATION_INSERT: apply.OpInsert, pb.Operation_OPERATION_UPDATE: apply.OpUpdate}[decisionOp(d)]
	w := apply.Conditional{Table: t, Op: op, Key: d.RecordKey, Values: d.GetDecidedValue().GetColumns(),
		Base: d.ExpectedLocalRevision, Ref: ref(cmd),
		Stamp: apply.Stamp{Revision: d.DecidedRevision, Origin: cmp.Or(d.DecidedOriginNodeId, a.cfg.ShoreNodeID),
			EventID: cmd.CommandId}}
	return plan{write: w, decision: true, absentDone: op == apply.OpDelete && d.ExpectedLocalRevision == ""}, nil
}

// resolve finds the ship table of the rule ruleID names and checks the
// command's key and values against it (apply.CheckRow; keyField and
// valuesField name them in a rejection's detail).
func (a *Applier) resolve(ctx context.Context, ruleID string, key, values []*pb.ColumnValue, keyField, valuesField string) (*apply.Table, error) {
	r := a.cfg.Rules.ByID(ruleID)
	switch {
	case r == nil:
		return nil, reject(pb.RejectReason_REJECT_REASON_RULE_UNKNOWN, "no rule of that id on this node")
	case r.Direction != normalize.DirectionDownlink && r.Direction != normalize.DirectionBoth:
		return nil, reject(pb.RejectReason_REJECT_REASON_RULE_NOT_AUTHORIZED, "the rule does not sync downlink")
	case !r.Revisioned:
		return nil, reject(pb.RejectReason_REJECT_REASON_RULE_NOT_AUTHORIZED,
			"the rule is not revisioned; remote apply writes revisioned tables only")
	}
	t, err := a.table(ctx, r)
	if err != nil {
		return nil, err
	}
	if reason, detail := apply.CheckRow(r.KeyColumns, t.Columns, key, values, keyField, valuesField); reason !=
		pb.RejectReason_REJECT_REASON_UNSPECIFIED {
		return nil, reject(reason, "%s", detail)
	}
	return t, nil
}

// ref is the command's sequence as the ledger row's reference.
func ref(cmd *pb.Command) int64 { return int64(min(cmd.GetSequence(), 1<<62)) }

// table returns rule r's ship table: its columns read once from the
// database (the ones the rule carries), kept until a write fails.
func (a *Applier) table(ctx context.Context, r *normalize.Rule) (*apply.Table, error) {
	a.mu.Lock()
	t := a.tables[r.ID]
	a.mu.Unlock()
	if t != nil {
		return t, nil
	}
	rows, err := a.cfg.Target.DB().QueryContext(ctx, stmts["TableColumns"], r.Database, r.Table)
	if err != nil {
		return nil, fmt.Errorf("remote: columns of rule %s's table: %w", r.ID, err)
	}
	defer rows.Close()
	spec := &apply.Table{Schema: r.Database, Name: r.Table}
	n := 0
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, fmt.Errorf("remote: columns of rule %s's table: %w", r.ID, err)
		}
		n++
		if r.Carries(c) {
			spec.Columns = append(spec.Columns, c)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("remote: columns of rule %s's table: %w", r.ID, err)
	}
	if n == 0 {
		// The operator's to fix (the --ship-db names another server, the
		// table is not created yet): retried, never a rejection.
		return nil, fmt.Errorf("remote: rule %s: the ship database has no table %s.%s", r.ID, r.Database, r.Table)
	}
	a.mu.Lock()
	a.tables[r.ID] = spec
	a.mu.Unlock()
	return spec, nil
}

// forget drops the table of cmd's rule after a failed write, so the next
// attempt reads its columns again (an ALTER TABLE may be what failed it).
func (a *Applier) forget(cmd *pb.Command) {
	var id string
	switch b := cmd.GetBody().(type) {
	case *pb.Command_Change:
		id = b.Change.GetRuleId()
	case *pb.Command_Decision:
		id = b.Decision.GetRuleId()
	}
	a.mu.Lock()
	delete(a.tables, id)
	a.mu.Unlock()
}
