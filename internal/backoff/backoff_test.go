package backoff_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/backoff"
)

func TestWithDefaults(t *testing.T) {
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, backoff.WithDefaults(nil, 4))
	in := []time.Duration{time.Minute}
	out := backoff.WithDefaults(in, 4)
	require.Equal(t, []time.Duration{time.Minute, time.Minute, time.Minute}, out)
	out[0] = 0
	require.Equal(t, time.Minute, in[0], "never the caller's slice")
	require.Len(t, backoff.WithDefaults([]time.Duration{1, 2, 3}, 2), 3, "a longer schedule is kept for TooLong")
	require.Empty(t, backoff.Doubling(time.Second, -1))
}

func TestChecks(t *testing.T) {
	require.True(t, backoff.TooLong([]time.Duration{1, 2}, 2))
	require.False(t, backoff.TooLong([]time.Duration{1}, 2))
	require.Contains(t, backoff.TooLongReason([]time.Duration{1, 2}, 2), "2 levels for MaxAttempts 2: at most MaxAttempts-1 = 1")
	require.Equal(t, "", backoff.Negative([]time.Duration{0, 1}))
	require.Equal(t, "level 1 is negative (-1ns)", backoff.Negative([]time.Duration{0, -1}))
}
