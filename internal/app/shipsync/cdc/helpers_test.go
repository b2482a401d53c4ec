package cdc_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// topic is the fixtures' topic: prefix ship0042, database ops, table
// voyage_log.
const topic = "ship0042.ops.voyage_log"

// fixture reads testdata/name.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

// voyageTypes types ops.voyage_log for the schema-less fixtures, as a
// caller would from the table's DDL.
func voyageTypes() cdc.TypeMap {
	return cdc.TypeMap{"ops.voyage_log": {
		"id":          {Type: "int32", Required: true},
		"vessel":      {Type: "string", Required: true},
		"fuel_used":   {Type: "bytes", Name: cdc.SemanticDecimal, Scale: 4},
		"cargo_t":     {Type: "bytes", Name: cdc.SemanticDecimal},
		"logged_on":   {Type: "int32", Name: cdc.SemanticDate},
		"departed_at": {Type: "int64", Name: cdc.SemanticTimestamp},
		"arrived_at":  {Type: "int64", Name: cdc.SemanticMicroTimestamp},
		"updated_at":  {Type: "string", Name: cdc.SemanticZonedTimestamp},
		"watch_start": {Type: "int64", Name: cdc.SemanticMicroTime},
		"built_year":  {Type: "int32", Name: cdc.SemanticYear},
		"meta":        {Type: "string", Name: cdc.SemanticJSON},
		"flags":       {Type: "bytes", Name: cdc.SemanticBits},
		"active":      {Type: "int16"},
		"speed_kn":    {Type: "float64"},
		"photo":       {Type: "bytes"},
		"note":        {Type: "string"},
	}}
}

func newDecoder(t testing.TB, cfg cdc.Config) *cdc.Decoder {
	t.Helper()
	d, err := cdc.New(cfg)
	require.NoError(t, err)
	return d
}

// decodeFixtures decodes the fixture files key (none if "") and value on
// the fixtures' topic and requires success.
func decodeFixtures(t testing.TB, cfg cdc.Config, key, value string) *cdc.Event {
	t.Helper()
	m := cdc.Message{Topic: topic, Value: fixture(t, value)}
	if key != "" {
		m.Key = fixture(t, key)
	}
	ev, err := newDecoder(t, cfg).Decode(m)
	require.NoError(t, err)
	return ev
}

func ts(t time.Time) *pb.ColumnValue {
	return &pb.ColumnValue{Value: &pb.ColumnValue_TimestampValue{TimestampValue: timestamppb.New(t)}}
}

func col(name string, v *pb.ColumnValue) *pb.ColumnValue {
	v.Name = name
	return v
}

func i64(n int64) *pb.ColumnValue {
	return &pb.ColumnValue{Value: &pb.ColumnValue_IntValue{IntValue: n}}
}
func str(s string) *pb.ColumnValue {
	return &pb.ColumnValue{Value: &pb.ColumnValue_StringValue{StringValue: s}}
}
func decimal(s string) *pb.ColumnValue {
	return &pb.ColumnValue{Value: &pb.ColumnValue_DecimalValue{DecimalValue: s}}
}
func byts(b ...byte) *pb.ColumnValue {
	return &pb.ColumnValue{Value: &pb.ColumnValue_BytesValue{BytesValue: b}}
}
func null() *pb.ColumnValue { return &pb.ColumnValue{Value: &pb.ColumnValue_Null{Null: true}} }

// rowA is the row the fixtures insert: one column of every mapped type.
func rowA() []*pb.ColumnValue {
	return []*pb.ColumnValue{
		col("id", i64(1017)),
		col("vessel", str("MV Northern Tern")),
		col("fuel_used", decimal("4521.0750")),
		col("cargo_t", decimal("987654")),
		col("logged_on", &pb.ColumnValue{Value: &pb.ColumnValue_DateValue{DateValue: "2026-12-01"}}),
		col("departed_at", ts(time.Date(2026, 11, 30, 22, 15, 30, 250e6, time.UTC))),
		col("arrived_at", ts(time.Date(2026, 12, 1, 6, 40, 5, 123456e3, time.UTC))),
		col("updated_at", ts(time.Date(2026, 12, 1, 6, 41, 0, 500e6, time.UTC))),
		col("watch_start", &pb.ColumnValue{Value: &pb.ColumnValue_TimeValue{TimeValue: "04:30:15.250000"}}),
		col("built_year", i64(2011)),
		col("meta", &pb.ColumnValue{Value: &pb.ColumnValue_JsonValue{JsonValue: `{"crew":14,"port":"NOTRD"}`}}),
		col("flags", byts(0x05)),
		col("active", i64(1)),
		col("speed_kn", &pb.ColumnValue{Value: &pb.ColumnValue_DoubleValue{DoubleValue: 13.75}}),
		col("photo", byts(0x89, 'P', 'N', 'G')),
		col("note", null()),
	}
}

// rowB is rowA as the update fixture changes it.
func rowB() []*pb.ColumnValue {
	r := rowA()
	r[2] = col("fuel_used", decimal("-123.4500"))
	r[3] = col("cargo_t", decimal("-42"))
	r[7] = col("updated_at", ts(time.Date(2026, 12, 1, 7, 2, 13, 250e3, time.UTC)))
	r[12] = col("active", i64(0))
	r[15] = col("note", str("fog off Utsira"))
	return r
}

// requireColumns compares column lists with proto equality.
func requireColumns(t testing.TB, want, got []*pb.ColumnValue) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.True(t, proto.Equal(want[i], got[i]), "column %d: want %v, got %v", i, want[i], got[i])
	}
}

// requireKind asserts err is a *DecodeError of kind k on field and returns
// it.
func requireKind(t testing.TB, err error, k cdc.ErrorKind, field string) *cdc.DecodeError {
	t.Helper()
	var de *cdc.DecodeError
	require.True(t, errors.As(err, &de), "not a *DecodeError: %v", err)
	require.Equal(t, k, de.Kind, "%v", err)
	if field != "" {
		require.Equal(t, field, de.Field, "%v", err)
	}
	return de
}

// edit decodes a JSON fixture into generic maps, lets f change it and
// encodes it again (member order becomes sorted; fine where order does
// not matter).
func edit(t testing.TB, data []byte, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	f(m)
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return out
}
