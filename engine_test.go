package relay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaytype"
)

// calls records handler invocations (message ids, in call order).
type calls struct {
	mu  sync.Mutex
	ids []int64
}

func (c *calls) add(id int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, id)
	n := 0
	for _, x := range c.ids {
		if x == id {
			n++
		}
	}
	return n // how many times id has been called, this call included
}

func (c *calls) get() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int64(nil), c.ids...)
}

// TestStartRefusesUnmigratedStore: a service refuses to start on an old schema.
func TestStartRefusesUnmigratedStore(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setupOn(t, s.open(t, false), relay.Config{Handler: okHandler()})
		err := b.engine.Start(b.ctx)
		require.ErrorIs(t, err, relaytype.ErrSchemaOutdated)
		require.NoError(t, b.engine.Stop(b.ctx)) // never started: harmless
	})
}

// TestAttemptsCountedOnceAndExhausted: each failure counts exactly one attempt,
// waits its own backoff level, and the MaxAttempts-th failure ends in
// DEAD(EXHAUSTED) keeping the last error text (seed 000 §3, §9.1).
func TestAttemptsCountedOnceAndExhausted(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var c calls
		b := setup(t, s, relay.Config{
			MaxAttempts: 3,
			Backoff:     []time.Duration{10 * time.Second, 20 * time.Second},
			Handler: relay.HandlerFunc(func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
				n := c.add(d.Message.ID)
				return relay.Retry(relaytype.ClassInfra, fmt.Errorf("boom %d", n))
			}),
		})
		b.enqueue(1)

		require.Equal(t, 1, b.work())
		m := b.get(1)
		require.Equal(t, relaytype.StateFailed, m.State)
		require.Equal(t, 1, m.Attempts)
		require.Equal(t, relaytype.ClassInfra, m.ErrorClass)
		require.Equal(t, "boom 1", m.LastError)
		require.True(t, m.NextAttemptAt.Equal(t0.Add(10*time.Second)), "next attempt %s", m.NextAttemptAt)

		require.Equal(t, 0, b.work(), "not due yet")
		b.clock.Advance(9 * time.Second)
		require.Equal(t, 0, b.work(), "still not due")
		require.Len(t, c.get(), 1)

		b.clock.Advance(time.Second)
		require.Equal(t, 1, b.work())
		m = b.get(1)
		require.Equal(t, 2, m.Attempts)
		require.True(t, m.NextAttemptAt.Equal(t0.Add(30*time.Second)), "second level: %s", m.NextAttemptAt)

		b.clock.Advance(20 * time.Second)
		require.Equal(t, 1, b.work())
		m = b.get(1)
		require.Equal(t, relaytype.StateDead, m.State)
		require.Equal(t, relaytype.ClassExhausted, m.ErrorClass)
		require.Equal(t, "boom 3", m.LastError, "EXHAUSTED keeps the cause text")
		require.Equal(t, 3, m.Attempts)
		require.Len(t, c.get(), 3, "exactly MaxAttempts handler calls")
		// The last failure is logged once, as exhausted: no "retry" with a
		// next_attempt_at for an attempt that never comes.
		require.Equal(t, 2, b.logs.count("relay: message retry"))
		require.Equal(t, 1, b.logs.count("relay: message exhausted"))
		for _, r := range b.logs.all() {
			if r.msg == "relay: message exhausted" {
				require.Equal(t, int64(3), r.attrs["attempts"])
			}
		}

		b.clock.Advance(time.Hour)
		require.Equal(t, 0, b.work())
	})
}

// TestExhaustedHeadWithoutHandlerCall: a FAILED head whose attempts already
// reached the limit (here: the limit was lowered) goes to DEAD(EXHAUSTED) in one
// statement without calling the handler (seed 000 §5.1 step 3).
func TestExhaustedHeadWithoutHandlerCall(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		d := s.open(t, true)
		first := setupOn(t, d, relay.Config{
			Handler: relay.HandlerFunc(func(context.Context, relay.Tx, *relay.Delivery) relay.Result {
				return relay.Retry(relaytype.ClassUnsupported, errors.New("no handler for kind"))
			}),
		})
		first.enqueue(1, 2)
		for range 2 {
			require.Equal(t, 1, first.work())
			first.clock.Advance(time.Minute)
		}
		require.Equal(t, 2, first.get(1).Attempts)

		var c calls
		second := setupOn(t, d, relay.Config{
			MaxAttempts: 2, Backoff: []time.Duration{time.Second},
			Handler: relay.HandlerFunc(func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
				c.add(d.Message.ID)
				return relay.Succeeded()
			}),
		})
		second.clock.Set(first.clock.Now())
		require.Equal(t, 2, second.work())
		m := second.get(1)
		require.Equal(t, relaytype.StateDead, m.State)
		require.Equal(t, relaytype.ClassExhausted, m.ErrorClass)
		require.Equal(t, "no handler for kind", m.LastError)
		require.Equal(t, []int64{2}, c.get(), "the exhausted head is not handed to the handler")
		require.Equal(t, relaytype.StateSucceeded, second.state(2))
	})
}

