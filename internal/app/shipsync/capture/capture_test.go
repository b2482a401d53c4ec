package capture_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/relaytype"
)

const (
	remoteRev   = "11111111-2222-3333-4444-555555555555"
	remoteEvent = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	remoteRev2  = "66666666-2222-3333-4444-555555555555"
	remoteEvt2  = "ffffffff-bbbb-cccc-dddd-eeeeeeeeeeee"
)

// meta is a row's platform columns as the database holds them.
type meta struct{ rev, origin, event string }

func (b *bundle) meta(id, leg int) meta {
	b.t.Helper()
	var m meta
	require.NoError(b.t, b.db.QueryRowContext(b.ctx, "SELECT _sync_revision, _sync_origin, COALESCE(_sync_event_id, '') "+
		"FROM voyage WHERE id = ? AND leg = ?", id, leg).Scan(&m.rev, &m.origin, &m.event))
	return m
}

func metaOf(img *pb.RowImage) meta {
	c := cols(img)
	return meta{rev: c["_sync_revision"].GetStringValue(), origin: c["_sync_origin"].GetStringValue(),
		event: c["_sync_event_id"].GetStringValue()}
}

// TestCaptureEndToEnd writes every kind of change to a table with one column
// of each mapped type and checks each record the ship client would read:
// decoded with the cdc decoder, ops, keys, images and the _sync_* rule.
func TestCaptureEndToEnd(t *testing.T) {
	b := setup(t)

	// 1. A local insert with every type.
	b.exec(`INSERT INTO voyage (id, leg, vessel, fuel, cargo, crew, speed, ratio, departed, logged_on, logged_at,
		updated, watch, built, photo, code, meta, status, active, flags, note) VALUES (1, 1, 'MV Tern', -1234.5678,
		9000000000, 200, 13.75, 1.5, '2026-12-01 07:02:13.123456', '2026-11-30', '2026-12-01 08:00:00',
		'2026-12-01 07:02:13.250', '-12:30:15.000250', 2011, x'00ff10', x'01020304', '{"crew":14}', 'sea', 1,
		b'1000000001', 'fog')`)
	ins1 := b.meta(1, 1)
	// 2. A local insert with every nullable column NULL.
	b.exec("INSERT INTO voyage (id, leg, vessel) VALUES (2, 1, 'MV Skua')")
	// 3. A local update.
	b.exec("UPDATE voyage SET note = 'clear', fuel = -0.0001 WHERE id = 1")
	upd1 := b.meta(1, 1)
	// 4. A primary-key change.
	b.exec("UPDATE voyage SET id = 3 WHERE id = 2")
	// 5. A remote insert (the platform applying a change from elsewhere).
	b.exec("INSERT INTO voyage (id, leg, vessel, _sync_revision, _sync_origin, _sync_event_id, _sync_updated_at) "+
		"VALUES (4, 1, 'MV Auk', ?, 'shore', ?, '2026-11-01 00:00:00.000001')", remoteRev, remoteEvent)
	// 6. A remote update of row 1, then a local one that touches no platform column.
	b.exec("UPDATE voyage SET note = 'remote', _sync_revision = ?, _sync_origin = 'shore', _sync_event_id = ?, "+
		"_sync_updated_at = '2026-11-02 00:00:00' WHERE id = 1", remoteRev2, remoteEvt2)
	b.exec("UPDATE voyage SET note = 'local again' WHERE id = 1")
	final1 := b.meta(1, 1)
	// 7. An update that changes nothing: no change event (as in the binlog).
	b.exec("UPDATE voyage SET note = note WHERE id = 4")
	// 8. A rolled-back insert leaves a hole in the changelog ids.
	tx, err := b.db.BeginTx(b.ctx, nil)
	require.NoError(t, err)
	_, err = tx.ExecContext(b.ctx, "INSERT INTO voyage (id, leg, vessel) VALUES (9, 1, 'ghost')")
	require.NoError(t, err)
	require.NoError(t, tx.Rollback())
	// 9. A delete, and a last insert after the hole.
	b.exec("DELETE FROM voyage WHERE id = 3")
	b.exec("INSERT INTO voyage (id, leg, vessel, note) VALUES (5, 1, 'MV Eider', 'Case')")
	b.exec("UPDATE voyage SET note = 'case' WHERE id = 5") // a case-only change is a change

	b.drain()
	byKey := b.read()

	// The metadata rule, in the database.
	require.Len(t, ins1.rev, 36)
	require.Equal(t, node, ins1.origin)
	require.Empty(t, ins1.event)
	require.NotEqual(t, ins1.rev, upd1.rev, "a local update gets a fresh revision")
	require.Equal(t, meta{remoteRev, "shore", remoteEvent}, b.meta(4, 1), "a remote insert keeps its metadata")
	require.NotEqual(t, remoteRev2, final1.rev)
	require.Equal(t, node, final1.origin)
	require.Empty(t, final1.event, "a local write clears the event id")

	// Row (1,1): create, local update, remote update, local update.
	r1 := byKey["id=1/leg=1"]
	require.Equal(t, []string{"c", "u", "u", "u"}, ops(r1))
	c := cols(r1[0].ev.After)
	require.Nil(t, r1[0].ev.Before)
	require.Equal(t, int64(1), c["id"].GetIntValue())
	require.Equal(t, int64(1), c["leg"].GetIntValue())
	require.Equal(t, "MV Tern", c["vessel"].GetStringValue())
	require.Equal(t, "-1234.5678", c["fuel"].GetDecimalValue())
	require.Equal(t, int64(9000000000), c["cargo"].GetIntValue())
	require.Equal(t, int64(200), c["crew"].GetIntValue())
	require.Equal(t, 13.75, c["speed"].GetDoubleValue())
	require.Equal(t, 1.5, c["ratio"].GetDoubleValue())
	require.Equal(t, time.Date(2026, 12, 1, 7, 2, 13, 123456000, time.UTC), c["departed"].GetTimestampValue().AsTime())
	require.Equal(t, "2026-11-30", c["logged_on"].GetDateValue())
	require.Equal(t, time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), c["logged_at"].GetTimestampValue().AsTime())
	require.Equal(t, time.Date(2026, 12, 1, 7, 2, 13, 250000000, time.UTC), c["updated"].GetTimestampValue().AsTime())
	require.Equal(t, "-12:30:15.000250", c["watch"].GetTimeValue())
	require.Equal(t, int64(2011), c["built"].GetIntValue())
	require.Equal(t, []byte{0x00, 0xff, 0x10}, c["photo"].GetBytesValue())
	require.Equal(t, []byte{1, 2, 3, 4}, c["code"].GetBytesValue())
	require.JSONEq(t, `{"crew":14}`, c["meta"].GetJsonValue())
	require.Equal(t, "sea", c["status"].GetStringValue())
	require.True(t, c["active"].GetBoolValue())
	require.Equal(t, []byte{0x01, 0x02}, c["flags"].GetBytesValue(), "BIT(10) 513, little-endian")
	require.Equal(t, "fog", c["note"].GetStringValue())
	require.Equal(t, ins1, metaOf(r1[0].ev.After))
	require.True(t, c["_sync_event_id"].GetNull())

	u := r1[1].ev
	require.Equal(t, "fog", cols(u.Before)["note"].GetStringValue())
	require.Equal(t, "clear", cols(u.After)["note"].GetStringValue())
	require.Equal(t, "-0.0001", cols(u.After)["fuel"].GetDecimalValue())
	require.Equal(t, ins1, metaOf(u.Before))
	require.Equal(t, upd1, metaOf(u.After))
	require.Equal(t, meta{remoteRev2, "shore", remoteEvt2}, metaOf(r1[2].ev.After), "a remote update keeps its metadata")
	require.Equal(t, time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), cols(r1[2].ev.After)["_sync_updated_at"].GetTimestampValue().AsTime())
	require.Equal(t, final1, metaOf(r1[3].ev.After))

	// Source block: Debezium's, with the changelog id as position.
	src := r1[0].ev.Source
	require.Equal(t, capture.ConnectorVersion, src.Version)
	require.Equal(t, "mysql", src.Connector)
	require.Equal(t, logical, src.Name)
	require.Equal(t, b.dbName, src.DB)
	require.Equal(t, "voyage", src.Table)
	require.Equal(t, capture.SourceFile, src.File)
	require.Equal(t, cdc.SnapshotFalse, src.Snapshot)
	require.Positive(t, src.Pos)
	require.Less(t, src.Pos, r1[1].ev.Source.Pos)
	var changedAt string
	require.NoError(t, b.db.QueryRowContext(b.ctx, "SELECT DATE_FORMAT(changed_at, '%Y-%m-%d %H:%i:%s.%f') "+
		"FROM _sync_changelog WHERE id = ?", src.Pos).Scan(&changedAt))
	want, err := time.Parse("2006-01-02 15:04:05.000000", changedAt)
	require.NoError(t, err)
	require.Equal(t, want, src.Timestamp, "the change time, to the microsecond (source.ts_ns)")
	require.Equal(t, t0, r1[0].ev.ProcessedAt, "processed on the capture's clock, before any advance")

	// Row (2,1): all NULLs, then its key changed to (3,1): delete with the
	// new key, tombstone, create with the old key — then (3,1) deleted.
	r2 := byKey["id=2/leg=1"]
	require.Equal(t, []string{"c", "d", "tombstone"}, ops(r2))
	for name, v := range cols(r2[0].ev.After) {
		switch name {
		case "id", "leg", "vessel", "_sync_revision", "_sync_origin", "_sync_updated_at":
			require.False(t, v.GetNull(), name)
		default:
			require.True(t, v.GetNull(), "column %s", name)
		}
	}
	r3 := byKey["id=3/leg=1"]
	require.Equal(t, []string{"c", "d", "tombstone"}, ops(r3))
	require.Equal(t, r3[0].key, r2[1].headers[cdc.HeaderNewKey])
	require.Equal(t, r2[1].key, r3[0].headers[cdc.HeaderOldKey])
	require.Nil(t, r3[0].ev.Before)
	require.Equal(t, "MV Skua", cols(r3[0].ev.After)["vessel"].GetStringValue())
	require.Equal(t, int64(2), cols(r2[1].ev.Before)["id"].GetIntValue())
	require.Equal(t, r2[1].ev.Source.Pos, r3[0].ev.Source.Pos, "one changelog row, split")
	require.Equal(t, "MV Skua", cols(r3[1].ev.Before)["vessel"].GetStringValue())
	require.Nil(t, r3[1].ev.After)

	// Row (4,1): the remote insert only; the no-op update made nothing.
	r4 := byKey["id=4/leg=1"]
	require.Equal(t, []string{"c"}, ops(r4))
	require.Equal(t, meta{remoteRev, "shore", remoteEvent}, metaOf(r4[0].ev.After))

	// Row (5,1): after the hole; the case-only change is captured.
	r5 := byKey["id=5/leg=1"]
	require.Equal(t, []string{"c", "u"}, ops(r5))
	require.Equal(t, "case", cols(r5[1].ev.After)["note"].GetStringValue())
	require.Len(t, byKey, 5)

	st, err := b.cap.Intake().Stats(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.PermanentHoles, "the rolled-back id")
	require.Equal(t, int64(10), b.messageStates()[relaytype.StateSucceeded])

	// Prune leaves nothing already in the local store.
	n, err := b.cap.Prune(b.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(10), n)
	var left int
	require.NoError(t, b.db.QueryRowContext(b.ctx, "SELECT COUNT(*) FROM _sync_changelog").Scan(&left))
	require.Zero(t, left)
}

