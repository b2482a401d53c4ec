package normalize_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// run normalises r with n at src and checks every emitted event.
func run(t testing.TB, n *normalize.Normalizer, r rec) normalize.Outcome {
	t.Helper()
	o, err := n.Normalize(context.Background(), src, r.decode(t), now)
	require.NoError(t, err)
	if o.Disposition == normalize.Emit {
		requireValid(t, o)
		require.Equal(t, proto.Size(o.Event), o.RawBytes)
	} else {
		require.Nil(t, o.Event)
		require.NotEmpty(t, o.Reason)
	}
	// Details never carry a row value (the test rows' values, revisions,
	// event ids and origins).
	require.LessOrEqual(t, len(o.Detail), 200)
	for _, v := range []string{"Northern", "s3cr3t", "ACTIVE", "DOCKED", "1017", rev1[:8], cmdIns[:8], otherNode} {
		require.NotContains(t, o.Detail, v)
	}
	return o
}

func TestDispositions(t *testing.T) {
	t.Parallel()
	ins := localRow(1017, rev1)
	upd := localRow(1017, rev2).with("status", "DOCKED")
	shared := newNormalizer(t, rules(t, ""), appliedTable())
	for _, tc := range []struct {
		name   string
		rec    rec
		want   normalize.Disposition
		reason string
		op     pb.Operation
	}{
		{"insert", rec{op: "c", after: ins}, normalize.Emit, "", pb.Operation_OPERATION_INSERT},
		{"update", rec{op: "u", before: ins, after: upd}, normalize.Emit, "", pb.Operation_OPERATION_UPDATE},
		{"delete", rec{op: "d", before: upd}, normalize.Emit, "", pb.Operation_OPERATION_DELETE},
		{"snapshot", rec{op: "r", after: ins}, normalize.Emit, "", pb.Operation_OPERATION_SNAPSHOT},
		{"tombstone", rec{op: "x", key: map[string]any{"id": 1017}}, normalize.Skip, normalize.ReasonTombstone, 0},
		{"truncate", rec{op: "t"}, normalize.Block, normalize.ReasonTruncate, 0},

		// Loop suppression (seed 004 §12).
		{"remote insert, applied", rec{op: "c", after: remoteRow(1017, rev1, cmdIns)}, normalize.Skip, normalize.ReasonLoopSuppressed, 0},
		{"remote update, applied", rec{op: "u", before: ins, after: remoteRow(1017, rev2, cmdUpd)}, normalize.Skip, normalize.ReasonLoopSuppressed, 0},
		{"remote snapshot row, applied", rec{op: "r", after: remoteRow(1017, rev2, cmdUpd)}, normalize.Skip, normalize.ReasonLoopSuppressed, 0},
		{"applier's stamp before its delete", rec{op: "u", before: upd, after: upd.with("_sync_event_id", cmdDel)}, normalize.Skip, normalize.ReasonLoopSuppressed, 0},
		{"remote delete, applied", rec{op: "d", before: upd.with("_sync_event_id", cmdDel)}, normalize.Skip, normalize.ReasonLoopSuppressed, 0},
		{"local delete of a row written remotely", rec{op: "d", before: remoteRow(1017, rev2, cmdUpd)}, normalize.Emit, "", pb.Operation_OPERATION_DELETE},
		{"event id kept by a local write", rec{op: "u", before: remoteRow(1017, rev1, cmdIns), after: remoteRow(1017, rev2, cmdIns)}, normalize.Block, normalize.ReasonUnknownOrigin, 0},
		{"event id of a command never applied", rec{op: "c", after: remoteRow(1017, rev1, cmdMiss)}, normalize.Block, normalize.ReasonUnknownOrigin, 0},
		{"delete stamped with an unknown command", rec{op: "d", before: upd.with("_sync_event_id", cmdMiss)}, normalize.Block, normalize.ReasonUnknownOrigin, 0},
		{"event id not a UUID", rec{op: "c", after: ins.with("_sync_event_id", "cmd-17")}, normalize.Block, normalize.ReasonUnknownOrigin, 0},
		{"event id cleared to empty text", rec{op: "u", before: remoteRow(1017, rev1, cmdIns), after: upd.with("_sync_event_id", "")}, normalize.Emit, "", pb.Operation_OPERATION_UPDATE},
		{"revision case differs from the applied command's", rec{op: "u", before: ins, after: remoteRow(1017, strings.ToUpper(rev2), cmdUpd)}, normalize.Skip, normalize.ReasonLoopSuppressed, 0},
		{"update that kept its revision in another case", rec{op: "u", before: ins, after: ins.with("_sync_revision", strings.ToUpper(rev1))}, normalize.Block, normalize.ReasonRevisionUnchanged, 0},
		{"foreign origin without event id", rec{op: "c", after: ins.with("_sync_origin", otherNode)}, normalize.Block, normalize.ReasonUnknownOrigin, 0},
		{"NULL origin", rec{op: "u", before: ins, after: upd.with("_sync_origin", nil)}, normalize.Block, normalize.ReasonUnknownOrigin, 0},
		{"no _sync_event_id column", rec{op: "c", after: ins.with("_sync_event_id", drop)}, normalize.Block, normalize.ReasonUnknownOrigin, 0},
		{"no _sync_origin column", rec{op: "c", after: ins.with("_sync_origin", drop)}, normalize.Block, normalize.ReasonUnknownOrigin, 0},

		// Revisions: never guessed.
		{"insert without revision column", rec{op: "c", after: ins.with("_sync_revision", drop)}, normalize.Block, normalize.ReasonMissingRevision, 0},
		{"insert with NULL revision", rec{op: "c", after: ins.with("_sync_revision", nil)}, normalize.Block, normalize.ReasonMissingRevision, 0},
		{"insert with empty revision", rec{op: "c", after: ins.with("_sync_revision", "")}, normalize.Block, normalize.ReasonMissingRevision, 0},
		{"insert with a non-UUID revision", rec{op: "c", after: ins.with("_sync_revision", "42")}, normalize.Block, normalize.ReasonMissingRevision, 0},
		{"update without before image", rec{op: "u", after: upd}, normalize.Block, normalize.ReasonMissingRevision, 0},
		{"update with before lacking revision", rec{op: "u", before: ins.with("_sync_revision", nil), after: upd}, normalize.Block, normalize.ReasonMissingRevision, 0},
		{"delete without revision", rec{op: "d", before: upd.with("_sync_revision", "")}, normalize.Block, normalize.ReasonMissingRevision, 0},
		{"update that kept its revision", rec{op: "u", before: ins, after: ins.with("status", "DOCKED")}, normalize.Block, normalize.ReasonRevisionUnchanged, 0},
		{"snapshot without revision", rec{op: "r", after: ins.with("_sync_revision", nil)}, normalize.Block, normalize.ReasonMissingRevision, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := run(t, shared, tc.rec) // one Normalizer for every parallel case: safe for concurrent use

			require.Equal(t, tc.want, o.Disposition, "%s: %s", o.Reason, o.Detail)
			require.Equal(t, tc.reason, o.Reason, o.Detail)
			if tc.rec.op != "x" {
				require.NotNil(t, o.Rule)
				require.Equal(t, normalize.PriorityNormal, o.Priority)
			}
			if o.Disposition == normalize.Emit {
				require.Equal(t, tc.op, o.Event.Operation)
				require.Equal(t, node, o.Event.OriginNodeId)
			}
		})
	}
}

