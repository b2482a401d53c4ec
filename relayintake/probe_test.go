package relayintake_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaysource"
)

// failingProber is a source whose hole probe always fails.
type failingProber struct{ relaysource.SequenceSource }

func (failingProber) HoleMark(context.Context) (int64, error) {
	return 0, errors.New("no PROCESS privilege")
}
func (failingProber) HoleSettled(context.Context, int64) (bool, error) {
	return false, errors.New("no PROCESS privilege")
}

// A probe that cannot answer leaves the hole to the max commit delay; a
// source that cannot probe is refused when ProbeHoles is asked for.
func TestProbeHolesFallsBack(t *testing.T) {
	t.Parallel()
	b := setup(t, sqliteStore, func(c *relayintake.Config) { c.ProbeHoles = true })
	_, err := relayintake.New(b.store, struct{ relaysource.SequenceSource }{b.src}, b.cfg)
	require.ErrorContains(t, err, "not a relaysource.HoleProber")

	b.in = b.newIntake(b.store, failingProber{b.src})
	b.seed(relayintake.SeedZero)
	b.insert(2, 3)
	for range 3 {
		require.Zero(t, b.round().ReleasedFirst, "a failed probe never settles")
	}
	b.clock.Advance(delay)
	res := b.round()
	require.Equal(t, int64(1), res.ReleasedFirst)
	require.False(t, res.ReleasedSettled)
}
