package relay_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// bindCountDriver counts the identity bindings the engine asks of a store.
type bindCountDriver struct {
	relaydriver.Driver
	mu    sync.Mutex
	one   int       // MessageBindIdentity calls
	many  [][]int64 // the ids of each MessageBindIdentities call
	fails int       // MessageBindIdentities calls still to fail
}

func (d *bindCountDriver) GetExecutor() relaydriver.Executor {
	return &bindCountExecutor{Executor: d.Driver.GetExecutor(), d: d}
}

func (d *bindCountDriver) counts() (one int, many [][]int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.one, append([][]int64(nil), d.many...)
}

type bindCountExecutor struct {
	relaydriver.Executor
	d *bindCountDriver
}

func (e *bindCountExecutor) MessageBindIdentity(ctx context.Context, p *relaydriver.MessageBindIdentityParams) (*relaydriver.MessageBindIdentityResult, error) {
	e.d.mu.Lock()
	e.d.one++
	e.d.mu.Unlock()
	return e.Executor.MessageBindIdentity(ctx, p)
}

func (e *bindCountExecutor) MessageBindIdentities(ctx context.Context, p *relaydriver.MessageBindIdentitiesParams) (*relaydriver.MessageBindIdentitiesResult, error) {
	e.d.mu.Lock()
	e.d.many = append(e.d.many, append([]int64(nil), p.IDs...))
	fail := e.d.fails > 0
	e.d.fails--
	e.d.mu.Unlock()
	if fail {
		return nil, errInjected
	}
	return e.Executor.MessageBindIdentities(ctx, p)
}

// TestFIFOBatchBindsIdentitiesInOneCall: a FIFO batch's identities are bound in
// one store call, not one per message, with the same outcome: a duplicate
// within the batch (of a message before it in the same call) ends the batch
// and is skipped as duplicate-of its owner once it is the head, the messages
// after it keep the identities they were bound to, and the handler sees each
// message bound to its own identity.
func TestFIFOBatchBindsIdentitiesInOneCall(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		d := &bindCountDriver{Driver: s.open(t, true)}
		var c calls
		b := setupOn(t, d, relay.Config{FIFOBatch: 8, Handler: decoding{handle: func(_ context.Context, _ relay.Tx, dl *relay.Delivery) relay.Result {
			c.add(dl.Message.ID)
			assert.Equal(t, dl.Decoded.Identity, dl.Message.IdentityKey, "message %d", dl.Message.ID)
			return relay.Succeeded()
		}}})
		b.enqueuePayloads(map[int64]string{1: "a|K-X", 2: "b|K-X", 3: "a|K-X", 4: "d|K-X", 5: "e|K-X"})

		require.Equal(t, 5, b.work())
		require.Equal(t, []int64{1, 2, 4, 5}, c.get())
		for id, want := range map[int64]string{1: "a", 2: "b", 3: "", 4: "d", 5: "e"} {
			require.Equal(t, want, b.get(id).IdentityKey, "message %d", id)
		}
		m3 := b.get(3)
		require.Equal(t, relaytype.StateSkipped, m3.State)
		require.Equal(t, "duplicate-of:1", m3.LastError)

		one, many := d.counts()
		// Round 1 binds every head in one call and runs 1, 2; round 2 asks
		// again for 3 only (4 and 5 are bound) and 3, now the head, is decided
		// alone (its one single binding); round 3 runs 4, 5 with nothing to
		// bind.
		require.Equal(t, [][]int64{{1, 2, 3, 4, 5}, {3}}, many)
		require.Equal(t, 1, one)
	})
}

// TestFIFOBatchDecodeFailureBindsNothingAfter: a message whose decoding fails
// ends the batch before the identities are bound, and nothing after it is
// bound: it is retried, and once it decodes it owns its identity before any
// later message with the same identity — as a message-by-message run decides.
func TestFIFOBatchDecodeFailureBindsNothingAfter(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var (
			mu       sync.Mutex
			decodeOK bool
		)
		var c calls
		b := setup(t, s, relay.Config{FIFOBatch: 8, Handler: decoding{
			decode: func(m *relaytype.Message) (*relay.Decoded, error) {
				mu.Lock()
				defer mu.Unlock()
				if m.ID == 2 && !decodeOK {
					return nil, relay.Classify(relaytype.ClassInfra, errors.New("not yet"))
				}
				ident := map[int64]string{1: "a", 2: "x", 3: "x", 4: "d"}[m.ID]
				return &relay.Decoded{Identity: ident, Kind: "K-X"}, nil
			},
			handle: func(_ context.Context, _ relay.Tx, dl *relay.Delivery) relay.Result {
				c.add(dl.Message.ID)
				return relay.Succeeded()
			},
		}})
		b.enqueue(1, 2, 3, 4)

		require.Equal(t, 2, b.work(), "1 succeeds, 2 fails to decode")
		require.Equal(t, relaytype.StateFailed, b.state(2))
		for _, id := range []int64{2, 3, 4} {
			require.Empty(t, b.get(id).IdentityKey, "message %d is not bound while 2 blocks the queue", id)
		}

		mu.Lock()
		decodeOK = true
		mu.Unlock()
		b.clock.Advance(time.Hour)
		require.Equal(t, 3, b.work())
		require.Equal(t, relaytype.StateSucceeded, b.state(2))
		require.Equal(t, "x", b.get(2).IdentityKey, "the retried message owns its identity")
		m3 := b.get(3)
		require.Equal(t, relaytype.StateSkipped, m3.State)
		require.Equal(t, "duplicate-of:2", m3.LastError)
		require.Equal(t, relaytype.StateSucceeded, b.state(4))
		require.Equal(t, []int64{1, 2, 4}, c.get())
	})
}

// TestFIFOBatchBindFailure: when the batch's one binding call fails, nothing
// is decided and the error is returned; the next round binds and runs the
// batch.
func TestFIFOBatchBindFailure(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		d := &bindCountDriver{Driver: s.open(t, true), fails: 1}
		var c calls
		b := setupOn(t, d, relay.Config{FIFOBatch: 8, Handler: decoding{handle: func(_ context.Context, _ relay.Tx, dl *relay.Delivery) relay.Result {
			c.add(dl.Message.ID)
			return relay.Succeeded()
		}}})
		b.enqueuePayloads(map[int64]string{1: "a|K-X", 2: "b|K-X", 3: "c|K-X"})

		n, err := b.engine.Work(b.ctx)
		require.ErrorIs(t, err, errInjected)
		require.Zero(t, n)
		for _, id := range []int64{1, 2, 3} {
			m := b.get(id)
			require.Equal(t, relaytype.StatePending, m.State)
			require.Zero(t, m.Attempts, "a store failure before the batch counts no attempt")
		}
		require.Equal(t, 3, b.work())
		require.Equal(t, []int64{1, 2, 3}, c.get())
	})
}
