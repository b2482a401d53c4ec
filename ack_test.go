package relay_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaysource"
	"github.com/relayhq/relay/relaytype"
)

// Acknowledgement write-back (seed 000 §6; docs/ack.md). Every test drives a
// fake clock and calls AckWriter.Work; none sleeps.

// ackR is the forced-write window of the tests.
const ackR = time.Hour

// ackSource wraps the real source: it fails on demand, blocks on demand, and
// records the ids it was called with, in order.
type ackSource struct {
	inner relaysource.Acknowledger

	mu      sync.Mutex
	calls   []int64
	failing map[int64]bool
	block   map[int64]chan struct{} // closed by the test to release the call
	entered chan int64              // receives an id whose call is blocked
}

func newAckSource(inner relaysource.Acknowledger) *ackSource {
	return &ackSource{inner: inner, failing: map[int64]bool{}, block: map[int64]chan struct{}{}, entered: make(chan int64, 10)}
}

// errSourceDown is the injected transient failure.
var errSourceDown = errors.New("mailbox unreachable (injected)")

// Acknowledge records the call, blocks or fails when told to, and otherwise
// calls the real source.
func (s *ackSource) Acknowledge(ctx context.Context, id int64, mark string, at time.Time) (relaysource.AckOutcome, error) {
	s.mu.Lock()
	s.calls = append(s.calls, id)
	fail, release := s.failing[id], s.block[id]
	s.mu.Unlock()
	if release != nil {
		s.entered <- id
		select {
		case <-release:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if fail {
		return 0, errSourceDown
	}
	return s.inner.Acknowledge(ctx, id, mark, at)
}

func (s *ackSource) setFailing(id int64, fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing[id] = fail
}

// takeCalls returns the calls so far and forgets them.
func (s *ackSource) takeCalls() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.calls
	s.calls = nil
	return out
}

// ackEnv is an engine with acknowledgement intent, its mailbox table and an
// AckWriter over it.
type ackEnv struct {
	*bundle
	mailbox *sql.DB
	src     *ackSource
	writer  *relay.AckWriter
	reg     *prometheus.Registry
}

// results maps a message id to its handler result (default Succeeded).
type results map[int64]relay.Result

// newAckEnv builds the environment on store s with the mailbox in db (SQLite
// when nil). mutate adjusts the writer's config.
func newAckEnv(t *testing.T, s store, db *sql.DB, dialect relaysource.Dialect, res results, mutate func(*relay.AckConfig)) *ackEnv {
	t.Helper()
	if db == nil {
		var err error
		// The busy timeout lets the test read the mailbox while a started writer
		// writes it.
		db, err = sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "mailbox.db")+"?_pragma=busy_timeout(5000)")
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		_, err = db.Exec("CREATE TABLE CMINMSGS (ID INTEGER PRIMARY KEY, MSGCONTENT TEXT NULL, " +
			"RECEIVETIME DATETIME NULL, PROCFLAG VARCHAR(16) NULL, PROCTIME DATETIME NULL)")
		require.NoError(t, err)
		dialect = relaysource.DialectSQLite
	}
	handler := relay.HandlerFunc(func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
		if r, ok := res[d.Message.ID]; ok {
			return r
		}
		return relay.Succeeded()
	})
	b := setup(t, s, relay.Config{Handler: handler, AckIntent: true})
	table, err := relaysource.NewSQLTable(db, relaysource.SQLTableConfig{
		Dialect: dialect, Table: "CMINMSGS", IDColumn: "ID", ReceivedAtColumn: "RECEIVETIME",
		MarkColumn: "PROCFLAG", MarkTimeColumn: "PROCTIME",
	})
	require.NoError(t, err)
	env := &ackEnv{bundle: b, mailbox: db, src: newAckSource(table), reg: prometheus.NewRegistry()}
	cfg := relay.AckConfig{
		Queue: b.engine.Queue(), Gate: b.engine.Gate(), R: ackR,
		Clock: b.clock, Logger: slog.New(b.logs), Registerer: env.reg,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	env.writer, err = relay.NewAckWriter(b.d, env.src, cfg)
	require.NoError(t, err)
	return env
}