// TestEventFields checks every field of emitted events against the proto's
// contract.
func TestEventFields(t *testing.T) {
	t.Parallel()
	n := newNormalizer(t, rules(t, ""), appliedTable())
	ins := localRow(1017, rev1)
	upd := localRow(1017, rev2).with("status", "DOCKED")

	o := run(t, n, rec{op: "c", after: ins})
	ev := o.Event
	wantID := normalize.EventID(normalize.IDInput{Origin: node, ReplayEpoch: 1, Topic: topic, Partition: 2, Offset: 1017,
		Database: "ops", Table: "voyage_log", Key: []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: 1017}}},
		Operation: pb.Operation_OPERATION_INSERT})
	require.Equal(t, "1.0", ev.SchemaVersion)
	require.Equal(t, wantID.String(), ev.EventId)
	require.Equal(t, node, ev.OriginNodeId)
	require.Equal(t, "ship0042-mysql", ev.SourceConnectorId)
	require.Equal(t, topic+"/2", ev.SourcePartition)
	require.Equal(t, uint64(1017), ev.GetSourcePosition())
	require.NotNil(t, ev.SourcePosition)
	require.Equal(t, "voyage-log", ev.RuleId)
	require.Equal(t, uint64(3), ev.RuleVersion)
	require.Equal(t, "ops", ev.Database)
	require.Empty(t, ev.Schema)
	require.Equal(t, "voyage_log", ev.Table)
	require.Len(t, ev.PrimaryKey, 1)
	require.Equal(t, "id", ev.PrimaryKey[0].Name)
	require.Equal(t, int64(1017), ev.PrimaryKey[0].GetIntValue())
	require.Nil(t, ev.Before)
	require.ElementsMatch(t, []string{"id", "vessel", "fuel_used", "departed_at", "logged_on", "status", "note", "secret", "occurred"}, names(ev.After))
	require.Equal(t, "4521.0750", get(ev.After, "fuel_used").GetDecimalValue())
	require.True(t, get(ev.After, "note").GetNull())
	require.Empty(t, ev.BaseRevision)
	require.Equal(t, rev1, ev.ResultRevision)
	require.Nil(t, ev.BusinessOccurredAt)
	require.Equal(t, changeTime, ev.CapturedAt.AsTime())
	require.Len(t, ev.TraceId, 32)
	require.Equal(t, normalize.TraceID(wantID), ev.TraceId)
	require.Empty(t, ev.TransactionId)
	require.Nil(t, ev.TransactionOrder)

	// UPDATE: both images, both revisions, transaction metadata.
	o = run(t, n, rec{op: "u", before: ins, after: upd, tx: map[string]any{"id": "7c1de3f2-5b1a-11f0-9a43-0242ac130002:5813", "total_order": 4, "data_collection_order": 2}})
	ev = o.Event
	require.Equal(t, rev1, ev.BaseRevision)
	require.Equal(t, rev2, ev.ResultRevision)
	require.Equal(t, "ACTIVE", get(ev.Before, "status").GetStringValue())
	require.Equal(t, "DOCKED", get(ev.After, "status").GetStringValue())
	require.Equal(t, "7c1de3f2-5b1a-11f0-9a43-0242ac130002:5813", ev.TransactionId)
	require.Equal(t, uint64(4), ev.GetTransactionOrder())

	// DELETE: base is the deleted revision, result the tombstone.
	o = run(t, n, rec{op: "d", before: upd})
	ev = o.Event
	require.Nil(t, ev.After)
	require.NotNil(t, ev.Before)
	require.Equal(t, rev2, ev.BaseRevision)
	require.Equal(t, normalize.TombstoneRevision(node, rev2, []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: 1017}}}), ev.ResultRevision)
	again := run(t, n, rec{op: "d", before: upd})
	require.Equal(t, ev.ResultRevision, again.Event.ResultRevision, "the same delete gives the same tombstone")
	require.Equal(t, ev.EventId, again.Event.EventId, "the same record at the same place gives the same id")

	// captured_at falls back to the connector's processing time.
	o = run(t, n, rec{op: "c", after: ins, tsMs: ptr(int64(-1))})
	require.Equal(t, changeTime.Add(40*time.Millisecond), o.Event.CapturedAt.AsTime())

	// The decoded event is not modified.
	dec := rec{op: "u", before: ins, after: upd}.decode(t)
	orig := proto.Clone(dec.After).(*pb.RowImage)
	_, err := n.Normalize(context.Background(), src, dec, now)
	require.NoError(t, err)
	require.True(t, proto.Equal(orig, dec.After))
}

