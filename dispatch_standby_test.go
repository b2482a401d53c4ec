package relay_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaysink"
	"github.com/relayhq/relay/relaytype"
)

// delivery is one event a tagSink confirmed: which dispatcher's sink, in
// which of its Publish calls.
type delivery struct {
	by   string
	call int
	ev   relaysink.Event
}

// deliveryLog records the confirmed deliveries of several dispatchers' sinks
// in one order (the order of the sinks' Publish calls).
type deliveryLog struct {
	mu  sync.Mutex
	all []delivery
}

func (l *deliveryLog) snapshot() []delivery {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all)
}

func (l *deliveryLog) count(by string) int {
	n := 0
	for _, d := range l.snapshot() {
		if d.by == by {
			n++
		}
	}
	return n
}

// tagSink confirms every event it is given, records it in log under its
// name, then runs onCall (which may block, e.g. until the dispatcher's ctx is
// cancelled: the broker has the events, the dispatcher never hears back).
type tagSink struct {
	by     string
	log    *deliveryLog
	calls  int // guarded by log.mu
	onCall func(ctx context.Context, call int, events []relaysink.Event)
}

func (s *tagSink) Name() string { return "tag-" + s.by }

func (s *tagSink) Publish(ctx context.Context, events []relaysink.Event) []error {
	s.log.mu.Lock()
	s.calls++
	call := s.calls
	for _, ev := range events {
		s.log.all = append(s.log.all, delivery{by: s.by, call: call, ev: ev})
	}
	s.log.mu.Unlock()
	if s.onCall != nil {
		s.onCall(ctx, call, events)
	}
	return make([]error, len(events))
}

func (s *tagSink) Close(context.Context) error { return nil }

// standbyBundle is one PostgreSQL schema opened by two drivers (two
// instances), a dispatcher of target "t" on each, and their shared log.
type standbyBundle struct {
	t      *testing.T
	ctx    context.Context
	da, db relaydriver.Driver
	a, b   *relay.Dispatcher
	sa, sb *tagSink
	log    *deliveryLog
	n      int // events committed
}

func setupStandby(t *testing.T, cfg relay.DispatcherConfig) *standbyBundle {
	t.Helper()
	dsn := testdb.PGSchema(t)
	s := &standbyBundle{t: t, ctx: t.Context(), da: testdb.PGDriverAt(t, dsn), db: testdb.PGDriverAt(t, dsn), log: &deliveryLog{}}
	s.sa, s.sb = &tagSink{by: "A", log: s.log}, &tagSink{by: "B", log: s.log}
	cfg.Target = "t"
	cfg.Clock = relayclock.System{} // the standby's retries and the lock renewals run on real time
	cfg.StandbyInterval = orDefault(cfg.StandbyInterval, 10*time.Millisecond)
	cfg.PollInterval = orDefault(cfg.PollInterval, time.Hour) // only LISTEN/NOTIFY and takeovers wake a dispatcher
	var err error
	cfg.Owner = "A"
	s.a, err = relay.NewDispatcher(s.da, s.sa, cfg)
	require.NoError(t, err)
	cfg.Owner = "B"
	s.b, err = relay.NewDispatcher(s.db, s.sb, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, s.a.Stop(context.Background()))
		require.NoError(t, s.b.Stop(context.Background()))
	})
	return s
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// commit appends rounds × keys events, one transaction per round with one
// event per key, so each key's seq is 1, 2, 3 … across calls.
func (s *standbyBundle) commit(rounds, keys int) {
	s.t.Helper()
	for range rounds {
		tx, err := s.da.Begin(s.ctx)
		require.NoError(s.t, err)
		evs := make([]*relay.OutboxEvent, keys)
		for k := range keys {
			s.n++
			evs[k] = &relay.OutboxEvent{ID: "e" + strconv.Itoa(s.n), Target: "t", Key: fmt.Sprintf("k%02d", k), Payload: []byte("x")}
		}
		_, err = relay.AppendEventsTx(s.ctx, tx, evs...)
		require.NoError(s.t, err)
		require.NoError(s.t, tx.Commit(s.ctx))
	}
}