// TestUnconvertibleRowIsDead: a changelog row the producer cannot convert
// is DEAD(MALFORMED) with a reason naming no value; the rows after it are
// delivered.
func TestUnconvertibleRowIsDead(t *testing.T) {
	b := setup(t)
	b.exec("INSERT INTO voyage (id, leg, vessel) VALUES (1, 1, 'a')")
	// A row of a table that was never installed, and one whose image lacks
	// columns (a table altered without re-running install).
	b.exec("INSERT INTO _sync_changelog (db_name, table_name, schema_id, op, key_json, after_json, changed_at) " +
		"VALUES (DATABASE(), 'other', 999, 'c', '{}', '{\"secret\": \"s3cr3t\"}', UTC_TIMESTAMP(6))")
	b.exec("INSERT INTO _sync_changelog (db_name, table_name, schema_id, op, key_json, after_json, changed_at) " +
		"SELECT DATABASE(), 'voyage', schema_id, 'c', '{}', '{\"id\": 7, \"secret\": \"s3cr3t\"}', UTC_TIMESTAMP(6) " +
		"FROM _sync_capture_table WHERE table_name = 'voyage'")
	b.exec("INSERT INTO voyage (id, leg, vessel) VALUES (2, 1, 'b')")
	b.drain()

	require.Equal(t, int64(2), b.messageStates()[relaytype.StateDead])
	require.Equal(t, int64(2), b.messageStates()[relaytype.StateSucceeded])
	byKey := b.read()
	require.Len(t, byKey, 2)
	for _, id := range []int64{2, 3} {
		m, err := b.store.GetExecutor().MessageGet(b.ctx, capture.QueueDefault, id)
		require.NoError(t, err)
		require.Equal(t, relaytype.ClassMalformed, m.ErrorClass)
		require.NotContains(t, m.LastError, "s3cr3t")
		require.Contains(t, m.LastError, "capture:")
	}
}

