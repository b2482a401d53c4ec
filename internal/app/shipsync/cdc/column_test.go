package cdc_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// oneColumn is a schema-form create of table ops.t whose row is the single
// column "v" with the given field schema (JSON members without "field")
// and JSON value.
func oneColumn(fieldSchema, value string) []byte {
	row := `{"type":"struct","optional":true,"field":"%s","fields":[{"field":"id","type":"int32"},{"field":"v",` + fieldSchema + `}]}`
	return []byte(`{"schema":{"type":"struct","fields":[` +
		strings.ReplaceAll(row, "%s", "before") + `,` + strings.ReplaceAll(row, "%s", "after") + `,
		{"field":"source","type":"struct","fields":[{"field":"version","type":"string"},{"field":"db","type":"string"},{"field":"table","type":"string"}]},
		{"field":"op","type":"string"},{"field":"ts_ms","type":"int64","optional":true}]},
	"payload":{"before":null,"after":{"id":1,"v":` + value + `},"source":{"version":"2.7.3.Final","db":"ops","table":"t"},"op":"c","ts_ms":1}}`)
}

const intKey = `{"id":1}`

func semantic(typ, name string) string {
	return `"type":"` + typ + `","optional":true,"name":"` + name + `"`
}

func decimalSchema(scale string) string {
	return `"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"` + scale + `"}`
}

