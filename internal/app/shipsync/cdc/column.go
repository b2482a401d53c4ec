package cdc

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// Semantic type names (a schema's `name`) that this package maps. Any other
// name on a column is IncompatibleType: a value is never mapped by its
// physical type alone when the connector said it means something else.
const (
	SemanticDecimal        = "org.apache.kafka.connect.data.Decimal"
	SemanticConnectDate    = "org.apache.kafka.connect.data.Date"
	SemanticConnectTime    = "org.apache.kafka.connect.data.Time"
	SemanticConnectTs      = "org.apache.kafka.connect.data.Timestamp"
	SemanticDate           = "io.debezium.time.Date"
	SemanticTime           = "io.debezium.time.Time"
	SemanticMicroTime      = "io.debezium.time.MicroTime"
	SemanticNanoTime       = "io.debezium.time.NanoTime"
	SemanticTimestamp      = "io.debezium.time.Timestamp"
	SemanticMicroTimestamp = "io.debezium.time.MicroTimestamp"
	SemanticNanoTimestamp  = "io.debezium.time.NanoTimestamp"
	SemanticZonedTimestamp = "io.debezium.time.ZonedTimestamp"
	SemanticYear           = "io.debezium.time.Year"
	SemanticJSON           = "io.debezium.data.Json"
	SemanticBits           = "io.debezium.data.Bits"
	SemanticEnum           = "io.debezium.data.Enum"
	SemanticEnumSet        = "io.debezium.data.EnumSet"
)

// ColumnType is a column's declared type: the Kafka Connect physical Type
// ("int8", "int16", "int32", "int64", "float32", "float64", "boolean",
// "string", "bytes"), the semantic Name ("" for none, else one of the
// Semantic... constants) and, for SemanticDecimal, the Scale. With a schema
// it is read from the message; without one it comes from a TypeMap.
type ColumnType struct {
	Type  string
	Name  string
	Scale int
	// Required: NULL is refused (IncompatibleType). A schema's
	// `optional: false` sets it; a TypeMap entry may.
	Required bool
}

// TypeMap types the columns of messages that carry no schema
// (schemas.enable=false), which alone cannot tell a DECIMAL (base64 text)
// or a DATE (a day number) from a string or an integer. It is keyed by
// "database.table" (source.db and source.table), then by column name. A
// schema-less message with a column the map does not type fails with
// MissingType; the decoder never guesses a type from a JSON value.
type TypeMap map[string]map[string]ColumnType

// schema is a parsed JsonConverter schema.
type schema struct {
	typ      string
	name     string
	optional bool
	scale    int
	fields   []field
}

type field struct {
	name string
	s    *schema
}

func (s *schema) column() ColumnType {
	return ColumnType{Type: s.typ, Name: s.name, Scale: s.scale, Required: !s.optional}
}

// fieldByName returns the struct field named n, or nil.
func (s *schema) fieldByName(n string) *schema {
	for _, f := range s.fields {
		if f.name == n {
			return f.s
		}
	}
	return nil
}

