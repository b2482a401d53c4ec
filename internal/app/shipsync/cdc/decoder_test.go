package cdc_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// t0 is source.ts_ms of the insert fixture: 2026-12-01T06:41:00.500Z.
var t0 = time.UnixMilli(1796107260500).UTC()

func TestDecodeInsertWithSchema(t *testing.T) {
	t.Parallel()
	ev := decodeFixtures(t, cdc.Config{}, "schema/key.json", "schema/insert.json")
	require.Equal(t, cdc.OpCreate, ev.Op)
	require.Equal(t, "debezium-mysql/2", ev.Format)
	requireColumns(t, []*pb.ColumnValue{col("id", i64(1017))}, ev.Key)
	require.Nil(t, ev.Before)
	requireColumns(t, rowA(), ev.After.Columns)
	require.Nil(t, ev.Transaction)
	require.Equal(t, t0.Add(212*time.Millisecond), ev.ProcessedAt)
	require.Equal(t, cdc.Source{
		Version: "2.7.3.Final", Connector: "mysql", Name: "ship0042", Timestamp: t0,
		Snapshot: cdc.SnapshotFalse, DB: "ops", Table: "voyage_log", ServerID: 4201,
		GTID: "7c1de3f2-5b1a-11f0-9a43-0242ac130002:5812", File: "mysql-bin.000214",
		Pos: 15830, Row: 0, Thread: 88,
	}, ev.Source)
}

func TestDecodeUpdateWithTransactionMetadata(t *testing.T) {
	t.Parallel()
	ev := decodeFixtures(t, cdc.Config{}, "schema/key.json", "schema/update.json")
	require.Equal(t, cdc.OpUpdate, ev.Op)
	requireColumns(t, rowA(), ev.Before.Columns)
	requireColumns(t, rowB(), ev.After.Columns)
	require.Equal(t, &cdc.Transaction{ID: "7c1de3f2-5b1a-11f0-9a43-0242ac130002:5813", TotalOrder: 2, DataCollectionOrder: 1}, ev.Transaction)
	require.Equal(t, int64(16112), ev.Source.Pos)
}

// TestDecodeDeleteThenTombstone: the delete carries the old row; the null
// record after it decodes to a tombstone with the same key, whether the
// key has a schema or is typed by the caller's TypeMap (the table then
// comes from the topic name).
func TestDecodeDeleteThenTombstone(t *testing.T) {
	t.Parallel()
	d := newDecoder(t, cdc.Config{Types: voyageTypes()})
	key := fixture(t, "schema/key.json")
	ev, err := d.Decode(cdc.Message{Topic: topic, Key: key, Value: fixture(t, "schema/delete.json")})
	require.NoError(t, err)
	require.Equal(t, cdc.OpDelete, ev.Op)
	requireColumns(t, rowB(), ev.Before.Columns)
	require.Nil(t, ev.After)

	for _, tc := range []struct {
		name       string
		key, value []byte
	}{
		{"nil value", key, nil},
		{"json null", key, []byte("null")},
		{"converter null pair", key, []byte(`{"schema":null,"payload":null}`)},
		{"schema-less key", fixture(t, "schemaless/key_1017.json"), nil},
	} {
		ev, err := d.Decode(cdc.Message{Topic: topic, Key: tc.key, Value: tc.value})
		require.NoError(t, err, tc.name)
		require.Equal(t, cdc.OpTombstone, ev.Op, tc.name)
		requireColumns(t, []*pb.ColumnValue{col("id", i64(1017))}, ev.Key)
		require.Nil(t, ev.Before)
		require.Nil(t, ev.After)
	}
	_, err = d.Decode(cdc.Message{Topic: topic})
	requireKind(t, err, cdc.MissingKey, "key")
}

func TestDecodeSnapshotLastSchemaless(t *testing.T) {
	t.Parallel()
	ev := decodeFixtures(t, cdc.Config{Types: voyageTypes()}, "schemaless/key_1017.json", "schemaless/snapshot_last.json")
	require.Equal(t, cdc.OpRead, ev.Op)
	require.Equal(t, cdc.SnapshotLast, ev.Source.Snapshot)
	require.Empty(t, ev.Source.GTID)
	require.Nil(t, ev.Before)
	requireColumns(t, rowA(), ev.After.Columns)
	requireColumns(t, []*pb.ColumnValue{col("id", i64(1017))}, ev.Key)
}