// TestFIFOHeadBlocksDuringBackoff: only the smallest unfinished id runs; a
// FAILED head waiting for its backoff blocks everything behind it, and terminal
// states (DEAD, SKIPPED, SUCCEEDED) release the queue (seed 000 §5.1).
func TestFIFOHeadBlocksDuringBackoff(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var c calls
		b := setup(t, s, relay.Config{
			Handler: relay.HandlerFunc(func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
				n := c.add(d.Message.ID)
				switch {
				case d.Message.ID == 3 && n == 1:
					return relay.Retry(relaytype.ClassInfra, errors.New("db down"))
				case d.Message.ID == 3 && n == 2:
					return relay.RetryAfter(time.Hour, relaytype.ClassInfra, errors.New("still down"))
				case d.Message.ID == 5:
					return relay.Dead(relaytype.ClassProtocol, errors.New("bad package"))
				case d.Message.ID == 7:
					return relay.Skip("no-match")
				}
				return relay.Succeeded()
			}),
		})
		b.enqueue(5, 3, 7, 9) // id order, not enqueue order, decides

		require.Equal(t, 1, b.work())
		require.Equal(t, []int64{3}, c.get())
		for _, id := range []int64{5, 7, 9} {
			require.Equal(t, relaytype.StatePending, b.state(id), "id %d must wait behind the FAILED head", id)
		}
		b.clock.Advance(999 * time.Millisecond)
		require.Equal(t, 0, b.work())

		b.clock.Advance(time.Millisecond) // first level: 1s
		require.Equal(t, 1, b.work(), "RetryAfter: one more attempt, nothing behind it")
		m := b.get(3)
		require.Equal(t, 2, m.Attempts, "RetryAfter still counts one attempt")
		require.True(t, m.NextAttemptAt.Equal(t0.Add(time.Second+time.Hour)), "override replaces the 2s level: %s", m.NextAttemptAt)
		b.clock.Advance(2 * time.Second) // the schedule's level would be due now
		require.Equal(t, 0, b.work())

		b.clock.Advance(time.Hour)
		require.Equal(t, 4, b.work())
		require.Equal(t, []int64{3, 3, 3, 5, 7, 9}, c.get())
		require.Equal(t, relaytype.StateSucceeded, b.state(3))
		require.Equal(t, relaytype.StateDead, b.state(5))
		require.Equal(t, relaytype.StateSkipped, b.state(7))
		require.Equal(t, "no-match", b.get(7).LastError)
		require.Equal(t, relaytype.StateSucceeded, b.state(9))
	})
}

// TestFIFOWatermark: with Watermarked, a head above the cursor's watermark is
// not taken (nothing at all without a cursor), with one WARN per watermark value
// (seed 000 §5.1 step 2).
func TestFIFOWatermark(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var c calls
		b := setup(t, s, relay.Config{
			Watermarked: true,
			Handler: relay.HandlerFunc(func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
				c.add(d.Message.ID)
				return relay.Succeeded()
			}),
		})
		save := func(w int64) {
			require.NoError(t, b.d.GetExecutor().CursorSave(b.ctx, &relaydriver.CursorSaveParams{
				Queue: "p", Watermark: w, Now: b.clock.Now(),
			}))
		}
		b.enqueue(1, 2, 3)

		require.Equal(t, 0, b.work(), "no cursor: nothing is taken")
		require.Equal(t, 0, b.work())
		require.Equal(t, 1, b.logs.count("no watermark"))

		save(2)
		require.Equal(t, 2, b.work())
		require.Equal(t, []int64{1, 2}, c.get())
		require.Equal(t, relaytype.StatePending, b.state(3))
		require.Equal(t, 0, b.work())
		require.Equal(t, 1, b.logs.count("above the watermark"), "one WARN per watermark value")

		save(3)
		b.enqueue(5)
		require.Equal(t, 1, b.work())
		require.Equal(t, 0, b.work())
		require.Equal(t, 2, b.logs.count("above the watermark"), "a new watermark value warns again")
		require.Equal(t, relaytype.StatePending, b.state(5))

		save(5)
		require.Equal(t, 1, b.work())
		require.Equal(t, []int64{1, 2, 3, 5}, c.get())
	})
}

