package relayintake_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/testlog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
	"github.com/relayhq/relay/relayintake"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaysource"
	"github.com/relayhq/relay/relaytype"
)

const (
	queue = "inbox"
	delay = time.Minute
)

var t0 = time.Date(2024, 3, 1, 8, 0, 0, 0, time.UTC)

// storeFactory opens a fresh, migrated engine store.
type storeFactory func(t *testing.T) relaydriver.Driver

func sqliteStore(t *testing.T) relaydriver.Driver {
	t.Helper()
	ctx := context.Background()
	d, err := relaysqlite.Open(ctx, filepath.Join(t.TempDir(), "relay.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	_, err = relaymigrate.Up(ctx, d, relayclock.System{}, relaymigrate.EngineLineOf(d))
	require.NoError(t, err)
	return d
}

func pgStore(t *testing.T) relaydriver.Driver { return testdb.PGDriver(t) }

// eachStore runs fn as a parallel subtest on SQLite and on PostgreSQL.
func eachStore(t *testing.T, fn func(t *testing.T, store storeFactory)) {
	t.Helper()
	for name, f := range map[string]storeFactory{"sqlite": sqliteStore, "postgres": pgStore} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fn(t, f)
		})
	}
}

// syncBuffer collects log output from several goroutines.
type syncBuffer = testlog.Buffer

// bundle is one test's world: an engine store, a foreign SQLite table read
// through relaysource.SQLTable, a fake clock, a metrics registry and the logs.
type bundle struct {
	t       *testing.T
	ctx     context.Context
	store   relaydriver.Driver
	foreign *sql.DB
	src     relaysource.SequenceSource
	clock   *relayclock.Fake
	reg     *prometheus.Registry
	logs    *syncBuffer
	cfg     relayintake.Config
	in      *relayintake.Intake
}

