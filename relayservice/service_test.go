package relayservice_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/testlog"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaylock"
	"github.com/relayhq/relay/relayservice"
	"github.com/relayhq/relay/relaysource"
	"github.com/relayhq/relay/relaytype"
)

const pipeline = "svc"

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// syncBuffer collects logs written from several goroutines.
type syncBuffer = testlog.Buffer

// world is a PostgreSQL schema shared by several instances and a foreign
// SQLite table they read.
type world struct {
	t       *testing.T
	dsn     string
	foreign *sql.DB
	src     *relaysource.SQLTable

	mu        sync.Mutex
	processed []string // "<instance>:<id>" in processing order
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, dsn: testdb.PGSchema(t)}
	var err error
	w.foreign, err = sql.Open("sqlite", filepath.Join(t.TempDir(), "foreign.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = w.foreign.Close() })
	_, err = w.foreign.Exec(`CREATE TABLE source_messages (id INTEGER PRIMARY KEY, payload BLOB)`)
	require.NoError(t, err)
	w.src, err = relaysource.NewSQLTable(w.foreign, relaysource.SQLTableConfig{Dialect: relaysource.DialectSQLite,
		Table: "source_messages", IDColumn: "id", PayloadColumn: "payload"})
	require.NoError(t, err)
	return w
}

func (w *world) insert(ids ...int64) {
	w.t.Helper()
	for _, id := range ids {
		_, err := w.foreign.Exec(`INSERT INTO source_messages (id, payload) VALUES (?, ?)`, id, fmt.Appendf(nil, "p%d", id))
		require.NoError(w.t, err)
	}
}

func (w *world) done() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.processed)
}

// instance is one relay process's pipeline: its own store connection, a FIFO
// engine and an intake whose fake clock never moves (so neither polls: the
// engine runs only when woken, the intake one round per Run), assembled by a
// Service whose lock waits on the real clock.
type instance struct {
	name   string
	store  *relaypgx.Driver
	intake *relayintake.Intake
	engine *relay.Engine
	svc    *relayservice.Service
	logs   *syncBuffer
	// onHandle, when set, runs in the handler before it records the message.
	onHandle func()
}

func (w *world) instance(name string, mutate ...func(*relayservice.Config)) *instance {
	w.t.Helper()
	in := &instance{name: name, store: testdb.PGDriverAt(w.t, w.dsn), logs: &syncBuffer{}}
	log := slog.New(slog.NewTextHandler(in.logs, nil))
	clock := relayclock.NewFake(t0)
	var err error
	in.intake, err = relayintake.New(in.store, w.src, relayintake.Config{Queue: pipeline, PollInterval: time.Hour,
		Clock: clock, Logger: log})
	require.NoError(w.t, err)
	in.engine, err = relay.NewEngine(in.store, relay.Config{Queue: pipeline, Mode: relay.ModeFIFO, Watermarked: true,
		PollInterval: time.Hour, Clock: clock, Logger: log, InstanceID: name,
		Handler: relay.HandlerFunc(func(_ context.Context, _ relay.Tx, d *relay.Delivery) relay.Result {
			if in.onHandle != nil {
				in.onHandle()
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			w.processed = append(w.processed, fmt.Sprintf("%s:%d", name, d.Message.ID))
			return relay.Succeeded()
		})})
	require.NoError(w.t, err)
	cfg := relayservice.Config{Driver: in.store, Intake: in.intake, Engine: in.engine,
		LockRetryEvery: 20 * time.Millisecond, Logger: log}
	for _, m := range mutate {
		m(&cfg)
	}
	in.svc, err = relayservice.New(cfg)
	require.NoError(w.t, err)
	return in
}

// run starts the instance's Service; the returned stop cancels it and returns
// Run's error.
func (in *instance) run(t *testing.T) (stop func() error, done <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { ch <- in.svc.Run(ctx) }()
	t.Cleanup(cancel)
	return func() error { cancel(); return <-ch }, ch
}

// Two instances on one PostgreSQL store: the second waits for the pipeline
// lock while the first runs, and takes over when the first stops — never
// while it is still active. Each instance's engine polls only every hour on a
// clock that never moves, so every row it processes was handed over by its
// intake's wake-up, which the Service wired.
func TestTakeoverAfterStop(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a, b := w.instance("a"), w.instance("b")
	_, err := a.intake.Seed(context.Background(), relayintake.SeedZero)
	require.NoError(t, err)
	w.insert(1, 2, 3)

	stopA, _ := a.run(t)
	require.Eventually(t, func() bool { return len(w.done()) == 3 }, 20*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"a:1", "a:2", "a:3"}, w.done())
	require.True(t, a.svc.Active())

	var aActiveInB []bool
	b.onHandle = func() { aActiveInB = append(aActiveInB, a.svc.Active()) }
	stopB, _ := b.run(t)
	require.Eventually(t, func() bool { return bytesContain(b.logs, "waiting for exclusive lock") }, 20*time.Second, 5*time.Millisecond)
	require.False(t, b.svc.Active())
	w.insert(4, 5, 6)

	require.NoError(t, stopA(), "a stop by ctx is not an error")
	require.False(t, a.svc.Active())
	require.Eventually(t, func() bool { return len(w.done()) == 6 }, 20*time.Second, 5*time.Millisecond)
	require.Equal(t, []string{"a:1", "a:2", "a:3", "b:4", "b:5", "b:6"}, w.done())
	require.Equal(t, []bool{false, false, false}, aActiveInB, "b processed only after a had stopped")
	require.True(t, b.svc.Active())

	// The handler records inside the transaction: wait for the last commit.
	var st *relayservice.Stats
	require.Eventually(t, func() bool {
		st, err = b.svc.Stats(context.Background())
		require.NoError(t, err)
		return st.Messages.Counts[relaytype.StateSucceeded] == 6
	}, 20*time.Second, 5*time.Millisecond)
	require.True(t, st.Active)
	require.Equal(t, int64(0), st.Messages.Backlog())
	require.NotNil(t, st.Cursor)
	require.Equal(t, int64(6), st.Cursor.Watermark)
	require.Empty(t, st.Outbox)
	require.NoError(t, stopB())
}