func TestColumnTypes(t *testing.T) {
	t.Parallel()
	d := newDecoder(t, cdc.Config{Types: cdc.TypeMap{"ops.t": {"id": {Type: "int32"}}}})
	utc := func(y int, mo time.Month, dd, h, mi, s, ns int) *pb.ColumnValue {
		return ts(time.Date(y, mo, dd, h, mi, s, ns, time.UTC))
	}
	tm := func(s string) *pb.ColumnValue { return &pb.ColumnValue{Value: &pb.ColumnValue_TimeValue{TimeValue: s}} }
	date := func(s string) *pb.ColumnValue { return &pb.ColumnValue{Value: &pb.ColumnValue_DateValue{DateValue: s}} }
	dbl := func(f float64) *pb.ColumnValue {
		return &pb.ColumnValue{Value: &pb.ColumnValue_DoubleValue{DoubleValue: f}}
	}
	for _, tc := range []struct {
		name, schema, value string
		want                *pb.ColumnValue // nil: want IncompatibleType
	}{
		{"int8", `"type":"int8"`, `-128`, i64(-128)},
		{"int8 out of range", `"type":"int8"`, `128`, nil},
		{"int16", `"type":"int16"`, `32767`, i64(32767)},
		{"int32", `"type":"int32"`, `-2147483648`, i64(math.MinInt32)},
		{"int32 out of range", `"type":"int32"`, `2147483648`, nil},
		{"int64", `"type":"int64"`, `9223372036854775807`, i64(math.MaxInt64)},
		{"int64 fraction", `"type":"int64"`, `1.5`, nil},
		{"int as string", `"type":"int32"`, `"12"`, nil},
		{"float32", `"type":"float32"`, `1.5`, dbl(1.5)},
		{"float64", `"type":"float64"`, `-2.25e-3`, dbl(-2.25e-3)},
		{"float64 NaN text", `"type":"float64"`, `"NaN"`, dbl(math.NaN())},
		{"float64 other text", `"type":"float64"`, `"1.5"`, nil},
		{"boolean", `"type":"boolean"`, `true`, &pb.ColumnValue{Value: &pb.ColumnValue_BoolValue{BoolValue: true}}},
		{"boolean as number", `"type":"boolean"`, `1`, nil},
		{"string", `"type":"string"`, `"Tromsø"`, str("Tromsø")},
		{"empty string is not null", `"type":"string"`, `""`, str("")},
		{"bytes", `"type":"bytes"`, `"AAEC/w=="`, byts(0, 1, 2, 0xff)},
		{"bytes bad base64", `"type":"bytes"`, `"AAE*"`, nil},
		{"null optional", `"type":"string","optional":true`, `null`, null()},
		{"null required", `"type":"string","optional":false`, `null`, nil},
		{"enum", semantic("string", "io.debezium.data.Enum"), `"AT_SEA"`, str("AT_SEA")},
		{"decimal scale 4 positive", decimalSchema("4"), `"AQ=="`, decimal("0.0001")},
		{"decimal scale 4 negative", decimalSchema("4"), `"7Sm8"`, decimal("-123.4500")},
		{"decimal scale 0 positive", decimalSchema("0"), `"AP8="`, decimal("255")},
		{"decimal scale 0 negative", decimalSchema("0"), `"/w=="`, decimal("-1")},
		{"decimal zero", decimalSchema("2"), `"AA=="`, decimal("0.00")},
		{"decimal empty bytes", decimalSchema("2"), `""`, nil},
		{"decimal as number", decimalSchema("2"), `12.5`, nil},
		{"decimal declared int64", `"type":"int64","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"}`, `"AA=="`, nil},
		{"date", semantic("int32", "io.debezium.time.Date"), `20788`, date("2026-12-01")},
		{"date before epoch", semantic("int32", "io.debezium.time.Date"), `-1`, date("1969-12-31")},
		{"date out of range", semantic("int32", "io.debezium.time.Date"), `-800000`, nil},
		{"connect date", semantic("int32", "org.apache.kafka.connect.data.Date"), `0`, date("1970-01-01")},
		{"time ms", semantic("int32", "io.debezium.time.Time"), `45296789`, tm("12:34:56.789000")},
		{"time µs", semantic("int64", "io.debezium.time.MicroTime"), `45296000001`, tm("12:34:56.000001")},
		{"time ns", semantic("int64", "io.debezium.time.NanoTime"), `45296000000007`, tm("12:34:56.000000007")},
		{"time whole seconds", semantic("int64", "io.debezium.time.MicroTime"), `0`, tm("00:00:00")},
		{"time negative", semantic("int64", "io.debezium.time.MicroTime"), `-5400000000`, tm("-01:30:00")},
		{"time past a day", semantic("int64", "io.debezium.time.MicroTime"), `3020399000000`, tm("838:59:59")},
		{"time absurd", semantic("int64", "io.debezium.time.MicroTime"), `9223372036854775807`, nil},
		{"time declared int64 for ms", semantic("int64", "io.debezium.time.Time"), `1`, nil},
		{"timestamp ms", semantic("int64", "io.debezium.time.Timestamp"), `1796107260500`, utc(2026, 12, 1, 6, 41, 0, 500e6)},
		{"timestamp µs", semantic("int64", "io.debezium.time.MicroTimestamp"), `1796107260500001`, utc(2026, 12, 1, 6, 41, 0, 500001e3)},
		{"timestamp ns", semantic("int64", "io.debezium.time.NanoTimestamp"), `1796107260500000009`, utc(2026, 12, 1, 6, 41, 0, 500000009)},
		{"timestamp before epoch", semantic("int64", "io.debezium.time.Timestamp"), `-1`, utc(1969, 12, 31, 23, 59, 59, 999e6)},
		{"timestamp out of range", semantic("int64", "io.debezium.time.Timestamp"), `9223372036854775807`, nil},
		{"connect timestamp", semantic("int64", "org.apache.kafka.connect.data.Timestamp"), `0`, utc(1970, 1, 1, 0, 0, 0, 0)},
		{"zoned UTC", semantic("string", "io.debezium.time.ZonedTimestamp"), `"2026-12-01T06:41:00.123456Z"`, utc(2026, 12, 1, 6, 41, 0, 123456e3)},
		{"zoned offset", semantic("string", "io.debezium.time.ZonedTimestamp"), `"2026-12-01T08:41:00+02:00"`, utc(2026, 12, 1, 6, 41, 0, 0)},
		{"zoned no zone", semantic("string", "io.debezium.time.ZonedTimestamp"), `"2026-12-01 06:41:00"`, nil},
		{"json", semantic("string", "io.debezium.data.Json"), `"[1,{\"a\":null}]"`, &pb.ColumnValue{Value: &pb.ColumnValue_JsonValue{JsonValue: `[1,{"a":null}]`}}},
		{"json invalid", semantic("string", "io.debezium.data.Json"), `"{"`, nil},
		{"bits", semantic("bytes", "io.debezium.data.Bits"), `"gAE="`, byts(0x80, 0x01)},
		{"bits declared string", semantic("string", "io.debezium.data.Bits"), `"gAE="`, nil},
		{"unknown semantic type", semantic("string", "io.debezium.data.Uuid"), `"x"`, nil},
		{"geometry struct", `"type":"struct","optional":true,"name":"io.debezium.data.geometry.Point","fields":[{"field":"x","type":"float64"}]`, `{"x":1}`, nil},
		{"array type", `"type":"array","items":{"type":"int32"}`, `[1]`, nil},
	} {
		ev, err := d.Decode(cdc.Message{Topic: "p.ops.t", Key: []byte(intKey), Value: oneColumn(tc.schema, tc.value)})
		if tc.want == nil {
			requireKind(t, err, cdc.IncompatibleType, "value.payload.after.v")
			continue
		}
		require.NoError(t, err, tc.name)
		got := ev.After.Columns[1]
		tc.want.Name = "v"
		if f, ok := tc.want.Value.(*pb.ColumnValue_DoubleValue); ok && math.IsNaN(f.DoubleValue) {
			require.True(t, math.IsNaN(got.GetDoubleValue()), tc.name)
			continue
		}
		require.True(t, proto.Equal(tc.want, got), "%s: want %v, got %v", tc.name, tc.want, got)
	}
}