// setup builds a bundle; mutate adjusts the Config before New.
func setup(t *testing.T, store storeFactory, mutate ...func(*relayintake.Config)) *bundle {
	t.Helper()
	b := &bundle{t: t, ctx: context.Background(), store: store(t), clock: relayclock.NewFake(t0),
		reg: prometheus.NewRegistry(), logs: &syncBuffer{}}
	var err error
	b.foreign, err = sql.Open("sqlite", filepath.Join(t.TempDir(), "foreign.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.foreign.Close() })
	_, err = b.foreign.Exec(`CREATE TABLE CMINMSGS (ID INTEGER PRIMARY KEY, FLID TEXT, CONTENT BLOB, RECEIVED_AT DATETIME)`)
	require.NoError(t, err)
	b.src, err = relaysource.NewSQLTable(b.foreign, relaysource.SQLTableConfig{
		Dialect: relaysource.DialectSQLite, Table: "CMINMSGS", IDColumn: "ID",
		KeyColumn: "FLID", PayloadColumn: "CONTENT", ReceivedAtColumn: "RECEIVED_AT",
	})
	require.NoError(t, err)
	b.cfg = relayintake.Config{
		Queue:          queue,
		MaxCommitDelay: delay,
		PollInterval:   time.Second,
		Clock:          b.clock,
		Logger:         slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registerer:     b.reg,
	}
	for _, m := range mutate {
		m(&b.cfg)
	}
	b.in = b.newIntake(b.store, b.src)
	return b
}

// newIntake builds another Intake on the bundle's config (a restart).
func (b *bundle) newIntake(store relaydriver.Driver, src relaysource.SequenceSource) *relayintake.Intake {
	b.t.Helper()
	in, err := relayintake.New(store, src, b.cfg)
	require.NoError(b.t, err)
	return in
}

// payloadOf is a row's payload: a marker that must never reach the logs.
func payloadOf(id int64) []byte { return fmt.Appendf(nil, "SECRET-PAYLOAD-%d", id) }

// insert adds source rows with the given ids (committed at once).
func (b *bundle) insert(ids ...int64) {
	b.t.Helper()
	for _, id := range ids {
		_, err := b.foreign.Exec(`INSERT INTO CMINMSGS (ID, FLID, CONTENT, RECEIVED_AT) VALUES (?, ?, ?, ?)`,
			id, fmt.Sprintf("FL%d", id%3), payloadOf(id), t0.Add(-time.Duration(id)*time.Second).Format("2006-01-02 15:04:05"))
		require.NoError(b.t, err)
	}
}

func (b *bundle) seed(mode string) int64 {
	b.t.Helper()
	w, err := b.in.Seed(b.ctx, mode)
	require.NoError(b.t, err)
	return w
}

func (b *bundle) round() *relayintake.RoundResult {
	b.t.Helper()
	res, err := b.in.RunOnce(b.ctx)
	require.NoError(b.t, err)
	require.NotNil(b.t, res)
	return res
}

func (b *bundle) cursor() *relaytype.Cursor {
	b.t.Helper()
	c, err := b.store.GetExecutor().CursorGet(b.ctx, queue)
	require.NoError(b.t, err)
	return c
}

// messageIDs lists every message id of the queue (all are PENDING here).
func (b *bundle) messageIDs() []int64 {
	b.t.Helper()
	msgs, err := b.store.GetExecutor().MessageListUnfinished(b.ctx, &relaydriver.MessageListUnfinishedParams{Queue: queue, Limit: 10000})
	require.NoError(b.t, err)
	ids := []int64{}
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	return ids
}

func (b *bundle) holes() []*relaytype.Hole {
	b.t.Helper()
	h, err := b.store.GetExecutor().HoleList(b.ctx, queue)
	require.NoError(b.t, err)
	return h
}

func (b *bundle) holeIDs() []int64 {
	ids := []int64{}
	for _, h := range b.holes() {
		ids = append(ids, h.ID)
	}
	return ids
}

func span(from, to int64) []int64 {
	ids := []int64{}
	for id := from; id <= to; id++ {
		ids = append(ids, id)
	}
	return ids
}

func requireTime(t *testing.T, want, got time.Time, msgAndArgs ...any) {
	t.Helper()
	require.Truef(t, want.Equal(got), "want time %v, got %v %v", want, got, fmt.Sprint(msgAndArgs...))
}

// faultDriver wraps a store and injects failures into the round's transaction:
// a fault a real database cannot be made to produce on demand.
type faultDriver struct {
	relaydriver.Driver
	failInsert, failHole, failCursorSave bool
}

var errInjected = errors.New("injected fault")

func (d *faultDriver) Begin(ctx context.Context) (relaydriver.ExecutorTx, error) {
	tx, err := d.Driver.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &faultTx{ExecutorTx: tx, d: d}, nil
}

type faultTx struct {
	relaydriver.ExecutorTx
	d *faultDriver
}

func (tx *faultTx) MessageInsertMany(ctx context.Context, p []*relaydriver.MessageInsertParams) (*relaydriver.MessageInsertResult, error) {
	if tx.d.failInsert {
		return nil, errInjected
	}
	return tx.ExecutorTx.MessageInsertMany(ctx, p)
}

func (tx *faultTx) HoleInsert(ctx context.Context, h *relaytype.Hole) error {
	if tx.d.failHole {
		return errInjected
	}
	return tx.ExecutorTx.HoleInsert(ctx, h)
}

func (tx *faultTx) CursorSave(ctx context.Context, p *relaydriver.CursorSaveParams) error {
	if tx.d.failCursorSave {
		return errInjected
	}
	return tx.ExecutorTx.CursorSave(ctx, p)
}

// funcSource is a SequenceSource whose behaviour a test scripts: for source
// contract violations no real database produces.
type funcSource struct {
	readAfter func(ctx context.Context, after int64, limit int) ([]relaysource.Row, error)
	bounds    func(ctx context.Context) (int64, int64, bool, error)
}

func (s *funcSource) ReadAfter(ctx context.Context, after int64, limit int) ([]relaysource.Row, error) {
	return s.readAfter(ctx, after, limit)
}

func (s *funcSource) Bounds(ctx context.Context) (int64, int64, bool, error) {
	if s.bounds == nil {
		return 0, 0, false, nil
	}
	return s.bounds(ctx)
}
