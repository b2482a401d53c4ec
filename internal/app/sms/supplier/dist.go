package supplier

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/relayhq/relay/relaytype"
)

// DistKind is the shape of a Dist.
type DistKind uint8

// The shapes a Dist can take.
const (
	// DistFixed always gives Min.
	DistFixed DistKind = iota
	// DistUniform gives a value uniformly between Min and Max.
	DistUniform
	// DistExp gives Min plus an exponentially distributed value with mean
	// Mean, capped at Max when Max > 0: most values are short, a few are long
	// (the tail that trips a client's timeouts).
	DistExp
)

// Dist is a distribution of durations (response latency, report delay). Its
// zero value is DistFixed at 0: at once. Draws come from the caller's random
// source, so a seeded server draws the same values in the same order.
type Dist struct {
	// Kind is the shape; DistFixed by default.
	Kind DistKind
	// Min is the value of DistFixed, the lower bound of DistUniform and the
	// offset of DistExp.
	Min time.Duration
	// Max is the upper bound of DistUniform and the cap of DistExp (0: no
	// cap).
	Max time.Duration
	// Mean is the mean of DistExp's exponential part.
	Mean time.Duration
}

// Fixed returns the Dist that always gives d.
func Fixed(d time.Duration) Dist { return Dist{Kind: DistFixed, Min: d} }

// Uniform returns the Dist uniform between lo and hi.
func Uniform(lo, hi time.Duration) Dist { return Dist{Kind: DistUniform, Min: lo, Max: hi} }

// Exp returns the exponential Dist with mean mean, capped at max (0: no cap).
func Exp(mean, max time.Duration) Dist { return Dist{Kind: DistExp, Mean: mean, Max: max} }

// maxDistDuration bounds every duration a Dist may give: a day. A simulator
// that is asked to wait longer was misconfigured.
const maxDistDuration = 24 * time.Hour

// validate checks the bounds; name is the setting, for the message.
func (d Dist) validate(name string) error {
	bad := func(why string) error { return fmt.Errorf("supplier: %s %s: %s", name, d, why) }
	switch {
	case d.Min < 0 || d.Max < 0 || d.Mean < 0:
		return bad("negative duration")
	case d.Min > maxDistDuration || d.Max > maxDistDuration || d.Mean > maxDistDuration:
		return bad("over 24h")
	}
	switch d.Kind {
	case DistFixed:
	case DistUniform:
		if d.Max < d.Min {
			return bad("max below min")
		}
	case DistExp:
		if d.Max > 0 && d.Max < d.Min {
			return bad("cap below min")
		}
	default:
		return bad("unknown kind")
	}
	return nil
}

// Draw returns one value drawn with r.
func (d Dist) Draw(r *rand.Rand) time.Duration {
	switch d.Kind {
	case DistUniform:
		if d.Max <= d.Min {
			return d.Min
		}
		return d.Min + time.Duration(r.Int64N(int64(d.Max-d.Min)+1))
	case DistExp:
		x := float64(d.Mean) * r.ExpFloat64()
		v := d.Min + time.Duration(math.Min(x, float64(maxDistDuration)))
		if d.Max > 0 && v > d.Max {
			v = d.Max
		}
		return v
	}
	return d.Min
}

// String returns the form ParseDist reads: "10ms", "uniform:5ms..50ms",
// "exp:20ms", "exp:20ms..1s" (with a cap), "exp:5ms+20ms" (with an offset).
func (d Dist) String() string {
	switch d.Kind {
	case DistFixed:
		return d.Min.String()
	case DistUniform:
		return "uniform:" + d.Min.String() + ".." + d.Max.String()
	case DistExp:
		s := "exp:"
		if d.Min > 0 {
			s += d.Min.String() + "+"
		}
		s += d.Mean.String()
		if d.Max > 0 {
			s += ".." + d.Max.String()
		}
		return s
	}
	return "kind" + strconv.Itoa(int(d.Kind))
}

// ParseDist reads a Dist: "D" or "fixed:D" (always D), "uniform:A..B"
// (between A and B), "exp:MEAN", "exp:MEAN..MAX", "exp:MIN+MEAN" or
// "exp:MIN+MEAN..MAX" (MIN plus an exponential of mean MEAN, capped at MAX).
// Durations are Go durations ("250ms", "2s"); every bound is checked.
func ParseDist(s string) (Dist, error) {
	kind, rest, ok := strings.Cut(s, ":")
	if !ok {
		kind, rest = "fixed", s
	}
	var d Dist
	var err error
	switch kind {
	case "fixed":
		d.Kind = DistFixed
		d.Min, err = parseDuration(rest)
	case "uniform":
		d.Kind = DistUniform
		lo, hi, ok := strings.Cut(rest, "..")
		if !ok {
			return Dist{}, distErr(s, "want uniform:A..B")
		}
		d.Min, err = parseDuration(lo)
		if err == nil {
			d.Max, err = parseDuration(hi)
		}
	case "exp":
		d.Kind = DistExp
		mean, max, capped := strings.Cut(rest, "..")
		if off, m, ok := strings.Cut(mean, "+"); ok {
			d.Min, err = parseDuration(off)
			mean = m
		}
		if err == nil {
			d.Mean, err = parseDuration(mean)
		}
		if err == nil && capped {
			d.Max, err = parseDuration(max)
		}
	default:
		return Dist{}, distErr(s, "want D, fixed:D, uniform:A..B or exp:[MIN+]MEAN[..MAX]")
	}
	if err != nil {
		return Dist{}, distErr(s, err.Error())
	}
	if err := d.validate("distribution"); err != nil {
		return Dist{}, err
	}
	return d, nil
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, errors.New("bad duration") // the caller quotes the whole value

	}
	return d, nil
}

func distErr(s, why string) error {
	return fmt.Errorf("supplier: distribution %s: %s", relaytype.QuoteValue(s), why)
}
