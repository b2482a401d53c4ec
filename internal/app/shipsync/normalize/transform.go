package normalize

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

// transformDef is a registered column transform: a pure, deterministic function
// of a value and the rule's integer arguments. A transform never sees NULL
// (NULL passes through unchanged) and returns errTransformType for a value
// of a type it does not handle. Registered transforms are versioned by name
// ("trim@1"): a changed behaviour is a new version, and the old one stays so
// that events of old rule versions are reproduced exactly.
type transformDef struct {
	// Args is the number of integer arguments the transform takes.
	Args int
	// CheckArgs validates the arguments at rule load (nil: any).
	CheckArgs func(args []int64) error
	// Apply returns the transformed value (a new ColumnValue; v is not
	// modified).
	Apply func(v *pb.ColumnValue, args []int64) (*pb.ColumnValue, error)
}

// errTransformType: a transform met a value type it does not handle.
var errTransformType = fmt.Errorf("value type not handled")

// transforms is the whitelist. No scripts, no network, no clock.
var transforms = map[string]transformDef{
	// trim@1: leading and trailing Unicode white space removed (text).
	"trim@1": {Apply: stringFunc(strings.TrimSpace)},
	// upper@1 / lower@1: Unicode upper / lower case (text).
	"upper@1": {Apply: stringFunc(strings.ToUpper)},
	"lower@1": {Apply: stringFunc(strings.ToLower)},
	// truncate@1{n}: at most n characters (text) or n bytes (binary), n ≥ 0.
	"truncate@1": {Args: 1, CheckArgs: argRange(0, 1<<30), Apply: truncate},
	// round@1{scale}: a DECIMAL rounded half away from zero to at most scale
	// fraction digits (0–65); a value with fewer digits is unchanged.
	"round@1": {Args: 1, CheckArgs: argRange(0, 65), Apply: round},
}

// TransformNames returns the registered transform names ("name@version"),
// sorted.
func TransformNames() []string {
	return slices.Sorted(maps.Keys(transforms))
}

// boundTransform is a transform with the rule's arguments.
type boundTransform struct {
	t    transformDef
	args []int64
}

func (r *Rule) compileTransforms(bad func(string, string) error) error {
	r.c.transforms = map[string][]boundTransform{}
	for i, ts := range r.Transforms {
		field := fmt.Sprintf("transforms[%d]", i)
		if err := checkColumnName(ts.Column, field+".column", bad); err != nil {
			return err
		}
		t, ok := transforms[ts.Transform]
		switch {
		case !ok:
			return bad(field+".transform", "not a registered transform name@version")
		case r.c.keys[ts.Column]:
			return bad(field+".column", "key columns are carried exactly; they cannot be transformed")
		case r.c.excluded[ts.Column] || (len(r.c.included) > 0 && !r.c.included[ts.Column]):
			return bad(field+".column", "the column is not carried")
		case len(ts.Args) != t.Args:
			return bad(field+".args", fmt.Sprintf("takes %d argument(s)", t.Args))
		}
		if t.CheckArgs != nil {
			if err := t.CheckArgs(ts.Args); err != nil {
				return bad(field+".args", err.Error())
			}
		}
		r.c.transforms[ts.Column] = append(r.c.transforms[ts.Column], boundTransform{t: t, args: ts.Args})
	}
	return nil
}

func argRange(lo, hi int64) func([]int64) error {
	return func(a []int64) error {
		if a[0] < lo || a[0] > hi {
			return fmt.Errorf("must be %d–%d", lo, hi)
		}
		return nil
	}
}

func stringFunc(f func(string) string) func(*pb.ColumnValue, []int64) (*pb.ColumnValue, error) {
	return func(v *pb.ColumnValue, _ []int64) (*pb.ColumnValue, error) {
		s, ok := v.Value.(*pb.ColumnValue_StringValue)
		if !ok {
			return nil, errTransformType
		}
		return &pb.ColumnValue{Name: v.Name, Value: &pb.ColumnValue_StringValue{StringValue: f(s.StringValue)}}, nil
	}
}

func truncate(v *pb.ColumnValue, args []int64) (*pb.ColumnValue, error) {
	n := int(args[0])
	switch x := v.Value.(type) {
	case *pb.ColumnValue_StringValue:
		s := x.StringValue
		if utf8.RuneCountInString(s) > n {
			i, count := 0, 0
			for i = range s {
				if count == n {
					break
				}
				count++
			}
			s = s[:i]
		}
		return &pb.ColumnValue{Name: v.Name, Value: &pb.ColumnValue_StringValue{StringValue: s}}, nil
	case *pb.ColumnValue_BytesValue:
		b := x.BytesValue
		if len(b) > n {
			b = b[:n]
		}
		return &pb.ColumnValue{Name: v.Name, Value: &pb.ColumnValue_BytesValue{BytesValue: append([]byte(nil), b...)}}, nil
	}
	return nil, errTransformType
}

// round rounds a decimal numeral ([-]digits[.digits]) half away from zero,
// as MySQL's ROUND does for exact values, on its text (no float).
func round(v *pb.ColumnValue, args []int64) (*pb.ColumnValue, error) {
	x, ok := v.Value.(*pb.ColumnValue_DecimalValue)
	if !ok {
		return nil, errTransformType
	}
	scale := int(args[0])
	s := x.DecimalValue
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" || !allDigits(intPart) || !allDigits(frac) {
		return nil, errTransformType
	}
	if len(frac) <= scale {
		return &pb.ColumnValue{Name: v.Name, Value: &pb.ColumnValue_DecimalValue{DecimalValue: x.DecimalValue}}, nil
	}
	up := frac[scale] >= '5'
	digits := []byte(intPart + frac[:scale])
	if up {
		i := len(digits) - 1
		for ; i >= 0; i-- {
			if digits[i] == '9' {
				digits[i] = '0'
				continue
			}
			digits[i]++
			break
		}
		if i < 0 {
			digits = append([]byte{'1'}, digits...)
		}
	}
	ip, fp := string(digits[:len(digits)-scale]), string(digits[len(digits)-scale:])
	out := ip
	if scale > 0 {
		out += "." + fp
	}
	if neg && strings.Trim(ip+fp, "0") != "" {
		out = "-" + out
	}
	return &pb.ColumnValue{Name: v.Name, Value: &pb.ColumnValue_DecimalValue{DecimalValue: out}}, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
