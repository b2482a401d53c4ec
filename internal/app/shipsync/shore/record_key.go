package shore

import (
	"crypto/sha256"
	"strconv"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// RecordKey is a record's key as the shore stores it: the SHA-256 of the
// key columns' deterministic Protobuf encoding (record heads, conflicts and
// the apply queue are keyed by it) and their JSON text (for operators: the
// Protobuf JSON mapping of a RowImage, without spaces).
func RecordKey(pk []*pb.ColumnValue) (hash []byte, text string, err error) {
	key := &pb.RowImage{Columns: pk}
	raw, err := proto.MarshalOptions{Deterministic: true}.Marshal(key)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(raw)
	if j, ok := keyJSON(pk); ok {
		return sum[:], j, nil
	}
	j, err := protojson.MarshalOptions{}.Marshal(key)
	if err != nil {
		return nil, "", err
	}
	return sum[:], string(j), nil
}

// keyJSON writes the JSON of a RowImage of pk as protojson does (field
// names in lowerCamelCase, 64-bit integers quoted, an empty name or list
// left out) for the value kinds keys are made of — integers, text, dates,
// times, decimals, booleans, null — each string valid UTF-8 (protojson
// refuses others). ok is false for any other value: RecordKey then asks
// protojson, which took a fifth of the shore's own CPU per received event
// when it wrote every key (docs/benchmarks.md).
func keyJSON(pk []*pb.ColumnValue) (text string, ok bool) {
	if len(pk) == 0 {
		return "{}", true
	}
	b := make([]byte, 0, 16+48*len(pk))
	b = append(b, `{"columns":[`...)
	for i, c := range pk {
		if c == nil {
			return "", false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		sep := false
		field := func(name string) {
			if sep {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = append(b, name...)
			b = append(b, `":`...)
			sep = true
		}
		if c.Name != "" {
			if !utf8.ValidString(c.Name) {
				return "", false
			}
			field("name")
			b = appendJSONString(b, c.Name)
		}
		var s, name string
		switch v := c.Value.(type) {
		case nil:
		case *pb.ColumnValue_Null:
			field("null")
			b = strconv.AppendBool(b, v.Null)
		case *pb.ColumnValue_BoolValue:
			field("boolValue")
			b = strconv.AppendBool(b, v.BoolValue)
		case *pb.ColumnValue_IntValue:
			field("intValue")
			b = append(strconv.AppendInt(append(b, '"'), v.IntValue, 10), '"')
		case *pb.ColumnValue_UintValue:
			field("uintValue")
			b = append(strconv.AppendUint(append(b, '"'), v.UintValue, 10), '"')
		case *pb.ColumnValue_StringValue:
			s, name = v.StringValue, "stringValue"
		case *pb.ColumnValue_DecimalValue:
			s, name = v.DecimalValue, "decimalValue"
		case *pb.ColumnValue_DateValue:
			s, name = v.DateValue, "dateValue"
		case *pb.ColumnValue_TimeValue:
			s, name = v.TimeValue, "timeValue"
		case *pb.ColumnValue_JsonValue:
			s, name = v.JsonValue, "jsonValue"
		default: // double, bytes, timestamp: protojson's own formats
			return "", false
		}
		if name != "" {
			if !utf8.ValidString(s) {
				return "", false
			}
			field(name)
			b = appendJSONString(b, s)
		}
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	return string(b), true
}

// appendJSONString appends s (valid UTF-8) quoted as protojson quotes it:
// only '"', '\\' and control characters escaped, the short escapes where
// JSON has them.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= ' ' && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
