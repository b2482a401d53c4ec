package msgx_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx"
	"github.com/relayhq/relay/internal/app/msgx/flight"
	"github.com/relayhq/relay/internal/app/msgx/flightstore"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaytype"
)

// latestRow is the KAFKA:schd row of a FLID in relay_latest.
type latestRow struct {
	EventType string
	Version   int64
	Payload   []byte
}

func (b *bundle) latest(t *testing.T, flid string) latestRow {
	t.Helper()
	var r latestRow
	require.NoError(t, b.store.Pool().QueryRow(b.ctx,
		"SELECT event_type, version, payload FROM relay_latest WHERE target = $1 AND key = $2", msgx.TargetSchd, flid).
		Scan(&r.EventType, &r.Version, &r.Payload))
	return r
}

// lifecycleEvents returns the event ids of the lifecycle's KAFKA:msg notices.
func (b *bundle) lifecycleEvents(t *testing.T) []string {
	t.Helper()
	rows, err := b.store.Pool().Query(b.ctx, "SELECT event_id FROM relay_outbox WHERE event_id LIKE 'lifecycle#%' ORDER BY event_id")
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestLifecycle runs Lifecycle.Pass on a fake clock over flights the Service
// wrote (seed 000 §9.3, §12.5, D1): flights of old operating days, quiet for
// msgx.lifecycle.flight-quiet, are archived into FLIGHT_SCHD_HST and deleted
// with their details; one never FDEL'd gets a KAFKA:msg DELETE notice and a
// KAFKA:schd tombstone in the same transaction, one already DELETED gets none;
// master and shared flights leave only together (a master with a child that
// is not a candidate waits, and so do its candidate children); a failing
// history write deletes nothing and emits nothing; a flight without an
// operating day leaves once created flight-keep-days ago; SCHD_SNAP_LOG, closed
// requests and the flight history are purged by their retentions.
func TestLifecycle(t *testing.T) {
	b := setup(t)
	b.cfg.CutoverWatermark = "zero"
	now := time.Now().UTC().Truncate(time.Second)
	old := time.Date(2026, 3, 1, 9, 30, 0, 0, time.UTC) // long past flight-keep-days
	future := sisWall(b.cfg, now.AddDate(0, 0, 40))
	futureDay := b.cfg.Flight.OperationDay(future)
	dttm := sisWall(b.cfg, now)

	_, stop := b.start(t)
	ids := []int64{
		b.put(t, schd("DNLD", "6001", dttm, "", plan("M2", "CA2", future), plan("F1", "CA9", future))),
		b.put(t, schd("DNLD", "6002", dttm, "",
			plan("A1", "CA1", old), plan("A2", "CA3", old),
			plan("M1", "CA4", old), shared("S2", "MU2", old, "M2"),
			plan("M3", "CA5", old), shared("C3", "MU3", old, "M3"),
			plan("M4", "CA6", old), shared("S4a", "MU4", old, "M4"))),
		b.put(t, schd("DNLD", "6003", dttm, "", shared("C1", "MU1", future, "M1"), shared("S4b", "MU5", future, "M4"))),
		b.put(t, fdel("6004", dttm, "A2")),
		b.put(t, flopBase("6005", dttm, "U1", "CA7")), // creates U1 without SODT: no OPERATION_DAY
	}
	for _, id := range ids {
		m := b.terminal(t, id)
		require.Equal(t, relaytype.StateSucceeded, m.State, "message %d: %s", id, m.LastError)
	}
	stop() // the dispatchers leave the outbox alone from here on

	// A1 has details: they must go with it.
	_, err := b.store.Pool().Exec(b.ctx, "INSERT INTO flight_gate (flid, ordinal, code) VALUES ('A1', 1, 'B12')")
	require.NoError(t, err)
	all := []string{"A1", "A2", "M1", "C1", "M2", "S2", "M3", "C3", "M4", "S4a", "S4b", "F1", "U1"}
	before := b.flights(t, all...)
	require.Len(t, before, len(all))
	require.Equal(t, flight.Deleted, before["A2"].Status)
	require.Empty(t, before["U1"].OperationDay)

	// Retention material: a closed request 40 days old, a fresh closed one,
	// and two open ones; an old trace about an old day, one about a day to come.
	reqClock := relayclock.NewFake(now.AddDate(0, 0, -40))
	rq := msgx.NewRequester(b.cfg, b.store.Pool(), b.mailbox, reqClock, quiet())
	oldClosed, err := rq.Register(b.ctx, msgx.RequestRefd, "AIRLINE")
	require.NoError(t, err)
	oldOpen, err := rq.Register(b.ctx, msgx.RequestRefd, "AIRLINE")
	require.NoError(t, err)
	reqClock.Set(now)
	newClosed, err := rq.Register(b.ctx, msgx.RequestRefd, "GATE")
	require.NoError(t, err)
	newOpen, err := rq.Register(b.ctx, msgx.RequestRefd, "GATE")
	require.NoError(t, err)
	for _, e := range []*flightstore.SnapLogEntry{
		{MsgID: 9001, Kind: "SCHD-DNLD", Records: 1, Outcome: "SUCCEEDED", ScopeStart: "20260301", ScopeEnd: "20260301",
			RecvAt: now.AddDate(0, 0, -60)},
		{MsgID: 9002, Kind: "SCHD-DNLD", Records: 1, Outcome: "SUCCEEDED", ScopeStart: "20260301", ScopeEnd: futureDay,
			RecvAt: now.AddDate(0, 0, -60)},
	} {
		require.NoError(t, flightstore.AppendSnapLog(b.ctx, b.store.Pool(), e))
	}

	clock := relayclock.NewFake(now.Add(b.cfg.FlightQuiet + 24*time.Hour))
	lc := msgx.NewLifecycle(b.cfg, b.store, b.store.Pool(), clock, quiet())

	// D1: when the history write fails, nothing is deleted and nothing emitted.
	_, err = b.store.Pool().Exec(b.ctx, "ALTER TABLE flight_schd_hst ADD CONSTRAINT test_refuse CHECK (flid <> 'M3')")
	require.NoError(t, err)
	_, err = lc.Pass(b.ctx)
	require.ErrorContains(t, err, "test_refuse")
	require.Len(t, b.flights(t, all...), len(all))
	require.Zero(t, b.count(t, "SELECT count(*) FROM flight_schd_hst"))
	require.Empty(t, b.lifecycleEvents(t))
	a1 := b.latest(t, "A1")
	require.Equal(t, "UPSERT", a1.EventType)
	require.Equal(t, before["A1"].Version, a1.Version)
	_, err = b.store.Pool().Exec(b.ctx, "ALTER TABLE flight_schd_hst DROP CONSTRAINT test_refuse")
	require.NoError(t, err)

	res, err := lc.Pass(b.ctx)
	require.NoError(t, err)
	require.Equal(t, msgx.LifecycleResult{Archived: 4, Tombstoned: 3, SnapLogPurged: 1, RequestsPurged: 1}, res)

	left := b.flights(t, all...)
	for _, flid := range []string{"A1", "A2", "M3", "C3"} {
		require.NotContains(t, left, flid, "%s is archived and deleted", flid)
	}
	// M1 waits for its child C1 (not a candidate); S2 for its master M2; M4 for
	// S4b, so S4a — a candidate — waits with M4 (its leaving alone would change
	// M4's MAFL without a new M4 version, seed 000 §11.4).
	// U1 has no operating day and was created less than flight-keep-days ago.
	for _, flid := range []string{"M1", "C1", "M2", "S2", "M4", "S4a", "S4b", "F1", "U1"} {
		require.Contains(t, left, flid)
		require.Equal(t, before[flid].Version, left[flid].Version, flid)
	}
	require.Zero(t, b.count(t, "SELECT count(*) FROM flight_gate WHERE flid = 'A1'"), "details deleted with the flight")

	// The history rows: the full state as it was, archived now.
	type hst struct {
		State   string
		Version int64
		Day     string
		At      time.Time
		Doc     []byte
	}
	for _, flid := range []string{"A1", "A2", "M3", "C3"} {
		var h hst
		require.NoError(t, b.store.Pool().QueryRow(b.ctx,
			"SELECT state, state_version, operation_day, archived_at, doc::text FROM flight_schd_hst WHERE flid = $1", flid).
			Scan(&h.State, &h.Version, &h.Day, &h.At, &h.Doc))
		require.Equal(t, string(before[flid].Status), h.State, flid)
		require.Equal(t, before[flid].Version, h.Version, flid)
		require.Equal(t, "20260301", h.Day)
		require.True(t, h.At.Equal(clock.Now()), flid)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(h.Doc, &doc))
		require.Equal(t, flid, doc["FLID"])
		switch flid {
		case "A1":
			require.Len(t, doc["GATE"], 1, "the document holds the details: %s", h.Doc)
		case "M3":
			require.Equal(t, []any{map[string]any{"FLID": "C3", "FLNO": "MU3"}}, doc["MAFL"], "the master's MAFL as it left: %s", h.Doc)
		}
	}

	// Deletion events: a never-FDEL'd flight gets both, in the archiving
	// transaction; the FDEL'd A2 keeps the tombstone FDEL sent.
	event := func(flid string) string {
		return fmt.Sprintf("lifecycle#%s#%d", flid, before[flid].Version+1)
	}
	require.Equal(t, []string{event("A1"), event("C3"), event("M3")}, b.lifecycleEvents(t))
	for _, flid := range []string{"A1", "M3", "C3"} {
		v := before[flid].Version + 1
		require.Equal(t, latestRow{EventType: "TOMBSTONE", Version: v}, b.latest(t, flid), flid)
		var payload []byte
		var target, key string
		require.NoError(t, b.store.Pool().QueryRow(b.ctx, "SELECT target, key, payload FROM relay_outbox WHERE event_id = $1",
			event(flid)).Scan(&target, &key, &payload))
		require.Equal(t, msgx.TargetMsg, target)
		require.Equal(t, flid, key)
		var notice map[string]any
		require.NoError(t, json.Unmarshal(payload, &notice))
		require.Equal(t, "DELETE", notice["ACTION"])
		require.Equal(t, "LIFECYCLE", notice["CAUSE"])
		require.EqualValues(t, v, notice["STATE_VERSION"])
		x := b.xmin(t, "SELECT xmin::text FROM flight_schd_hst WHERE flid = $1", flid)
		require.Equal(t, x, b.xmin(t, "SELECT xmin::text FROM relay_outbox WHERE event_id = $1", event(flid)))
		require.Equal(t, x, b.xmin(t, "SELECT xmin::text FROM relay_latest WHERE target = $1 AND key = $2", msgx.TargetSchd, flid),
			"archive, notice and tombstone commit together")
	}
	require.Equal(t, latestRow{EventType: "TOMBSTONE", Version: before["A2"].Version}, b.latest(t, "A2"))
	require.Zero(t, b.count(t, "SELECT count(*) FROM relay_outbox WHERE event_id LIKE 'lifecycle#A2#%'"))

	// Retention: the 40-day-old closed request went; fresh and open ones stay.
	for id, kept := range map[int64]bool{oldClosed.ID: false, oldOpen.ID: true, newClosed.ID: true, newOpen.ID: true} {
		_, ok := b.request(t, id)
		require.Equal(t, kept, ok, "request %d", id)
	}
	require.Zero(t, b.count(t, "SELECT count(*) FROM schd_snap_log WHERE msg_id = 9001"))
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM schd_snap_log WHERE msg_id = 9002"),
		"a trace about a day not over yet is kept")

	// Half a year later: the rest leave (families together), the first
	// archive is purged by msgx.lifecycle.history-retention, and the traces
	// and the closed request too.
	clock.Advance(b.cfg.HistoryRetention + time.Hour)
	res, err = lc.Pass(b.ctx)
	require.NoError(t, err)
	require.Equal(t, msgx.LifecycleResult{Archived: 9, Tombstoned: 9, SnapLogPurged: 4, RequestsPurged: 1, HistoryPurged: 4}, res)
	require.Empty(t, b.flights(t, all...))
	require.Equal(t, 9, b.count(t, "SELECT count(*) FROM flight_schd_hst"))
	require.Equal(t, latestRow{EventType: "TOMBSTONE", Version: before["U1"].Version + 1}, b.latest(t, "U1"),
		"a flight without an operating day leaves once created flight-keep-days ago")
	require.Zero(t, b.count(t, "SELECT count(*) FROM flight_schd_hst WHERE flid = ANY($1)", []string{"A1", "A2", "M3", "C3"}))
	require.Zero(t, b.count(t, "SELECT count(*) FROM schd_snap_log"))
	for id, kept := range map[int64]bool{oldOpen.ID: true, newClosed.ID: false, newOpen.ID: true} {
		_, ok := b.request(t, id)
		require.Equal(t, kept, ok, "request %d: only closed requests are purged", id)
	}

	// Nothing is left to do.
	res, err = lc.Pass(b.ctx)
	require.NoError(t, err)
	require.Zero(t, res)
}