// parseSchema reads a JsonConverter schema object: type, optional name,
// optional, parameters (only Decimal's scale is used) and, for a struct,
// its fields in order. Array and map schemas parse (so an envelope that has
// one still reads) but a column of those types is IncompatibleType.
func parseSchema(v any, path string) (*schema, error) {
	o, ok := v.(*object)
	if !ok {
		return nil, fail(Malformed, path, "schema is not an object")
	}
	s := &schema{}
	t, ok := o.vals["type"].(string)
	if !ok {
		return nil, fail(Malformed, path+".type", "missing or not a string")
	}
	s.typ = t
	if n, present := o.get("name"); present && n != nil {
		if s.name, ok = n.(string); !ok {
			return nil, fail(Malformed, path+".name", "not a string")
		}
	}
	if opt, present := o.get("optional"); present && opt != nil {
		if s.optional, ok = opt.(bool); !ok {
			return nil, fail(Malformed, path+".optional", "not a boolean")
		}
	}
	if s.name == SemanticDecimal {
		p, _ := o.vals["parameters"].(*object)
		if p == nil {
			return nil, fail(Malformed, path+".parameters", "decimal without parameters")
		}
		sc, _ := p.vals["scale"].(string)
		n, err := strconv.Atoi(sc)
		if err != nil || n < 0 || n > 1000 {
			return nil, fail(Malformed, path+".parameters.scale", "missing or not a scale")
		}
		s.scale = n
	}
	if t != "struct" {
		return s, nil
	}
	fs, ok := o.vals["fields"].([]any)
	if !ok {
		return nil, fail(Malformed, path+".fields", "missing or not an array")
	}
	seen := map[string]bool{}
	for i, fv := range fs {
		fp := fmt.Sprintf("%s.fields[%d]", path, i)
		fo, ok := fv.(*object)
		if !ok {
			return nil, fail(Malformed, fp, "not an object")
		}
		name, ok := fo.vals["field"].(string)
		if !ok || name == "" {
			return nil, fail(Malformed, fp+".field", "missing or not a string")
		}
		if seen[name] {
			return nil, fail(Malformed, fp+".field", "duplicate field")
		}
		seen[name] = true
		fs, err := parseSchema(fo, fp)
		if err != nil {
			return nil, err
		}
		s.fields = append(s.fields, field{name: name, s: fs})
	}
	return s, nil
}

// columnValue maps one JSON value of declared type ct to a ColumnValue
// named name. path names the column in errors; v is never quoted.
func columnValue(name string, ct ColumnType, v any, path string) (*pb.ColumnValue, error) {
	if v == nil {
		if ct.Required {
			return nil, fail(IncompatibleType, path, "null in a required column")
		}
		return &pb.ColumnValue{Name: name, Value: &pb.ColumnValue_Null{Null: true}}, nil
	}
	var (
		cv  *pb.ColumnValue
		err error
	)
	switch ct.Name {
	case "", SemanticEnum, SemanticEnumSet, SemanticYear:
		cv, err = physicalValue(ct.Type, v)
	case SemanticDecimal:
		cv, err = decimalValue(ct, v)
	case SemanticDate, SemanticConnectDate:
		cv, err = dateValue(ct, v)
	case SemanticTime, SemanticMicroTime, SemanticNanoTime, SemanticConnectTime:
		cv, err = timeValue(ct, v)
	case SemanticTimestamp, SemanticMicroTimestamp, SemanticNanoTimestamp, SemanticConnectTs:
		cv, err = timestampValue(ct, v)
	case SemanticZonedTimestamp:
		cv, err = zonedValue(ct, v)
	case SemanticJSON:
		cv, err = jsonValue(ct, v)
	case SemanticBits:
		if ct.Type != "bytes" {
			return nil, fail(IncompatibleType, path, "bits not declared as bytes")
		}
		cv, err = physicalValue(ct.Type, v)
	default:
		return nil, fail(IncompatibleType, path, "semantic type not supported")
	}
	if err != nil {
		return nil, fail(IncompatibleType, path, err.Error())
	}
	cv.Name = name
	return cv, nil
}

// typeError is a fixed, value-free reason for IncompatibleType.
type typeError string

func (e typeError) Error() string { return string(e) }

// intBits gives the width of each Kafka Connect integer type.
var intBits = map[string]int{"int8": 8, "int16": 16, "int32": 32, "int64": 64}

