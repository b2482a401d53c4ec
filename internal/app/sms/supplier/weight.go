package supplier

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/relayhq/relay/relaytype"
)

// Weighted is one value of a weighted choice (SubmitResp Result codes,
// report Stat values) and its relative weight.
type Weighted[T comparable] struct {
	// Value is what is chosen.
	Value T
	// Weight is the value's share relative to the others' (not a
	// percentage); 0 never chooses it.
	Weight int
}

// maxWeight bounds one weight, so that a sum never overflows.
const maxWeight = 1_000_000

// pick returns a value of ws drawn with r by weight; def when ws is empty or
// all weights are 0.
func pick[T comparable](ws []Weighted[T], r *rand.Rand, def T) T {
	total := 0
	for _, w := range ws {
		total += w.Weight
	}
	if total <= 0 {
		return def
	}
	x := r.IntN(total)
	for _, w := range ws {
		if x < w.Weight {
			return w.Value
		}
		x -= w.Weight
	}
	return def
}

func validateWeights[T comparable](name string, ws []Weighted[T]) error {
	for _, w := range ws {
		if w.Weight < 0 || w.Weight > maxWeight {
			return fmt.Errorf("supplier: %s: weight %d of %v outside 0…%d", name, w.Weight, w.Value, maxWeight)
		}
	}
	return nil
}

// ParseResults reads "CODE=WEIGHT,…" (e.g. "13=3,10=1") into Result code
// weights; a bare "CODE" weighs 1. Codes are 1–255 so that they fit the
// 2.0 Result byte.
func ParseResults(s string) ([]Weighted[uint32], error) {
	return parseWeights(s, "results", func(v string) (uint32, bool) {
		n, err := strconv.ParseUint(v, 10, 8)
		return uint32(n), err == nil && n > 0
	})
}

// ParseStats reads "STAT=WEIGHT,…" (e.g. "DELIVRD=95,UNDELIV=3,EXPIRED=2")
// into report Stat weights; a bare "STAT" weighs 1. A Stat is 1–7 printable
// ASCII characters other than '=' and ',' (the field is 7 bytes): the
// standard's values and vendor codes such as "MA:0001" both fit.
func ParseStats(s string) ([]Weighted[string], error) {
	return parseWeights(s, "stats", func(v string) (string, bool) { return v, validStat(v) })
}

// validStat reports whether v fits the 7-byte Stat field as printable ASCII.
func validStat(v string) bool {
	if len(v) == 0 || len(v) > 7 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= ' ' || v[i] > '~' || v[i] == '=' || v[i] == ',' {
			return false
		}
	}
	return true
}

func parseWeights[T comparable](s, name string, value func(string) (T, bool)) ([]Weighted[T], error) {
	var out []Weighted[T]
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		v, w := item, 1
		if before, after, ok := strings.Cut(item, "="); ok {
			n, err := strconv.Atoi(strings.TrimSpace(after))
			if err != nil {
				return nil, fmt.Errorf("supplier: %s: bad weight in %s", name, relaytype.QuoteValue(item))
			}
			v, w = strings.TrimSpace(before), n
		}
		x, ok := value(v)
		if !ok || w < 0 || w > maxWeight {
			return nil, fmt.Errorf("supplier: %s: bad item %s", name, relaytype.QuoteValue(item))
		}
		out = append(out, Weighted[T]{Value: x, Weight: w})
	}
	return out, nil
}
