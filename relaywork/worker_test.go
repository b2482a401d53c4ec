package relaywork_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/relaywork"
)

// drive advances the fake clock by step every millisecond of real time
// while a timer waits on it, until the returned stop is called: Run's polls,
// renewals and retry backoffs move on as if time passed.
func (b *bundle) drive(step time.Duration) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if b.clock.Waiters() > 0 {
					b.clock.Advance(step)
				}
			}
		}
	}()
	return func() { close(done); <-finished }
}

// runAsync starts Run and returns its cancel and its result.
func runAsync(ctx context.Context, s *relaywork.Store, w relaywork.WorkerConfig) (context.CancelFunc, <-chan error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, w) }()
	return cancel, done
}

// End to end: facts for N keys arrive concurrently (each stores the fact and
// bumps its keys in one transaction) while Run processes them with a
// handler that recomputes from all stored facts under Lock + Done; some
// first attempts fail and are retried after their backoff. At the end every
// row is idle with processed_revision = revision, and every outcome counts
// every fact.
func TestRunEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{Lease: time.Hour})
	_, err := b.pool.Exec(b.ctx, `CREATE TABLE fact (id bigserial PRIMARY KEY, key text NOT NULL);
		CREATE TABLE outcome (key text PRIMARY KEY, facts bigint NOT NULL, revision bigint NOT NULL)`)
	require.NoError(t, err)
	const nKeys, producers, factsEach = 40, 4, 60
	key := func(i int) string { return fmt.Sprintf("submit-%02d", i%nKeys) }

	var failedOnce sync.Map
	var handled, inflight, maxInflight atomic.Int64
	handle := func(ctx context.Context, c relaywork.Claim) error {
		handled.Add(1)
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for m := maxInflight.Load(); n > m && !maxInflight.CompareAndSwap(m, n); m = maxInflight.Load() {
		}
		if _, seen := failedOnce.LoadOrStore(c.Key, true); !seen && c.Key[len(c.Key)-1] == '0' {
			return errors.New("receipt store unavailable")
		}
		return inTx(ctx, b.pool, func(tx pgx.Tx) error {
			if err := b.store.Lock(ctx, tx, c); err != nil {
				return err // work row first ...
			}
			var n int64 // ... then the domain's rows
			if err := tx.QueryRow(ctx, "SELECT count(*) FROM fact WHERE key = $1", c.Key).Scan(&n); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO outcome (key, facts, revision) VALUES ($1, $2, $3)
				ON CONFLICT (key) DO UPDATE SET facts = excluded.facts, revision = excluded.revision`, c.Key, n, c.Revision); err != nil {
				return err
			}
			return b.store.Done(ctx, tx, c, time.Time{})
		})
	}
	stopClock := b.drive(100 * time.Millisecond)
	defer stopClock()
	cancel, done := runAsync(b.ctx, b.store, relaywork.WorkerConfig{Owner: "w1", BatchSize: 8, Concurrency: 4, Handle: handle})
	defer cancel()

	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range factsEach {
				keys := []string{key(p*factsEach + i)}
				if i%3 == 0 { // a fact about two keys bumps both, in sorted order
					keys = append(keys, key(p*factsEach+i+17))
				}
				err := inTx(b.ctx, b.pool, func(tx pgx.Tx) error {
					if err := b.store.Bump(b.ctx, tx, keys); err != nil {
						return err
					}
					for _, k := range keys {
						if _, err := tx.Exec(b.ctx, "INSERT INTO fact (key) VALUES ($1)", k); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Errorf("store fact: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()

	require.Eventually(t, func() bool {
		var unsettled int
		require.NoError(t, b.pool.QueryRow(b.ctx,
			"SELECT count(*) FROM relay_work WHERE state <> 'idle' OR processed_revision <> revision").Scan(&unsettled))
		return unsettled == 0
	}, 30*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	var rows, bad int
	require.NoError(t, b.pool.QueryRow(b.ctx, `
		SELECT count(*), count(*) FILTER (WHERE o.facts IS DISTINCT FROM w.revision OR o.revision <> w.revision
		                                   OR o.facts <> (SELECT count(*) FROM fact f WHERE f.key = w.key))
		FROM relay_work w LEFT JOIN outcome o ON o.key = w.key`).Scan(&rows, &bad))
	require.Equal(t, nKeys, rows)
	require.Zero(t, bad, "every outcome reflects every fact")
	var facts int
	require.NoError(t, b.pool.QueryRow(b.ctx, "SELECT count(*) FROM fact").Scan(&facts))
	require.Equal(t, producers*factsEach+producers*(factsEach/3), facts)
	require.GreaterOrEqual(t, handled.Load(), int64(nKeys+nKeys/10), "the failed first attempts were retried")
	require.LessOrEqual(t, maxInflight.Load(), int64(4), "at most Concurrency handlers at once")
}

// A handler that outlives its lease (another worker took the row over) has
// its ctx cancelled with ErrLeaseLost; Run records no failure for it.
func TestRunCancelsHandlerWhenLeaseLost(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second
	b := setup(t, relaywork.Config{Lease: lease})
	b.bump(t, "k")
	started := make(chan struct{})
	cause := make(chan error, 1)
	// The handler returns only once w2 holds the row: were it to return
	// first (its renewal finds the lease expired as soon as the clock
	// moves), w1 would hand the row back and claim it again before w2.
	taken := make(chan struct{})
	cancel, done := runAsync(b.ctx, b.store, relaywork.WorkerConfig{Owner: "w1", Concurrency: 1,
		Handle: func(ctx context.Context, c relaywork.Claim) error {
			close(started)
			<-ctx.Done()
			cause <- context.Cause(ctx)
			<-taken
			return ctx.Err()
		}})
	defer cancel()
	<-started
	// The renewal timer is parked on the clock (Run itself waits for its
	// only slot): w1 stalls past its lease and w2 takes the row.
	require.Eventually(t, func() bool { return b.clock.Waiters() > 0 }, 5*time.Second, time.Millisecond)
	b.clock.Advance(lease + time.Second)
	c2 := b.claim(t, "w2", 1)
	close(taken)
	require.Len(t, c2, 1)
	require.True(t, c2[0].TakenOver)

	err := <-cause
	require.ErrorIs(t, err, relaywork.ErrLeaseLost)
	cancel()
	require.NoError(t, <-done)
	r := b.row(t, "k")
	require.Equal(t, "w2", r.LeaseOwner, "w1's Release leaves w2's row alone")
	require.Equal(t, 0, r.Attempts, "a lost lease is not a failure")
}

// Stopping Run waits for the handlers and hands their rows back; a handler
// that returns nil without Done has its row marked done by Run; a panic is
// a failure.
func TestRunStopReleasesAndSettles(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{})
	b.bump(t, "block", "nil", "panic")
	running := make(chan struct{}, 3)
	settled := make(chan struct{}, 3)
	cancel, done := runAsync(b.ctx, b.store, relaywork.WorkerConfig{Owner: "w1",
		Handle: func(ctx context.Context, c relaywork.Claim) error {
			running <- struct{}{}
			switch c.Key {
			case "nil":
				settled <- struct{}{}
				return nil
			case "panic":
				settled <- struct{}{}
				panic("boom")
			}
			<-ctx.Done()
			return ctx.Err()
		}})
	for range 3 {
		<-running
	}
	require.Eventually(t, func() bool {
		return b.row(t, "nil").State == relaywork.StateIdle && b.row(t, "panic").State == relaywork.StateRetryWait
	}, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	r := b.row(t, "block")
	require.Equal(t, relaywork.StatePending, r.State, "handed back on stop")
	require.Empty(t, r.LeaseOwner)
	require.Equal(t, 0, r.Attempts, "a stop is not a failure")
	r = b.row(t, "nil")
	require.EqualValues(t, 1, r.ProcessedRevision)
	r = b.row(t, "panic")
	require.Equal(t, 1, r.Attempts)
	require.Contains(t, r.LastError, "handler panicked: boom")
}

func TestRunValidatesConfig(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{})
	h := func(context.Context, relaywork.Claim) error { return nil }
	require.ErrorContains(t, b.store.Run(b.ctx, relaywork.WorkerConfig{Handle: h}), "Owner is required")
	require.ErrorContains(t, b.store.Run(b.ctx, relaywork.WorkerConfig{Owner: "w"}), "Handle is required")
	require.ErrorContains(t, b.store.Run(b.ctx, relaywork.WorkerConfig{Owner: "w", Handle: h, Concurrency: -1}), "Concurrency -1")
}

// The collector reports this process's counters and the needs_review count,
// labelled by queue.
func TestCollector(t *testing.T) {
	t.Parallel()
	b := setup(t, relaywork.Config{Lease: 10 * time.Second, MaxAttempts: 1})
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(b.store.Collector()))
	other, err := relaywork.New(b.pool, relaywork.Config{Queue: "other"})
	require.NoError(t, err)
	require.NoError(t, reg.Register(other.Collector()), "stores of different queues register side by side")

	b.bump(t, "a", "b")
	cs := b.claim(t, "w1", 2)
	b.clock.Advance(11 * time.Second)
	taken := b.claim(t, "w2", 1)
	require.Len(t, taken, 1)
	for _, c := range cs {
		if c.Key == taken[0].Key {
			require.ErrorIs(t, b.finish(c, time.Time{}), relaywork.ErrFenced)
		} else {
			require.NoError(t, b.store.Fail(b.ctx, c, errors.New("x"))) // MaxAttempts 1: needs_review
		}
	}

	got := map[string]float64{}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			require.Len(t, m.GetLabel(), 1)
			if m.GetLabel()[0].GetValue() != "q" {
				continue
			}
			got[mf.GetName()] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	require.Equal(t, map[string]float64{
		"relay_work_claims_total":    3,
		"relay_work_takeovers_total": 1,
		"relay_work_fenced_total":    1,
		"relay_work_failures_total":  1,
		"relay_work_needs_review":    1,
	}, got)
}
