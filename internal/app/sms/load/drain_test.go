package load_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/internal/app/sms/load"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaymigrate"
)

var start = time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)

type db struct {
	t     *testing.T
	ctx   context.Context
	pool  *pgxpool.Pool
	appID int64
}

// setupDB: a fresh schema with the engine's, the sms and the gateway's
// tables and the demo tenancy.
func setupDB(t *testing.T) *db {
	t.Helper()
	ctx := t.Context()
	d := testdb.PGDriver(t)
	clock := relayclock.NewFake(start)
	_, err := relaymigrate.Up(ctx, d, clock, tenancy.MigrationLine(), gateway.MigrationLine())
	require.NoError(t, err)
	_, err = tenancy.Seed(ctx, d.Pool(), tenancy.DemoFixture(func(n string) string { return "file:/x/" + n }), tenancy.SeedOpts{Clock: clock})
	require.NoError(t, err)
	b := &db{t: t, ctx: ctx, pool: d.Pool()}
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT id FROM sms_app WHERE name = 'otp'`).Scan(&b.appID))
	return b
}

func (b *db) exec(sql string, args ...any) {
	b.t.Helper()
	_, err := b.pool.Exec(b.ctx, sql, args...)
	require.NoError(b.t, err, sql)
}

// message inserts message id with n numbers and segments, admitted (or
// refused when segments is 0), accepted at at.
func (b *db) message(id int64, n, segments int, at time.Time) {
	b.t.Helper()
	if segments == 0 {
		b.exec(`INSERT INTO sms_message (id, app_id, client_msg_id, numbers, sign_name, template_code, params, content,
			state, reason, accepted_at, decided_at) VALUES ($1, $2, $3, '{13812340000}', 's', 'otp', '{}', '', 'refused', 'blacklisted', $4, $4)`,
			id, b.appID, fmt.Sprint("c-", id), at)
		return
	}
	nums, cars, units := make([]string, n), make([]string, n), make([]int64, n)
	for i := range n {
		nums[i], cars[i], units[i] = fmt.Sprintf("138%08d", id*10+int64(i)), "mobile", 45
	}
	b.exec(`INSERT INTO sms_message (id, app_id, client_msg_id, numbers, sign_name, template_code, params, content,
		carriers, segments, unit_li, amount_li, state, accepted_at, decided_at)
		VALUES ($1, $2, $3, $4, 's', 'otp', '{}', 'x', $5, $6, $7, $8, 'admitted', $9, $9)`,
		id, b.appID, fmt.Sprint("c-", id), nums, cars, segments, units, int64(45*n*segments), at)
}

func (b *db) complete(id int64) {
	b.exec(`UPDATE sms_message SET state = 'completed', completed_at = decided_at,
		outcomes = array_fill('delivered'::text, ARRAY[cardinality(numbers)]) WHERE id = $1`, id)
}

// attempt inserts an attempt and its submits, segment k settled with
// states[k] at settled[k].
func (b *db) attempt(msg int64, recipient, no int, retryOf int64, states []string, settled []time.Time) int64 {
	b.t.Helper()
	var retry any
	if retryOf != 0 {
		retry = retryOf
	}
	var id int64
	require.NoError(b.t, b.pool.QueryRow(b.ctx, `INSERT INTO sms_attempt (message_id, recipient, attempt_no, retry_of, channel_id,
		receipt_mode, segments, state, created_at) VALUES ($1, $2, $3, $4, (SELECT id FROM sms_channel WHERE name = 'cm-a'),
		'per_segment', $5, 'queued', $6) RETURNING id`, msg, recipient, no, retry, len(states), start).Scan(&id))
	for k, st := range states {
		sid := id*256 + int64(k+1)
		b.exec(`INSERT INTO sms_submit (submit_id, attempt_id, channel_id, pk_number, registered)
			VALUES ($1, $2, (SELECT id FROM sms_channel WHERE name = 'cm-a'), $3, true)`, sid, id, k+1)
		b.exec(`INSERT INTO gateway_submit (submit_id, channel, state, claimed_by, claimed_at, settled_at)
			VALUES ($1, 'cm-a', $2, 'gw', $3, $4)`, sid, st, start, settled[k])
	}
	return id
}

func TestDrain(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	b.message(1, 1, 1, start.Add(-time.Hour)) // before the tier: never waited for
	b.message(2, 1, 1, start)
	b.message(3, 1, 0, start)
	b.complete(2)

	// Message 4 is still admitted; the test completes it once Drain has
	// reported it waiting.
	b.message(4, 1, 1, start.Add(time.Second))
	seen := make(chan [2]int, 100)
	done := make(chan error, 1)
	var res load.DrainResult
	go func() {
		var err error
		res, err = load.Drain(b.ctx, b.pool, start, relayclock.System{}, time.Minute, func(d, t int) { seen <- [2]int{d, t} })
		done <- err
	}()
	require.Equal(t, [2]int{2, 3}, <-seen)
	// Between the first scan and the end Drain probes only message 4; a
	// message accepted meanwhile is found by the scan that confirms the end.
	b.message(6, 1, 1, start.Add(3*time.Second))
	b.complete(4)
	for got := <-seen; got != [2]int{3, 4}; got = <-seen {
		require.Contains(t, [][2]int{{2, 3}, {3, 3}}, got)
	}
	b.complete(6)
	require.NoError(t, <-done)
	require.Equal(t, 4, res.Total)
	require.Equal(t, 4, res.Done)

	// A message never decided: the timeout ends the wait with the counts.
	b.message(5, 1, 1, start.Add(2*time.Second))
	res, err := load.Drain(b.ctx, b.pool, start, relayclock.System{}, time.Nanosecond, nil)
	require.ErrorIs(t, err, load.ErrDrainTimeout)
	require.ErrorContains(t, err, "4 of 5 messages decided")
	require.Equal(t, load.DrainResult{Total: 5, Done: 4, Elapsed: res.Elapsed}, res)
}

// TestSubmitRate: full supplier submits are messages whose every
// recipient's first attempt had every segment accepted; the window runs
// from the tier's first accept to the last settle of those submits.
func TestSubmitRate(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	acc := func(n int, at time.Duration) ([]string, []time.Time) {
		s, ts := make([]string, n), make([]time.Time, n)
		for i := range n {
			s[i], ts[i] = "ACCEPTED", start.Add(at)
		}
		return s, ts
	}
	b.message(1, 1, 1, start) // full at 1 s
	s, ts := acc(1, time.Second)
	b.attempt(1, 0, 1, 0, s, ts)
	b.message(2, 2, 3, start.Add(100*time.Millisecond)) // two recipients, three segments each: full at 2 s
	s, ts = acc(3, 1500*time.Millisecond)
	b.attempt(2, 0, 1, 0, s, ts)
	s, ts = acc(3, 2*time.Second)
	b.attempt(2, 1, 1, 0, s, ts)
	b.message(3, 1, 3, start.Add(200*time.Millisecond)) // one segment rejected: not full
	b.attempt(3, 0, 1, 0, []string{"ACCEPTED", "REJECTED", "ACCEPTED"}, []time.Time{start, start, start})
	b.message(4, 1, 0, start.Add(300*time.Millisecond)) // refused
	b.message(5, 1, 1, start.Add(400*time.Millisecond)) // went through on its retry only: not a first submit
	first := b.attempt(5, 0, 1, 0, []string{"REJECTED"}, []time.Time{start.Add(time.Second)})
	b.exec(`UPDATE sms_attempt SET state = 'failed', decided_at = $2 WHERE id = $1`, first, start)
	s, ts = acc(1, 5*time.Second)
	b.attempt(5, 0, 2, first, s, ts)
	b.message(6, 1, 1, start.Add(-time.Minute)) // an earlier tier
	s, ts = acc(1, 0)
	b.attempt(6, 0, 1, 0, s, ts)

	r, err := load.SubmitRate(b.ctx, b.pool, load.Window{From: start})
	require.NoError(t, err)
	require.Equal(t, load.SubmitRateResult{Messages: 5, Full: 2, Segments: 7, From: start, To: start.Add(2 * time.Second),
		PerSecond: 1}, r)

	r, err = load.SubmitRate(b.ctx, b.pool, load.Window{From: start, To: start.Add(150 * time.Millisecond)})
	require.NoError(t, err)
	require.Equal(t, int64(2), r.Messages)
	require.Equal(t, int64(2), r.Full)

	r, err = load.SubmitRate(b.ctx, b.pool, load.Window{From: start.Add(time.Hour)})
	require.NoError(t, err)
	require.Equal(t, load.SubmitRateResult{}, r)
}

// slowClock is a clock on which every reading is 30 ms after the previous
// one (so every look Drain takes seems slow) and every wait ends at once,
// recorded.
type slowClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func (c *slowClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(30 * time.Millisecond)
	return c.now
}

func (c *slowClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

// TestDrainWaitsLongerAfterSlowLooks: a look that took long is followed by
// a wait twenty times as long, so that watching a large backlog does not
// take the CPU the chain needs to drain it.
func TestDrainWaitsLongerAfterSlowLooks(t *testing.T) {
	t.Parallel()
	b := setupDB(t)
	b.message(1, 1, 1, start) // never decided
	clock := &slowClock{now: start}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	_, err := load.Drain(ctx, b.pool, start, clock, 0, func(int, int) {
		clock.mu.Lock()
		defer clock.mu.Unlock()
		if len(clock.waits) >= 3 {
			cancel()
		}
	})
	require.ErrorIs(t, err, context.Canceled)
	clock.mu.Lock()
	defer clock.mu.Unlock()
	require.GreaterOrEqual(t, len(clock.waits), 3)
	for _, w := range clock.waits {
		// Each look spans two readings (60 ms): the wait is 20 × 60 ms.
		require.Equal(t, 1200*time.Millisecond, w)
	}
}
