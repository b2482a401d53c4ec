package apply

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
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
	// Base, when set, is the revision the write is conditional on instead
	// of the event's base revision: a SNAPSHOT row written over the
	// record's current revision (an upsert under a version condition).
	Base string
}

// Decide is the pure decision of §10.3 steps 3–4 for ev under rule (nil:
// not registered) given the record's head. seed 004 §11.1: INSERT needs no
// current record (or a tombstone the rule allows re-creating); UPDATE and
// DELETE need the current revision to equal base_revision. The target's
// own revision decides that — the write is conditional, and a write that
// changes nothing is inspected and recorded as a conflict with the row it
// met — because the head may lag behind the target: the shore's own writes
// move it only when the shore CDC consumer forwards them, and an arbiter
// writing a decision moves it after the write, so a local change made in
// between never moved it. A head-only conflict would record a revision the
// shore no longer holds; its case would expire and nothing reopen it. The
// head still recognises a repeated change (Repeat) and a re-insert over a
// tombstone the rule forbids. A SNAPSHOT row is written like an INSERT when
// it carries no base revision and like an UPDATE when it does.
//
// A SNAPSHOT row without a base revision is an upsert under a version
// condition: it never overwrites a newer revision — the record holding its
// revision now or among its recent ones (the record moved past it), or a
// tombstone of its revision by its node (deleted since), is a Repeat, an
// idempotent success that writes nothing — a record the shore does not
// know is inserted, and a live record at another revision is updated on
// condition that the target still holds the record's current revision
// (Plan.Base), so a write that happened in between makes it a conflict.
func Decide(rule *shore.Rule, ev *pb.ChangeEvent, head Head) Plan {
	if p, ok := checkShape(rule, ev); !ok {
		return p
	}
	op := OpFor(ev)
	if !head.Found {
		return Plan{Action: Write, Op: op}
	}
	// Revisions are unique per change (a new UUID per local write; a
	// delete's tombstone derived from what it deleted), so a result
	// revision the record has or had names a change already applied.
	if r := ev.ResultRevision; r != "" && (r == head.Revision || slices.Contains(head.Recent, r)) {
		return Plan{Action: Repeat, Op: op}
	}
	if ev.Operation == pb.Operation_OPERATION_SNAPSHOT && ev.BaseRevision == "" {
		switch {
		case head.Tombstone && head.Revision == normalize.TombstoneRevision(ev.OriginNodeId, ev.ResultRevision, ev.PrimaryKey):
			return Plan{Action: Repeat, Op: op}
		case !head.Tombstone:
			return Plan{Action: Write, Op: OpUpdate, Base: head.Revision}
		}
	}
	if op == OpInsert && head.Tombstone && !rule.InsertOverTombstone {
		return Plan{Action: Conflict, Op: op}
	}
	return Plan{Action: Write, Op: op}
}

// OpFor is the statement that writes change ev: an INSERT inserts, a
// DELETE deletes, an UPDATE updates, and a SNAPSHOT row is inserted when it
// carries no base revision and updated over it when it does.
func OpFor(ev *pb.ChangeEvent) Op {
	switch ev.Operation {
	case pb.Operation_OPERATION_INSERT:
		return OpInsert
	case pb.Operation_OPERATION_DELETE:
		return OpDelete
	case pb.Operation_OPERATION_SNAPSHOT:
		if ev.BaseRevision == "" {
			return OpInsert
		}
	}
	return OpUpdate
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
	if r, detail := CheckRow(rule.KeyColumns, rule.Columns, ev.PrimaryKey, ev.GetAfter().GetColumns(),
		"primary_key", "after.columns"); r != pb.RejectReason_REJECT_REASON_UNSPECIFIED {
		return reject(r, "%s", detail)
	}
	return Plan{}, true
}

// CheckRow checks a row a change writes against its table's shape: key must
// name exactly keyColumns in order, none NULL; every one of values must be
// one of columns and not a platform column, and a key column among them
// must hold the key's value (a key change is a DELETE and an INSERT, never
// an UPDATE). It returns the reason and a payload-free detail naming
// keyField[i] or valuesField[i], or REJECT_REASON_UNSPECIFIED when the row
// fits.
func CheckRow(keyColumns, columns []string, key, values []*pb.ColumnValue, keyField, valuesField string) (pb.RejectReason, string) {
	if len(key) != len(keyColumns) {
		return pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS, fmt.Sprintf("%s has %d columns, the rule's key %d",
			keyField, len(key), len(keyColumns))
	}
	for i, c := range key {
		if c.GetName() != keyColumns[i] {
			return pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS, fmt.Sprintf("%s[%d] is not key column %d of the rule", keyField, i, i)
		}
		if c.GetValue() == nil {
			return pb.RejectReason_REJECT_REASON_MISSING_FIELD, fmt.Sprintf("%s[%d] has no value", keyField, i)
		}
		if c.GetNull() {
			return pb.RejectReason_REJECT_REASON_INVALID_FIELD, fmt.Sprintf("%s[%d] is NULL", keyField, i)
		}
	}
	allowed := make(map[string]bool, len(columns))
	for _, c := range columns {
		allowed[c] = true
	}
	for i, c := range values {
		if !allowed[c.GetName()] {
			return pb.RejectReason_REJECT_REASON_COLUMN_NOT_ALLOWED, fmt.Sprintf("%s[%d] is not a column of the rule", valuesField, i)
		}
		if strings.HasPrefix(strings.ToLower(c.GetName()), "_sync_") {
			return pb.RejectReason_REJECT_REASON_COLUMN_NOT_ALLOWED, fmt.Sprintf("%s[%d] is a platform column", valuesField, i)
		}
		if c.GetValue() == nil {
			return pb.RejectReason_REJECT_REASON_MISSING_FIELD, fmt.Sprintf("%s[%d] has no value", valuesField, i)
		}
	}
	for _, k := range key {
		for i, c := range values {
			if c.GetName() == k.GetName() && !sameValue(c, k) {
				return pb.RejectReason_REJECT_REASON_INCONSISTENT_FIELDS, fmt.Sprintf("%s[%d] changes a key column", valuesField, i)
			}
		}
	}
	return pb.RejectReason_REJECT_REASON_UNSPECIFIED, ""
}

// sameValue reports whether two column values are equal.
func sameValue(a, b *pb.ColumnValue) bool {
	return proto.Equal(&pb.ColumnValue{Value: a.Value}, &pb.ColumnValue{Value: b.Value})
}
