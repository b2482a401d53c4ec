package capture

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
)

// Column is one column of a captured table as install read it from
// information_schema.COLUMNS: what the triggers write for it and what
// SchemaFor maps it to.
type Column struct {
	// Name is the column name.
	Name string `json:"name"`
	// DataType is information_schema DATA_TYPE, lower case ("int",
	// "decimal", "datetime", "longtext", …).
	DataType string `json:"data_type"`
	// ColumnType is information_schema COLUMN_TYPE ("int(10) unsigned",
	// "enum('a','b')"): signedness and the ENUM/SET members.
	ColumnType string `json:"column_type"`
	// Nullable is IS_NULLABLE = 'YES': the Debezium field is optional.
	Nullable bool `json:"nullable"`
	// Precision and Scale are NUMERIC_PRECISION and NUMERIC_SCALE (DECIMAL;
	// BIT keeps its length in Precision).
	Precision int `json:"precision,omitempty"`
	Scale     int `json:"scale,omitempty"`
	// DatetimePrecision is DATETIME_PRECISION (fractional digits of TIME,
	// DATETIME and TIMESTAMP).
	DatetimePrecision int `json:"datetime_precision,omitempty"`
	// JSON marks a MariaDB JSON column (a LONGTEXT with a json_valid check).
	JSON bool `json:"json,omitempty"`
}

// Unsigned reports whether the column is an unsigned number.
func (c Column) Unsigned() bool { return strings.Contains(c.ColumnType, "unsigned") }

// Field is one Kafka Connect schema as JsonConverter writes it: a column's
// type, or (with Fields) a struct such as a row image, the key or the
// envelope. The member order is Debezium's.
type Field struct {
	Type       string            `json:"type"`
	Optional   bool              `json:"optional"`
	Name       string            `json:"name,omitempty"`
	Version    int               `json:"version,omitempty"`
	Parameters map[string]string `json:"parameters,omitempty"`
	Default    any               `json:"default,omitempty"`
	Fields     []Field           `json:"fields,omitempty"`
	Field      string            `json:"field,omitempty"`
}

// ErrUnsupportedType is returned by SchemaFor for a column type Debezium
// would not map to a plain value (GEOMETRY and the other spatial types),
// and by install, which refuses such a table.
var ErrUnsupportedType = errors.New("capture: column type not supported")

// kind is how a column's value is carried from the trigger's JSON to the
// Debezium JSON value.
type kind int

const (
	kindInt kind = iota
	kindFloat32
	kindFloat64
	kindDecimal
	kindBool
	kindBits
	kindString
	kindBytes
	kindDate
	kindTimestampMs
	kindTimestampUs
	kindZoned
	kindTime
)

