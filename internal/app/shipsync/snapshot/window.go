package snapshot

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

// WindowResult is a window reconcile's outcome, stored with its task: what
// the check found once the outside rows were dealt with. It carries counts,
// digests and key hashes, never key values.
type WindowResult struct {
	RuleID      string    `json:"rule_id"`
	RuleVersion uint64    `json:"rule_version"`
	Boundary    time.Time `json:"boundary"`
	// DeleteOutside is the policy the reconcile ran under.
	DeleteOutside bool `json:"delete_outside"`
	// ShipRows and ShoreRows are the rows of the two tables at the check;
	// InWindow the ship's rows inside the window.
	ShipRows  int `json:"ship_rows"`
	ShoreRows int `json:"shore_rows"`
	InWindow  int `json:"in_window"`
	// Deleted are the shore rows outside the window deleted; Changed those
	// left because they changed after they were read; Kept those outside
	// the window kept (the policy, or a change).
	Deleted int `json:"deleted"`
	Changed int `json:"changed"`
	Kept    int `json:"kept"`
	// Unsent are the ship's rows inside the window the shore still lacks or
	// holds at another revision, Outside the shore rows outside the window
	// still to delete, Orphans the shore rows inside the window the ship
	// does not have (reported only).
	Unsent  int `json:"unsent"`
	Outside int `json:"outside"`
	Orphans int `json:"orphans"`
	// Digest and ShoreDigest are the key+revision digests of the rows inside
	// the window on each side (hex SHA-256).
	Digest      string `json:"digest"`
	ShoreDigest string `json:"shore_digest"`
	// Exceptions are the rows of either side whose business time is NULL,
	// unreadable or in the future.
	Exceptions []WindowException `json:"exceptions"`
	Reconciled bool              `json:"reconciled"`
	CheckedAt  time.Time         `json:"checked_at"`
}

// WindowException is one row the reconcile left alone: its side ("source"
// or "target"), the first 8 bytes of the SHA-256 of its key as the check
// reads it (a JSON array of the key values' text), in hex, and why.
type WindowException struct {
	Side    string `json:"side"`
	KeyHash string `json:"key_hash"`
	Problem string `json:"problem"`
}

// WindowSides are the two tables a window reconcile compares: the ship's
// (the rule's source table) and the shore's (the table the rule writes).
type WindowSides struct {
	Ship, Shore           *sql.DB
	ShipTable, ShoreTable shore.WindowTable
}

// WindowPolicy is what happens to the shore's rows outside the window:
// kept unless DeleteOutside; a two-way rule deletes only with
// TwoWayDeleteApproved.
type WindowPolicy struct {
	DeleteOutside, TwoWayDeleteApproved bool
}

// ReconcileWindow finishes the window reconcile of task id once its
// snapshot is COMPLETED: it plans against the task's fixed boundary,
// deletes the shore rows outside the window when the policy says so (each
// only if unchanged since it was read), checks both sides again — counts,
// key+revision digests, exceptions — and stores the result with the task.
// rule is the task's rule version. The result is returned also when the
// sides do not agree (Reconciled false).
func (s *Store) ReconcileWindow(ctx context.Context, id string, rule *normalize.Rule, sides WindowSides, p WindowPolicy) (*WindowResult, error) {
	ts, err := s.Tasks(ctx)
	if err != nil {
		return nil, err
	}
	var t *Task
	for i := range ts {
		if ts[i].ID == id {
			t = &ts[i]
		}
	}
	switch {
	case t == nil:
		return nil, ErrNotFound
	case t.WindowNow.IsZero():
		return nil, fmt.Errorf("snapshot: task %s is not a window reconcile's snapshot (it has no window)", id)
	case t.State != Completed:
		return nil, fmt.Errorf("snapshot: task %s is %s: its window is reconciled once it is COMPLETED", id, t.State)
	case rule == nil || rule.ID != t.RuleID || rule.Version != t.RuleVersion:
		return nil, fmt.Errorf("snapshot: task %s ran rule %s version %d: reconcile it with that rule version", id, t.RuleID, t.RuleVersion)
	}
	plan := func() (*normalize.WindowPlan, []normalize.WindowRow, []normalize.WindowRow, error) {
		ship, err := shore.WindowRows(ctx, sides.Ship, sides.ShipTable)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("snapshot: ship side: %w", err)
		}
		target, err := shore.WindowRows(ctx, sides.Shore, sides.ShoreTable)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("snapshot: shore side: %w", err)
		}
		pl, err := normalize.WindowReconcile{Rule: rule, TrustedNow: t.WindowNow, Source: ship, Target: target,
			DeleteOutside: p.DeleteOutside, TwoWayDeleteApproved: p.TwoWayDeleteApproved}.Plan()
		return pl, ship, target, err
	}
	first, _, target, err := plan()
	if err != nil {
		return nil, err
	}
	var del shore.WindowDeleted
	if len(first.Delete) > 0 {
		byKey := make(map[string]normalize.WindowRow, len(target))
		for _, row := range target {
			byKey[row.Key] = row
		}
		rows := make([]normalize.WindowRow, len(first.Delete))
		for i, k := range first.Delete {
			rows[i] = byKey[k]
		}
		if del, err = shore.WindowDelete(ctx, sides.Shore, sides.ShoreTable, first.Boundary, rows); err != nil {
			return nil, err
		}
	}
	check, ship, target, err := plan()
	if err != nil {
		return nil, err
	}
	r := &WindowResult{RuleID: check.RuleID, RuleVersion: check.RuleVersion, Boundary: check.Boundary.UTC(),
		DeleteOutside: p.DeleteOutside, ShipRows: len(ship), ShoreRows: len(target), InWindow: check.InWindow,
		Deleted: del.Deleted, Changed: del.Changed, Kept: len(check.Keep), Unsent: len(check.Upsert),
		Outside: len(check.Delete), Orphans: len(check.Orphans), Digest: hex.EncodeToString(check.Digest[:]),
		ShoreDigest: hex.EncodeToString(check.TargetDigest[:]), Reconciled: check.Reconciled(),
		CheckedAt: s.clock.Now().UTC(), Exceptions: []WindowException{}}
	for _, e := range check.Exceptions {
		h := sha256.Sum256([]byte(e.Key))
		r.Exceptions = append(r.Exceptions, WindowException{Side: e.Side, KeyHash: hex.EncodeToString(h[:8]), Problem: e.Problem})
	}
	if err := s.setResult(ctx, id, r); err != nil {
		return nil, err
	}
	return r, nil
}

// ErrNotReconciled: the check after a window reconcile found the sides
// still apart.
var ErrNotReconciled = errors.New("snapshot: the window is not reconciled")