// physicalValue maps a value by its Kafka Connect physical type alone.
func physicalValue(typ string, v any) (*pb.ColumnValue, error) {
	switch typ {
	case "int8", "int16", "int32", "int64":
		n, err := intOf(typ, v)
		if err != nil {
			return nil, err
		}
		return &pb.ColumnValue{Value: &pb.ColumnValue_IntValue{IntValue: n}}, nil
	case "float32", "float64":
		f, err := floatOf(v)
		if err != nil {
			return nil, err
		}
		return &pb.ColumnValue{Value: &pb.ColumnValue_DoubleValue{DoubleValue: f}}, nil
	case "boolean":
		b, ok := v.(bool)
		if !ok {
			return nil, typeError("not a boolean")
		}
		return &pb.ColumnValue{Value: &pb.ColumnValue_BoolValue{BoolValue: b}}, nil
	case "string":
		s, ok := v.(string)
		if !ok {
			return nil, typeError("not a string")
		}
		return &pb.ColumnValue{Value: &pb.ColumnValue_StringValue{StringValue: s}}, nil
	case "bytes":
		b, err := bytesOf(v)
		if err != nil {
			return nil, err
		}
		return &pb.ColumnValue{Value: &pb.ColumnValue_BytesValue{BytesValue: b}}, nil
	default:
		return nil, typeError("type not supported")
	}
}

func intOf(typ string, v any) (int64, error) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, typeError("not a number")
	}
	bits, ok := intBits[typ]
	if !ok {
		return 0, typeError("not declared as an integer")
	}
	n, err := strconv.ParseInt(string(num), 10, bits)
	if err != nil {
		return 0, typeError("not an integer in range")
	}
	return n, nil
}

func floatOf(v any) (float64, error) {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return 0, typeError("not a number in range")
		}
		return f, nil
	case string:
		// Jackson writes non-finite doubles as these strings.
		switch x {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
	}
	return 0, typeError("not a number")
}

func bytesOf(v any) ([]byte, error) {
	s, ok := v.(string)
	if !ok {
		return nil, typeError("not a base64 string")
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, typeError("bad base64")
	}
	return b, nil
}

// decimalValue: Kafka Connect Decimal is the unscaled value as big-endian
// two's complement bytes (base64 in JSON) and the scale as a schema
// parameter; the result is the exact decimal text.
func decimalValue(ct ColumnType, v any) (*pb.ColumnValue, error) {
	if ct.Type != "bytes" {
		return nil, typeError("decimal not declared as bytes")
	}
	b, err := bytesOf(v)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 || len(b) > 64 {
		return nil, typeError("decimal of bad length")
	}
	n := new(big.Int).SetBytes(b)
	if b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(8*len(b))))
	}
	return &pb.ColumnValue{Value: &pb.ColumnValue_DecimalValue{DecimalValue: formatDecimal(n, ct.Scale)}}, nil
}

// formatDecimal writes unscaled × 10^-scale exactly: "-123.4500" for
// (-1234500, 4), "0.05" for (5, 2), "42" for (42, 0).
func formatDecimal(n *big.Int, scale int) string {
	neg := n.Sign() < 0
	digits := new(big.Int).Abs(n).String()
	if scale > 0 {
		if len(digits) <= scale {
			digits = strings.Repeat("0", scale-len(digits)+1) + digits
		}
		digits = digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
	}
	if neg {
		return "-" + digits
	}
	return digits
}

// dateValue: days since 1970-01-01 → "YYYY-MM-DD" (years 0001–9999).
func dateValue(ct ColumnType, v any) (*pb.ColumnValue, error) {
	if ct.Type != "int32" {
		return nil, typeError("date not declared as int32")
	}
	days, err := intOf(ct.Type, v)
	if err != nil {
		return nil, err
	}
	d := time.Unix(days*86400, 0).UTC()
	if d.Year() < 1 || d.Year() > 9999 {
		return nil, typeError("date out of range")
	}
	return &pb.ColumnValue{Value: &pb.ColumnValue_DateValue{DateValue: d.Format("2006-01-02")}}, nil
}

// timeUnit is the unit of a temporal semantic type's number.
func timeUnit(name string) time.Duration {
	switch name {
	case SemanticMicroTime, SemanticMicroTimestamp:
		return time.Microsecond
	case SemanticNanoTime, SemanticNanoTimestamp:
		return time.Nanosecond
	default:
		return time.Millisecond
	}
}

