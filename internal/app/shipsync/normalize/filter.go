package normalize

import (
	"bytes"
	"cmp"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// Filter ops.
const (
	opEq      = "eq"
	opNe      = "ne"
	opLt      = "lt"
	opLe      = "le"
	opGt      = "gt"
	opGe      = "ge"
	opIn      = "in"
	opIsNull  = "is_null"
	opNotNull = "not_null"
)

// condition is a validated Condition.
type condition struct {
	column string
	op     string
	values []string
}

func (r *Rule) compileFilter(bad func(string, string) error) error {
	for i, c := range r.RowFilter {
		field := fmt.Sprintf("row_filter[%d]", i)
		if err := checkColumnName(c.Column, field+".column", bad); err != nil {
			return err
		}
		cd := condition{column: c.Column, op: c.Op}
		switch c.Op {
		case opEq, opNe, opLt, opLe, opGt, opGe:
			if c.Value == nil || len(c.Values) > 0 {
				return bad(field+".value", "this op takes one value (and no values)")
			}
			cd.values = []string{*c.Value}
		case opIn:
			if c.Value != nil || len(c.Values) == 0 {
				return bad(field+".values", "in takes one or more values (and no value)")
			}
			cd.values = slices.Clone(c.Values)
		case opIsNull, opNotNull:
			if c.Value != nil || len(c.Values) > 0 {
				return bad(field+".value", "this op takes no value")
			}
		default:
			return bad(field+".op", "not one of eq, ne, lt, le, gt, ge, in, is_null, not_null")
		}
		r.c.filter = append(r.c.filter, cd)
	}
	return nil
}

// errFilterValue: a condition's text does not read as the column's type.
var errFilterValue = fmt.Errorf("filter value does not read as the column's type")

// match evaluates c on column v (never nil). A comparison with NULL is false.
func (c condition) match(v *pb.ColumnValue) (bool, error) {
	_, isNull := v.Value.(*pb.ColumnValue_Null)
	switch c.op {
	case opIsNull:
		return isNull, nil
	case opNotNull:
		return !isNull, nil
	}
	if isNull {
		return false, nil
	}
	for _, text := range c.values {
		n, err := compareText(v, text)
		if err != nil {
			return false, err
		}
		var ok bool
		switch c.op {
		case opEq, opIn:
			ok = n == 0
		case opNe:
			ok = n != 0
		case opLt:
			ok = n < 0
		case opLe:
			ok = n <= 0
		case opGt:
			ok = n > 0
		case opGe:
			ok = n >= 0
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// compareText compares a column value with a filter's text read as the
// value's type: -1, 0, +1. Integers, unsigned integers and doubles compare
// numerically; DECIMAL exactly; text and JSON byte-wise; bytes with the
// text's bytes; booleans read "true"/"false"/"1"/"0"; timestamps read
// RFC 3339; DATE "YYYY-MM-DD"; TIME "[-]HH:MM:SS[.f]".
func compareText(v *pb.ColumnValue, text string) (int, error) {
	switch x := v.Value.(type) {
	case *pb.ColumnValue_IntValue:
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return 0, errFilterValue
		}
		return cmp.Compare(x.IntValue, n), nil
	case *pb.ColumnValue_UintValue:
		n, err := strconv.ParseUint(text, 10, 64)
		if err != nil {
			return 0, errFilterValue
		}
		return cmp.Compare(x.UintValue, n), nil
	case *pb.ColumnValue_DoubleValue:
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return 0, errFilterValue
		}
		return cmp.Compare(x.DoubleValue, f), nil
	case *pb.ColumnValue_DecimalValue:
		a, ok1 := new(big.Rat).SetString(x.DecimalValue)
		b, ok2 := new(big.Rat).SetString(text)
		if !ok1 || !ok2 || strings.ContainsAny(text, "/eE") {
			return 0, errFilterValue
		}
		return a.Cmp(b), nil
	case *pb.ColumnValue_StringValue:
		return strings.Compare(x.StringValue, text), nil
	case *pb.ColumnValue_JsonValue:
		return strings.Compare(x.JsonValue, text), nil
	case *pb.ColumnValue_BytesValue:
		return bytes.Compare(x.BytesValue, []byte(text)), nil
	case *pb.ColumnValue_BoolValue:
		var b bool
		switch text {
		case "true", "1":
			b = true
		case "false", "0":
		default:
			return 0, errFilterValue
		}
		return cmp.Compare(boolInt(x.BoolValue), boolInt(b)), nil
	case *pb.ColumnValue_TimestampValue:
		t, err := time.Parse(time.RFC3339Nano, text)
		if err != nil {
			return 0, errFilterValue
		}
		return x.TimestampValue.AsTime().Compare(t), nil
	case *pb.ColumnValue_DateValue:
		if _, err := time.Parse(time.DateOnly, text); err != nil {
			return 0, errFilterValue
		}
		return strings.Compare(x.DateValue, text), nil
	case *pb.ColumnValue_TimeValue:
		a, ok1 := timeOfDay(x.TimeValue)
		b, ok2 := timeOfDay(text)
		if !ok1 || !ok2 {
			return 0, errFilterValue
		}
		return cmp.Compare(a, b), nil
	}
	return 0, errFilterValue
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// timeOfDay reads "[-]H+:MM:SS[.f]" as a duration.
func timeOfDay(s string) (time.Duration, bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	parts := strings.Split(s, ":")
	if len(parts) != 3 || len(parts[0]) == 0 || len(parts[0]) > 4 || len(parts[1]) != 2 || len(parts[2]) < 2 {
		return 0, false
	}
	h, err1 := strconv.Atoi(parts[0])
	m, err2 := strconv.Atoi(parts[1])
	sec, err3 := strconv.ParseFloat(parts[2], 64)
	if err1 != nil || err2 != nil || err3 != nil || h < 0 || m < 0 || m > 59 || sec < 0 || sec >= 60 ||
		!allDigits(strings.Replace(parts[2], ".", "", 1)) || !allDigits(parts[0]) || !allDigits(parts[1]) {
		return 0, false
	}
	d := time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(sec*float64(time.Second))
	if neg {
		d = -d
	}
	return d, true
}
