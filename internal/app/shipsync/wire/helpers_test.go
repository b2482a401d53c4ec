package wire_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

// secret is put into row values; no error text may ever contain it.
const secret = "S3CRET-ROW-VALUE"

var t0 = time.Date(2026, 12, 2, 5, 0, 0, 123456000, time.UTC)

func uuidN(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012x", n) }

// validEvent returns an UPDATE that passes ValidateEvent, with every kind of
// column value in its images.
func validEvent(n int) *pb.ChangeEvent {
	return &pb.ChangeEvent{
		SchemaVersion:      "1.0",
		EventId:            uuidN(n),
		OriginNodeId:       "ship-0042",
		SourceConnectorId:  "dbz-mysql-1",
		SourcePartition:    "ship.cdc.ops.voyage/0",
		SourcePosition:     proto.Uint64(uint64(n)),
		SourceSequence:     uint64(n + 1),
		TransactionId:      "3E11FA47-71CA-11E1-9E33-C80AA9429562:23",
		TransactionOrder:   proto.Uint64(1),
		RuleId:             "voyage-log",
		RuleVersion:        3,
		Database:           "ops",
		Table:              "voyage",
		PrimaryKey:         []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: int64(n)}}},
		Operation:          pb.Operation_OPERATION_UPDATE,
		Before:             &pb.RowImage{Columns: []*pb.ColumnValue{{Name: "note", Value: &pb.ColumnValue_StringValue{StringValue: secret}}}},
		After:              &pb.RowImage{Columns: allKinds()},
		BaseRevision:       "11111111-2222-4333-8444-555555555555",
		ResultRevision:     "66666666-7777-4888-9999-aaaaaaaaaaaa",
		BusinessOccurredAt: timestamppb.New(t0.Add(-time.Minute)),
		CapturedAt:         timestamppb.New(t0),
		TraceId:            "4bf92f3577b34da6a3ce929d0e0e4736",
	}
}

func allKinds() []*pb.ColumnValue {
	return []*pb.ColumnValue{
		{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: -7}},
		{Name: "nullable", Value: &pb.ColumnValue_Null{Null: true}},
		{Name: "empty", Value: &pb.ColumnValue_StringValue{StringValue: ""}},
		{Name: "note", Value: &pb.ColumnValue_StringValue{StringValue: secret}},
		{Name: "big", Value: &pb.ColumnValue_UintValue{UintValue: 1 << 63}},
		{Name: "ratio", Value: &pb.ColumnValue_DoubleValue{DoubleValue: 0.25}},
		{Name: "price", Value: &pb.ColumnValue_DecimalValue{DecimalValue: "-12345678901234567890.000100"}},
		{Name: "blob", Value: &pb.ColumnValue_BytesValue{BytesValue: []byte{0, 1, 0xff}}},
		{Name: "empty_blob", Value: &pb.ColumnValue_BytesValue{BytesValue: []byte{}}},
		{Name: "flag", Value: &pb.ColumnValue_BoolValue{BoolValue: false}},
		{Name: "at", Value: &pb.ColumnValue_TimestampValue{TimestampValue: timestamppb.New(t0)}},
		{Name: "day", Value: &pb.ColumnValue_DateValue{DateValue: "2026-02-28"}},
		{Name: "dur", Value: &pb.ColumnValue_TimeValue{TimeValue: "-838:59:59.000001"}},
		{Name: "doc", Value: &pb.ColumnValue_JsonValue{JsonValue: `{"a":[1,null]}`}},
	}
}

func events(n int) []*pb.ChangeEvent {
	out := make([]*pb.ChangeEvent, n)
	for i := range out {
		out[i] = validEvent(i + 1)
	}
	return out
}

func newBatch(evs []*pb.ChangeEvent) *wire.Batch {
	return &wire.Batch{
		NodeID:    "ship-0042",
		BatchID:   uuidN(999),
		Sequence:  7,
		CreatedAt: t0,
		Events:    evs,
	}
}

func newCodec(t testing.TB, cfg wire.Config) *wire.Codec {
	t.Helper()
	c, err := wire.NewCodec(cfg)
	require.NoError(t, err)
	return c
}