// wantType checks the physical type a temporal semantic type is carried in.
func wantType(ct ColumnType) error {
	want := "int64"
	if ct.Name == SemanticTime || ct.Name == SemanticConnectTime {
		want = "int32"
	}
	if ct.Type != want {
		return typeError("temporal type not declared as " + want)
	}
	return nil
}

// maxTimeOfDay bounds a TIME value: MySQL's TIME range is ±838:59:59, so
// anything beyond a few thousand hours is not a TIME.
const maxTimeOfDay = 10000 * time.Hour

// timeValue: a duration since midnight (MySQL TIME may be negative or past
// 24 h) → "[-]HH:MM:SS[.ffffff]", nine fraction digits only if the value has
// sub-microsecond precision.
func timeValue(ct ColumnType, v any) (*pb.ColumnValue, error) {
	if err := wantType(ct); err != nil {
		return nil, err
	}
	n, err := intOf(ct.Type, v)
	if err != nil {
		return nil, err
	}
	unit := timeUnit(ct.Name)
	if n > int64(maxTimeOfDay/unit) || n < -int64(maxTimeOfDay/unit) {
		return nil, typeError("time out of range")
	}
	d := time.Duration(n) * unit
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	h, m, s := d/time.Hour, d%time.Hour/time.Minute, d%time.Minute/time.Second
	out := fmt.Sprintf("%s%02d:%02d:%02d", sign, h, m, s)
	switch ns := d % time.Second; {
	case ns == 0:
	case ns%time.Microsecond == 0:
		out += fmt.Sprintf(".%06d", ns/time.Microsecond)
	default:
		out += fmt.Sprintf(".%09d", ns)
	}
	return &pb.ColumnValue{Value: &pb.ColumnValue_TimeValue{TimeValue: out}}, nil
}

// timestampValue: ms, µs or ns since the epoch (MySQL DATETIME, which
// Debezium writes as if it were UTC) → an instant in UTC.
func timestampValue(ct ColumnType, v any) (*pb.ColumnValue, error) {
	if err := wantType(ct); err != nil {
		return nil, err
	}
	n, err := intOf(ct.Type, v)
	if err != nil {
		return nil, err
	}
	var t time.Time
	switch timeUnit(ct.Name) {
	case time.Millisecond:
		t = time.UnixMilli(n)
	case time.Microsecond:
		t = time.UnixMicro(n)
	default:
		t = time.Unix(0, n)
	}
	return timestamp(t)
}

// zonedValue: ISO-8601 text with an offset (MySQL TIMESTAMP, which
// Debezium writes in UTC, "2026-12-02T05:00:00.123456Z") → an instant.
func zonedValue(ct ColumnType, v any) (*pb.ColumnValue, error) {
	if ct.Type != "string" {
		return nil, typeError("zoned timestamp not declared as string")
	}
	s, ok := v.(string)
	if !ok {
		return nil, typeError("not a string")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, typeError("not an ISO-8601 timestamp")
	}
	return timestamp(t)
}

// jsonValue: a JSON document carried as text; it must be valid JSON.
func jsonValue(ct ColumnType, v any) (*pb.ColumnValue, error) {
	if ct.Type != "string" {
		return nil, typeError("json not declared as string")
	}
	s, ok := v.(string)
	if !ok {
		return nil, typeError("not a string")
	}
	if !json.Valid([]byte(s)) {
		return nil, typeError("not valid JSON text")
	}
	return &pb.ColumnValue{Value: &pb.ColumnValue_JsonValue{JsonValue: s}}, nil
}

// timestamp wraps an instant, refusing one outside 0001–9999 UTC, which
// google.protobuf.Timestamp cannot hold.
func timestamp(t time.Time) (*pb.ColumnValue, error) {
	ts := timestamppb.New(t.UTC())
	if ts.CheckValid() != nil {
		return nil, typeError("timestamp out of range")
	}
	return &pb.ColumnValue{Value: &pb.ColumnValue_TimestampValue{TimestampValue: ts}}, nil
}
