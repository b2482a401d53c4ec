package wire_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

var columnar = wire.ColumnarVersion.String()

// roundTrip encodes evs at version v, decodes them, and requires the very
// same events back.
func roundTrip(t testing.TB, c *wire.Codec, v string, evs []*pb.ChangeEvent) *pb.UploadBatch {
	t.Helper()
	b := newBatch(evs)
	b.ProtocolVersion = v
	data, err := c.Encode(b)
	require.NoError(t, err)
	out, err := c.Decode(data)
	require.NoError(t, err)
	require.Equal(t, v, out.ProtocolVersion)
	require.Len(t, out.Events, len(evs))
	for i := range evs {
		require.True(t, proto.Equal(evs[i], out.Events[i]), "event %d:\nsent %v\ngot  %v", i, evs[i], out.Events[i])
	}
	var ub pb.UploadBatch
	require.NoError(t, proto.Unmarshal(data, &ub))
	return &ub
}

// TestColumnsRoundTrip: a 1.1 batch decodes to exactly the events sent —
// the typical narrow updates, every value kind, and random events with
// every optional field, id form and value kind mixed — compressed or not.
func TestColumnsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, threshold := range []int{-1, 1} {
		c := newCodec(t, wire.Config{CompressThreshold: threshold})
		ub := roundTrip(t, c, columnar, narrowUpdates(wire.MaxEventsDefault))
		require.Empty(t, ub.EventsBody, "a 1.1 batch leaves events_body empty for 1.0 receivers to refuse")
		require.NotEmpty(t, ub.EventColumns)
		roundTrip(t, c, columnar, events(wire.MaxEventsDefault))
		roundTrip(t, c, columnar, events(1))
		ub = roundTrip(t, c, "1.0", narrowUpdates(3))
		require.Empty(t, ub.EventColumns, "a 1.0 batch has no columns")
		roundTrip(t, c, "1.7", narrowUpdates(3)) // a later minor keeps the columns
	}
	c := newCodec(t, wire.Config{})
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 13))
		evs := make([]*pb.ChangeEvent, 1+r.IntN(60))
		for i := range evs {
			evs[i] = randomEvent(r, i)
		}
		roundTrip(t, c, columnar, evs)
	}
}

// TestColumnsForms: identifiers that are not canonical lower-case UUIDs go
// as text, a trace id is left out only when it is the event id's hex, and
// events the columns cannot carry (unknown fields, a nil timestamp value)
// go whole — all of them come back as sent.
func TestColumnsForms(t *testing.T) {
	t.Parallel()
	c := newCodec(t, wire.Config{})
	evs := narrowUpdates(8)
	evs[0].EventId = strings.ToUpper(evs[0].EventId)                                // text event id: trace id cannot be derived
	evs[1].BaseRevision = "rev-17"                                                  // a revision that is not a UUID
	evs[2].ResultRevision = "6ba7b811-9dad-11d1-80b4-00c04fd430c"                   // one digit short
	evs[3].TraceId = strings.ToUpper(evs[3].TraceId)                                // trace id differing from the derived one
	evs[4].TraceId = evs[4].EventId                                                 // a UUID trace id
	evs[5].BaseRevision, evs[5].TraceId = "", ""                                    // empty ids
	evs[6].ProtoReflect().SetUnknown(protowire.AppendVarint([]byte{0xf8, 0x01}, 7)) // field 31 varint 7
	evs[7].After.Columns[2].Value = &pb.ColumnValue_TimestampValue{}
	b := newBatch(evs)
	b.ProtocolVersion = columnar
	data, err := c.Encode(b)
	require.NoError(t, err)
	out, err := c.Decode(data)
	require.NoError(t, err)
	for i := range evs[:7] {
		require.True(t, proto.Equal(evs[i], out.Events[i]), "event %d", i)
	}
	// A nil timestamp message travels as an empty one, as in 1.0.
	require.True(t, proto.Equal(&timestamppb.Timestamp{}, out.Events[7].After.Columns[2].GetTimestampValue()))

	var cols pb.EventColumns
	require.NoError(t, proto.Unmarshal(columnsBody(t, data), &cols))
	require.Equal(t, []uint32{0, 0, 0, 0, 0, 0, 1, 1}, cols.Form)
	require.Equal(t, []uint32{2, 1, 1, 1, 1, 1}, cols.EventId.Form)
	require.Equal(t, []uint32{2, 3, 3, 2, 1, 0}, cols.TraceId.Form)
	require.Equal(t, []uint32{1, 2, 1, 1, 1, 0}, cols.BaseRevision.Form)
	require.Equal(t, []uint32{1, 1, 2, 1, 1, 1}, cols.ResultRevision.Form)
}