// requireClass fails unless err wraps class and its text is bounded, valid
// UTF-8 and free of row values.
func requireClass(t testing.TB, err error, class error) {
	t.Helper()
	require.Error(t, err)
	require.True(t, errors.Is(err, class), "want %v, got %v", class, err)
	requireBounded(t, err)
}

func requireBounded(t testing.TB, err error) {
	t.Helper()
	msg := err.Error()
	require.LessOrEqual(t, len(msg), 240, msg)
	require.True(t, utf8.ValidString(msg), "%q", msg)
	require.False(t, strings.Contains(msg, secret), msg)
}

// classes lists every error class of the package.
var classes = []error{
	wire.ErrMalformedVersion, wire.ErrUnsupportedMajor, wire.ErrMalformedBatch,
	wire.ErrTooManyEvents, wire.ErrBatchTooLarge, wire.ErrBadCompression,
	wire.ErrDecompressedTooLarge, wire.ErrChecksumMismatch, wire.ErrInvalidEvent,
}

func hasClass(err error) bool {
	for _, c := range classes {
		if errors.Is(err, c) {
			return true
		}
	}
	return false
}

// narrowUpdates returns n UPDATE events of a narrow row, as a ship
// produces them: deterministic v5 event ids, time-based (v1-shaped)
// revisions, the trace id the event id's hex.
func narrowUpdates(n int) []*pb.ChangeEvent {
	base := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	ns := uuid.MustParse("6ba7b811-9dad-11d1-80b4-00c04fd430c8")
	rev := func(i int) string { // v1 layout: time_low varies, the rest is the node's
		return fmt.Sprintf("%08x-cf2e-11f1-9a41-0242ac110002", uint32(i)*2654435761)
	}
	evs := make([]*pb.ChangeEvent, n)
	for i := range evs {
		id := uuid.NewSHA1(ns, fmt.Appendf(nil, "ship-1/tank/%d", i))
		key := []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: int64(i * 37 % 50000)}}}
		row := &pb.RowImage{Columns: []*pb.ColumnValue{key[0],
			{Name: "level", Value: &pb.ColumnValue_IntValue{IntValue: int64(40000 + i*13%9000)}},
			{Name: "note", Value: &pb.ColumnValue_StringValue{StringValue: "sounded"}}}}
		pos := uint64(1000 + i*311)
		evs[i] = &pb.ChangeEvent{SchemaVersion: "1.0", EventId: id.String(), OriginNodeId: "ship-1",
			SourceConnectorId: "capture-demo", SourcePartition: "sync.cdc.demo.ship.tank/2", SourcePosition: &pos,
			SourceSequence: uint64(900 + i), RuleId: "tank", RuleVersion: 1, Database: "ship", Table: "tank",
			PrimaryKey: key, Operation: pb.Operation_OPERATION_UPDATE, Before: row, After: row,
			BaseRevision: rev(2 * i), ResultRevision: rev(2*i + 1),
			CapturedAt: timestamppb.New(base.Add(time.Duration(i) * 1700 * time.Millisecond)),
			TraceId:    hex.EncodeToString(id[:])}
	}
	return evs
}

// requireReencodes requires decoded batch b to encode again with re and
// decode with c to the same events. Re-marshalling may grow a body
// (unknown fields, non-minimal varints come back in their shorter forms
// only), so only the size limit may refuse it.
func requireReencodes(t testing.TB, c, re *wire.Codec, b *wire.Batch) {
	t.Helper()
	again, err := re.Encode(&wire.Batch{ProtocolVersion: b.ProtocolVersion, NodeID: b.NodeID, BatchID: b.BatchID,
		Sequence: b.Sequence, CreatedAt: b.CreatedAt, Events: b.Events})
	if err != nil {
		requireClass(t, err, wire.ErrBatchTooLarge)
		return
	}
	b2, err := c.Decode(again)
	require.NoError(t, err)
	require.Len(t, b2.Events, len(b.Events))
	for i := range b.Events {
		require.True(t, proto.Equal(b.Events[i], b2.Events[i]))
	}
}