// classify maps c to its value kind and Kafka Connect schema, as the
// Debezium MySQL connector does with its default settings
// (decimal.handling.mode=precise, time.precision.mode=adaptive_time_microseconds,
// bigint.unsigned.handling.mode=long, binary.handling.mode=bytes).
func classify(c Column) (kind, Field, error) {
	f := Field{Optional: c.Nullable, Field: c.Name}
	named := func(typ, name string) { f.Type, f.Name, f.Version = typ, name, 1 }
	k := kindInt
	switch c.DataType {
	case "tinyint":
		f.Type = "int16" // TINYINT is INT16 signed or not
	case "smallint":
		f.Type = "int16"
		if c.Unsigned() {
			f.Type = "int32"
		}
	case "mediumint":
		f.Type = "int32" // an unsigned MEDIUMINT still fits
	case "int", "integer":
		f.Type = "int32"
		if c.Unsigned() {
			f.Type = "int64"
		}
	case "bigint":
		f.Type = "int64" // unsigned too: bigint.unsigned.handling.mode=long
	case "float":
		k, f.Type = kindFloat32, "float32"
	case "double", "real":
		k, f.Type = kindFloat64, "float64"
	case "decimal", "numeric":
		k = kindDecimal
		named("bytes", cdc.SemanticDecimal)
		f.Parameters = map[string]string{"scale": strconv.Itoa(c.Scale),
			"connect.decimal.precision": strconv.Itoa(c.Precision)}
	case "bit":
		if c.Precision <= 1 {
			k, f.Type = kindBool, "boolean"
		} else {
			k = kindBits
			named("bytes", cdc.SemanticBits)
			f.Parameters = map[string]string{"length": strconv.Itoa(c.Precision)}
		}
	case "char", "varchar", "tinytext", "text", "mediumtext", "longtext":
		k, f.Type = kindString, "string"
		if c.JSON {
			named("string", cdc.SemanticJSON)
		}
	case "json":
		k = kindString
		named("string", cdc.SemanticJSON)
	case "enum", "set":
		k = kindString
		named("string", cdc.SemanticEnum)
		if c.DataType == "set" {
			f.Name = cdc.SemanticEnumSet
		}
		f.Parameters = map[string]string{"allowed": strings.Join(members(c.ColumnType), ",")}
	case "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob":
		k, f.Type = kindBytes, "bytes"
	case "date":
		k = kindDate
		named("int32", cdc.SemanticDate)
	case "datetime":
		k = kindTimestampMs
		named("int64", cdc.SemanticTimestamp)
		if c.DatetimePrecision > 3 {
			k, f.Name = kindTimestampUs, cdc.SemanticMicroTimestamp
		}
	case "timestamp":
		k = kindZoned
		named("string", cdc.SemanticZonedTimestamp)
	case "time":
		k = kindTime
		named("int64", cdc.SemanticMicroTime)
	case "year":
		named("int32", cdc.SemanticYear)
	default:
		return 0, Field{}, fmt.Errorf("%w: column %s is %s", ErrUnsupportedType, bound(c.Name), bound(c.DataType))
	}
	return k, f, nil
}

// SchemaFor returns the Kafka Connect schema field Debezium writes for c,
// or an error wrapping ErrUnsupportedType.
func SchemaFor(c Column) (Field, error) {
	_, f, err := classify(c)
	return f, err
}

// members returns the quoted members of an ENUM or SET COLUMN_TYPE
// ("enum('a','b”c')" → a, b'c).
func members(columnType string) []string {
	open, end := strings.IndexByte(columnType, '('), strings.LastIndexByte(columnType, ')')
	if open < 0 || end <= open {
		return nil
	}
	var out []string
	s := columnType[open+1 : end]
	for len(s) > 0 && s[0] == '\'' {
		var b strings.Builder
		i := 1
		for ; i < len(s); i++ {
			if s[i] == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					b.WriteByte('\'')
					i++
					continue
				}
				break
			}
			if s[i] == '\\' && i+1 < len(s) {
				i++
			}
			b.WriteByte(s[i])
		}
		out = append(out, b.String())
		s = strings.TrimPrefix(s[min(i+1, len(s)):], ",")
	}
	return out
}

// triggerExpr is the SQL expression the triggers put into the changelog's
// JSON_OBJECT for column c of row ("NEW" or "OLD"): text for what JSON
// numbers would lose (DECIMAL), base64 for bytes, UTC text or epoch for
// temporal values.
func triggerExpr(c Column, row string) string {
	ref := row + "." + quoteIdent(c.Name)
	k, _, _ := classify(c)
	switch k {
	case kindDecimal, kindDate, kindTime:
		return "CAST(" + ref + " AS CHAR)"
	case kindBool, kindBits:
		return "CAST(" + ref + " + 0 AS UNSIGNED)"
	case kindBytes:
		return "TO_BASE64(" + ref + ")"
	case kindTimestampMs, kindTimestampUs:
		return "DATE_FORMAT(" + ref + ", '%Y-%m-%d %H:%i:%s.%f')"
	case kindZoned:
		// UNIX_TIMESTAMP reads the stored instant whatever the session's
		// time zone; the text of a TIMESTAMP would not.
		return "CAST(UNIX_TIMESTAMP(" + ref + ") AS CHAR)"
	}
	return ref
}

