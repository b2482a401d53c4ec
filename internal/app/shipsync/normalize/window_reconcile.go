package normalize

import (
	"cmp"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"
)

// WindowRow is one record as a window reconcile sees it: its key (the
// canonical key text, as Rule's events carry it), its business time (nil:
// NULL or unreadable) and its revision (any text that changes when the row
// changes; "" when not known).
type WindowRow struct {
	Key        string
	BusinessAt *time.Time
	Revision   string
}

// WindowReconcile is a WINDOW_RECONCILE task: run when a rule's dataset
// window is first enabled, shrinks, grows or simply moves with time, it
// brings the target side to exactly the rows of the source that are inside
// the window (the rows outside are kept or deleted by policy).
type WindowReconcile struct {
	// Rule is the rule version the task runs under (it must have a window).
	Rule *Rule
	// TrustedNow fixes the boundary: Rule.WindowStart(TrustedNow). The task
	// keeps this boundary from start to end, whatever time it takes.
	TrustedNow time.Time
	// Source are the source's current rows of the rule's table (the
	// controlled snapshot); Target the target's rows of the same table.
	Source, Target []WindowRow
	// DeleteOutside deletes target rows whose business time is before the
	// boundary; otherwise they are kept (the default).
	DeleteOutside bool
	// TwoWayDeleteApproved allows DeleteOutside on a BOTH rule: without
	// it a two-way rule refuses to delete rows that slid out of the window
	// (ErrTwoWayWindowDelete), since the other side may still change them.
	TwoWayDeleteApproved bool
}

// ErrTwoWayWindowDelete: DeleteOutside on a two-way rule without the
// explicit approval.
var ErrTwoWayWindowDelete = errors.New("normalize: a two-way rule does not delete rows that left its window without approval")

// WindowPlan is what a reconcile does and how it is checked.
type WindowPlan struct {
	RuleID      string
	RuleVersion uint64
	// Boundary is the fixed window start (left-closed: a row at it is in).
	Boundary time.Time
	// Upsert are the source rows inside the window the target lacks or
	// holds at another revision (rows that entered the window, or changed
	// while outside it): they go to the target as snapshot rows.
	Upsert []string
	// Delete are target rows outside the window to delete (DeleteOutside);
	// Keep those kept.
	Delete, Keep []string
	// Orphans are target rows inside the window the source does not have:
	// reported, never deleted by the reconcile (a delete travels as an
	// event).
	Orphans []string
	// Exceptions are rows whose business time is NULL, unreadable or
	// further in the future than the rule allows: neither side is changed
	// for them.
	Exceptions []WindowException
	// InWindow is how many source rows are inside the window, and Digest
	// the SHA-256 of their sorted keys and revisions: after the plan is
	// carried out, the target's rows inside the window have the same count
	// and digest (TargetDigest of a fresh plan equals Digest).
	InWindow     int
	Digest       [32]byte
	TargetDigest [32]byte
}

// WindowException is a row the reconcile leaves alone, and why.
type WindowException struct {
	Side, Key, Problem string
}

// Reconciled reports whether the target already matches: nothing to upsert
// or delete, and the digests agree.
func (p *WindowPlan) Reconciled() bool {
	return len(p.Upsert) == 0 && len(p.Delete) == 0 && p.Digest == p.TargetDigest
}

// Plan computes the reconcile: which rows enter the target, which leave it,
// which are kept or only reported, and the digests that check the result.
// It is pure; keys are listed in sorted order.
func (w WindowReconcile) Plan() (*WindowPlan, error) {
	r := w.Rule
	switch {
	case r == nil || !r.HasWindow():
		return nil, errors.New("normalize: window reconcile needs a rule with a dataset window")
	case w.TrustedNow.IsZero():
		return nil, ErrNoTrustedTime
	case w.DeleteOutside && r.Direction == DirectionBoth && !w.TwoWayDeleteApproved:
		return nil, ErrTwoWayWindowDelete
	}
	p := &WindowPlan{RuleID: r.ID, RuleVersion: r.Version, Boundary: r.WindowStart(w.TrustedNow)}
	latest := w.TrustedNow.Add(r.c.skew)
	judge := func(side string, row WindowRow) (in, ok bool) {
		switch {
		case row.BusinessAt == nil:
			p.Exceptions = append(p.Exceptions, WindowException{side, row.Key, "business time is NULL or unreadable"})
			return false, false
		case row.BusinessAt.After(latest):
			p.Exceptions = append(p.Exceptions, WindowException{side, row.Key, "business time is in the future"})
			return false, false
		}
		return !row.BusinessAt.Before(p.Boundary), true
	}
	source := map[string]WindowRow{}
	var inside []WindowRow
	entering := map[string]bool{}
	for _, row := range w.Source {
		if _, dup := source[row.Key]; dup {
			return nil, fmt.Errorf("normalize: window reconcile: a source key appears twice (rule %s)", r.ID)
		}
		source[row.Key] = row
		if in, ok := judge("source", row); ok && in {
			inside = append(inside, row)
			entering[row.Key] = true
		}
	}
	target := map[string]WindowRow{}
	var targetInside []WindowRow
	for _, row := range w.Target {
		if _, dup := target[row.Key]; dup {
			return nil, fmt.Errorf("normalize: window reconcile: a target key appears twice (rule %s)", r.ID)
		}
		target[row.Key] = row
		in, ok := judge("target", row)
		switch {
		case !ok:
		case in:
			targetInside = append(targetInside, row)
			if _, has := source[row.Key]; !has {
				p.Orphans = append(p.Orphans, row.Key)
			}
		case entering[row.Key]:
			// Outside by the target's copy, inside by the source's: the
			// upsert below brings it in.
		case w.DeleteOutside:
			p.Delete = append(p.Delete, row.Key)
		default:
			p.Keep = append(p.Keep, row.Key)
		}
	}
	for _, row := range inside {
		if t, has := target[row.Key]; !has || t.Revision != row.Revision || !sameInstant(t.BusinessAt, row.BusinessAt) {
			p.Upsert = append(p.Upsert, row.Key)
		}
	}
	p.InWindow = len(inside)
	p.Digest = windowDigest(inside)
	p.TargetDigest = windowDigest(slices.DeleteFunc(targetInside, func(row WindowRow) bool {
		_, has := source[row.Key]
		return !has // orphans are reported, not counted against the source
	}))
	for _, l := range [][]string{p.Upsert, p.Delete, p.Keep, p.Orphans} {
		slices.Sort(l)
	}
	slices.SortFunc(p.Exceptions, func(a, b WindowException) int {
		return cmp.Or(cmp.Compare(a.Side, b.Side), cmp.Compare(a.Key, b.Key))
	})
	return p, nil
}

func sameInstant(a, b *time.Time) bool { return a != nil && b != nil && a.Equal(*b) }

// windowDigest is the SHA-256 over rows sorted by key: each key and
// revision, length-prefixed.
func windowDigest(rows []WindowRow) [32]byte {
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(a, b WindowRow) int { return cmp.Compare(a.Key, b.Key) })
	h := sha256.New()
	for _, row := range rows {
		fmt.Fprintf(h, "%d:%s%d:%s", len(row.Key), row.Key, len(row.Revision), row.Revision)
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}