// decoding is a Handler that is also a Decoder: payload "identity|kind".
type decoding struct {
	decode func(m *relaytype.Message) (*relay.Decoded, error)
	handle relay.HandlerFunc
}

func (h decoding) Decode(_ context.Context, m *relaytype.Message) (*relay.Decoded, error) {
	if h.decode != nil {
		return h.decode(m)
	}
	ident, kind, _ := strings.Cut(string(m.Payload), "|")
	return &relay.Decoded{Identity: ident, Kind: kind, Value: string(m.Payload)}, nil
}

func (h decoding) Handle(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
	return h.handle(ctx, tx, d)
}

func (b *bundle) enqueuePayloads(kv map[int64]string) {
	b.t.Helper()
	var ps []*relay.EnqueueParams
	for id, p := range kv {
		ps = append(ps, &relay.EnqueueParams{ID: id, Payload: []byte(p)})
	}
	_, err := b.engine.Enqueue(b.ctx, ps...)
	require.NoError(b.t, err)
}

// TestIdentityDuplicate: a second message with a bound identity is SKIPPED
// duplicate-of:<owner>, without a handler call; the owner's own retry keeps its
// binding and is never its own duplicate (seed 000 §2, §5.2 step 3).
func TestIdentityDuplicate(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var c calls
		b := setup(t, s, relay.Config{Handler: decoding{handle: func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
			if c.add(d.Message.ID) == 1 && d.Message.ID == 1 {
				return relay.Retry(relaytype.ClassInfra, errors.New("first try fails"))
			}
			assert.Equal(t, d.Message.IdentityKey, d.Decoded.Identity)
			return relay.Succeeded()
		}}})
		b.enqueuePayloads(map[int64]string{1: "X|FLOP-A", 2: "X|FLOP-A", 3: "Y|FLOP-A"})

		require.Equal(t, 1, b.work())
		require.Equal(t, "X", b.get(1).IdentityKey, "bound before the handler ran, outside its transaction")
		b.clock.Advance(time.Second)
		require.Equal(t, 3, b.work())

		m1 := b.get(1)
		require.Equal(t, relaytype.StateSucceeded, m1.State, "own retry is not a duplicate")
		m2 := b.get(2)
		require.Equal(t, relaytype.StateSkipped, m2.State)
		require.Equal(t, "duplicate-of:1", m2.LastError)
		require.Equal(t, relaytype.StateSucceeded, b.state(3))
		require.Equal(t, []int64{1, 1, 3}, c.get(), "the duplicate never reaches the handler")
	})
}

// TestIgnoreRules: TYPE-STYP and TYPE-* rules match Decoded.Kind
// case-insensitively; an ignored message is SKIPPED ignored:<rule> without a
// handler call, and its identity is still bound (seed 000 §2).
func TestIgnoreRules(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var c calls
		b := setup(t, s, relay.Config{
			IgnoreRules: []string{"ldm-*", "FLOP-abcd"},
			Handler: decoding{handle: func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
				c.add(d.Message.ID)
				return relay.Succeeded()
			}},
		})
		b.enqueuePayloads(map[int64]string{
			1: "i1|LDM-XYZ", 2: "i2|flop-ABCD", 3: "i3|FLOP-OTHER", 4: "i4|LDMX-A", 5: "i5|Ldm-q", 6: "i1|FLOP-NEW",
		})
		require.Equal(t, 6, b.work())
		want := map[int64]struct {
			state relaytype.State
			why   string
		}{
			1: {relaytype.StateSkipped, "ignored:ldm-*"},
			2: {relaytype.StateSkipped, "ignored:FLOP-abcd"},
			3: {relaytype.StateSucceeded, ""},
			4: {relaytype.StateSucceeded, ""},
			5: {relaytype.StateSkipped, "ignored:ldm-*"},
			6: {relaytype.StateSkipped, "duplicate-of:1"},
		}
		for id, w := range want {
			m := b.get(id)
			require.Equal(t, w.state, m.State, "id %d", id)
			require.Equal(t, w.why, m.LastError, "id %d", id)
		}
		require.Equal(t, "i1", b.get(1).IdentityKey, "ignored messages still bind their identity")
		require.Equal(t, []int64{3, 4}, c.get())
	})
}