// TestAlterAndReinstall: rows written before an ALTER TABLE are typed by
// the schema their trigger was made for, rows after the re-install by the
// new one — even when both are still queued when the capture reads them.
func TestAlterAndReinstall(t *testing.T) {
	b := setup(t)
	b.exec("INSERT INTO voyage (id, leg, vessel) VALUES (1, 1, 'before')")
	b.exec("ALTER TABLE voyage ADD COLUMN draft DECIMAL(5,2) NULL AFTER vessel")
	b.exec("INSERT INTO voyage (id, leg, vessel, draft) VALUES (2, 1, 'between', 9.5)") // old triggers
	_, err := capture.Install(b.ctx, b.db, capture.InstallConfig{NodeID: node, Tables: []string{"voyage"}})
	require.NoError(t, err)
	b.exec("INSERT INTO voyage (id, leg, vessel, draft) VALUES (3, 1, 'after', 10.25)")
	again, err := capture.Install(b.ctx, b.db, capture.InstallConfig{NodeID: node, Tables: []string{"voyage"}})
	require.NoError(t, err)
	b.drain()

	byKey := b.read()
	_, has := cols(byKey["id=1/leg=1"][0].ev.After)["draft"]
	require.False(t, has, "written by the first triggers")
	_, has = cols(byKey["id=2/leg=1"][0].ev.After)["draft"]
	require.False(t, has, "the old triggers do not know the new column until install runs again")
	require.Equal(t, "10.25", cols(byKey["id=3/leg=1"][0].ev.After)["draft"].GetDecimalValue())
	require.Zero(t, b.messageStates()[relaytype.StateDead])

	var schemas int
	require.NoError(t, b.db.QueryRowContext(b.ctx, "SELECT COUNT(*) FROM _sync_capture_schema").Scan(&schemas))
	require.Equal(t, 2, schemas, "an unchanged re-install reuses its schema")
	require.Equal(t, int64(2), again[0].SchemaID)
}