// TestDecodeTruncate: a truncate has no key and no row images, so it needs
// neither a key nor a TypeMap.
func TestDecodeTruncate(t *testing.T) {
	t.Parallel()
	ev := decodeFixtures(t, cdc.Config{}, "", "schemaless/truncate.json")
	require.Equal(t, cdc.OpTruncate, ev.Op)
	require.Nil(t, ev.Key)
	require.Nil(t, ev.Before)
	require.Nil(t, ev.After)
	require.Equal(t, "voyage_log", ev.Source.Table)
}

// TestDecodePrimaryKeyChange: a key change arrives as a delete of the old
// key (header __debezium.newkey) and a create of the new one (header
// __debezium.oldkey); each decodes as what it is, headers passed through.
func TestDecodePrimaryKeyChange(t *testing.T) {
	t.Parallel()
	d := newDecoder(t, cdc.Config{Types: voyageTypes()})
	oldKey, newKey := fixture(t, "schemaless/key_1017.json"), fixture(t, "schemaless/key_1018.json")
	del, err := d.Decode(cdc.Message{Topic: topic, Key: oldKey, Value: fixture(t, "schemaless/pkchange_delete.json"),
		Headers: []cdc.Header{{Key: cdc.HeaderNewKey, Value: newKey}}})
	require.NoError(t, err)
	ins, err := d.Decode(cdc.Message{Topic: topic, Key: newKey, Value: fixture(t, "schemaless/pkchange_create.json"),
		Headers: []cdc.Header{{Key: cdc.HeaderOldKey, Value: oldKey}}})
	require.NoError(t, err)

	require.Equal(t, cdc.OpDelete, del.Op)
	requireColumns(t, []*pb.ColumnValue{col("id", i64(1017))}, del.Key)
	h, ok := del.Header(cdc.HeaderNewKey)
	require.True(t, ok)
	require.Equal(t, newKey, h)

	require.Equal(t, cdc.OpCreate, ins.Op)
	requireColumns(t, []*pb.ColumnValue{col("id", i64(1018))}, ins.Key)
	h, ok = ins.Header(cdc.HeaderOldKey)
	require.True(t, ok)
	require.Equal(t, oldKey, h)
	_, ok = ins.Header(cdc.HeaderNewKey)
	require.False(t, ok)
	require.Equal(t, del.Source.Pos, ins.Source.Pos)
}

// TestKeyOrder: key columns come in key order: the key schema's field
// order, or without a schema the JSON member order (not sorted, not map
// order).
func TestKeyOrder(t *testing.T) {
	t.Parallel()
	types := cdc.TypeMap{"ops.leg": {"voyage": {Type: "int64"}, "leg": {Type: "int16"}, "note": {Type: "string"}}}
	d := newDecoder(t, cdc.Config{Types: types})
	value := []byte(`{"op":"c","after":{"voyage":7,"leg":2,"note":"x"},"source":{"version":"3.1.0.Final","connector":"mysql","db":"ops","table":"leg"},"ts_ms":1}`)
	vl, lg := col("voyage", i64(7)), col("leg", i64(2))
	for _, tc := range []struct {
		key  string
		want []*pb.ColumnValue
	}{
		{`{"voyage":7,"leg":2}`, []*pb.ColumnValue{vl, lg}},
		{`{"leg":2,"voyage":7}`, []*pb.ColumnValue{lg, vl}},
		{`{"schema":{"type":"struct","fields":[{"field":"voyage","type":"int64"},{"field":"leg","type":"int16"}]},"payload":{"leg":2,"voyage":7}}`, []*pb.ColumnValue{vl, lg}},
	} {
		ev, err := d.Decode(cdc.Message{Topic: "p.ops.leg", Key: []byte(tc.key), Value: value})
		require.NoError(t, err, tc.key)
		requireColumns(t, tc.want, ev.Key)
		require.Equal(t, "debezium-mysql/3", ev.Format)
	}
}

func TestNewRefusesUnregisteredMajor(t *testing.T) {
	t.Parallel()
	_, err := cdc.New(cdc.Config{Majors: []int{2, 4}})
	require.ErrorContains(t, err, "Majors")
}