// mail inserts mailbox rows with the given ids (no mark) and enqueues them
// with receivedAt, then processes them to their terminal states.
func (e *ackEnv) mail(receivedAt time.Time, ids ...int64) {
	e.t.Helper()
	ps := make([]*relay.EnqueueParams, len(ids))
	for i, id := range ids {
		_, err := e.mailbox.Exec("INSERT INTO CMINMSGS (ID, MSGCONTENT) VALUES (?, ?)", id, "m"+itoa(id))
		require.NoError(e.t, err)
		ps[i] = &relay.EnqueueParams{ID: id, Payload: []byte("m" + itoa(id)), ReceivedAt: receivedAt}
	}
	_, err := e.engine.Enqueue(e.ctx, ps...)
	require.NoError(e.t, err)
	e.work()
}

// ack runs the writer's Work.
func (e *ackEnv) ack() int {
	e.t.Helper()
	n, err := e.writer.Work(e.ctx)
	require.NoError(e.t, err)
	return n
}

// flag reads a mailbox row's PROCFLAG ("<NULL>" when NULL).
func (e *ackEnv) flag(id int64) string {
	e.t.Helper()
	var f sql.NullString
	require.NoError(e.t, e.mailbox.QueryRow("SELECT PROCFLAG FROM CMINMSGS WHERE ID = ?", id).Scan(&f))
	if !f.Valid {
		return "<NULL>"
	}
	return f.String
}

func (e *ackEnv) metric(name string, labels map[string]string) float64 {
	e.t.Helper()
	labels["queue"] = e.engine.Queue()
	return metricValue(e.t.(*testing.T), e.reg, name, labels)
}

func (e *ackEnv) outcomes(o string) float64 {
	return e.metric("relay_ack_total", map[string]string{"outcome": o})
}

func (e *ackEnv) abandoned(reason string) float64 {
	return e.metric("relay_ack_abandoned_total", map[string]string{"reason": reason})
}

// checkThreeOutcomes runs the deterministic outcomes (seed 000 §6.2): 1 is
// written, 2 (already marked by hand) keeps its mark, 3 (deleted after
// enqueue) is abandoned at once with MISSING_ROW.
func checkThreeOutcomes(t *testing.T, e *ackEnv) {
	e.mail(time.Time{}, 1, 2, 3)
	require.Equal(t, relaytype.StateSkipped, e.state(2))
	_, err := e.mailbox.Exec("UPDATE CMINMSGS SET PROCFLAG = 'MANUAL' WHERE ID = 2")
	require.NoError(t, err)
	_, err = e.mailbox.Exec("DELETE FROM CMINMSGS WHERE ID = 3")
	require.NoError(t, err)

	st, err := e.writer.Stats(e.ctx)
	require.NoError(t, err)
	require.Equal(t, relaydriver.AckStats{Owing: 3}, *st)
	e.clock.Advance(time.Second)
	require.Equal(t, 3, e.ack())
	st, err = e.writer.Stats(e.ctx)
	require.NoError(t, err)
	require.Equal(t, relaydriver.AckStats{Abandoned: 1, Acknowledged: 2}, *st)
	require.Equal(t, "SUCCEEDED", e.flag(1))
	requireAckAt(t, e.clock.Now(), e.get(1))
	require.Equal(t, "MANUAL", e.flag(2), "an existing mark is never overwritten")
	requireAckAt(t, e.clock.Now(), e.get(2))
	m := e.get(3)
	require.True(t, m.AckAt.IsZero(), "abandoned is not acknowledged")
	require.Equal(t, e.clock.Now(), m.AckAbandonedAt)
	require.Equal(t, relaydriver.AckReasonMissingRow, m.AckAbandonReason)
	require.Zero(t, m.AckAttempts, "abandoned at once, no retry")

	require.Equal(t, 1.0, e.outcomes("written"))
	require.Equal(t, 1.0, e.outcomes("already_marked"))
	require.Equal(t, 1.0, e.outcomes("missing_row"))
	require.Equal(t, 1.0, e.abandoned(relaydriver.AckReasonMissingRow))
	require.Equal(t, 1, e.logs.count("acknowledgement abandoned"))

	e.clock.Advance(10 * ackR)
	require.Zero(t, e.ack(), "nothing is owed any more, however old")
}