// TestReinstallIsIdempotent: install twice, then uninstall: triggers gone,
// changelog kept.
func TestReinstallIsIdempotent(t *testing.T) {
	b := setup(t)
	_, err := capture.Install(b.ctx, b.db, capture.InstallConfig{NodeID: "ship-8", Tables: []string{"voyage"}})
	require.NoError(t, err)
	b.exec("INSERT INTO voyage (id, leg, vessel) VALUES (1, 1, 'a')")
	require.Equal(t, "ship-8", b.meta(1, 1).origin, "the re-install replaced the triggers")
	var n int
	require.NoError(t, b.db.QueryRowContext(b.ctx, "SELECT COUNT(*) FROM _sync_changelog").Scan(&n))
	require.Equal(t, 1, n)

	tables, err := capture.Uninstall(b.ctx, b.db, capture.UninstallConfig{})
	require.NoError(t, err)
	require.Equal(t, []string{"voyage"}, tables)
	require.NoError(t, b.db.QueryRowContext(b.ctx, "SELECT COUNT(*) FROM information_schema.TRIGGERS "+
		"WHERE TRIGGER_SCHEMA = DATABASE()").Scan(&n))
	require.Zero(t, n)
	require.NoError(t, b.db.QueryRowContext(b.ctx, "SELECT COUNT(*) FROM _sync_changelog").Scan(&n))
	require.Equal(t, 1, n, "the changelog is kept")
	_, err = capture.Uninstall(b.ctx, b.db, capture.UninstallConfig{DropChangelog: true})
	require.NoError(t, err)
	err = b.db.QueryRowContext(b.ctx, "SELECT COUNT(*) FROM _sync_changelog").Scan(&n)
	require.Error(t, err)
}