// TestDecodeAndDeadClasses: a decode error classified MALFORMED is DEAD at once
// without a handler call; an unclassified one is CODEC_ERROR and retried; a
// handler's Retry of a DeadClasses class is DEAD at once.
func TestDecodeAndDeadClasses(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var c calls
		b := setup(t, s, relay.Config{
			Mode: relay.ModeUnordered, Workers: 1,
			Handler: decoding{
				decode: func(m *relaytype.Message) (*relay.Decoded, error) {
					switch m.ID {
					case 1:
						return nil, relay.Classify(relaytype.ClassMalformed, errors.New("not XML"))
					case 2:
						return nil, errors.New("codec cannot read v7")
					}
					return nil, nil
				},
				handle: func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
					c.add(d.Message.ID)
					assert.Nil(t, d.Decoded)
					return relay.Retry(relaytype.ClassMalformed, errors.New("payload missing"))
				},
			},
		})
		b.enqueue(1, 2, 3)
		require.Equal(t, 3, b.work())
		m := b.get(1)
		require.Equal(t, relaytype.StateDead, m.State)
		require.Equal(t, relaytype.ClassMalformed, m.ErrorClass)
		require.Contains(t, m.LastError, "not XML")
		require.Equal(t, 1, m.Attempts, "DEAD on the first attempt counts that attempt")
		m = b.get(2)
		require.Equal(t, relaytype.StateFailed, m.State)
		require.Equal(t, relaytype.ClassCodec, m.ErrorClass)
		require.Equal(t, 1, m.Attempts)
		m = b.get(3)
		require.Equal(t, relaytype.StateDead, m.State)
		require.Equal(t, relaytype.ClassMalformed, m.ErrorClass)
		require.Equal(t, 1, m.Attempts, "DEAD at once counts the one processing attempt")
		require.Equal(t, []int64{3}, c.get())
	})
}

// TestHandlerWritesCommitWithTerminalState: the handler's writes commit with
// SUCCEEDED/SKIPPED (and the acknowledgement intent) and are rolled back on
// Retry, Dead, a panic and a zero Result (seed 000 §5.3).
func TestHandlerWritesCommitWithTerminalState(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		b := setup(t, s, relay.Config{
			Mode: relay.ModeUnordered, Workers: 2, AckIntent: true,
			Handler: relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
				id := d.Message.ID
				if err := insertProj(ctx, tx, id); err != nil {
					return relay.Retry(relaytype.ClassInfra, err)
				}
				switch id {
				case 1:
					return relay.Succeeded()
				case 2:
					return relay.Retry(relaytype.ClassInfra, errors.New("later"))
				case 3:
					return relay.Dead(relaytype.ClassProtocol, errors.New("rejected"))
				case 4:
					return relay.Skip("no-match")
				case 5:
					panic("handler bug")
				}
				return relay.Result{}
			}),
		})
		b.createProj()
		b.enqueue(1, 2, 3, 4, 5, 6)
		require.Equal(t, 6, b.work())
		require.Equal(t, []int64{1, 4}, b.projRows(), "only SUCCEEDED and SKIPPED commit the handler's writes")

		type want struct {
			state relaytype.State
			class relaytype.ErrorClass
			text  string
			ack   bool
		}
		for id, w := range map[int64]want{
			1: {relaytype.StateSucceeded, "", "", true},
			2: {relaytype.StateFailed, relaytype.ClassInfra, "later", false},
			3: {relaytype.StateDead, relaytype.ClassProtocol, "rejected", true},
			4: {relaytype.StateSkipped, "", "no-match", true},
			5: {relaytype.StateFailed, relaytype.ClassInternal, "handler panic: handler bug", false},
			6: {relaytype.StateFailed, relaytype.ClassInternal, "zero Result", false},
		} {
			m := b.get(id)
			require.Equal(t, w.state, m.State, "id %d", id)
			require.Equal(t, w.class, m.ErrorClass, "id %d", id)
			require.Contains(t, m.LastError, w.text, "id %d", id)
			require.Equal(t, w.ack, !m.AckNextAt.IsZero(), "id %d: acknowledgement intent with the terminal state", id)
			require.Empty(t, m.LeaseOwner, "id %d: lease released", id)
		}
	})
}

