package msgx_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaytype"
)

// snapRow is one SCHD_SNAP_LOG row.
type snapRow struct {
	Kind, Identity, Outcome string
	Records, Applied        int
	ScopeStart, ScopeEnd    *string
}

// snapLog returns the SCHD_SNAP_LOG rows of mailbox message id, in append order.
func (b *bundle) snapLog(t *testing.T, id int64) []snapRow {
	t.Helper()
	rows, err := b.store.Pool().Query(b.ctx, `SELECT kind, coalesce(identity, ''), outcome, records, applied,
		scope_start, scope_end FROM schd_snap_log WHERE msg_id = $1 ORDER BY id`, id)
	require.NoError(t, err)
	defer rows.Close()
	var out []snapRow
	for rows.Next() {
		var r snapRow
		require.NoError(t, rows.Scan(&r.Kind, &r.Identity, &r.Outcome, &r.Records, &r.Applied, &r.ScopeStart, &r.ScopeEnd))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

func ptr(s string) *string { return &s }

// TestSchedulePackageProtocol checks whole-package rejection (seed 000 §7.1
// steps 2–4, INV-19): a SCHD-DNLD naming one FLID twice, or moving a known
// flight to another operating day, is DEAD(PROTOCOL) and writes no flight at
// all (no half package), yet leaves a DEAD(PROTOCOL) trace in SCHD_SNAP_LOG
// appended outside the rolled-back transaction; a good package writes its
// SUCCEEDED trace in its own transaction.
func TestSchedulePackageProtocol(t *testing.T) {
	b := setup(t)
	b.cfg.CutoverWatermark = "zero"
	b.start(t)
	dttm := sisWall(b.cfg, time.Now())
	day1 := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	day2 := time.Date(2026, 12, 2, 23, 50, 0, 0, time.UTC)

	good := b.put(t, schd("DNLD", "3001", dttm, "", plan("P1", "CA201", day1), plan("P2", "CA202", day2)))
	twice := b.put(t, schd("DNLD", "3002", dttm, "", plan("X1", "CA301", day1), plan("X2", "CA302", day1),
		plan("X2", "CA303", day1)))
	moved := b.put(t, schd("DNLD", "3003", dttm, "", plan("X3", "CA304", day1), plan("P1", "CA201", day1.AddDate(0, 0, 4))))

	m := b.terminal(t, good)
	require.Equal(t, relaytype.StateSucceeded, m.State, m.LastError)
	for _, id := range []int64{twice, moved} {
		m := b.terminal(t, id)
		require.Equal(t, relaytype.StateDead, m.State, "message %d", id)
		require.Equal(t, relaytype.ClassProtocol, m.ErrorClass, "message %d: %s", id, m.LastError)
	}
	require.Contains(t, b.message(t, twice).LastError, "FLID appears twice")

	// No half package: neither the good records of a rejected package nor the
	// change to a known flight were written, nor any event for them.
	require.Empty(t, b.flights(t, "X1", "X2", "X3"))
	require.Zero(t, b.count(t, "SELECT count(*) FROM relay_outbox WHERE key = ANY($1)", []string{"X1", "X2", "X3"}))
	p := b.flights(t, "P1", "P2")
	require.Len(t, p, 2)
	require.Equal(t, int64(1), p["P1"].Version)
	require.Equal(t, "20261201", p["P1"].OperationDay)
	require.Equal(t, good, p["P1"].LastMsgID)

	require.Equal(t, []snapRow{{Kind: "SCHD-DNLD", Identity: "AODB|SCHD|DNLD|3001", Outcome: "SUCCEEDED",
		Records: 2, Applied: 2, ScopeStart: ptr("20261201"), ScopeEnd: ptr("20261202")}}, b.snapLog(t, good))
	require.Equal(t,
		b.xmin(t, "SELECT xmin::text FROM flight_schd WHERE flid = 'P1'"),
		b.xmin(t, "SELECT xmin::text FROM schd_snap_log WHERE msg_id = $1", good),
		"the SUCCEEDED trace commits with the package")
	for _, c := range []struct {
		id      int64
		records int
		outcome string
	}{{twice, 3, "DEAD(PROTOCOL): FLID appears twice in the package"}, {moved, 2, "DEAD(PROTOCOL): "}} {
		log := b.snapLog(t, c.id)
		require.Len(t, log, 1, "one trace of the rejected package %d", c.id)
		require.Equal(t, "SCHD-DNLD", log[0].Kind)
		require.Equal(t, c.records, log[0].Records)
		require.Zero(t, log[0].Applied)
		require.Contains(t, log[0].Outcome, c.outcome)
		require.Regexp(t, `^DEAD\(PROTOCOL\)`, log[0].Outcome)
	}

	// The rejected packages are dead, not retried: nothing else is pending.
	stats, err := b.store.GetExecutor().MessageStats(b.ctx, b.cfg.Pipeline)
	require.NoError(t, err)
	require.Zero(t, stats.Backlog())
}