// columnsBody returns the uncompressed EventColumns of an encoded batch.
func columnsBody(t testing.TB, data []byte) []byte {
	t.Helper()
	var ub pb.UploadBatch
	require.NoError(t, proto.Unmarshal(data, &ub))
	require.Equal(t, pb.ContentEncoding_CONTENT_ENCODING_IDENTITY, ub.ContentEncoding)
	return ub.EventColumns
}

// columnsBatch wraps body as a 1.1 UploadBatch of n events with a correct
// size and checksum, so that it reaches the column decoder.
func columnsBatch(body []byte, n uint32) []byte {
	sum := sha256.Sum256(body)
	data, _ := proto.Marshal(&pb.UploadBatch{ProtocolVersion: columnar, NodeId: "ship-0042", BatchId: uuidN(999),
		Sequence: 7, CreatedAt: timestamppb.New(t0), EventCount: n, UncompressedBytes: uint64(len(body)),
		ContentEncoding: pb.ContentEncoding_CONTENT_ENCODING_IDENTITY, Checksum: sum[:], EventColumns: body})
	return data
}

// TestColumnsRefusals: a damaged EventColumns is refused with a class of
// errors.go (never a panic), and so are the header combinations 1.1 rules
// out.
func TestColumnsRefusals(t *testing.T) {
	t.Parallel()
	c := newCodec(t, wire.Config{CompressThreshold: -1})
	b := newBatch(narrowUpdates(20))
	b.ProtocolVersion = columnar
	data, err := c.Encode(b)
	require.NoError(t, err)
	body := columnsBody(t, data)

	// Every truncation and every single-byte change is refused or decodes
	// to 20 events; none panics.
	for i := range body {
		_, err := c.Decode(columnsBatch(body[:i], 20))
		require.True(t, hasClass(err), "truncated at %d: %v", i, err)
		requireBounded(t, err)
		for _, x := range []byte{0x01, 0x80, 0xff} {
			bad := append([]byte{}, body...)
			bad[i] ^= x
			out, err := c.Decode(columnsBatch(bad, 20))
			if err == nil {
				require.Len(t, out.Events, 20)
				continue
			}
			require.True(t, hasClass(err), "byte %d ^ %#x: %v", i, x, err)
			requireBounded(t, err)
		}
	}

	_, err = c.Decode(columnsBatch(body, 21))
	requireClass(t, err, wire.ErrChecksumMismatch)

	var ub pb.UploadBatch
	require.NoError(t, proto.Unmarshal(data, &ub))
	old := proto.Clone(&ub).(*pb.UploadBatch)
	old.ProtocolVersion = "1.0"
	both := proto.Clone(&ub).(*pb.UploadBatch)
	both.EventsBody = []byte{0x0a, 0x00}
	for name, m := range map[string]*pb.UploadBatch{"columns at 1.0": old, "both bodies": both} {
		raw, err := proto.Marshal(m)
		require.NoError(t, err)
		_, err = c.Decode(raw)
		requireClass(t, err, wire.ErrMalformedBatch)
		t.Log(name, err)
	}

	// Strings are stored once: a body well under the limit can name
	// events whose rows are far over it. The decoder stops at the limit.
	small := newCodec(t, wire.Config{MaxBytes: 64 << 10, CompressThreshold: -1})
	evs := narrowUpdates(200)
	for _, ev := range evs {
		ev.Table = strings.Repeat("t", 200)
		ev.Database = strings.Repeat("d", 200)
	}
	body, _ = encodeColumnsBody(t, evs)
	require.Less(t, len(body), 64<<10)
	_, err = small.Decode(columnsBatch(body, 200))
	requireClass(t, err, wire.ErrBatchTooLarge)
	b = newBatch(evs)
	b.ProtocolVersion = columnar
	_, err = small.Encode(b)
	requireClass(t, err, wire.ErrBatchTooLarge)
}