// drained waits until every committed event is SENT.
func (s *standbyBundle) drained() {
	s.t.Helper()
	require.Eventually(s.t, func() bool {
		st, err := s.b.Stats(s.ctx)
		require.NoError(s.t, err)
		return st.Pending == 0 && st.Sent == int64(s.n)
	}, 30*time.Second, 5*time.Millisecond)
}

// requireOneThenOther checks that the log is every delivery of first, then
// every delivery of second: the two never delivered at the same time.
func requireOneThenOther(t *testing.T, log []delivery, first, second string) {
	t.Helper()
	i := 0
	for i < len(log) && log[i].by == first {
		i++
	}
	for j := i; j < len(log); j++ {
		require.Equal(t, second, log[j].by, "delivery %d of %d: after %s's first delivery only %s delivers", j, len(log), second, second)
	}
}

// requirePerKeyOrder checks, for each dispatcher separately, that it
// delivered each key's events in ascending seq (no key goes back within one
// dispatcher), and that together they delivered every seq 1..perKey of each
// key.
func requirePerKeyOrder(t *testing.T, log []delivery, keys, perKey int) {
	t.Helper()
	last := map[string]int64{}  // by+key → last seq delivered
	seen := map[string][]bool{} // key → seq delivered
	for _, d := range log {
		k := d.by + "/" + d.ev.Key
		require.Greater(t, d.ev.Seq, last[k], "%s delivered %s seq %d after seq %d", d.by, d.ev.Key, d.ev.Seq, last[k])
		last[k] = d.ev.Seq
		if seen[d.ev.Key] == nil {
			seen[d.ev.Key] = make([]bool, perKey+1)
		}
		seen[d.ev.Key][d.ev.Seq] = true
	}
	require.Len(t, seen, keys)
	for key, seqs := range seen {
		for seq := 1; seq <= perKey; seq++ {
			require.True(t, seqs[seq], "%s seq %d never delivered", key, seq)
		}
	}
}

// Two dispatchers of one target on two instances of one PostgreSQL schema:
// the first started is active, the second a standby that delivers nothing.
// The active one is stopped in the middle of its backlog (from inside its
// fifth sink call); the standby takes over and delivers the rest and what is
// committed afterwards. Asserted: every event delivered exactly once (a Stop
// that can wait settles its batches before it gives the lock up, so nothing is
// redelivered), all of A's deliveries come before all of B's, and each key's
// seqs arrive in ascending order 1..n.
func TestDispatcherStandbyTakesOverOnStop(t *testing.T) {
	t.Parallel()
	s := setupStandby(t, relay.DispatcherConfig{BatchSize: 20})
	const keys, before, after = 10, 30, 10
	stopped := make(chan error, 1)
	s.sa.onCall = func(_ context.Context, call int, _ []relaysink.Event) {
		if call == 5 {
			go func() { stopped <- s.a.Stop(context.Background()) }()
		}
	}
	require.NoError(t, s.a.Start(s.ctx))
	require.True(t, s.a.Active(), "the first dispatcher takes the lock")
	s.sb.onCall = func(context.Context, int, []relaysink.Event) {}
	require.NoError(t, s.b.Start(s.ctx))
	require.False(t, s.b.Active(), "the second is a standby")
	stA, err := s.a.Stats(s.ctx)
	require.NoError(t, err)
	stB, err := s.b.Stats(s.ctx)
	require.NoError(t, err)
	require.True(t, stA.Active)
	require.False(t, stB.Active)

	s.commit(before, keys)
	require.NoError(t, <-stopped)
	require.False(t, s.a.Active())
	require.Eventually(t, s.b.Active, 10*time.Second, time.Millisecond, "the standby takes over")
	s.commit(after, keys)
	s.drained()

	log := s.log.snapshot()
	require.Len(t, log, s.n, "every event exactly once")
	ids := map[string]bool{}
	for _, d := range log {
		require.False(t, ids[d.ev.ID], "%s delivered twice", d.ev.ID)
		ids[d.ev.ID] = true
	}
	require.Positive(t, s.log.count("A"))
	require.Positive(t, s.log.count("B"))
	requireOneThenOther(t, log, "A", "B")
	requirePerKeyOrder(t, log, keys, before+after)
}

