package relayintake_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relayintake"
)

// Run: full batches follow each other at once; otherwise it waits the poll
// interval on the injected clock; failures are logged (without payloads) and
// retried; a hole ages out on the clock; cancel stops it cleanly.
func TestRun(t *testing.T) {
	t.Parallel()
	b := setup(t, sqliteStore, func(c *relayintake.Config) { c.BatchSize = 2 })
	b.seed(relayintake.SeedZero)
	b.insert(span(1, 5)...)

	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.in.Run(ctx) }()
	// parked waits until Run waits on the clock again, i.e. its round is over.
	parked := func() {
		t.Helper()
		require.Eventually(t, func() bool { return b.clock.Waiters() == 1 }, 10*time.Second, time.Millisecond)
	}

	parked()
	require.Equal(t, int64(5), b.cursor().Watermark, "full batches run back to back, without waiting")

	b.insert(6)
	b.clock.Advance(time.Second - time.Nanosecond)
	require.Equal(t, 1, b.clock.Waiters(), "still waiting the poll interval")
	b.clock.Advance(time.Nanosecond)
	parked()
	require.Equal(t, int64(6), b.cursor().Watermark)

	// An unreadable source: logged, retried after the poll interval, W unchanged.
	_, err := b.foreign.Exec(`ALTER TABLE CMINMSGS RENAME TO AWAY`)
	require.NoError(t, err)
	b.clock.Advance(time.Second)
	parked()
	require.Contains(t, b.logs.String(), "round failed")
	require.Equal(t, int64(6), b.cursor().Watermark)
	require.Equal(t, 1.0, metricValue(t, b, "relay_intake_errors_total"))
	select {
	case err := <-done:
		t.Fatalf("Run returned on a source failure: %v", err)
	default:
	}
	_, err = b.foreign.Exec(`ALTER TABLE AWAY RENAME TO CMINMSGS`)
	require.NoError(t, err)

	// A hole observed by Run is released once the clock passes the delay; the
	// release round and the round after it run back to back.
	b.insert(8, 9)
	b.clock.Advance(time.Second)
	parked()
	holeSeen := b.clock.Now()
	requireTime(t, holeSeen, b.cursor().HoleSince)
	require.Equal(t, int64(6), b.cursor().Watermark)
	b.clock.Advance(delay)
	parked()
	require.Equal(t, int64(9), b.cursor().Watermark)
	require.Equal(t, []int64{7}, b.holeIDs())
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 8, 9}, b.messageIDs())

	cancel()
	require.NoError(t, <-done, "a cancelled Run returns nil")
	require.NotContains(t, b.logs.String(), "SECRET-PAYLOAD", "logs never carry payloads")
}

// A randomised history of a mailbox where ids are allocated in order but
// commit late or never, checked after every round against the invariants of
// W never decreases; every id up to W is exactly
// one of a message or a logged permanent hole; no message lies above W; a hole
// is released only after waiting the max commit delay and never for a row that
// was visible; in the end every committed row is enqueued.
func TestRandomHistoryLosesNothing(t *testing.T) {
	t.Parallel()
	for seed := range uint64(3) {
		t.Run("", func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 42))
			b := setup(t, sqliteStore, func(c *relayintake.Config) { c.BatchSize = 1 + r.IntN(4) })
			b.seed(relayintake.SeedZero)

			var (
				next      int64 = 1
				pending         = map[int64]bool{} // allocated, not yet visible
				committed       = map[int64]bool{}
				abandoned       = map[int64]bool{} // rolled back, or given up by release
				lastW     int64
			)
			check := func() {
				t.Helper()
				w := b.cursor().Watermark
				require.GreaterOrEqual(t, w, lastW, "W never decreases")
				lastW = w
				msgs, holes := b.messageIDs(), b.holes()
				all := slices.Clone(msgs)
				for _, h := range holes {
					require.False(t, committed[h.ID], "hole %d was a visible row", h.ID)
					require.GreaterOrEqual(t, h.ReleasedAt.Sub(h.FirstSeenAt), delay, "hole %d released early", h.ID)
					all = append(all, h.ID)
					if pending[h.ID] { // the late transaction is given up for good
						delete(pending, h.ID)
						abandoned[h.ID] = true
					}
				}
				slices.Sort(all)
				require.Equal(t, span(1, w), all, "every id up to W is a message or a hole, once")
				for _, id := range msgs {
					require.True(t, committed[id])
				}
			}
			commit := func(id int64) {
				delete(pending, id)
				committed[id] = true
				b.insert(id)
			}
			anyPending := func() (int64, bool) {
				for id := range pending {
					return id, true
				}
				return 0, false
			}

			for range 150 {
				switch x := r.IntN(10); {
				case x < 4: // allocate: visible at once, or held open
					if r.IntN(3) == 0 {
						pending[next] = true
					} else {
						commit(next)
					}
					next++
				case x < 5:
					if id, ok := anyPending(); ok {
						commit(id)
					}
				case x < 6:
					if id, ok := anyPending(); ok {
						delete(pending, id)
						abandoned[id] = true
					}
				case x < 8:
					b.clock.Advance(time.Duration(r.Int64N(int64(delay / 2))))
				default:
					b.round()
					check()
				}
			}
			// Settle: everything open commits or rolls back; rounds run until quiet.
			for id := range pending {
				if r.IntN(2) == 0 {
					commit(id)
				} else {
					delete(pending, id)
					abandoned[id] = true
				}
			}
			var maxCommitted int64
			for id := range committed {
				maxCommitted = max(maxCommitted, id)
			}
			// Trailing abandoned ids have no row after them, so they are no hole
			// and W stops at the last committed row.
			for {
				res := b.round()
				check()
				if res.Watermark == maxCommitted {
					break
				}
				if !res.More {
					b.clock.Advance(delay)
				}
			}
			var want []int64
			for id := range committed {
				want = append(want, id)
			}
			slices.Sort(want)
			require.Equal(t, want, b.messageIDs(), "every committed row is enqueued")
			for id := range abandoned {
				require.False(t, committed[id])
			}
			t.Logf("ids %d, committed %d, permanent holes %d", next-1, len(committed), len(b.holes()))
			require.NotEmpty(t, b.holes(), "the history exercised releases")
		})
	}
}