// encodeColumnsBody encodes evs at 1.1 without limits and returns the
// uncompressed EventColumns.
func encodeColumnsBody(t testing.TB, evs []*pb.ChangeEvent) ([]byte, *pb.EventColumns) {
	t.Helper()
	c := newCodec(t, wire.Config{CompressThreshold: -1})
	b := newBatch(evs)
	b.ProtocolVersion = columnar
	data, err := c.Encode(b)
	require.NoError(t, err)
	body := columnsBody(t, data)
	var cols pb.EventColumns
	require.NoError(t, proto.Unmarshal(body, &cols))
	return body, &cols
}

// FuzzDecodeColumns: any EventColumns body (wrapped in a batch whose size
// and checksum match, so that every input reaches the column decoder)
// decodes without panicking to a classified, bounded error or to events
// that encode again at 1.1 and decode to the same events. The corpus in
// testdata/fuzz/FuzzDecodeColumns adds stored bodies to the ones made here.
func FuzzDecodeColumns(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 2))
	mixed := make([]*pb.ChangeEvent, 6)
	for i := range mixed {
		mixed[i] = randomEvent(r, i)
	}
	for _, evs := range [][]*pb.ChangeEvent{narrowUpdates(3), events(2), mixed} {
		body, _ := encodeColumnsBody(f, evs)
		f.Add(body, uint8(len(evs)))
	}
	f.Add([]byte{}, uint8(1))
	f.Add([]byte{0x12, 0x01, 0x00}, uint8(1))
	c := newCodec(f, wire.Config{MaxEvents: 50, MaxBytes: 64 << 10})
	re := newCodec(f, wire.Config{MaxEvents: 50, MaxBytes: 64 << 10, CompressThreshold: 1})
	f.Fuzz(func(t *testing.T, body []byte, n uint8) {
		b, err := c.Decode(columnsBatch(body, uint32(n)))
		if err != nil {
			require.True(t, hasClass(err), "unclassified: %v", err)
			requireBounded(t, err)
			require.NotEqual(t, pb.ErrorCode_ERROR_CODE_INTERNAL, wire.ErrorBody(err).Code)
			return
		}
		require.Len(t, b.Events, int(n))
		requireReencodes(t, c, re, b)
	})
}