// debeziumValue converts the trigger's JSON value raw of column c into the
// value Debezium writes in a row image. Errors name the column, never the
// value.
func debeziumValue(c Column, raw json.RawMessage) (any, error) {
	k, _, err := classify(c)
	if err != nil {
		return nil, err
	}
	if len(raw) == 0 || string(raw) == "null" {
		if !c.Nullable {
			return nil, fmt.Errorf("column %s: NULL in a NOT NULL column", bound(c.Name))
		}
		return nil, nil
	}
	v, err := convert(k, c, raw)
	if err != nil {
		return nil, fmt.Errorf("column %s (%s): %w", bound(c.Name), bound(c.DataType), err)
	}
	return v, nil
}

var errNotText = errors.New("not a JSON string")

func convert(k kind, c Column, raw json.RawMessage) (any, error) {
	text := func() (string, error) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", errNotText
		}
		return s, nil
	}
	number := func() (string, error) {
		var n json.Number
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&n); err != nil {
			return "", errors.New("not a JSON number")
		}
		return n.String(), nil
	}
	switch k {
	case kindInt:
		n, err := number()
		if err != nil {
			return nil, err
		}
		if i, err := strconv.ParseInt(n, 10, 64); err == nil {
			return json.Number(strconv.FormatInt(i, 10)), nil
		}
		// BIGINT UNSIGNED above 2^63-1: Debezium's "long" mode wraps it.
		u, err := strconv.ParseUint(n, 10, 64)
		if err != nil {
			return nil, errors.New("not an integer in range")
		}
		return json.Number(strconv.FormatInt(int64(u), 10)), nil
	case kindFloat32, kindFloat64:
		n, err := number()
		if err != nil {
			return nil, err
		}
		bits := 64
		if k == kindFloat32 {
			bits = 32
		}
		f, err := strconv.ParseFloat(n, bits)
		if err != nil || math.IsInf(f, 0) {
			return nil, errors.New("not a float in range")
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, bits)), nil
	case kindBool, kindBits:
		n, err := number()
		if err != nil {
			return nil, err
		}
		u, err := strconv.ParseUint(n, 10, 64)
		if err != nil {
			return nil, errors.New("not a bit value")
		}
		if k == kindBool {
			return u != 0, nil
		}
		// io.debezium.data.Bits: little-endian, sized to the bit length.
		b := make([]byte, (c.Precision+7)/8)
		for i := range b {
			b[i] = byte(u >> (8 * i))
		}
		return base64.StdEncoding.EncodeToString(b), nil
	case kindString:
		if c.JSON || c.DataType == "json" {
			if len(raw) > 0 && raw[0] != '"' { // a server that embeds JSON as JSON
				var b bytes.Buffer
				if err := json.Compact(&b, raw); err != nil {
					return nil, errors.New("not JSON")
				}
				return b.String(), nil
			}
		}
		return text()
	case kindBytes:
		s, err := text()
		if err != nil {
			return nil, err
		}
		// TO_BASE64 wraps lines every 76 characters.
		s = strings.Map(func(r rune) rune {
			if r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, s)
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, errors.New("not base64")
		}
		return base64.StdEncoding.EncodeToString(b), nil
	case kindDecimal:
		s, err := text()
		if err != nil {
			return nil, err
		}
		u, err := unscaled(s, c.Scale)
		if err != nil {
			return nil, err
		}
		return base64.StdEncoding.EncodeToString(twosComplement(u)), nil
	case kindDate:
		s, err := text()
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(s, "0000-00-00") {
			return zeroTemporal(c, json.Number("0"))
		}
		t, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return nil, errors.New("not a date")
		}
		return json.Number(strconv.FormatInt(floorDiv(t.Unix(), 86400), 10)), nil
	case kindTimestampMs, kindTimestampUs:
		s, err := text()
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(s, "0000-00-00") {
			return zeroTemporal(c, json.Number("0"))
		}
		t, err := time.Parse("2006-01-02 15:04:05.999999", s)
		if err != nil {
			return nil, errors.New("not a datetime")
		}
		if k == kindTimestampMs {
			return json.Number(strconv.FormatInt(t.UnixMilli(), 10)), nil
		}
		return json.Number(strconv.FormatInt(t.UnixMicro(), 10)), nil
	case kindZoned:
		s, err := text()
		if err != nil {
			return nil, err
		}
		us, err := unscaled(s, 6)
		if err != nil || !us.IsInt64() {
			return nil, errors.New("not an epoch time")
		}
		if us.Sign() == 0 {
			return zeroTemporal(c, "1970-01-01T00:00:00Z")
		}
		t := time.UnixMicro(us.Int64()).UTC()
		layout := "2006-01-02T15:04:05"
		if p := c.DatetimePrecision; p > 0 {
			layout += "." + strings.Repeat("0", p)
		}
		return t.Format(layout + "Z"), nil
	case kindTime:
		s, err := text()
		if err != nil {
			return nil, err
		}
		us, err := timeMicros(s)
		if err != nil {
			return nil, err
		}
		return json.Number(strconv.FormatInt(us, 10)), nil
	}
	return nil, errors.New("no conversion")
}