// TestPanicKeepsEngineGoing: a panicking handler becomes Retry(INTERNAL); the
// engine neither crashes nor stops, and the message succeeds on its retry.
func TestPanicKeepsEngineGoing(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var c calls
		b := setup(t, s, relay.Config{Handler: relay.HandlerFunc(func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
			if c.add(d.Message.ID) == 1 && d.Message.ID == 1 {
				var m map[string]int
				//lint:ignore SA5000 the nil map write is the point: a real runtime panic, not panic(value)
				m["boom"]++
			}
			return relay.Succeeded()
		})})
		b.enqueue(1, 2)
		n, err := b.engine.Work(b.ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		m := b.get(1)
		require.Equal(t, relaytype.ClassInternal, m.ErrorClass)
		require.Contains(t, m.LastError, "panic")
		require.Equal(t, 1, b.logs.count("handler panicked"))

		b.clock.Advance(time.Second)
		require.Equal(t, 2, b.work())
		require.Equal(t, relaytype.StateSucceeded, b.state(1))
		require.Equal(t, relaytype.StateSucceeded, b.state(2))
	})
}

// TestHandlerTimeout: a handler running past HandlerTimeout (on the engine's
// clock) has its ctx cancelled, its writes rolled back, and the attempt counts
// as Retry(TIMEOUT) even though it returned Succeeded.
func TestHandlerTimeout(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		started := make(chan struct{})
		var c calls
		b := setup(t, s, relay.Config{
			HandlerTimeout: 5 * time.Second,
			Handler: relay.HandlerFunc(func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
				if err := insertProj(ctx, tx, d.Message.ID); err != nil {
					return relay.Retry(relaytype.ClassInfra, err)
				}
				if c.add(d.Message.ID) == 1 {
					close(started)
					<-ctx.Done()
				}
				return relay.Succeeded()
			}),
		})
		b.createProj()
		b.enqueue(1)

		type res struct {
			n   int
			err error
		}
		done := make(chan res, 1)
		go func() {
			n, err := b.engine.Work(b.ctx)
			done <- res{n, err}
		}()
		<-started
		b.clock.Advance(5 * time.Second)
		r := <-done
		require.NoError(t, r.err)
		require.Equal(t, 1, r.n)
		m := b.get(1)
		require.Equal(t, relaytype.StateFailed, m.State)
		require.Equal(t, relaytype.ClassTimeout, m.ErrorClass)
		require.Contains(t, m.LastError, "exceeded 5s")
		require.Empty(t, b.projRows(), "the overrun attempt's writes are rolled back")

		b.clock.Advance(time.Second)
		require.Equal(t, 1, b.work())
		require.Equal(t, relaytype.StateSucceeded, b.state(1))
		require.Equal(t, []int64{1}, b.projRows())
	})
}