// requireAckAt checks that m was acknowledged at want.
func requireAckAt(t *testing.T, want time.Time, m *relaytype.Message) {
	t.Helper()
	require.True(t, want.Equal(m.AckAt), "AckAt of %d: want %v, got %v", m.ID, want, m.AckAt)
	require.True(t, m.AckAbandonedAt.IsZero())
}

func TestAckOutcomes(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		e := newAckEnv(t, s, nil, "", results{2: relay.Skip("ignored:X")}, nil)
		checkThreeOutcomes(t, e)
	})
}

// batchAckSource is an ackSource that is also a relaysource.BatchAcknowledger:
// a batch fails whole when one of its ids is failing, and is otherwise written
// by the real source in one transaction.
type batchAckSource struct {
	*ackSource
	batches int
}

func (s *batchAckSource) AcknowledgeBatch(ctx context.Context, items []relaysource.AckItem) ([]relaysource.AckOutcome, error) {
	s.mu.Lock()
	s.batches++
	fail := false
	for _, it := range items {
		fail = fail || s.failing[it.ID]
	}
	s.mu.Unlock()
	if fail {
		return nil, errSourceDown
	}
	return s.inner.(relaysource.BatchAcknowledger).AcknowledgeBatch(ctx, items)
}

// With a BatchAcknowledger the writer acknowledges a scanned batch in one
// source call and records each row's outcome exactly as row by row; a failed
// batch is a transient failure of each of its rows, retried after backoff.
func TestAckBatchSource(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		var cfg relay.AckConfig
		e := newAckEnv(t, s, nil, "", results{2: relay.Skip("ignored:X")}, func(c *relay.AckConfig) { cfg = *c })
		src := &batchAckSource{ackSource: e.src}
		e.reg = prometheus.NewRegistry()
		cfg.Registerer = e.reg
		var err error
		e.writer, err = relay.NewAckWriter(e.d, src, cfg)
		require.NoError(t, err)

		checkThreeOutcomes(t, e)
		require.Equal(t, 1, src.batches, "one source call for the scanned batch")
		require.Empty(t, e.src.takeCalls(), "no row-by-row call")

		e.mail(time.Time{}, 4, 5)
		e.src.setFailing(5, true)
		require.Equal(t, 2, e.ack())
		for _, id := range []int64{4, 5} {
			require.Equal(t, "<NULL>", e.flag(id), "a failed batch writes nothing")
			require.Equal(t, 1, e.get(id).AckAttempts, "row %d", id)
		}
		require.Equal(t, 2.0, e.outcomes("transient"))
		e.src.setFailing(5, false)
		e.clock.Advance(time.Hour / 2)
		require.Equal(t, 2, e.ack())
		require.Equal(t, "SUCCEEDED", e.flag(4))
		require.Equal(t, "SUCCEEDED", e.flag(5))
		require.Equal(t, 3, src.batches)
	})
}

