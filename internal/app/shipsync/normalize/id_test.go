package normalize_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// TestNamespaces: the documented namespaces are the documented
// derivations, and distinct.
func TestNamespaces(t *testing.T) {
	t.Parallel()
	for name, ns := range map[string]uuid.UUID{
		"event-id":           normalize.EventIDNamespace,
		"tombstone-revision": normalize.TombstoneNamespace,
		"overwrite-revision": normalize.OverwriteNamespace,
	} {
		require.Equal(t, uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://relayhq.dev/shipsync/normalize/"+name+"/v1")), ns, name)
	}
}

func intKey(n int64) []*pb.ColumnValue {
	return []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: n}}}
}

func baseInput() normalize.IDInput {
	return normalize.IDInput{Origin: node, ReplayEpoch: 1, Topic: topic, Partition: 2, Offset: 1017,
		Database: "ops", Table: "voyage_log", Key: intKey(1017), Operation: pb.Operation_OPERATION_UPDATE}
}

// TestEventIDStable: the same input gives the same id (and a v5 UUID); any
// one part changed gives another.
func TestEventIDStable(t *testing.T) {
	t.Parallel()
	id := normalize.EventID(baseInput())
	require.Equal(t, id, normalize.EventID(baseInput()))
	require.Equal(t, uuid.Version(5), id.Version())
	require.Equal(t, uuid.RFC4122, id.Variant())
	// Pinned (recomputed independently from docs/shipsync/normalize.md):
	// a change of the encoding must be a new namespace, never a
	// silent change of every id.
	require.Equal(t, "0cd0369d-a0d1-518d-94d8-be9b5b3b89f8", id.String())

	for name, change := range map[string]func(*normalize.IDInput){
		"origin":    func(in *normalize.IDInput) { in.Origin = "ship-0043" },
		"epoch":     func(in *normalize.IDInput) { in.ReplayEpoch = 2 },
		"topic":     func(in *normalize.IDInput) { in.Topic = "ship0042.ops.voyage_log2" },
		"partition": func(in *normalize.IDInput) { in.Partition = 3 },
		"offset":    func(in *normalize.IDInput) { in.Offset = 1018 },
		"database":  func(in *normalize.IDInput) { in.Database = "ops2" },
		"table":     func(in *normalize.IDInput) { in.Table = "voyage" },
		"key value": func(in *normalize.IDInput) { in.Key = intKey(1018) },
		"key name":  func(in *normalize.IDInput) { in.Key = []*pb.ColumnValue{{Name: "ID", Value: in.Key[0].Value}} },
		"key type": func(in *normalize.IDInput) {
			in.Key = []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_UintValue{UintValue: 1017}}}
		},
		"operation": func(in *normalize.IDInput) { in.Operation = pb.Operation_OPERATION_DELETE },
		// Length prefixes: moving a byte between neighbouring parts changes the id.
		"topic/database boundary": func(in *normalize.IDInput) { in.Database, in.Table = "opsv", "oyage_log" },
		"origin/topic boundary":   func(in *normalize.IDInput) { in.Origin, in.Topic = node+"s", "hip0042.ops.voyage_log" },
	} {
		in := baseInput()
		change(&in)
		require.NotEqual(t, id, normalize.EventID(in), name)
	}
}