// TestPrimaryKeyChange: Debezium's DELETE (with __debezium.newkey),
// tombstone, CREATE (with __debezium.oldkey) become DELETE of the old key,
// a skip, and INSERT of the new key.
func TestPrimaryKeyChange(t *testing.T) {
	t.Parallel()
	n := newNormalizer(t, rules(t, ""), appliedTable())
	old := localRow(1017, rev1)
	moved := localRow(1018, rev2)
	del := run(t, n, rec{op: "d", before: old, headers: []cdc.Header{{Key: cdc.HeaderNewKey, Value: []byte(`{"id":1018}`)}}})
	tomb := run(t, n, rec{op: "x", key: map[string]any{"id": 1017}})
	ins := run(t, n, rec{op: "c", after: moved, headers: []cdc.Header{{Key: cdc.HeaderOldKey, Value: []byte(`{"id":1017}`)}}})
	require.Equal(t, pb.Operation_OPERATION_DELETE, del.Event.Operation)
	require.Equal(t, int64(1017), del.Event.PrimaryKey[0].GetIntValue())
	require.Equal(t, rev1, del.Event.BaseRevision)
	require.Contains(t, del.Detail, "primary-key change")
	require.Equal(t, normalize.Skip, tomb.Disposition)
	require.Equal(t, pb.Operation_OPERATION_INSERT, ins.Event.Operation)
	require.Equal(t, int64(1018), ins.Event.PrimaryKey[0].GetIntValue())
	require.Empty(t, ins.Event.BaseRevision)
	require.Equal(t, rev2, ins.Event.ResultRevision)
	require.Contains(t, ins.Detail, "primary-key change")
}