// A transient failure only backs off before R, however many attempts
// (MaxAttemptsAlert only alerts); from EnqueuedAt+R it is abandoned with
// TRANSIENT_DEADLINE. RECEIVED_AT, years in the past, does not matter.
func TestAckTransientUntilR(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		e := newAckEnv(t, s, nil, "", nil, func(c *relay.AckConfig) { c.MaxAttemptsAlert = 3 })
		e.mail(t0.AddDate(-10, 0, 0), 1)
		enqueued := e.get(1).EnqueuedAt
		require.True(t, enqueued.Equal(t0))
		e.src.setFailing(1, true)

		backoff := relay.AckBackoffDefault
		for attempt := 1; ; attempt++ {
			require.Equal(t, 1, e.ack())
			m := e.get(1)
			if e.clock.Now().Sub(enqueued) >= ackR {
				require.Equal(t, relaydriver.AckReasonTransientDeadline, m.AckAbandonReason)
				require.Equal(t, e.clock.Now(), m.AckAbandonedAt)
				require.True(t, m.AckAt.IsZero(), "abandoned is not acknowledged")
				require.Greater(t, attempt, 3+5, "many more attempts than MaxAttemptsAlert")
				break
			}
			require.True(t, m.AckAbandonedAt.IsZero(), "attempt %d at age %s: never abandoned before R", attempt, e.clock.Now().Sub(enqueued))
			require.Equal(t, attempt, m.AckAttempts)
			wait := backoff[min(attempt-1, len(backoff)-1)]
			require.Equal(t, e.clock.Now().Add(wait), m.AckNextAt, "attempt %d", attempt)
			require.Zero(t, e.ack(), "waits for its backoff")
			e.clock.Set(m.AckNextAt)
		}
		require.Equal(t, 1.0, e.abandoned(relaydriver.AckReasonTransientDeadline))
		require.Equal(t, 1.0, e.metric("relay_ack_attempts_alerts_total", map[string]string{}), "one alert when attempts reached MaxAttemptsAlert")
		require.Equal(t, 1, e.logs.count("reached max attempts"))
		require.Equal(t, 1, e.logs.count("acknowledgement abandoned"))
		require.Zero(t, e.outcomes("written"))

		// Reopen puts it back; once the mailbox answers it is written.
		e.src.setFailing(1, false)
		n, err := e.writer.Reopen(e.ctx, &relay.AckReopenParams{Reason: relaydriver.AckReasonTransientDeadline})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, 1, e.ack())
		require.Equal(t, "SUCCEEDED", e.flag(1))
		requireAckAt(t, e.clock.Now(), e.get(1))
	})
}

// A closed mailbox pool is a transient failure: backoff, not abandonment.
func TestAckClosedSourceIsTransient(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		e := newAckEnv(t, s, nil, "", nil, nil)
		e.mail(time.Time{}, 1)
		require.NoError(t, e.mailbox.Close())
		require.Equal(t, 1, e.ack())
		m := e.get(1)
		require.Equal(t, 1, m.AckAttempts)
		require.True(t, m.AckAbandonedAt.IsZero())
		require.Equal(t, e.clock.Now().Add(time.Second), m.AckNextAt)
		require.Equal(t, 1.0, e.outcomes("transient"))
	})
}

// Rows enqueued more than R ago are tried every round whatever their backoff
// (seed 000 §6.3): success writes, failure abandons.
func TestAckPastRIgnoresBackoff(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		e := newAckEnv(t, s, nil, "", nil, func(c *relay.AckConfig) { c.Backoff = []time.Duration{10 * ackR} })
		e.mail(time.Time{}, 1, 2)
		e.src.setFailing(1, true)
		e.src.setFailing(2, true)
		require.Equal(t, 2, e.ack())
		e.src.takeCalls()
		e.clock.Advance(ackR / 2)
		require.Zero(t, e.ack(), "backing off for 10R")
		require.Empty(t, e.src.takeCalls())

		e.clock.Set(t0.Add(ackR + time.Millisecond))
		e.src.setFailing(1, false)
		require.Equal(t, 2, e.ack())
		require.Equal(t, []int64{1, 2}, e.src.takeCalls())
		requireAckAt(t, e.clock.Now(), e.get(1))
		require.Equal(t, relaydriver.AckReasonTransientDeadline, e.get(2).AckAbandonReason)
	})
}

