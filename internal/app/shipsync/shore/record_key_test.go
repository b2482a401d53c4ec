package shore

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// protojsonKey is the JSON protojson writes for a RowImage of pk, without
// the spaces it adds at random per build.
func protojsonKey(t testing.TB, pk []*pb.ColumnValue) (string, error) {
	j, err := protojson.MarshalOptions{}.Marshal(&pb.RowImage{Columns: pk})
	if err != nil {
		return "", err
	}
	var c bytes.Buffer
	require.NoError(t, json.Compact(&c, j))
	return c.String(), nil
}

func col(name string, v any) *pb.ColumnValue {
	c := &pb.ColumnValue{Name: name}
	switch v := v.(type) {
	case nil:
	case int64:
		c.Value = &pb.ColumnValue_IntValue{IntValue: v}
	case uint64:
		c.Value = &pb.ColumnValue_UintValue{UintValue: v}
	case string:
		c.Value = &pb.ColumnValue_StringValue{StringValue: v}
	case bool:
		c.Value = &pb.ColumnValue_BoolValue{BoolValue: v}
	case *pb.ColumnValue_Null:
		c.Value = v
	case *pb.ColumnValue_DecimalValue:
		c.Value = v
	case *pb.ColumnValue_DateValue:
		c.Value = v
	case *pb.ColumnValue_TimeValue:
		c.Value = v
	case *pb.ColumnValue_JsonValue:
		c.Value = v
	case *pb.ColumnValue_DoubleValue:
		c.Value = v
	case *pb.ColumnValue_BytesValue:
		c.Value = v
	case *pb.ColumnValue_TimestampValue:
		c.Value = v
	}
	return c
}

// TestKeyJSONAsProtojson: the key text written without protojson is
// protojson's text for every value kind it handles, and the other kinds
// are left to protojson.
func TestKeyJSONAsProtojson(t *testing.T) {
	t.Parallel()
	handled := [][]*pb.ColumnValue{
		nil,
		{col("id", int64(3000000001))},
		{col("id", int64(math.MinInt64)), col("b", uint64(math.MaxUint64)), col("z", int64(0)), col("u", uint64(0))},
		{col("", int64(1))},
		{col("id", nil)},
		{col("n", &pb.ColumnValue_Null{Null: true}), col("f", &pb.ColumnValue_Null{Null: false})},
		{col("t", true), col("f", false)},
		{col("s", ""), col("q", `a "quoted" \ back\slash`), col("c", "\x00\x01\b\f\n\r\t\x1f\x7f"), col("u", "ünï 鍵 \u2028\u2029 🚢")},
		{col("d", &pb.ColumnValue_DecimalValue{DecimalValue: "-123.4500"}), col("day", &pb.ColumnValue_DateValue{DateValue: "2026-12-03"}),
			col("tm", &pb.ColumnValue_TimeValue{TimeValue: "-12:00:01.5"}), col("j", &pb.ColumnValue_JsonValue{JsonValue: `{"a": [1, "x"]}`})},
		{col("名前", "x"), col(`we"ird\name`, int64(-1))},
	}
	for _, pk := range handled {
		got, ok := keyJSON(pk)
		require.True(t, ok, "%v", pk)
		want, err := protojsonKey(t, pk)
		require.NoError(t, err)
		require.Equal(t, want, got)
		_, text, err := RecordKey(pk)
		require.NoError(t, err)
		require.Equal(t, want, text)
	}
	left := [][]*pb.ColumnValue{
		{col("x", &pb.ColumnValue_DoubleValue{DoubleValue: 1.5})},
		{col("id", int64(1)), col("x", &pb.ColumnValue_BytesValue{BytesValue: []byte{1, 2}})},
		{col("x", &pb.ColumnValue_TimestampValue{TimestampValue: timestamppb.New(time.Unix(1, 5))})},
		{nil},
	}
	for _, pk := range left {
		_, ok := keyJSON(pk)
		require.False(t, ok, "%v", pk)
	}
	// Not UTF-8: left to protojson, which refuses it (so does RecordKey).
	for _, pk := range [][]*pb.ColumnValue{{col("id", "\xff")}, {col("\xfe", int64(1))}} {
		_, ok := keyJSON(pk)
		require.False(t, ok)
		_, _, err := RecordKey(pk)
		require.Error(t, err)
	}
}

// FuzzKeyJSON compares the key text with protojson's for keys of a text,
// an integer and an unsigned column.
func FuzzKeyJSON(f *testing.F) {
	f.Add("id", "a\"b\\c\n", int64(-5), uint64(7))
	f.Add("", "", int64(0), uint64(0))
	f.Add("\x1f", "\u2028\xff", int64(math.MaxInt64), uint64(math.MaxUint64))
	f.Fuzz(func(t *testing.T, name, s string, i int64, u uint64) {
		pk := []*pb.ColumnValue{col(name, s), col(name+"i", i), col("u", u)}
		want, err := protojsonKey(t, pk)
		got, ok := keyJSON(pk)
		if err != nil {
			require.False(t, ok, "protojson refuses %q", pk)
			return
		}
		require.True(t, ok)
		require.Equal(t, want, got)
	})
}