func TestRuleSelection(t *testing.T) {
	t.Parallel()
	ins := rec{op: "c", after: localRow(1017, rev1)}

	other := rules(t, `{"table": "crew_list"}`)
	o := run(t, newNormalizer(t, other, appliedTable()), ins)
	require.Equal(t, normalize.Skip, o.Disposition)
	require.Equal(t, normalize.ReasonNoRule, o.Reason)
	require.Nil(t, o.Rule)

	strict, err := normalize.New(normalize.Config{NodeID: node, ConnectorID: "c", BlockUnknownTables: true}, other, appliedTable())
	require.NoError(t, err)
	o = run(t, strict, ins)
	require.Equal(t, normalize.Block, o.Disposition)
	require.Equal(t, normalize.ReasonNoRule, o.Reason)

	down := newNormalizer(t, rules(t, `{"direction": "DOWNLINK"}`), appliedTable())
	for _, r := range []rec{ins, {op: "t"}} {
		o = run(t, down, r)
		require.Equal(t, normalize.Skip, o.Disposition)
		require.Equal(t, normalize.ReasonDirection, o.Reason)
	}
	o = run(t, newNormalizer(t, rules(t, `{"priority": "CRITICAL", "direction": "UPLINK"}`), appliedTable()), ins)
	require.Equal(t, normalize.PriorityCritical, o.Priority)

	o = run(t, newNormalizer(t, rules(t, `{"key_columns": ["voyage", "id"]}`), appliedTable()), ins)
	require.Equal(t, normalize.ReasonKeyMismatch, o.Reason)
	o = run(t, newNormalizer(t, rules(t, `{"key_columns": ["vessel"]}`), appliedTable()), ins)
	require.Equal(t, normalize.ReasonKeyMismatch, o.Reason)
}

// TestInfrastructureErrors: only a failed lookup, a missing trusted time or
// a caller bug is an error.
func TestInfrastructureErrors(t *testing.T) {
	t.Parallel()
	n := newNormalizer(t, rules(t, ""), &applied{err: errLookup})
	_, err := n.Normalize(context.Background(), src, rec{op: "c", after: remoteRow(1, rev1, cmdIns)}.decode(t), now)
	require.ErrorIs(t, err, errLookup)
	// A local write needs no lookup.
	o, err := n.Normalize(context.Background(), src, rec{op: "c", after: localRow(1, rev1)}.decode(t), now)
	require.NoError(t, err)
	require.Equal(t, normalize.Emit, o.Disposition)

	_, err = n.Normalize(context.Background(), src, nil, now)
	require.Error(t, err)
	_, err = n.Normalize(context.Background(), normalize.Source{Topic: topic, Offset: -1}, rec{op: "c", after: localRow(1, rev1)}.decode(t), now)
	require.Error(t, err)

	w := newNormalizer(t, rules(t, `{"business_time_column": "departed_at", "dataset_window": "30d"}`), appliedTable())
	_, err = w.Normalize(context.Background(), src, rec{op: "c", after: localRow(1, rev1)}.decode(t), time.Time{})
	require.ErrorIs(t, err, normalize.ErrNoTrustedTime)
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	rs := rules(t, "")
	for _, cfg := range []normalize.Config{
		{ConnectorID: "c"},
		{NodeID: node},
		{NodeID: "bad\nnode", ConnectorID: "c"},
		{NodeID: node, ConnectorID: "c", SchemaVersion: "2.0"},
		{NodeID: node, ConnectorID: "c", SchemaVersion: "one"},
	} {
		_, err := normalize.New(cfg, rs, appliedTable())
		require.Error(t, err, "%+v", cfg)
	}
	_, err := normalize.New(normalize.Config{NodeID: node, ConnectorID: "c"}, rs, nil)
	require.ErrorContains(t, err, "applied lookup")
	_, err = normalize.New(normalize.Config{NodeID: node, ConnectorID: "c"}, rules(t, `{"revisioned": false, "direction": "UPLINK"}`), nil)
	require.NoError(t, err)
}

