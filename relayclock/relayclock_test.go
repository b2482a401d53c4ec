package relayclock_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayclock"
)

func TestFakeFiresTimersInOrderOnlyWhenDue(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := relayclock.NewFake(t0)
	late := c.After(10 * time.Second)
	early := c.After(time.Second)
	require.Equal(t, 2, c.Waiters())

	c.Advance(999 * time.Millisecond)
	select {
	case <-early:
		t.Fatal("fired before its deadline")
	default:
	}
	c.Advance(time.Millisecond)
	require.Equal(t, t0.Add(time.Second), <-early)
	require.Equal(t, 1, c.Waiters())

	c.Set(t0) // never backwards
	require.Equal(t, t0.Add(time.Second), c.Now())
	c.Set(t0.Add(time.Minute))
	require.Equal(t, t0.Add(time.Minute), <-late)
	require.Zero(t, c.Waiters())
}

func TestFakeNonPositiveDelayFiresAtOnce(t *testing.T) {
	t.Parallel()
	c := relayclock.NewFake(time.Unix(0, 0))
	select {
	case <-c.After(0):
	default:
		t.Fatal("After(0) must fire at once")
	}
	require.Zero(t, c.Waiters())
}

func TestSystemIsUTC(t *testing.T) {
	t.Parallel()
	require.Equal(t, time.UTC, relayclock.System{}.Now().Location())
}