// zeroTemporal is MySQL's zero date or time: NULL in a nullable column (as
// Debezium emits it), else epoch.
func zeroTemporal(c Column, epoch any) (any, error) {
	if c.Nullable {
		return nil, nil
	}
	return epoch, nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// unscaled parses decimal text ("-12.5", "7", ".25") into its unscaled
// integer at scale; digits beyond scale are refused, never rounded.
func unscaled(s string, scale int) (*big.Int, error) {
	bad := errors.New("not a decimal")
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" && frac == "" {
		return nil, bad
	}
	if len(frac) > scale {
		if strings.TrimRight(frac[scale:], "0") != "" {
			return nil, errors.New("more fractional digits than the scale")
		}
		frac = frac[:scale]
	}
	digits := intPart + frac + strings.Repeat("0", scale-len(frac))
	for _, r := range digits {
		if r < '0' || r > '9' {
			return nil, bad
		}
	}
	u, ok := new(big.Int).SetString(cmp.Or(digits, "0"), 10)
	if !ok {
		return nil, bad
	}
	if neg {
		u.Neg(u)
	}
	return u, nil
}

// twosComplement is Kafka Connect Decimal's byte form of u: big-endian
// two's complement, minimal length (BigInteger.toByteArray).
func twosComplement(u *big.Int) []byte {
	if u.Sign() >= 0 {
		b := u.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// -u = 2^n - |u| for the smallest n bytes that hold it with a sign bit.
	n := (new(big.Int).Not(u).BitLen())/8 + 1 // ^u = -u-1 >= 0
	mod := new(big.Int).Lsh(big.NewInt(1), uint(8*n))
	b := new(big.Int).Add(mod, u).Bytes()
	for len(b) < n {
		b = append([]byte{0xff}, b...)
	}
	return b
}

// timeMicros parses MySQL TIME text "[-]H…H:MM:SS[.ffffff]" into
// microseconds (negative and beyond 24 h allowed, as MicroTime carries).
func timeMicros(s string) (int64, error) {
	bad := errors.New("not a time")
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return 0, bad
	}
	h, err1 := strconv.ParseInt(parts[0], 10, 64)
	m, err2 := strconv.ParseInt(parts[1], 10, 64)
	secText, fracText, _ := strings.Cut(parts[2], ".")
	sec, err3 := strconv.ParseInt(secText, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || h < 0 || m < 0 || m > 59 || sec < 0 || sec > 59 || len(fracText) > 9 {
		return 0, bad
	}
	var frac int64
	if fracText != "" {
		f, err := strconv.ParseInt((fracText + "000000")[:6], 10, 64)
		if err != nil {
			return 0, bad
		}
		frac = f
	}
	us := ((h*60+m)*60+sec)*1_000_000 + frac
	if neg {
		us = -us
	}
	return us, nil
}

// bound cuts a name from the database to 64 bytes for error texts.
func bound(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