func mustUUID(t testing.TB, s string) uuid.UUID {
	t.Helper()
	u, err := uuid.Parse(s)
	require.NoError(t, err)
	return u
}

// TestBinaryRevision: a BINARY(16) _sync_revision (or _sync_event_id) reads
// as the canonical UUID text.
func TestBinaryRevision(t *testing.T) {
	t.Parallel()
	n := newNormalizer(t, rules(t, ""), appliedTable())
	ev := rec{op: "c", after: localRow(1017, rev1)}.decode(t)
	u := mustUUID(t, rev1)
	for _, c := range ev.After.Columns {
		if c.Name == "_sync_revision" {
			c.Value = &pb.ColumnValue_BytesValue{BytesValue: u[:]}
		}
	}
	o, err := n.Normalize(context.Background(), src, ev, now)
	require.NoError(t, err)
	requireValid(t, o)
	require.Equal(t, rev1, o.Event.ResultRevision)

	for _, c := range ev.After.Columns {
		if c.Name == "_sync_revision" {
			c.Value = &pb.ColumnValue_BytesValue{BytesValue: u[:15]}
		}
	}
	o, err = n.Normalize(context.Background(), src, ev, now)
	require.NoError(t, err)
	require.Equal(t, normalize.ReasonMissingRevision, o.Reason)
}

// BenchmarkNormalize: one UPDATE with both images through the example rule
// (filter, window, three transforms, mappings), decoded once.
func BenchmarkNormalize(b *testing.B) {
	n := newNormalizer(b, exampleRules(b), appliedTable())
	ev := rec{op: "u", before: localRow(1017, rev1), after: localRow(1017, rev2).with("status", "DOCKED")}.decode(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		o, err := n.Normalize(ctx, src, ev, now)
		if err != nil || o.Disposition != normalize.Emit {
			b.Fatal(err, o.Reason)
		}
	}
}

// TestShoreSide: on the shore, DOWNLINK and BOTH rules emit (the shore's
// local writes become commands) and an UPLINK rule skips; the lookup gets
// the origin the applier wrote beside the stamped id.
func TestShoreSide(t *testing.T) {
	t.Parallel()
	shore := func(rs *normalize.RuleSet, a normalize.AppliedLookup) *normalize.Normalizer {
		n, err := normalize.New(normalize.Config{NodeID: node, ConnectorID: "shore-mysql", Side: normalize.SideShore}, rs, a)
		require.NoError(t, err)
		return n
	}
	ins := rec{op: "c", after: localRow(1017, rev1)}
	for _, dir := range []string{"DOWNLINK", "BOTH"} {
		requireValid(t, run(t, shore(rules(t, `{"direction": "`+dir+`"}`), appliedTable()), ins))
	}
	o := run(t, shore(rules(t, `{"direction": "UPLINK"}`), appliedTable()), ins)
	require.Equal(t, normalize.Skip, o.Disposition)
	require.Equal(t, normalize.ReasonDirection, o.Reason)
	require.Contains(t, o.Detail, "UPLINK only")

	seen := &originSeen{applied: appliedTable()}
	o = run(t, shore(rules(t, ""), seen), rec{op: "c", after: remoteRow(1017, rev1, cmdIns)})
	require.Equal(t, normalize.ReasonLoopSuppressed, o.Reason)
	require.Equal(t, []string{remoteRow(1017, rev1, cmdIns)["_sync_origin"].(string)}, seen.origins)
}

// originSeen records the origins the normaliser passed to the lookup.
type originSeen struct {
	*applied
	origins []string
}

func (o *originSeen) Applied(ctx context.Context, origin, id string) (normalize.AppliedCommand, bool, error) {
	o.origins = append(o.origins, origin)
	return o.applied.Applied(ctx, origin, id)
}