// TestReplay: only whitelisted classes are replayed (MALFORMED refused by
// default); replay resets attempts, next attempt and error but keeps the
// identity; it moves only FAILED/DEAD, so a succeeded message changes nothing
// (seed 000 §9.1).
func TestReplay(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var c calls
		var healed atomic.Bool
		b := setup(t, s, relay.Config{
			Mode: relay.ModeUnordered, Workers: 1,
			MaxAttempts: 2, Backoff: []time.Duration{time.Second},
			Handler: decoding{handle: func(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
				c.add(d.Message.ID)
				if !healed.Load() {
					switch d.Message.ID {
					case 1:
						return relay.Dead(relaytype.ClassMalformed, errors.New("bad body"))
					case 2:
						return relay.Retry(relaytype.ClassInfra, errors.New("db down"))
					case 4:
						return relay.RetryAfter(time.Hour, relaytype.ClassUnsupported, errors.New("no handler"))
					}
				}
				if err := insertProj(ctx, tx, d.Message.ID); err != nil {
					return relay.Retry(relaytype.ClassInfra, err)
				}
				return relay.Succeeded()
			}},
		})
		b.createProj()
		b.enqueuePayloads(map[int64]string{1: "id1|K-A", 2: "id2|K-A", 3: "id3|K-A", 4: "id4|K-A"})
		require.Equal(t, 4, b.work())
		b.clock.Advance(time.Second)
		require.Equal(t, 1, b.work(), "message 2 exhausts")
		require.Equal(t, relaytype.ClassExhausted, b.get(2).ErrorClass)
		require.Equal(t, relaytype.StateFailed, b.state(4))

		_, err := b.engine.Replay(b.ctx, &relay.ReplayParams{Classes: []relaytype.ErrorClass{relaytype.ClassMalformed}})
		require.ErrorIs(t, err, relay.ErrReplayRefused)
		require.Contains(t, err.Error(), "MALFORMED")
		_, err = b.engine.Replay(b.ctx, &relay.ReplayParams{})
		require.ErrorIs(t, err, relay.ErrReplayRefused)
		require.Equal(t, relaytype.StateDead, b.state(1), "a refused replay moves nothing")

		// Every whitelisted class, including the succeeded message's id.
		n, err := b.engine.Replay(b.ctx, &relay.ReplayParams{Classes: relay.ReplayableClassesDefault})
		require.NoError(t, err)
		require.Equal(t, 2, n, "the exhausted and the FAILED message")
		for _, id := range []int64{2, 4} {
			m := b.get(id)
			require.Equal(t, relaytype.StatePending, m.State, "id %d", id)
			require.Zero(t, m.Attempts)
			require.Equal(t, relaytype.ClassNone, m.ErrorClass)
			require.Empty(t, m.LastError)
			require.True(t, m.NextAttemptAt.IsZero())
			require.Equal(t, fmt.Sprintf("id%d", id), m.IdentityKey, "identity kept")
		}
		require.Equal(t, relaytype.StateSucceeded, b.state(3))
		n, err = b.engine.Replay(b.ctx, &relay.ReplayParams{Classes: relay.ReplayableClassesDefault, IDs: []int64{3}})
		require.NoError(t, err)
		require.Zero(t, n, "a succeeded message is never replayed")

		healed.Store(true)
		require.Equal(t, 2, b.work())
		require.Equal(t, relaytype.StateSucceeded, b.state(2), "a replayed message is not its own duplicate")
		require.Equal(t, relaytype.StateSucceeded, b.state(4))
		require.Equal(t, []int64{2, 3, 4}, b.projRows(), "message 3's effect applied exactly once")

		// MALFORMED is replayable only when configured.
		withMalformed := setupOn(t, b.d, relay.Config{
			Mode: relay.ModeUnordered, Handler: okHandler(),
			ReplayableClasses: []relaytype.ErrorClass{relaytype.ClassMalformed},
		})
		n, err = withMalformed.engine.Replay(b.ctx, &relay.ReplayParams{
			Classes: []relaytype.ErrorClass{relaytype.ClassMalformed}, IDs: []int64{1},
		})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, "id1", b.get(1).IdentityKey)
		require.Equal(t, relaytype.StatePending, b.state(1))
	})
}

// TestGateMutualExclusion: LifecycleGate.Do never runs two functions at once,
// and Replay runs inside the gate (it waits while acknowledgement work holds it).
func TestGateMutualExclusion(t *testing.T) {
	t.Parallel()
	b := setup(t, stores()[1], relay.Config{Handler: okHandler()})
	g := b.engine.Gate()
	var active, peak atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 50 {
				require.NoError(t, g.Do(b.ctx, func(context.Context) error {
					n := active.Add(1)
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					active.Add(-1)
					return nil
				}))
			}
		})
	}
	wg.Wait()
	require.Equal(t, int32(1), peak.Load())

	held := make(chan struct{})
	release := make(chan struct{})
	gateDone := make(chan error, 1)
	go func() {
		gateDone <- g.Do(b.ctx, func(context.Context) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	ctx, cancel := context.WithCancel(b.ctx)
	cancel()
	_, err := b.engine.Replay(ctx, &relay.ReplayParams{Classes: []relaytype.ErrorClass{relaytype.ClassInfra}})
	require.ErrorIs(t, err, context.Canceled, "replay waits for the gate")
	close(release)
	require.NoError(t, <-gateDone)
	_, err = b.engine.Replay(b.ctx, &relay.ReplayParams{Classes: []relaytype.ErrorClass{relaytype.ClassInfra}})
	require.NoError(t, err)
}
