package apply

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

// Head is what the shore knows of a record's current version (its
// sync_record_head row); Found false when it knows nothing yet.
type Head struct {
	Found     bool
	Revision  string
	Origin    string
	EventID   string
	Tombstone bool
	// Recent are the revisions the record held before Revision, newest
	// first (RecentRevisions of them at most).
	Recent []string
}

// RecentRevisions is how many earlier revisions of a record the shore
// keeps to recognise a repeated change.
const RecentRevisions = 8

// Action is what Decide chose for an event.
type Action int

const (
	// Write: run the conditional write on the target.
	Write Action = iota + 1
	// Conflict: the shore's version is not the one the change was made over.
	Conflict
	// Reject: the event cannot be applied at all (Plan.Reason says why).
	Reject
	// Repeat: the record holds, or held within its last RecentRevisions
	// changes, the event's result revision — the change was applied
	// already (a CDC record delivered again) — so nothing is written and
	// the event is applied.
	Repeat
)

// Op is the kind of target statement a Write runs.
type Op int

const (
	// OpInsert inserts the row; it must not exist.
	OpInsert Op = iota + 1
	// OpUpdate updates the row where its revision is the base revision.
	OpUpdate
	// OpDelete deletes the row where its revision is the base revision.
	OpDelete
)

// Plan is Decide's answer for one event.
type Plan struct {
	Action Action
	Op     Op
	// Reason and Detail explain a Reject (Detail is payload-free).
	Reason pb.RejectReason
	Detail string
}

// Decide is the pure decision of §10.3 steps 3–4 for ev under rule (nil:
// not registered) given the record's head. seed 004 §11.1: INSERT needs no
// current record (or a tombstone the rule allows re-creating); UPDATE and
// DELETE need the current revision to equal base_revision. When the shore
// knows nothing of the record, the target's own revision decides (the write
// is conditional). A SNAPSHOT row is written like an INSERT when it carries no
// base revision and like an UPDATE when it does.
func Decide(rule *shore.Rule, ev *pb.ChangeEvent, head Head) Plan {
	if p, ok := checkShape(rule, ev); !ok {
		return p
	}
	op := OpUpdate
	switch ev.Operation {
	case pb.Operation_OPERATION_INSERT:
		op = OpInsert
	case pb.Operation_OPERATION_DELETE:
		op = OpDelete
	case pb.Operation_OPERATION_SNAPSHOT:
		if ev.BaseRevision == "" {
			op = OpInsert
		}
	}
	if !head.Found {
		return Plan{Action: Write, Op: op}
	}
	// Revisions are unique per change (a new UUID per local write; a
	// delete's tombstone derived from what it deleted), so a result
	// revision the record has or had names a change already applied.
	if r := ev.ResultRevision; r != "" && (r == head.Revision || slices.Contains(head.Recent, r)) {
		return Plan{Action: Repeat, Op: op}
	}
	switch op {
	case OpInsert:
		if !head.Tombstone || !rule.InsertOverTombstone {
			return Plan{Action: Conflict, Op: op}
		}
	default:
		if head.Tombstone || head.Revision != ev.BaseRevision {
			return Plan{Action: Conflict, Op: op}
		}
	}
	return Plan{Action: Write, Op: op}
}

// checkShape rejects an event its rule cannot write: unknown rule, another
// table, a key that is not the rule's, a column the rule does not carry.
func checkShape(rule *shore.Rule, ev *pb.ChangeEvent) (Plan, bool) {
	reject := func(r pb.RejectReason, format string, args ...any) (Plan, bool) {
		return Plan{Action: Reject, Reason: r, Detail: fmt.Sprintf(format, args...)}, false
	}
	if rule == nil {
		return reject(pb.RejectReason_REJECT_REASON_RULE_UNKNOWN, "rule %s version %d is not registered on the shore",
			ev.RuleId, ev.RuleVersion)
	}
	if ev.Table != rule.SourceTable {
		return reject(pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS, "table is not the rule's source table")
	}
	if len(ev.PrimaryKey) != len(rule.KeyColumns) {
		return reject(pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS, "primary_key has %d columns, the rule's key %d",
			len(ev.PrimaryKey), len(rule.KeyColumns))
	}
	for i, c := range ev.PrimaryKey {
		if c.Name != rule.KeyColumns[i] {
			return reject(pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS, "primary_key[%d] is not key column %d of the rule", i, i)
		}
		if c.GetNull() {
			return reject(pb.RejectReason_REJECT_REASON_INVALID_FIELD, "primary_key[%d] is NULL", i)
		}
	}
	allowed := make(map[string]bool, len(rule.Columns))
	for _, c := range rule.Columns {
		allowed[c] = true
	}
	for i, c := range ev.GetAfter().GetColumns() {
		if !allowed[c.Name] {
			return reject(pb.RejectReason_REJECT_REASON_COLUMN_NOT_ALLOWED, "after.columns[%d] is not a column of the rule", i)
		}
		if strings.HasPrefix(strings.ToLower(c.Name), "_sync_") {
			return reject(pb.RejectReason_REJECT_REASON_COLUMN_NOT_ALLOWED, "after.columns[%d] is a platform column", i)
		}
	}
	// A key column in the after image must hold the key's value: a key
	// change is a DELETE and an INSERT, never an UPDATE.
	for _, k := range ev.PrimaryKey {
		for i, c := range ev.GetAfter().GetColumns() {
			if c.Name == k.Name && !sameValue(c, k) {
				return reject(pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS, "after.columns[%d] changes a key column", i)
			}
		}
	}
	return Plan{}, true
}

// sameValue reports whether two column values are equal.
func sameValue(a, b *pb.ColumnValue) bool {
	return proto.Equal(&pb.ColumnValue{Value: a.Value}, &pb.ColumnValue{Value: b.Value})
}