// The active dispatcher is cut off in the middle of a sink call: the sink
// has the batch, then the dispatcher's Stop cannot wait (its ctx is already
// cancelled), as when a process is told to quit now. It marks nothing more,
// and the standby takes over. Asserted: every event delivered; the only
// events delivered twice are events of at most 1+2 of A's sink calls (the one
// cut off and the up to two batches still settling), and every event
// of the call cut off is delivered again (it was never marked); A's
// deliveries all come before B's; per dispatcher each key's seqs ascend.
func TestDispatcherStandbyTakesOverOnCancel(t *testing.T) {
	t.Parallel()
	s := setupStandby(t, relay.DispatcherConfig{BatchSize: 20})
	const keys, perKey, cutAt = 10, 30, 5
	inCall := make(chan struct{})
	s.sa.onCall = func(ctx context.Context, call int, _ []relaysink.Event) {
		if call == cutAt {
			close(inCall)
			<-ctx.Done() // the broker has the batch; the answer never comes back
		}
	}
	require.NoError(t, s.a.Start(s.ctx))
	require.NoError(t, s.b.Start(s.ctx))
	require.True(t, s.a.Active())
	require.False(t, s.b.Active())
	s.commit(perKey, keys)
	<-inCall
	cancelled, cancel := context.WithCancel(s.ctx)
	cancel()
	require.ErrorIs(t, s.a.Stop(cancelled), context.Canceled)
	require.Eventually(t, s.b.Active, 10*time.Second, time.Millisecond, "the standby takes over")
	s.drained()

	log := s.log.snapshot()
	var lastA int
	count := map[string]int{}
	for _, d := range log {
		count[d.ev.ID]++
		if d.by == "A" {
			lastA = max(lastA, d.call)
		}
	}
	require.Equal(t, cutAt, lastA, "A made no sink call after the one cut off")
	redone := map[int]bool{} // A's calls with an event delivered again
	for _, d := range log {
		if count[d.ev.ID] > 1 && d.by == "A" {
			redone[d.call] = true
		}
		require.LessOrEqual(t, count[d.ev.ID], 2, "%s", d.ev.ID)
		if d.by == "A" && d.call == cutAt {
			require.Equal(t, 2, count[d.ev.ID], "%s was in the call cut off, never marked, so B delivers it again", d.ev.ID)
		}
	}
	// Besides the call cut off, only batches still settling when it was cut
	// can be delivered again: at most two (the settle depth). They need not
	// be the two calls just before it — settles finish in any order, so an
	// earlier, slower one may still be running.
	require.True(t, redone[cutAt], "the call cut off is delivered again")
	require.LessOrEqual(t, len(redone), 3, "A's calls delivered again: %v", redone)
	requireOneThenOther(t, log, "A", "B")
	requirePerKeyOrder(t, log, keys, perKey)
}