// A permanently failing row does not starve the others: the scan orders by
// attempts, then id (seed 000 §6.1).
func TestAckFairOrder(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		e := newAckEnv(t, s, nil, "", nil, func(c *relay.AckConfig) {
			c.BatchSize = 2
			c.Backoff = []time.Duration{time.Second}
		})
		e.mail(time.Time{}, 1)
		e.src.setFailing(1, true)
		for range 3 {
			require.Equal(t, 1, e.ack())
			e.clock.Advance(time.Second)
		}
		e.mail(time.Time{}, 4, 5, 6)
		e.src.takeCalls()
		require.Equal(t, 4, e.ack())
		require.Equal(t, []int64{4, 5, 6, 1}, e.src.takeCalls(), "fresh rows first, the failing row last")
		for _, id := range []int64{4, 5, 6} {
			require.Equal(t, "SUCCEEDED", e.flag(id))
		}
		require.Equal(t, 4, e.get(1).AckAttempts)
	})
}

// Reopen by id: a missing row restored by a human is written afterwards.
func TestAckReopenMissingRow(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		e := newAckEnv(t, s, nil, "", results{1: relay.Dead(relaytype.ClassProtocol, errors.New("bad"))}, nil)
		e.mail(time.Time{}, 1)
		_, err := e.mailbox.Exec("DELETE FROM CMINMSGS WHERE ID = 1")
		require.NoError(t, err)
		require.Equal(t, 1, e.ack())
		require.Equal(t, relaydriver.AckReasonMissingRow, e.get(1).AckAbandonReason)
		st, err := e.writer.Stats(e.ctx)
		require.NoError(t, err)
		require.Equal(t, relaydriver.AckStats{Abandoned: 1}, *st, "abandoned is not acknowledged")

		_, err = e.mailbox.Exec("INSERT INTO CMINMSGS (ID, MSGCONTENT) VALUES (1, 'restored')")
		require.NoError(t, err)
		e.clock.Advance(time.Minute)
		n, err := e.writer.Reopen(e.ctx, &relay.AckReopenParams{IDs: []int64{1}})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, 1, e.ack())
		require.Equal(t, "DEAD", e.flag(1), "MarkFor defaults to the state name")
		requireAckAt(t, e.clock.Now(), e.get(1))
		st, err = e.writer.Stats(e.ctx)
		require.NoError(t, err)
		require.Equal(t, relaydriver.AckStats{Acknowledged: 1}, *st)

		_, err = e.writer.Reopen(e.ctx, &relay.AckReopenParams{})
		require.Error(t, err)
	})
}

