package normalize_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
)

func windowRule(t *testing.T, version uint64, window string, dir normalize.Direction) *normalize.Rule {
	t.Helper()
	set, err := normalize.NewRuleSet(normalize.Rule{ID: "log", Version: version, Direction: dir, Database: "ship",
		Table: "log", KeyColumns: []string{"id"}, Revisioned: true, BusinessTimeColumn: "at", DatasetWindow: window})
	require.NoError(t, err)
	return set.Rules()[0]
}

func at(t time.Time) *time.Time { return &t }

// TestWindowReconcile: rows entering the window are upserted, rows outside
// kept (or deleted by policy), target rows the source lacks only reported,
// rows without a usable business time listed as exceptions; carried out,
// a second plan finds the two sides reconciled; when the window moves or
// grows the next plan moves the rows that leave or enter.
func TestWindowReconcile(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rule := windowRule(t, 1, "30d", normalize.DirectionUplink)
	boundary := now.AddDate(0, 0, -30)
	source := []normalize.WindowRow{
		{Key: "a", BusinessAt: at(boundary.Add(24 * time.Hour)), Revision: "ra"},
		{Key: "b", BusinessAt: at(boundary.Add(-24 * time.Hour)), Revision: "rb"},
		{Key: "c", Revision: "rc"},
		{Key: "d", BusinessAt: at(boundary), Revision: "rd"}, // left-closed: in
		{Key: "e", BusinessAt: at(now.Add(time.Hour)), Revision: "re"},
		{Key: "g", BusinessAt: at(now.Add(-time.Hour)), Revision: "rg2"},
	}
	target := []normalize.WindowRow{
		{Key: "a", BusinessAt: at(boundary.Add(24 * time.Hour)), Revision: "ra"},
		{Key: "b", BusinessAt: at(boundary.Add(-24 * time.Hour)), Revision: "rb"},
		{Key: "f", BusinessAt: at(boundary.Add(-48 * time.Hour)), Revision: "rf"},
		{Key: "g", BusinessAt: at(now.Add(-time.Hour)), Revision: "rg1"},
		{Key: "x", BusinessAt: at(now.Add(-2 * time.Hour)), Revision: "rx"},
	}
	w := normalize.WindowReconcile{Rule: rule, TrustedNow: now, Source: source, Target: target}
	p, err := w.Plan()
	require.NoError(t, err)
	require.True(t, p.Boundary.Equal(boundary))
	require.Equal(t, []string{"d", "g"}, p.Upsert, "d entered, g changed")
	require.Equal(t, []string{"b", "f"}, p.Keep)
	require.Empty(t, p.Delete)
	require.Equal(t, []string{"x"}, p.Orphans)
	require.Equal(t, []normalize.WindowException{
		{Side: "source", Key: "c", Problem: "business time is NULL or unreadable"},
		{Side: "source", Key: "e", Problem: "business time is in the future"},
	}, p.Exceptions)
	require.Equal(t, 3, p.InWindow)
	require.False(t, p.Reconciled())

	// Carried out: the target holds d and g's new revision.
	target = append(target[:3:3], source[3], source[5], target[4])
	w.Target = target
	p, err = w.Plan()
	require.NoError(t, err)
	require.True(t, p.Reconciled(), "%+v", p)
	require.Equal(t, p.Digest, p.TargetDigest)

	// Deleting what is outside: b and f leave the target.
	w.DeleteOutside = true
	p, err = w.Plan()
	require.NoError(t, err)
	require.Equal(t, []string{"b", "f"}, p.Delete)
	require.Empty(t, p.Keep)

	// Two days later a has slid out; it is deleted (or kept) like b.
	w.TrustedNow = now.Add(48 * time.Hour)
	p, err = w.Plan()
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "d", "f"}, p.Delete)
	require.Equal(t, 2, p.InWindow, "g, and e whose time is no longer in the future")
	require.Equal(t, []string{"e"}, p.Upsert)

	// A larger window (a new rule version): b enters and is upserted.
	w = normalize.WindowReconcile{Rule: windowRule(t, 2, "60d", normalize.DirectionUplink), TrustedNow: now, Source: source,
		Target: []normalize.WindowRow{target[0], target[3], target[4]}}
	p, err = w.Plan()
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, p.Upsert)
	require.EqualValues(t, 2, p.RuleVersion)

	// A two-way rule does not delete rows that left its window unless that
	// was approved.
	w = normalize.WindowReconcile{Rule: windowRule(t, 1, "30d", normalize.DirectionBoth), TrustedNow: now, Source: source,
		Target: target, DeleteOutside: true}
	_, err = w.Plan()
	require.ErrorIs(t, err, normalize.ErrTwoWayWindowDelete)
	w.TwoWayDeleteApproved = true
	p, err = w.Plan()
	require.NoError(t, err)
	require.Equal(t, []string{"b", "f"}, p.Delete)

	_, err = normalize.WindowReconcile{Rule: windowRule(t, 1, "", normalize.DirectionUplink), TrustedNow: now}.Plan()
	require.ErrorContains(t, err, "needs a rule with a dataset window")
	_, err = normalize.WindowReconcile{Rule: rule}.Plan()
	require.ErrorIs(t, err, normalize.ErrNoTrustedTime)
	_, err = normalize.WindowReconcile{Rule: rule, TrustedNow: now, Source: []normalize.WindowRow{{Key: "a"}, {Key: "a"}}}.Plan()
	require.ErrorContains(t, err, "appears twice")
}