// A dispatcher whose lock is lost (its session terminated, as when the
// server drops a connection) stops delivering and goes back to standby; the
// other dispatcher takes over; and when that one stops, the first takes the
// target again.
func TestDispatcherLockLostGoesStandby(t *testing.T) {
	t.Parallel()
	// LockTTL: renewed (checked) every 100ms. StandbyInterval: B tries every
	// 200ms and A, after its loss, waits 400ms before trying again, so B's
	// attempt comes first even on a loaded machine.
	s := setupStandby(t, relay.DispatcherConfig{LockTTL: 300 * time.Millisecond, StandbyInterval: 200 * time.Millisecond})
	require.NoError(t, s.a.Start(s.ctx))
	require.NoError(t, s.b.Start(s.ctx))
	require.True(t, s.a.Active())

	// Terminate the session holding A's lock ("outbox:<kind>:<target>").
	pool := s.db.(*relaypgx.Driver).Pool()
	var ok bool
	require.NoError(t, pool.QueryRow(s.ctx, `
		SELECT pg_terminate_backend(l.pid) FROM pg_locks l,
		     (SELECT hashtextextended(current_schema() || '/' || $1::text, 0) AS k) s
		WHERE l.locktype = 'advisory' AND l.granted
		  AND l.classid::bigint = ((s.k >> 32) & 4294967295) AND l.objid::bigint = (s.k & 4294967295)`,
		"outbox:events:t").Scan(&ok))
	require.True(t, ok)
	require.Eventually(t, func() bool { return !s.a.Active() && s.b.Active() }, 10*time.Second, time.Millisecond,
		"A notices the loss at its next renewal and steps down; B takes over")

	s.commit(3, 4)
	s.drained()
	require.Zero(t, s.log.count("A"), "A delivers nothing after losing the lock")
	require.Equal(t, s.n, s.log.count("B"))

	require.NoError(t, s.b.Stop(s.ctx))
	require.Eventually(t, s.a.Active, 10*time.Second, time.Millisecond, "A, back on standby, takes the target again")
	s.commit(1, 4)
	require.Eventually(t, func() bool { return s.log.count("A") == 4 }, 10*time.Second, time.Millisecond)
}

// Work delivers only under the target lock: while another dispatcher is
// active, Work refuses at once (ErrLocked) and delivers nothing; on the
// active dispatcher it runs under the loop's lock.
func TestDispatcherWorkNeedsTheLock(t *testing.T) {
	t.Parallel()
	s := setupStandby(t, relay.DispatcherConfig{})
	require.NoError(t, s.a.Start(s.ctx))
	require.NoError(t, s.b.Start(s.ctx))
	require.False(t, s.b.Active())
	s.commit(1, 3)
	n, err := s.b.Work(s.ctx)
	require.ErrorIs(t, err, relaytype.ErrLocked)
	require.Zero(t, n)
	require.Zero(t, s.log.count("B"))
	stopCtx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, s.b.Stop(stopCtx), "a standby stops at once, without waiting for the lock")
	_, err = s.a.Work(s.ctx)
	require.NoError(t, err)
	s.drained()
	require.NoError(t, s.a.Stop(s.ctx))
	s.commit(1, 3)
	n, err = s.b.Work(s.ctx)
	require.NoError(t, err, "with no dispatcher started, Work takes the lock for the call")
	require.Equal(t, 3, n)
}

// Stats reads the target's counts and oldest pending age (on the
// dispatcher's clock, from the oldest PENDING event's created_at) and whether
// this dispatcher is active; a DispatchLatest dispatcher reads its
// latest-state rows.
func TestDispatcherStats(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		d := s.open(t, true)
		ctx := t.Context()
		clock := relayclock.NewFake(t0.Add(time.Hour))
		sink := &recSink{}
		sink.setFail(func(ev relaysink.Event) error {
			if ev.Key == "b" {
				return fmt.Errorf("refused")
			}
			return nil
		})
		disp, err := relay.NewDispatcher(d, sink, relay.DispatcherConfig{Target: "t", Clock: clock, MaxAttempts: 1, PollInterval: time.Hour})
		require.NoError(t, err)

		st, err := disp.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, relay.DispatcherStats{}, st, "empty target, not started")

		for i, at := range []time.Duration{0, 10 * time.Minute, 20 * time.Minute} {
			key := []string{"a", "a", "b"}[i]
			_, err := d.GetExecutor().OutboxAppend(ctx, []*relaydriver.OutboxAppendParams{{Event: relaytype.Event{ID: "e" + strconv.Itoa(i),
				Target: "t", Key: key, Type: relaydriver.OutboxUpsert, Payload: []byte("x")}, Now: t0.Add(at)}})
			require.NoError(t, err)
		}
		st, err = disp.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, relay.DispatcherStats{Pending: 3, OldestPending: time.Hour}, st)
		clock.Advance(time.Minute)
		st, err = disp.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, time.Hour+time.Minute, st.OldestPending, "the age grows with the clock")

		_, err = disp.Work(ctx)
		require.NoError(t, err)
		st, err = disp.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, relay.DispatcherStats{Sent: 2, Dead: 1}, st, "nothing pending: no age; Work alone is not active")

		require.NoError(t, disp.Start(ctx))
		st, err = disp.Stats(ctx)
		require.NoError(t, err)
		require.True(t, st.Active, "started and holding the target")
		require.NoError(t, disp.Stop(ctx))
		st, err = disp.Stats(ctx)
		require.NoError(t, err)
		require.False(t, st.Active, "stopped")

		latest, err := relay.NewDispatcher(d, sink, relay.DispatcherConfig{Target: "t", Kind: relay.DispatchLatest, Clock: clock})
		require.NoError(t, err)
		_, err = d.GetExecutor().LatestUpsert(ctx, &relaydriver.LatestUpsertParams{Target: "t", Key: "k", Version: 1,
			Type: relaydriver.OutboxUpsert, Payload: []byte("x"), Now: t0})
		require.NoError(t, err)
		st, err = latest.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, relay.DispatcherStats{Pending: 1, OldestPending: time.Hour + time.Minute}, st, "the latest-state rows of t")
	})
}