// When the lock's session dies under a running instance, its renewal fails:
// the Service stops every part and Run returns an error wrapping
// relaylock.ErrLost.
func TestLockLost(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := w.instance("a", func(c *relayservice.Config) { c.LockTTL = 300 * time.Millisecond })
	_, err := a.intake.Seed(context.Background(), relayintake.SeedZero)
	require.NoError(t, err)
	w.insert(1)
	_, done := a.run(t)
	require.Eventually(t, func() bool { return len(w.done()) == 1 }, 20*time.Second, 5*time.Millisecond)

	// Kill the session that holds the pipeline's advisory lock (its key is
	// scoped to the schema, see relaypgx's LockTry).
	var n int
	err = a.store.Pool().QueryRow(context.Background(), `
		SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l,
		     (SELECT hashtextextended(current_schema() || '/' || $1::text, 0) AS k) s
		WHERE l.locktype = 'advisory' AND l.granted
		  AND l.classid::bigint = ((s.k >> 32) & 4294967295) AND l.objid::bigint = (s.k & 4294967295)`,
		"pipeline:"+pipeline).Scan(&n)
	require.NoError(t, err)
	require.Equal(t, 1, n, "one session held the lock")

	select {
	case err := <-done:
		require.ErrorIs(t, err, relaylock.ErrLost)
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after the lock was lost")
	}
	require.False(t, a.svc.Active())
}

func bytesContain(b *syncBuffer, s string) bool { return bytes.Contains([]byte(b.String()), []byte(s)) }

// Shared Services run at once on one store: both are active and both
// process messages of a per-key pipeline; New refuses Shared where one active
// instance is needed (an intake, a FIFO engine).
func TestSharedRunsSeveralInstances(t *testing.T) {
	t.Parallel()
	dsn := testdb.PGSchema(t)
	var mu sync.Mutex
	by := map[string]int{}
	newSvc := func(name string) (*relayservice.Service, *relay.Engine) {
		store := testdb.PGDriverAt(t, dsn)
		e, err := relay.NewEngine(store, relay.Config{Queue: pipeline, Mode: relay.ModePerKey, InstanceID: name,
			PollInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
			Handler: relay.HandlerFunc(func(context.Context, relay.Tx, *relay.Delivery) relay.Result {
				mu.Lock()
				defer mu.Unlock()
				by[name]++
				return relay.Succeeded()
			})})
		require.NoError(t, err)
		svc, err := relayservice.New(relayservice.Config{Driver: store, Engine: e, Shared: true,
			Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		return svc, e
	}
	a, ea := newSvc("a")
	b, _ := newSvc("b")
	ctx, cancel := context.WithCancel(context.Background())
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() { doneA <- a.Run(ctx) }()
	go func() { doneB <- b.Run(ctx) }()
	require.Eventually(t, func() bool { return a.Active() && b.Active() }, 20*time.Second, 5*time.Millisecond)
	params := make([]*relay.EnqueueParams, 400)
	for i := range params {
		params[i] = &relay.EnqueueParams{Key: fmt.Sprintf("k%d", i%40)}
	}
	_, err := ea.Enqueue(ctx, params...)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := a.Stats(ctx)
		require.NoError(t, err)
		return st.Messages.Counts[relaytype.StateSucceeded] == 400
	}, 30*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-doneA)
	require.NoError(t, <-doneB)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 400, by["a"]+by["b"])

	w := newWorld(t)
	fifo := w.instance("fifo")
	_, err = relayservice.New(relayservice.Config{Driver: fifo.store, Engine: fifo.engine, Shared: true})
	require.ErrorContains(t, err, "ModeFIFO")
	_, err = relayservice.New(relayservice.Config{Driver: fifo.store, Engine: ea, Intake: fifo.intake, Shared: true})
	require.ErrorContains(t, err, "Intake")
}
