package relay_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// t0 is where every test's fake clock starts.
var t0 = time.Date(2025, 3, 1, 8, 0, 0, 0, time.UTC)

// store is one driver the engine tests run on. Each open gives a fresh store.
type store struct {
	name string
	// open returns a migrated store (migrate=true) or a bare one.
	open func(t testing.TB, migrate bool) relaydriver.Driver
	// concurrentTx: transactions of different goroutines can be open at once
	// (PostgreSQL). SQLite has one writer, so handlers never overlap there.
	concurrentTx bool
}

func stores() []store {
	return []store{
		{name: "postgres", open: openPG, concurrentTx: true},
		{name: "sqlite", open: openSQLite},
	}
}

func openPG(t testing.TB, migrate bool) relaydriver.Driver {
	t.Helper()
	if migrate {
		return testdb.PGDriver(t)
	}
	return openBarePG(t)
}

func openBarePG(t testing.TB) relaydriver.Driver {
	t.Helper()
	d, err := relaypgx.Open(context.Background(), testdb.PGSchema(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func openSQLite(t testing.TB, migrate bool) relaydriver.Driver {
	t.Helper()
	ctx := context.Background()
	d, err := relaysqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	if migrate {
		_, err = relaymigrate.Up(ctx, d, relayclock.System{}, relaymigrate.EngineLineOf(d))
		require.NoError(t, err)
	}
	return d
}

// eachStore runs fn as a parallel subtest per store.
func eachStore(t *testing.T, fn func(t *testing.T, s store)) {
	t.Helper()
	eachStoreWhere(t, func(store) bool { return true }, fn)
}

// eachStoreWhere runs fn as a parallel subtest per store that has the
// capability keep asks for; the others do not have the behaviour under test.
func eachStoreWhere(t *testing.T, keep func(store) bool, fn func(t *testing.T, s store)) {
	t.Helper()
	for _, s := range stores() {
		if !keep(s) {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			fn(t, s)
		})
	}
}

// bundle is one test's engine and its surroundings.
type bundle struct {
	t      testing.TB
	ctx    context.Context
	d      relaydriver.Driver
	clock  *relayclock.Fake
	engine *relay.Engine
	logs   *logCapture
}

// setup opens a fresh store and builds an engine on it. cfg.Queue defaults to
// "p", cfg.Clock to a fake clock at t0, cfg.Logger to a capture.
func setup(t testing.TB, s store, cfg relay.Config) *bundle {
	t.Helper()
	return setupOn(t, s.open(t, true), cfg)
}

func setupOn(t testing.TB, d relaydriver.Driver, cfg relay.Config) *bundle {
	t.Helper()
	b := &bundle{t: t, ctx: context.Background(), d: d, logs: &logCapture{}}
	if cfg.Queue == "" {
		cfg.Queue = "p"
	}
	if cfg.Clock == nil {
		b.clock = relayclock.NewFake(t0)
		cfg.Clock = b.clock
	} else {
		b.clock, _ = cfg.Clock.(*relayclock.Fake)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(b.logs)
	}
	e, err := relay.NewEngine(d, cfg)
	require.NoError(t, err)
	b.engine = e
	return b
}

// enqueue inserts messages with the given ids (payload "m<id>", key "").
func (b *bundle) enqueue(ids ...int64) {
	b.t.Helper()
	ps := make([]*relay.EnqueueParams, len(ids))
	for i, id := range ids {
		ps[i] = &relay.EnqueueParams{ID: id, Payload: []byte("m" + itoa(id))}
	}
	_, err := b.engine.Enqueue(b.ctx, ps...)
	require.NoError(b.t, err)
}

// work runs Work and fails the test on an error.
func (b *bundle) work() int {
	b.t.Helper()
	n, err := b.engine.Work(b.ctx)
	require.NoError(b.t, err)
	return n
}

// get reads one message.
func (b *bundle) get(id int64) *relaytype.Message {
	b.t.Helper()
	m, err := b.d.GetExecutor().MessageGet(b.ctx, b.engine.Queue(), id)
	require.NoError(b.t, err)
	return m
}

// state reads one message's state.
func (b *bundle) state(id int64) relaytype.State { return b.get(id).State }

// createProj creates the handler-side table both dialects accept.
func (b *bundle) createProj() {
	b.t.Helper()
	_, err := b.d.GetExecutor().Exec(b.ctx, "CREATE TABLE proj (id BIGINT PRIMARY KEY, v TEXT)")
	require.NoError(b.t, err)
}

// projRows returns proj's ids in order.
func (b *bundle) projRows() []int64 {
	b.t.Helper()
	rows, err := b.d.GetExecutor().Query(b.ctx, "SELECT id FROM proj ORDER BY id")
	require.NoError(b.t, err)
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		require.NoError(b.t, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(b.t, rows.Err())
	return out
}

// insertProj is the handler-side write used by many tests.
func insertProj(ctx context.Context, tx relay.Tx, id int64) error {
	_, err := tx.Exec(ctx, "INSERT INTO proj (id, v) VALUES ($1, $2)", id, "v"+itoa(id))
	return err
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// logCapture is a slog.Handler that keeps records for assertions.
type logCapture struct {
	mu   sync.Mutex
	recs []capturedLog
}

type capturedLog struct {
	level slog.Level
	msg   string
	attrs map[string]any
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }

func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	rec := capturedLog{level: r.Level, msg: r.Message, attrs: map[string]any{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Any()
		return true
	})
	c.mu.Lock()
	c.recs = append(c.recs, rec)
	c.mu.Unlock()
	return nil
}

func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCapture) WithGroup(string) slog.Handler      { return c }

// count returns how many records' message contains substr.
func (c *logCapture) count(substr string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.recs {
		if strings.Contains(r.msg, substr) {
			n++
		}
	}
	return n
}

// all returns a copy of the records.
func (c *logCapture) all() []capturedLog {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]capturedLog(nil), c.recs...)
}