// Replay and acknowledgement never interleave (seed 000 §5.3, §9.1): a replay
// waits while an acknowledgement batch is inside the gate, and an
// acknowledgement waits while the gate is held (as by a replay).
func TestAckGate(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		e := newAckEnv(t, s, nil, "", results{1: relay.Dead(relaytype.ClassInfra, errors.New("down"))}, nil)
		e.mail(time.Time{}, 1)
		require.Equal(t, relaytype.StateDead, e.state(1))
		release := make(chan struct{})
		e.src.mu.Lock()
		e.src.block[1] = release
		e.src.mu.Unlock()

		acked := make(chan error, 1)
		go func() {
			_, err := e.writer.Work(e.ctx)
			acked <- err
		}()
		require.Equal(t, int64(1), <-e.src.entered, "the batch is inside the gate")

		// A replay cannot enter while the batch holds the gate.
		short, cancel := context.WithTimeout(e.ctx, 100*time.Millisecond)
		_, err := e.engine.Replay(short, &relay.ReplayParams{Classes: []relaytype.ErrorClass{relaytype.ClassInfra}})
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, relaytype.StateDead, e.state(1), "the replay did not run")

		replayed := make(chan int, 1)
		go func() {
			n, err := e.engine.Replay(e.ctx, &relay.ReplayParams{Classes: []relaytype.ErrorClass{relaytype.ClassInfra}})
			require.NoError(t, err)
			replayed <- n
		}()
		close(release)
		require.NoError(t, <-acked)
		require.Equal(t, 1, <-replayed, "the replay ran after the batch")
		m := e.get(1)
		require.Equal(t, relaytype.StatePending, m.State)
		require.True(t, m.AckAt.IsZero(), "the replay reset the acknowledgement facts after the batch recorded them")
		require.Equal(t, "DEAD", e.flag(1))

		// Vice versa: while the gate is held, acknowledgement and reopen wait.
		e.mail(time.Time{}, 2)
		require.NoError(t, e.engine.Gate().Do(e.ctx, func(context.Context) error {
			short, cancel := context.WithTimeout(e.ctx, 100*time.Millisecond)
			defer cancel()
			_, err := e.writer.Work(short)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			_, err = e.writer.Reopen(short, &relay.AckReopenParams{IDs: []int64{2}})
			require.ErrorIs(t, err, context.DeadlineExceeded)
			return nil
		}))
		require.Equal(t, "<NULL>", e.flag(2), "no acknowledgement ran inside the held gate")
		require.Equal(t, 2, e.ack(), "2, and 1 again: replayed, it ran to DEAD again and owes an acknowledgement")
		require.Equal(t, "SUCCEEDED", e.flag(2))
		require.Equal(t, "DEAD", e.flag(1))
		require.Equal(t, 1.0, e.outcomes("already_marked"), "1's mark was already there")
	})
}

// The four outcomes end to end against the real MariaDB mailbox table
// (seed 000 CMINMSGS shape).
func TestAckMariaDBMailbox(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, s store) {
		db := testdb.MariaDB(t)
		_, err := db.Exec("CREATE TABLE CMINMSGS (ID BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, " +
			"MSGCONTENT MEDIUMTEXT NULL, RECEIVETIME DATETIME(3) NULL, PROCFLAG VARCHAR(16) NULL, " +
			"PROCTIME DATETIME(3) NULL) ENGINE=InnoDB")
		require.NoError(t, err)
		e := newAckEnv(t, s, db, relaysource.DialectMySQL, results{2: relay.Skip("ignored:X")}, nil)
		checkThreeOutcomes(t, e)

		var procTime time.Time
		require.NoError(t, db.QueryRow("SELECT PROCTIME FROM CMINMSGS WHERE ID = 1").Scan(&procTime))
		require.True(t, procTime.Equal(t0.Add(time.Second)), "PROCTIME is the writer's clock: %v", procTime)

		// Transient: retried before R, then written once the mailbox answers;
		// and abandoned with TRANSIENT_DEADLINE when it never does.
		e.clock.Set(t0.Add(20 * ackR))
		e.mail(time.Time{}, 4, 5)
		e.src.setFailing(4, true)
		e.src.setFailing(5, true)
		require.Equal(t, 2, e.ack())
		require.Equal(t, 2.0, e.outcomes("transient"))
		e.src.setFailing(4, false)
		e.clock.Advance(time.Second)
		require.Equal(t, 2, e.ack(), "both due after the first backoff level")
		require.Equal(t, "SUCCEEDED", e.flag(4))
		requireAckAt(t, e.clock.Now(), e.get(4))
		require.Equal(t, 2, e.get(5).AckAttempts)
		e.clock.Advance(ackR)
		require.Equal(t, 1, e.ack())
		require.Equal(t, relaydriver.AckReasonTransientDeadline, e.get(5).AckAbandonReason)
		require.Equal(t, "<NULL>", e.flag(5), "abandoned: the mailbox row stays unmarked")
		require.Equal(t, 1.0, e.abandoned(relaydriver.AckReasonTransientDeadline))
	})
}

