package relayredis

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaysink"
)

// A later event of a key that Redis confirmed after an earlier one failed is
// reported unconfirmed; other keys and other topics are not affected.
func TestEnforcePrefix(t *testing.T) {
	boom := errors.New("boom")
	events := []relaysink.Event{
		{ID: "1", Topic: "a", Key: "k", Seq: 1},
		{ID: "2", Topic: "a", Key: "k", Seq: 2},
		{ID: "3", Topic: "a", Key: "j", Seq: 1},
		{ID: "4", Topic: "b", Key: "k", Seq: 1},
		{ID: "5", Topic: "a", Key: "k", Seq: 3},
		{ID: "6", Topic: "a", Key: "k", Seq: 4},
	}
	errs := []error{nil, boom, nil, nil, nil, boom}
	enforcePrefix(events, errs)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], boom)
	require.NoError(t, errs[2])
	require.NoError(t, errs[3], "another topic's key is its own sequence")
	require.ErrorIs(t, errs[4], ErrEarlierFailed)
	require.ErrorContains(t, errs[4], "relayredis: publish a key=k id=5: ")
	require.ErrorIs(t, errs[5], boom)
}