// randomEvent returns an event with fields drawn from r: present or not,
// ids in every form, every value kind including the malformed ones (the
// codec carries what it is given; ValidateEvent judges it).
func randomEvent(r *rand.Rand, i int) *pb.ChangeEvent {
	pick := func(s ...string) string { return s[r.IntN(len(s))] }
	id := func() string {
		switch r.IntN(6) {
		case 0:
			return ""
		case 1:
			return "not-a-uuid-" + fmt.Sprint(r.IntN(50))
		case 2:
			return strings.ToUpper(uuidN(r.IntN(1 << 20)))
		default:
			var u [16]byte
			for j := range u {
				u[j] = byte(r.UintN(256))
			}
			h := hex.EncodeToString(u[:])
			return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
		}
	}
	u64 := func() uint64 {
		switch r.IntN(4) {
		case 0:
			return 0
		case 1:
			return math.MaxUint64 - r.Uint64N(3)
		default:
			return r.Uint64N(1 << (r.IntN(63) + 1))
		}
	}
	ts := func() *timestamppb.Timestamp {
		if r.IntN(4) == 0 {
			return nil
		}
		return &timestamppb.Timestamp{Seconds: int64(u64()) >> r.IntN(64), Nanos: int32(r.Uint32())}
	}
	value := func() *pb.ColumnValue {
		cv := &pb.ColumnValue{Name: pick("id", "level", "note", "ü", "", strings.Repeat("x", 40))}
		switch r.IntN(15) {
		case 0:
		case 1:
			cv.Value = &pb.ColumnValue_Null{Null: r.IntN(2) == 0}
		case 2:
			cv.Value = &pb.ColumnValue_IntValue{IntValue: int64(u64())}
		case 3:
			cv.Value = &pb.ColumnValue_UintValue{UintValue: u64()}
		case 4:
			cv.Value = &pb.ColumnValue_DoubleValue{DoubleValue: []float64{0, math.Copysign(0, -1), math.NaN(),
				math.Inf(-1), r.NormFloat64()}[r.IntN(5)]}
		case 5:
			cv.Value = &pb.ColumnValue_DecimalValue{DecimalValue: fmt.Sprint(r.Int64())}
		case 6:
			cv.Value = &pb.ColumnValue_StringValue{StringValue: pick("", "sounded", "日本", secret)}
		case 7:
			cv.Value = &pb.ColumnValue_BytesValue{BytesValue: []byte(pick("", "\x00\xff", "abc"))}
		case 8:
			cv.Value = &pb.ColumnValue_BoolValue{BoolValue: r.IntN(2) == 0}
		case 9:
			if t := ts(); t != nil {
				cv.Value = &pb.ColumnValue_TimestampValue{TimestampValue: t}
			}
		case 10:
			cv.Value = &pb.ColumnValue_DateValue{DateValue: "2026-12-02"}
		case 11:
			cv.Value = &pb.ColumnValue_TimeValue{TimeValue: "-838:59:59"}
		case 12:
			cv.Value = &pb.ColumnValue_JsonValue{JsonValue: `{"a":1}`}
		default:
			cv.Value = &pb.ColumnValue_IntValue{IntValue: int64(r.IntN(100))}
		}
		return cv
	}
	image := func(max int) []*pb.ColumnValue {
		cols := make([]*pb.ColumnValue, r.IntN(max+1))
		for j := range cols {
			cols[j] = value()
		}
		return cols
	}
	ev := &pb.ChangeEvent{SchemaVersion: pick("1.0", "1.1", ""), EventId: id(), OriginNodeId: pick("ship-1", "ship-2"),
		SourceConnectorId: pick("capture-demo", ""), SourcePartition: pick("t/0", "t/1"), SourceSequence: u64(),
		TransactionId: pick("", "tx-1", fmt.Sprint(i)), RuleId: pick("tank", "log"), RuleVersion: u64(),
		Database: "ship", Schema: pick("", "public"), Table: pick("tank", "log"), PrimaryKey: image(2),
		Operation: pb.Operation(r.IntN(7) - 1), BaseRevision: id(), ResultRevision: id(),
		BusinessOccurredAt: ts(), CapturedAt: ts(), TraceId: id()}
	if r.IntN(3) > 0 {
		ev.SourcePosition = proto.Uint64(u64())
	}
	if r.IntN(3) == 0 {
		ev.TransactionOrder = proto.Uint64(u64())
	}
	if r.IntN(3) > 0 {
		ev.Before = &pb.RowImage{Columns: image(4)}
	}
	if r.IntN(4) > 0 {
		ev.After = &pb.RowImage{Columns: image(5)}
	}
	switch r.IntN(8) {
	case 0: // the normaliser's trace id
		if u, err := hex.DecodeString(strings.ReplaceAll(ev.EventId, "-", "")); err == nil && len(u) == 16 {
			ev.TraceId = hex.EncodeToString(u)
		}
	case 1: // a field of a later minor
		ev.ProtoReflect().SetUnknown(protowire.AppendVarint([]byte{0xf8, 0x01}, uint64(i)))
	}
	return ev
}
