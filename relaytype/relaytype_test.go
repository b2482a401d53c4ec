package relaytype_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaytype"
)

func TestStatePredicates(t *testing.T) {
	t.Parallel()
	cases := []struct {
		s                  relaytype.State
		terminal, unfinish bool
	}{
		{relaytype.StatePending, false, true},
		{relaytype.StateFailed, false, true}, // FAILED holds the head (seed 000 §3)
		{relaytype.StateSucceeded, true, false},
		{relaytype.StateSkipped, true, false},
		{relaytype.StateDead, true, false},
		{relaytype.StateArchived, false, false}, // a shadow row, not a processing state
	}
	for _, c := range cases {
		require.Equal(t, c.terminal, c.s.Terminal(), c.s)
		require.Equal(t, c.unfinish, c.s.Unfinished(), c.s)
		require.True(t, c.s.Valid(), c.s)
	}
	require.False(t, relaytype.State("DONE").Valid())
}

func TestParseErrorClass(t *testing.T) {
	t.Parallel()
	for _, c := range relaytype.KnownClasses {
		got, err := relaytype.ParseErrorClass(string(c))
		require.NoError(t, err)
		require.Equal(t, c, got)
	}
	_, err := relaytype.ParseErrorClass("ERROR")
	require.ErrorContains(t, err, `unknown error class "ERROR"`)
}