// TestCanonicalKeyUnambiguous: keys that differ only in how their parts are
// split, typed or ordered encode differently.
func TestCanonicalKeyUnambiguous(t *testing.T) {
	t.Parallel()
	s := func(name, v string) *pb.ColumnValue {
		return &pb.ColumnValue{Name: name, Value: &pb.ColumnValue_StringValue{StringValue: v}}
	}
	keys := [][]*pb.ColumnValue{
		{s("a", "bc")},
		{s("ab", "c")},
		{s("a", "b"), s("c", "")},
		{s("a", ""), s("bc", "")},
		{s("c", ""), s("a", "b")},
		{{Name: "a", Value: &pb.ColumnValue_BytesValue{BytesValue: []byte("bc")}}},
		{{Name: "a", Value: &pb.ColumnValue_JsonValue{JsonValue: "bc"}}},
		{{Name: "a", Value: &pb.ColumnValue_DecimalValue{DecimalValue: "1.0"}}},
		{{Name: "a", Value: &pb.ColumnValue_DecimalValue{DecimalValue: "1.00"}}},
		{{Name: "a", Value: &pb.ColumnValue_IntValue{IntValue: 1}}},
		{{Name: "a", Value: &pb.ColumnValue_UintValue{UintValue: 1}}},
		{{Name: "a", Value: &pb.ColumnValue_BoolValue{BoolValue: true}}},
		{{Name: "a", Value: &pb.ColumnValue_DoubleValue{DoubleValue: 1}}},
		{{Name: "a", Value: &pb.ColumnValue_TimestampValue{TimestampValue: timestamppb.New(now)}}},
		{{Name: "a", Value: &pb.ColumnValue_DateValue{DateValue: "2026-12-02"}}},
		{{Name: "a", Value: &pb.ColumnValue_TimeValue{TimeValue: "12:00:00"}}},
	}
	seen := map[string]int{}
	for i, k := range keys {
		enc := string(normalize.CanonicalKey(k))
		if j, dup := seen[enc]; dup {
			t.Fatalf("keys %d and %d encode alike", j, i)
		}
		seen[enc] = i
	}
	// −0 and +0 are one double key.
	neg := []*pb.ColumnValue{{Name: "a", Value: &pb.ColumnValue_DoubleValue{DoubleValue: negZero()}}}
	pos := []*pb.ColumnValue{{Name: "a", Value: &pb.ColumnValue_DoubleValue{DoubleValue: 0}}}
	require.Equal(t, normalize.CanonicalKey(pos), normalize.CanonicalKey(neg))
}

func negZero() float64 {
	z := 0.0
	return -z
}

// TestTombstoneRevision: deterministic per (origin, base, key), different
// when any of them differs, never equal to the base.
func TestTombstoneRevision(t *testing.T) {
	t.Parallel()
	a := normalize.TombstoneRevision(node, rev1, intKey(1))
	require.Equal(t, a, normalize.TombstoneRevision(node, rev1, intKey(1)))
	require.NotEqual(t, a, normalize.TombstoneRevision(otherNode, rev1, intKey(1)))
	require.NotEqual(t, a, normalize.TombstoneRevision(node, rev2, intKey(1)))
	require.NotEqual(t, a, normalize.TombstoneRevision(node, rev1, intKey(2)))
	require.NotEqual(t, rev1, a)
	u, err := uuid.Parse(a)
	require.NoError(t, err)
	require.Equal(t, uuid.Version(5), u.Version())

	id := normalize.EventID(baseInput())
	require.Len(t, normalize.TraceID(id), 32)
	require.Equal(t, []string{"lower@1", "round@1", "trim@1", "truncate@1", "upper@1"}, normalize.TransformNames())
	require.NotEqual(t, normalize.OverwriteRevision(id), id.String())
}

// TestEventIDNoCollisions generates 200,000 ids over the variants a ship
// produces — snapshot, insert, update and delete of many keys, at
// neighbouring offsets and partitions, re-read after a restart (same
// offsets: same ids) and replayed under new epochs (new ids) — and finds no
// collision among the distinct inputs.
func TestEventIDNoCollisions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("200k ids")
	}
	ops := []pb.Operation{pb.Operation_OPERATION_SNAPSHOT, pb.Operation_OPERATION_INSERT, pb.Operation_OPERATION_UPDATE, pb.Operation_OPERATION_DELETE}
	seen := make(map[uuid.UUID]struct{}, 200_000)
	in := baseInput()
	n := 0
	for epoch := uint32(0); epoch < 5; epoch++ {
		for part := int32(0); part < 4; part++ {
			for i := 0; i < 10_000; i++ {
				in.ReplayEpoch, in.Partition, in.Offset = epoch, part, int64(i)
				in.Key = intKey(int64(i % 2_500)) // the same record again at other offsets
				in.Operation = ops[i%len(ops)]
				id := normalize.EventID(in)
				_, dup := seen[id]
				require.False(t, dup, "collision at epoch %d partition %d offset %d", epoch, part, i)
				seen[id] = struct{}{}
				n++
				// A restart re-reads the same record at the same offset: same id.
				if i%1000 == 0 {
					require.Equal(t, id, normalize.EventID(in))
				}
			}
		}
	}
	require.Equal(t, 200_000, n)
	require.Len(t, seen, n)
}
