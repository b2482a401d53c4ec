package capture_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/cdc"
)

// TestSchemaFor: each MariaDB type maps to the schema Debezium's MySQL
// connector writes with its default settings.
func TestSchemaFor(t *testing.T) {
	t.Parallel()
	col := func(dataType, columnType string) capture.Column {
		return capture.Column{Name: "c", DataType: dataType, ColumnType: columnType, Nullable: true}
	}
	for _, tc := range []struct {
		col    capture.Column
		typ    string
		name   string
		params map[string]string
	}{
		{col("tinyint", "tinyint(4)"), "int16", "", nil},
		{col("tinyint", "tinyint(3) unsigned"), "int16", "", nil},
		{col("smallint", "smallint(6)"), "int16", "", nil},
		{col("smallint", "smallint(5) unsigned"), "int32", "", nil},
		{col("mediumint", "mediumint(9)"), "int32", "", nil},
		{col("mediumint", "mediumint(8) unsigned"), "int32", "", nil},
		{col("int", "int(11)"), "int32", "", nil},
		{col("int", "int(10) unsigned"), "int64", "", nil},
		{col("bigint", "bigint(20)"), "int64", "", nil},
		{col("bigint", "bigint(20) unsigned"), "int64", "", nil},
		{col("float", "float"), "float32", "", nil},
		{col("double", "double"), "float64", "", nil},
		{capture.Column{Name: "c", DataType: "decimal", ColumnType: "decimal(12,4)", Precision: 12, Scale: 4},
			"bytes", cdc.SemanticDecimal, map[string]string{"scale": "4", "connect.decimal.precision": "12"}},
		{capture.Column{Name: "c", DataType: "bit", ColumnType: "bit(1)", Precision: 1}, "boolean", "", nil},
		{capture.Column{Name: "c", DataType: "bit", ColumnType: "bit(10)", Precision: 10}, "bytes", cdc.SemanticBits,
			map[string]string{"length": "10"}},
		{col("char", "char(3)"), "string", "", nil},
		{col("varchar", "varchar(64)"), "string", "", nil},
		{col("text", "text"), "string", "", nil},
		{col("longtext", "longtext"), "string", "", nil},
		{capture.Column{Name: "c", DataType: "longtext", ColumnType: "longtext", JSON: true}, "string", cdc.SemanticJSON, nil},
		{col("enum", "enum('sea','port','it''s')"), "string", cdc.SemanticEnum, map[string]string{"allowed": "sea,port,it's"}},
		{col("set", "set('a','b')"), "string", cdc.SemanticEnumSet, map[string]string{"allowed": "a,b"}},
		{col("binary", "binary(4)"), "bytes", "", nil},
		{col("varbinary", "varbinary(8)"), "bytes", "", nil},
		{col("blob", "blob"), "bytes", "", nil},
		{col("longblob", "longblob"), "bytes", "", nil},
		{col("date", "date"), "int32", cdc.SemanticDate, nil},
		{capture.Column{Name: "c", DataType: "datetime", ColumnType: "datetime"}, "int64", cdc.SemanticTimestamp, nil},
		{capture.Column{Name: "c", DataType: "datetime", ColumnType: "datetime(3)", DatetimePrecision: 3}, "int64",
			cdc.SemanticTimestamp, nil},
		{capture.Column{Name: "c", DataType: "datetime", ColumnType: "datetime(6)", DatetimePrecision: 6}, "int64",
			cdc.SemanticMicroTimestamp, nil},
		{col("timestamp", "timestamp(3)"), "string", cdc.SemanticZonedTimestamp, nil},
		{col("time", "time(6)"), "int64", cdc.SemanticMicroTime, nil},
		{col("year", "year(4)"), "int32", cdc.SemanticYear, nil},
	} {
		f, err := capture.SchemaFor(tc.col)
		require.NoError(t, err, tc.col.ColumnType)
		require.Equal(t, tc.typ, f.Type, tc.col.ColumnType)
		require.Equal(t, tc.name, f.Name, tc.col.ColumnType)
		require.Equal(t, tc.params, f.Parameters, tc.col.ColumnType)
		require.Equal(t, tc.col.Nullable, f.Optional, tc.col.ColumnType)
		require.Equal(t, "c", f.Field)
	}
	for _, dt := range []string{"point", "geometry", "polygon"} {
		_, err := capture.SchemaFor(col(dt, dt))
		require.True(t, errors.Is(err, capture.ErrUnsupportedType), dt)
	}
}