// listenProbe is a store whose ListenOutbox records when LISTEN is in effect,
// or fails with fail.
type listenProbe struct {
	relaydriver.Driver
	established atomic.Bool
	fail        error
}

func (p *listenProbe) ListenOutbox(ctx context.Context, target string) (<-chan struct{}, error) {
	if p.fail != nil {
		return nil, p.fail
	}
	ch, err := p.Driver.(relaydriver.Listener).ListenOutbox(ctx, target)
	if err == nil {
		p.established.Store(true)
	}
	return ch, err
}

// Start returns only once LISTEN is in effect, so an event committed right
// after Start is delivered on its notification: the poll interval is an hour
// on a clock that never moves. A LISTEN that fails fails Start, and the target
// lock is given up (another dispatcher starts active).
func TestDispatcherStartListens(t *testing.T) {
	t.Parallel()
	probe := &listenProbe{Driver: openPG(t, true)}
	sink := &recSink{}
	clock := relayclock.NewFake(t0)
	disp, err := relay.NewDispatcher(probe, sink, relay.DispatcherConfig{Target: "t", Clock: clock, PollInterval: time.Hour})
	require.NoError(t, err)
	require.NoError(t, disp.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, disp.Stop(context.Background())) })
	require.True(t, probe.established.Load(), "LISTEN is in effect when Start returns")
	require.True(t, disp.Active())

	tx, err := probe.Begin(t.Context())
	require.NoError(t, err)
	_, err = relay.AppendEventsTx(t.Context(), tx, &relay.OutboxEvent{ID: "e1", Target: "t", Key: "a"})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(t.Context()))
	require.Eventually(t, func() bool { return len(sink.byKey()["a"]) == 1 }, 10*time.Second, time.Millisecond)

	// A store whose LISTEN fails: Start fails and leaves the target free.
	bad := &listenProbe{Driver: openPG(t, true), fail: errors.New("injected listen failure")}
	failing, err := relay.NewDispatcher(bad, &recSink{}, relay.DispatcherConfig{Target: "t", Clock: clock, PollInterval: time.Hour})
	require.NoError(t, err)
	require.ErrorContains(t, failing.Start(t.Context()), "injected listen failure")
	require.False(t, failing.Active())
	next, err := relay.NewDispatcher(bad.Driver, &recSink{}, relay.DispatcherConfig{Target: "t", Clock: clock, PollInterval: time.Hour})
	require.NoError(t, err)
	require.NoError(t, next.Start(t.Context()))
	require.True(t, next.Active(), "the failed Start gave the lock up")
	require.NoError(t, next.Stop(t.Context()))
}