// TestLateCommitKeepsOrder: a business transaction that took a smaller
// changelog id commits after later ones; the intake's watermark waits for
// it (within the max commit delay), so records come out in changelog-id
// order and nothing past the hole is produced early.
func TestLateCommitKeepsOrder(t *testing.T) {
	b := setup(t)
	held := b.hold("INSERT INTO voyage (id, leg, vessel) VALUES (1, 1, 'first')")
	b.exec("INSERT INTO voyage (id, leg, vessel) VALUES (2, 1, 'second')")
	b.exec("INSERT INTO voyage (id, leg, vessel) VALUES (3, 1, 'third')")

	for range 3 {
		_, err := b.cap.Step(b.ctx)
		require.NoError(t, err)
	}
	require.Zero(t, b.messageStates()[relaytype.StateSucceeded], "nothing past the open transaction's id")
	b.clock.Advance(30 * time.Second) // within the one-minute max commit delay
	require.NoError(t, held.Commit())
	b.drain()

	byKey := b.read()
	var pos []int64
	for _, k := range []string{"id=1/leg=1", "id=2/leg=1", "id=3/leg=1"} {
		require.Len(t, byKey[k], 1, k)
		pos = append(pos, byKey[k][0].ev.Source.Pos)
	}
	require.Equal(t, []int64{1, 2, 3}, pos)
	st, err := b.cap.Intake().Stats(b.ctx)
	require.NoError(t, err)
	require.Zero(t, st.PermanentHoles)
}

