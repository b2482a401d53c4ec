// Package backoff holds the retry schedules the engine's Config and the
// dispatcher share: the doubling default, how a short schedule is extended,
// and the checks that refuse a schedule with a level that can never fire.
package backoff

import (
	"fmt"
	"slices"
	"time"
)

// FirstDefault is the first level of the default schedule, which doubles
// from there (relay.BackoffFirstDefault).
const FirstDefault = time.Second

// Doubling returns levels delays starting at first and doubling:
// Doubling(time.Second, 4) is [1s 2s 4s 8s].
func Doubling(first time.Duration, levels int) []time.Duration {
	out := make([]time.Duration, 0, max(levels, 0))
	for i := range max(levels, 0) {
		out = append(out, first<<i)
	}
	return out
}

// WithDefaults returns the effective schedule of a Backoff field: nil or
// empty is Doubling(FirstDefault, maxAttempts-1); a shorter schedule is
// extended to maxAttempts-1 levels by repeating its last level; a longer one
// is returned as it is, for TooLong to refuse. The result is never the
// caller's slice.
func WithDefaults(levels []time.Duration, maxAttempts int) []time.Duration {
	if len(levels) == 0 {
		return Doubling(FirstDefault, maxAttempts-1)
	}
	out := slices.Clone(levels)
	for len(out) < maxAttempts-1 {
		out = append(out, levels[len(levels)-1])
	}
	return out
}

// TooLong reports whether a schedule has more levels than retries (seed 000
// §9.1: a level that never fires must not pass the start-up check).
func TooLong(levels []time.Duration, maxAttempts int) bool {
	return len(levels) > maxAttempts-1
}

// TooLongReason is the validation message of a schedule TooLong refuses.
func TooLongReason(levels []time.Duration, maxAttempts int) string {
	return fmt.Sprintf("%d levels for MaxAttempts %d: at most MaxAttempts-1 = %d "+
		"(a level beyond that can never fire; a shorter schedule repeats its last level)",
		len(levels), maxAttempts, maxAttempts-1)
}

// Negative returns the validation message of the first negative level, or
// "" when there is none.
func Negative(levels []time.Duration) string {
	for i, d := range levels {
		if d < 0 {
			return fmt.Sprintf("level %d is negative (%s)", i, d)
		}
	}
	return ""
}