// Configuration is validated with the field named; R has no default.
func TestAckConfigValidation(t *testing.T) {
	t.Parallel()
	good := func() relay.AckConfig {
		return relay.AckConfig{Queue: "p", Gate: new(relay.LifecycleGate), R: time.Hour}
	}
	src := newAckSource(nil)
	for name, tc := range map[string]struct {
		mutate func(*relay.AckConfig)
		want   string
	}{
		"no queue":       {func(c *relay.AckConfig) { c.Queue = "" }, "Queue"},
		"no gate":        {func(c *relay.AckConfig) { c.Gate = nil }, "Gate"},
		"no R":           {func(c *relay.AckConfig) { c.R = 0 }, "R"},
		"negative R":     {func(c *relay.AckConfig) { c.R = -time.Second }, "R"},
		"zero backoff":   {func(c *relay.AckConfig) { c.Backoff = []time.Duration{time.Second, 0} }, "Backoff"},
		"empty backoff":  {func(c *relay.AckConfig) { c.Backoff = []time.Duration{} }, "Backoff"},
		"negative alert": {func(c *relay.AckConfig) { c.MaxAttemptsAlert = -1 }, "MaxAttemptsAlert"},
		"negative batch": {func(c *relay.AckConfig) { c.BatchSize = -1 }, "BatchSize"},
		"negative poll":  {func(c *relay.AckConfig) { c.PollInterval = -time.Second }, "PollInterval"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := good()
			tc.mutate(&cfg)
			_, err := relay.NewAckWriter(nopDriver{}, src, cfg)
			require.ErrorContains(t, err, "AckConfig."+tc.want)
		})
	}
	_, err := relay.NewAckWriter(nopDriver{}, src, good())
	require.NoError(t, err)
	_, err = relay.NewAckWriter(nil, src, good())
	require.Error(t, err)
	_, err = relay.NewAckWriter(nopDriver{}, nil, good())
	require.Error(t, err)
}

// A started writer acknowledges on Notify and on its poll interval (on the
// fake clock), in its own goroutine: processing goes on while an
// acknowledgement is blocked in the source. It refuses an unmigrated store
// and stops cleanly.
func TestAckWriterStartNotifyStop(t *testing.T) {
	t.Parallel()
	s := stores()[1] // sqlite
	bare, err := relay.NewAckWriter(openSQLite(t, false), newAckSource(nil), relay.AckConfig{
		Queue: "p", Gate: new(relay.LifecycleGate), R: ackR,
	})
	require.NoError(t, err)
	require.ErrorIs(t, bare.Start(t.Context()), relaytype.ErrSchemaOutdated)

	e := newAckEnv(t, s, nil, "", nil, func(c *relay.AckConfig) { c.PollInterval = time.Minute })
	release := make(chan struct{})
	e.src.mu.Lock()
	e.src.block[1] = release
	e.src.mu.Unlock()
	require.NoError(t, e.writer.Start(e.ctx))
	require.Error(t, e.writer.Start(e.ctx), "starts once")

	e.mail(time.Time{}, 1)
	e.writer.Notify()
	require.Equal(t, int64(1), <-e.src.entered)
	e.mail(time.Time{}, 2) // processing is not held up by the blocked acknowledgement
	require.Equal(t, relaytype.StateSucceeded, e.state(2))
	close(release)

	marked := func(id int64) func() bool { return func() bool { return e.flag(id) == "SUCCEEDED" } }
	require.Eventually(t, marked(1), 10*time.Second, time.Millisecond)
	// 2 is found by the same Work call or, later, by the poll interval on the
	// clock (moved a poll interval per check, so whenever the loop parks it is
	// woken).
	require.Eventually(t, func() bool {
		e.clock.Advance(time.Minute)
		return marked(2)()
	}, 10*time.Second, time.Millisecond)
	require.NoError(t, e.writer.Stop(e.ctx))
	require.NoError(t, e.writer.Stop(e.ctx), "twice is harmless")
}