// TestRestartAndPruneKeepsLateRow: a capture restarted on its state file
// carries on from its watermark (every change once); prune never deletes
// a row at a permanent-hole id, so a late row stays for the late check.
func TestRestartAndPruneKeepsLateRow(t *testing.T) {
	b := setup(t)
	b.exec("INSERT INTO voyage (id, leg, vessel) VALUES (1, 1, 'a')")
	b.exec("INSERT INTO voyage (id, leg, vessel) VALUES (2, 1, 'b')")
	_, err := b.cap.Step(b.ctx) // enqueued, processed, sent
	require.NoError(t, err)

	// A transaction holds id 3 past the max commit delay.
	held := b.hold("INSERT INTO voyage (id, leg, vessel) VALUES (3, 1, 'late')")
	b.exec("INSERT INTO voyage (id, leg, vessel) VALUES (4, 1, 'd')")
	_, err = b.cap.Intake().RunOnce(b.ctx) // sees the hole at 3
	require.NoError(t, err)

	b.cap = b.newCapture() // restart on the same state
	b.clock.Advance(2 * time.Minute)
	b.drain() // releases 3 as a permanent hole, delivers 4
	require.NoError(t, held.Commit())

	byKey := b.read()
	for _, k := range []string{"id=1/leg=1", "id=2/leg=1", "id=4/leg=1"} {
		require.Equal(t, []string{"c"}, ops(byKey[k]), k)
	}
	require.Empty(t, byKey["id=3/leg=1"], "the late row waits for an operator (relay admin late-ingest)")

	n, err := b.cap.Prune(b.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	var left []int64
	rows, err := b.db.QueryContext(b.ctx, "SELECT id FROM _sync_changelog")
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		left = append(left, id)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int64{3}, left, "the late row at the hole id is kept")
}

// TestKafkaOutageIsRetried: Kafka refusing records for longer than the
// engine's default attempt limit does not give a change up: every record
// arrives, in order, once Kafka takes them again.
func TestKafkaOutageIsRetried(t *testing.T) {
	b := setup(t)
	b.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.InvalidRecord, Count: 15})
	b.exec("INSERT INTO voyage (id, leg, vessel) VALUES (1, 1, 'v0')")
	for i := 1; i <= 3; i++ {
		b.exec("UPDATE voyage SET vessel = ? WHERE id = 1", "v"+strconv.Itoa(i))
	}
	b.drain()
	var recs []record
	for range 100 {
		_, err := b.cap.Step(b.ctx)
		require.NoError(t, err)
		if b.recordCount() == 4 {
			recs = b.read()["id=1/leg=1"]
			break
		}
		b.clock.Advance(time.Minute) // the dispatcher's backoff
	}
	require.Equal(t, []string{"c", "u", "u", "u"}, ops(recs))
	for i, r := range recs {
		require.Equal(t, "v"+strconv.Itoa(i), cols(r.ev.After)["vessel"].GetStringValue())
	}
}

// TestRolledBackHoleReleasedByProbe: a rolled-back change leaves a hole in
// the changelog ids; the hole probe releases it once no transaction that
// was open when it was seen is still open — on the capture's clock no time
// passes — and the change after it is produced. (Rounds are 0.25 s apart:
// the server refreshes INNODB_TRX only after 0.1 s without a read.)
func TestRolledBackHoleReleasedByProbe(t *testing.T) {
	b := setup(t)
	b.exec("INSERT INTO voyage (id, leg, vessel) VALUES (1, 1, 'a')")
	held := b.hold("INSERT INTO voyage (id, leg, vessel) VALUES (2, 1, 'ghost')")
	b.exec("INSERT INTO voyage (id, leg, vessel) VALUES (3, 1, 'c')")
	for range 3 {
		_, err := b.cap.Step(b.ctx)
		require.NoError(t, err)
	}
	st, err := b.cap.Intake().Stats(b.ctx)
	require.NoError(t, err)
	require.Zero(t, st.PermanentHoles, "an open transaction's hole is never released by the probe")
	require.NoError(t, held.Rollback())

	start := b.clock.Now()
	require.Eventually(t, func() bool {
		_, err := b.cap.Step(b.ctx)
		require.NoError(t, err)
		return len(b.read()["id=3/leg=1"]) == 1
	}, 60*time.Second, 250*time.Millisecond, "the change after the hole is produced")
	require.Equal(t, start, b.clock.Now())
	byKey := b.read()
	require.Equal(t, []string{"c"}, ops(byKey["id=1/leg=1"]))
	require.Empty(t, byKey["id=2/leg=1"])
	st, err = b.cap.Intake().Stats(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.PermanentHoles)
}
