package snapshot_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/app/shipsync/snapshot"
)

// TestWindowReconcile runs a WINDOW_RECONCILE end to end on a rule with a
// 30-day dataset window: a ship table with rows inside the window, outside
// it, with a NULL and a future business time; a shore table that holds
// copies of the outside rows and two rows the ship no longer has. The
// windowed snapshot sends only the inside rows (the NULL and future ones
// are listed as exceptions), rows change during it, and the reconcile —
// first keeping the outside rows, then deleting them, each delete
// conditional on the revision read — leaves the shore equal to the ship's
// rows inside the window, with the check's counts, digests and exceptions
// stored with the task.
func TestWindowReconcile(t *testing.T) {
	// The boundary is fixed from this instant for the whole task; the live
	// client judges by the real clock, a few seconds later: every row is
	// days away from the boundary either way.
	windowNow := time.Now().UTC().Truncate(time.Second)
	at := func(d time.Duration) string { return windowNow.Add(d).Format("2006-01-02 15:04:05.000000") }
	const day = 24 * time.Hour
	const insert = "INSERT INTO crew (" + crewCols + ", _sync_revision, _sync_origin, _sync_updated_at) " +
		"VALUES (?, ?, 'AB', 1.00, ?, ?, '" + shipdemo.Node + "', '2026-01-02 03:04:05')"
	b := setupWorld(t, world{
		rules: func(shipDB string) []normalize.Rule {
			rules := shipdemo.ShipRules(shipDB)
			for i := range rules {
				if rules[i].ID == "crew" {
					rules[i].DatasetWindow = "30d"
				}
			}
			return rules
		},
		seed: func(b *bench) {
			for _, db := range []string{b.shipName, strings.Replace(b.shipName, "_ship_", "_shore_", 1)} {
				b.exec(t, "ALTER TABLE "+db+".crew MODIFY updated_at DATETIME(6) NULL")
			}
			for id := 1; id <= 40; id++ { // inside
				b.exec(t, insert, id, fmt.Sprintf("in %d", id), at(-day-time.Duration(id)*time.Minute), uuid.NewString())
			}
			for id := 41; id <= 60; id++ { // outside
				b.exec(t, insert, id, fmt.Sprintf("out %d", id), at(-60*day+time.Duration(id)*time.Minute), uuid.NewString())
			}
			b.exec(t, insert, 61, "no time", nil, uuid.NewString())
			b.exec(t, insert, 62, "no time either", nil, uuid.NewString())
			b.exec(t, insert, 63, "from the future", at(10*day), uuid.NewString())
			// The shore has the outside rows (from before the window) and
			// two outside rows the ship deleted long ago.
			_, err := b.shore.ExecContext(t.Context(), "INSERT INTO crew SELECT * FROM "+b.shipName+".crew WHERE id BETWEEN 41 AND 60")
			require.NoError(t, err)
			for _, id := range []int{70, 71} {
				_, err := b.shore.ExecContext(t.Context(), insert, id, "gone", at(-90*day), uuid.NewString())
				require.NoError(t, err)
			}
		},
	})
	ctx := t.Context()
	rule := b.cfg.Rules.Lookup(b.shipName, "crew")
	require.True(t, rule.HasWindow())
	boundary := rule.WindowStart(windowNow)

	require.NoError(t, b.cfg.Store.Create(ctx, snapshot.Task{ID: "win-1", RuleID: "crew", RuleVersion: 1,
		Database: b.shipName, Table: "crew", WindowNow: windowNow}))
	b.stepUntil(t, "first chunk sent", func() bool { p := b.task(t, "win-1"); return p.Chunks >= 1 && p.Received >= 40 })
	// Rows 1–50 are read (40 sent), 51–63 not yet. Change both kinds.
	b.exec(t, "UPDATE crew SET name = 'changed during' WHERE id = 5")
	b.exec(t, "DELETE FROM crew WHERE id = 7")
	b.exec(t, "UPDATE crew SET name = 'still outside' WHERE id = 55")
	b.exec(t, "INSERT INTO crew ("+crewCols+") VALUES (100, 'ahead of the cursor', 'AB', 2.00, ?)", at(-2*day))
	b.stepUntil(t, "caught up", func() bool { return b.task(t, "win-1").State == snapshot.Completed })
	require.Eventually(t, func() bool { return b.cl.Waiting() == 0 }, time.Minute, 20*time.Millisecond)
	// The changes made during the snapshot travel as live changes (capture,
	// topic, client): the client may have nothing waiting before the
	// capture has written them. The shore has them all once row 5 is
	// changed, row 7 gone and row 100 there.
	require.Eventually(t, func() bool {
		var changed, gone, ahead int
		err := b.shore.QueryRowContext(ctx, "SELECT (SELECT count(*) FROM crew WHERE id = 5 AND name = 'changed during'), "+
			"(SELECT count(*) FROM crew WHERE id = 7), (SELECT count(*) FROM crew WHERE id = 100)").Scan(&changed, &gone, &ahead)
		require.NoError(t, err)
		return changed == 1 && gone == 0 && ahead == 1 && b.cl.Waiting() == 0
	}, time.Minute, 20*time.Millisecond)

	p := b.task(t, "win-1")
	require.Empty(t, p.Error)
	require.Equal(t, int64(41), p.Events, "rows 1–40 and 100 sent; the outside, NULL and future rows not")
	require.Equal(t, p.Events, p.Applied)
	require.Zero(t, p.Conflicts)
	require.True(t, p.WindowNow.Equal(windowNow))
	require.Equal(t, int64(3), p.Exceptions, "two NULL business times and a future one")
	exc, err := b.cfg.Store.Exceptions(ctx, "win-1")
	require.NoError(t, err)
	var problems []string
	for _, e := range exc {
		problems = append(problems, e.Problem)
	}
	require.ElementsMatch(t, []string{"business time is NULL under a dataset window", "business time is NULL under a dataset window",
		"business time is further in the future than future_skew"}, problems)

	ship, err := apply.OpenTarget(b.shipDSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ship.Close() })
	target, err := apply.OpenTarget(b.shoreDSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = target.Close() })
	table := shore.WindowTable{Table: "crew", Key: []string{"id"}, TimeColumn: "updated_at", Revisioned: true}
	sides := snapshot.WindowSides{Ship: ship.DB(), Shore: target.DB(), ShipTable: table, ShoreTable: table}

	// Keep: the shore's outside rows stay, and the window already agrees.
	kept, err := b.cfg.Store.ReconcileWindow(ctx, "win-1", rule, sides, snapshot.WindowPolicy{})
	require.NoError(t, err)
	t.Logf("keep: %+v", *kept)
	require.True(t, kept.Reconciled)
	require.Equal(t, boundary.UTC(), kept.Boundary)
	require.Equal(t, 40, kept.InWindow, "40 inside, 7 deleted, 100 inserted")
	require.Equal(t, 22, kept.Kept)
	require.Zero(t, kept.Deleted+kept.Unsent+kept.Outside+kept.Orphans)
	require.Equal(t, kept.Digest, kept.ShoreDigest)
	require.Len(t, kept.Exceptions, 3)
	for _, e := range kept.Exceptions {
		require.Equal(t, "source", e.Side)
		require.Len(t, e.KeyHash, 16)
	}

	// A delete is conditional on the revision read: a row changed since
	// stays.
	d, err := shore.WindowDelete(ctx, target.DB(), table, boundary, []normalize.WindowRow{{Key: `["71"]`, Revision: "not-its-revision"}})
	require.NoError(t, err)
	require.Equal(t, shore.WindowDeleted{Changed: 1}, d)

	// Delete (a one-way rule): the 22 outside rows go.
	res, err := b.cfg.Store.ReconcileWindow(ctx, "win-1", rule, sides, snapshot.WindowPolicy{DeleteOutside: true})
	require.NoError(t, err)
	t.Logf("delete: %+v", *res)
	require.True(t, res.Reconciled)
	require.Equal(t, 22, res.Deleted)
	require.Zero(t, res.Changed+res.Kept+res.Outside+res.Unsent)
	require.Equal(t, 40, res.ShoreRows)
	require.Equal(t, kept.Digest, res.Digest)
	stored := b.task(t, "win-1").Result
	require.NotNil(t, stored)
	require.Equal(t, res.Digest, stored.Digest)
	require.Equal(t, 22, stored.Deleted)
	require.Len(t, stored.Exceptions, 3)

	// The shore holds exactly the ship's rows inside the window.
	want := dumpWhere(t, b.ship, "updated_at >= ? AND updated_at <= ?", boundary.UTC().Format("2006-01-02 15:04:05.000000"), at(0))
	require.Len(t, want, 40)
	require.Equal(t, want, dump(t, b.shore))

	// A task without a window, or one not COMPLETED, is refused.
	require.NoError(t, b.cfg.Store.Create(ctx, snapshot.Task{ID: "plain", RuleID: "crew", RuleVersion: 1,
		Database: b.shipName, Table: "crew"}))
	_, err = b.cfg.Store.ReconcileWindow(ctx, "plain", rule, sides, snapshot.WindowPolicy{})
	require.ErrorContains(t, err, "not a window reconcile's snapshot")
	_, err = b.cfg.Store.ReconcileWindow(ctx, "nope", rule, sides, snapshot.WindowPolicy{})
	require.ErrorIs(t, err, snapshot.ErrNotFound)
}