// TestDebeziumValue: the value conversions, including the edges of each.
func TestDebeziumValue(t *testing.T) {
	t.Parallel()
	dec := func(scale int) capture.Column {
		return capture.Column{Name: "d", DataType: "decimal", Precision: 12, Scale: scale, Nullable: true}
	}
	b64 := func(b ...byte) string { return base64.StdEncoding.EncodeToString(b) }
	for _, tc := range []struct {
		what string
		col  capture.Column
		raw  string
		want any
	}{
		{"decimal 0", dec(4), `"0.0000"`, b64(0)},
		{"decimal 127", dec(0), `"127"`, b64(0x7f)},
		{"decimal 128 keeps a sign byte", dec(0), `"128"`, b64(0x00, 0x80)},
		{"decimal -128", dec(0), `"-128"`, b64(0x80)},
		{"decimal -129", dec(0), `"-129"`, b64(0xff, 0x7f)},
		{"decimal -1234.5678", dec(4), `"-1234.5678"`, b64(0xff, 0x43, 0x9e, 0xb2)},
		{"decimal -0.0001", dec(4), `"-0.0001"`, b64(0xff)},
		{"bigint unsigned wraps like Debezium's long mode", capture.Column{DataType: "bigint", ColumnType: "bigint(20) unsigned"},
			`18446744073709551615`, json.Number("-1")},
		{"float32 shortest", capture.Column{DataType: "float"}, `1.100000023841858`, json.Number("1.1")},
		{"bit(1)", capture.Column{DataType: "bit", Precision: 1}, `0`, false},
		{"bit(16) little-endian", capture.Column{DataType: "bit", Precision: 16}, `258`, b64(0x02, 0x01)},
		{"blob with TO_BASE64 line breaks", capture.Column{DataType: "blob"}, `"AAEC\nAw=="`, b64(0, 1, 2, 3)},
		{"date before 1970", capture.Column{DataType: "date"}, `"1969-12-31"`, json.Number("-1")},
		{"zero date, nullable", capture.Column{DataType: "date", Nullable: true}, `"0000-00-00"`, nil},
		{"datetime ms", capture.Column{DataType: "datetime"}, `"1970-01-01 00:00:01.000000"`, json.Number("1000")},
		{"datetime µs", capture.Column{DataType: "datetime", DatetimePrecision: 6}, `"1970-01-01 00:00:01.000002"`,
			json.Number("1000002")},
		{"timestamp(3)", capture.Column{DataType: "timestamp", DatetimePrecision: 3}, `"1796107262.500000"`,
			"2026-12-01T06:41:02.500Z"},
		{"timestamp(0)", capture.Column{DataType: "timestamp"}, `"1796107262"`, "2026-12-01T06:41:02Z"},
		{"time negative", capture.Column{DataType: "time", DatetimePrecision: 6}, `"-838:59:59.000000"`,
			json.Number("-3020399000000")},
		{"json as text", capture.Column{DataType: "longtext", JSON: true}, `"{\"a\":1}"`, `{"a":1}`},
		{"json as JSON", capture.Column{DataType: "longtext", JSON: true}, `{"a": [1, 2]}`, `{"a":[1,2]}`},
		{"null in a nullable column", dec(2), `null`, nil},
	} {
		got, err := capture.DebeziumValue(tc.col, json.RawMessage(tc.raw))
		require.NoError(t, err, tc.what)
		require.Equal(t, tc.want, got, tc.what)
	}
	for _, tc := range []struct {
		what string
		col  capture.Column
		raw  string
	}{
		{"null in NOT NULL", capture.Column{Name: "n", DataType: "int"}, `null`},
		{"decimal beyond its scale", dec(2), `"1.234"`},
		{"decimal not a number", dec(2), `"12a"`},
		{"int not a number", capture.Column{Name: "n", DataType: "int"}, `"x"`},
		{"date not a date", capture.Column{Name: "n", DataType: "date"}, `"2026-13-01"`},
		{"blob not base64", capture.Column{Name: "n", DataType: "blob"}, `"%%%"`},
	} {
		_, err := capture.DebeziumValue(tc.col, json.RawMessage(tc.raw))
		require.Error(t, err, tc.what)
		require.NotContains(t, err.Error(), tc.raw, "%s: no value in the error", tc.what)
	}
}

// ExampleSchemaFor shows the schema field of a DECIMAL(12,4) column.
func ExampleSchemaFor() {
	f, _ := capture.SchemaFor(capture.Column{Name: "fuel", DataType: "decimal", ColumnType: "decimal(12,4)",
		Nullable: true, Precision: 12, Scale: 4})
	b, _ := json.Marshal(f)
	fmt.Println(string(b))
	// Output:
	// {"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"connect.decimal.precision":"12","scale":"4"},"field":"fuel"}
}

// FuzzDebeziumValue: any trigger JSON value for any mapped column type
// converts or fails with an error that never quotes the input; it never
// panics.
func FuzzDebeziumValue(f *testing.F) {
	types := []capture.Column{
		{DataType: "int"}, {DataType: "bigint", ColumnType: "bigint(20) unsigned"}, {DataType: "float"},
		{DataType: "double"}, {DataType: "decimal", Precision: 12, Scale: 4}, {DataType: "bit", Precision: 1},
		{DataType: "bit", Precision: 10}, {DataType: "varchar"}, {DataType: "longtext", JSON: true},
		{DataType: "blob"}, {DataType: "date"}, {DataType: "datetime", DatetimePrecision: 6},
		{DataType: "timestamp", DatetimePrecision: 3}, {DataType: "time", DatetimePrecision: 6}, {DataType: "year"},
	}
	for i, seed := range []string{`1`, `-1.5`, `"-1234.5678"`, `"AAEC\nAw=="`, `"2026-12-01"`,
		`"2026-12-01 07:02:13.123456"`, `"1796107262.500"`, `"-838:59:59.000000"`, `{"a":1}`, `null`, `"x"`} {
		f.Add(uint8(i), seed, i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, typ uint8, raw string, nullable bool) {
		col := types[int(typ)%len(types)]
		col.Name, col.Nullable = "c", nullable
		_, err := capture.DebeziumValue(col, json.RawMessage(raw))
		if err == nil {
			return
		}
		// Every error is a fixed phrase about a named column: nothing of
		// the input can be in it.
		msg := err.Error()
		if rest, ok := strings.CutPrefix(msg, "column c ("+col.DataType+"): "); ok {
			msg = rest
		} else if rest, ok := strings.CutPrefix(msg, "column c: "); ok {
			msg = rest
		}
		if !slices.Contains(valueProblems, msg) {
			t.Fatalf("unexpected error text %q", err)
		}
	})
}

// valueProblems are the fixed phrases of DebeziumValue's errors.
var valueProblems = []string{"not a JSON number", "not an integer in range", "not a float in range",
	"not a bit value", "not JSON", "not a JSON string", "not base64", "not a decimal",
	"more fractional digits than the scale", "not a date", "not a datetime", "not an epoch time", "not a time",
	"NULL in a NOT NULL column"}
