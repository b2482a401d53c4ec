package relaysink_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaysink"
)

// After a key's first unconfirmed event, every later event of that (topic,
// key) wraps ErrEarlierFailed, keeping its own reason beside it; other keys
// and the same key on another topic are not affected.
func TestEnforceKeyOrder(t *testing.T) {
	t.Parallel()
	boom, late := errors.New("boom"), errors.New("late")
	events := []relaysink.Event{
		{ID: "1", Topic: "a", Key: "k", Seq: 1},
		{ID: "2", Topic: "a", Key: "k", Seq: 2},
		{ID: "3", Topic: "a", Key: "j", Seq: 1},
		{ID: "4", Topic: "b", Key: "k", Seq: 1},
		{ID: "5", Topic: "a", Key: "k", Seq: 3},
		{ID: "6", Topic: "a", Key: "k", Seq: 4},
		{ID: "7", Topic: "a", Key: "k", Seq: 5},
		{ID: "8", Topic: "a", Key: "j", Seq: 2},
	}
	already := relaysink.ErrEarlierFailed
	errs := []error{nil, boom, nil, nil, nil, late, already, nil}
	relaysink.EnforceKeyOrder(events, errs)

	require.NoError(t, errs[0])
	require.Equal(t, boom, errs[1], "the first failure keeps its own error")
	require.NoError(t, errs[2])
	require.NoError(t, errs[3], "another topic's key is its own sequence")
	require.Equal(t, relaysink.ErrEarlierFailed, errs[4], "a confirmation behind a failure is withdrawn")
	require.ErrorIs(t, errs[5], relaysink.ErrEarlierFailed)
	require.ErrorIs(t, errs[5], late, "its own reason stays")
	require.Equal(t, already, errs[6], "not wrapped twice")
	require.NoError(t, errs[7])

	// Idempotent.
	again := append([]error(nil), errs...)
	relaysink.EnforceKeyOrder(events, again)
	require.Equal(t, errs, again)
}

// Validate refuses what breaks the Event contract, each error wrapping
// ErrInvalidEvent and naming the field.
func TestEventValidate(t *testing.T) {
	t.Parallel()
	good := relaysink.Event{ID: "e1", Topic: "t", Key: "", Seq: 1, Type: relaysink.Upsert}
	require.NoError(t, good.Validate(), "an empty key is a key")
	tomb := good
	tomb.Type = relaysink.Tombstone
	require.NoError(t, tomb.Validate())
	for want, mutate := range map[string]func(*relaysink.Event){
		"empty ID":     func(ev *relaysink.Event) { ev.ID = "" },
		"empty topic":  func(ev *relaysink.Event) { ev.Topic = "" },
		`type "MERGE"`: func(ev *relaysink.Event) { ev.Type = "MERGE" },
		`type ""`:      func(ev *relaysink.Event) { ev.Type = "" },
	} {
		ev := good
		mutate(&ev)
		err := ev.Validate()
		require.ErrorIs(t, err, relaysink.ErrInvalidEvent, want)
		require.ErrorContains(t, err, want)
	}
}

// FinishResult applies the prefix rule and wraps each error in a
// PublishError that names the sink and the event, never the payload, and
// keeps the reason reachable by errors.Is and the event by errors.As.
func TestFinishResult(t *testing.T) {
	t.Parallel()
	events := []relaysink.Event{
		{ID: "e1", Topic: "t", Key: "k", Seq: 1, Type: relaysink.Upsert, Payload: []byte("secret-payload")},
		{ID: "e2", Topic: "t", Key: "k", Seq: 2, Type: relaysink.Upsert},
	}
	errs := []error{relaysink.ErrClosed, nil}
	relaysink.FinishResult("relaytest", events, errs)
	require.EqualError(t, errs[0], "relaytest: publish t key=k id=e1: sink closed")
	require.EqualError(t, errs[1], "relaytest: publish t key=k id=e2: an earlier event of the key was not confirmed")
	require.ErrorIs(t, errs[1], relaysink.ErrEarlierFailed)
	require.ErrorIs(t, errs[0], relaysink.ErrClosed)
	var pe *relaysink.PublishError
	require.ErrorAs(t, errs[0], &pe)
	require.Equal(t, relaysink.PublishError{Sink: "relaytest", Topic: "t", Key: "k", ID: "e1", Err: relaysink.ErrClosed}, *pe)

	wrapped := append([]error(nil), errs...)
	relaysink.FinishResult("relaytest", events, errs)
	require.Same(t, wrapped[0], errs[0], "not wrapped twice")
	require.Same(t, wrapped[1], errs[1], "not wrapped twice")
}
