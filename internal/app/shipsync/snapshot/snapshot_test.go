package snapshot_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	"github.com/relayhq/relay/internal/app/shipsync/snapshot"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/internal/kafkaread"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
)

// bench is one ship (MariaDB, trigger capture, kfake topics, client) and one
// shore (PostgreSQL, data API, applier into MariaDB).
type bench struct {
	ship, shore       *sql.DB
	shipName          string
	shipDSN, shoreDSN string
	st                *client.Store
	cl                *client.Client
	cfg               snapshot.Config
	// runner is the live runner; a "crash" replaces it with a new one
	// built from the stored state (the client reaches it through here).
	runner atomic.Pointer[snapshot.Runner]
	// held counts the records the barrier held back, covered the changes
	// the catch-up filter skipped.
	held, covered atomic.Int64
	// startClient starts a client on the same state file (a restarted
	// process); stopClient stops the running one.
	startClient, stopClient func()
	// pg is the shore's PostgreSQL.
	pg *pgxpool.Pool
}

func (b *bench) Hold(tp client.TP, off int64) bool {
	h := b.runner.Load().Hold(tp, off)
	if h {
		b.held.Add(1)
	}
	return h
}

// filter is the client's normaliser behind the live runner's filter.
type filter struct {
	b    *bench
	next client.Normalizer
}

func (f *filter) Normalize(ctx context.Context, src normalize.Source, ev *cdc.Event, now time.Time) (normalize.Outcome, error) {
	o, err := (&snapshot.Filter{Next: f.next, Runner: f.b.runner.Load()}).Normalize(ctx, src, ev, now)
	if o.Reason == snapshot.ReasonCovered {
		f.b.covered.Add(1)
	}
	return o, err
}

const crewCols = "id, name, rank_code, wage, updated_at"

func setup(t *testing.T, rows int) *bench { return setupWorld(t, world{rows: rows}) }

// world varies the bench: rows of the default shape before the capture,
// the node's rules (nil: the demo's) and seed, run on both databases'
// fresh tables before the capture is installed.
type world struct {
	rows  int
	rules func(shipDB string) []normalize.Rule
	seed  func(b *bench)
}

func setupWorld(t *testing.T, w world) *bench {
	t.Helper()
	rows := w.rows
	ctx := t.Context()
	server := testdb.MariaDBServer()
	tag := fmt.Sprintf("%x", rand.Uint32())
	b := &bench{shipName: "relay_snap_ship_" + tag}
	shipDSN, dropShip, err := mysqldsn.CreateScratch(ctx, server, b.shipName)
	require.NoError(t, err)
	t.Cleanup(dropShip)
	shoreDSN, dropShore, err := mysqldsn.CreateScratch(ctx, server, "relay_snap_shore_"+tag)
	require.NoError(t, err)
	t.Cleanup(dropShore)
	b.shipDSN, b.shoreDSN = shipDSN, shoreDSN
	b.ship, err = sql.Open("mysql", shipDSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.ship.Close() })
	b.shore, err = sql.Open("mysql", shoreDSN)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.shore.Close() })
	require.NoError(t, shipdemo.CreateTables(ctx, b.ship, b.shore))

	// Rows the ship had before its capture existed: no change of them was
	// ever captured, only a snapshot can bring them to the shore.
	for id := 1; id <= rows; id++ {
		_, err := b.ship.ExecContext(ctx, "INSERT INTO crew ("+crewCols+", _sync_revision, _sync_origin, _sync_updated_at) "+
			"VALUES (?, ?, 'AB', ?, '2026-01-02 03:04:05.000006', ?, ?, '2026-01-02 03:04:05')",
			id, fmt.Sprintf("sailor %d", id), fmt.Sprintf("%d.%02d", 1500+id, id%100), uuid.NewString(), shipdemo.Node)
		require.NoError(t, err)
	}
	if w.seed != nil {
		w.seed(b)
	}
	_, err = capture.Install(ctx, b.ship, capture.InstallConfig{NodeID: shipdemo.Node, Tables: shipdemo.TableNames()})
	require.NoError(t, err)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, shipdemo.Topics(b.shipName)...))
	require.NoError(t, err)
	t.Cleanup(cluster.Close)
	brokers := cluster.ListenAddrs()
	dir := t.TempDir()
	sh, err := shipdemo.StartShore(ctx, shipdemo.ShoreOptions{PostgresURL: testdb.PGSchema(t), TargetDSN: shoreDSN,
		PKIDir: filepath.Join(dir, "pki"), Node: shipdemo.Node, Rules: shipdemo.ShoreRules()})
	require.NoError(t, err)
	t.Cleanup(sh.Close)
	b.pg = sh.PG.Pool()

	runCtx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	capt, err := shipdemo.StartCapture(ctx, shipdemo.CaptureOptions{DB: b.ship, StateFile: filepath.Join(dir, "capture.db"),
		Brokers: brokers})
	require.NoError(t, err)
	wg.Add(1)
	go func() { defer wg.Done(); _ = capt.Run(runCtx) }()

	clock := relayclock.System{}
	if w.rules == nil {
		w.rules = shipdemo.ShipRules
	}
	rs, err := normalize.NewRuleSet(w.rules(b.shipName)...)
	require.NoError(t, err)
	b.st, err = client.OpenStore(ctx, filepath.Join(dir, "client.db"), "shipsync-client-"+shipdemo.Node, clock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.st.Close() })
	tc, err := pki.Dir{Path: filepath.Join(dir, "pki")}.ClientTLS("node-" + shipdemo.Node)
	require.NoError(t, err)
	tr, err := client.NewTransport(sh.URL, tc, 30*time.Second)
	require.NoError(t, err)
	t.Cleanup(tr.Close)

	conn := "capture-" + shipdemo.Logical
	norm, err := normalize.New(normalize.Config{NodeID: shipdemo.Node, ConnectorID: conn}, rs, b.st)
	require.NoError(t, err)
	dec, err := cdc.New(cdc.Config{})
	require.NoError(t, err)
	codec, err := wire.NewCodec(wire.Config{})
	require.NoError(t, err)
	b.cfg = snapshot.Config{NodeID: shipdemo.Node, Store: snapshot.NewStore(b.st.DB(), clock), Rules: rs,
		Normalizer: norm, Decoder: dec, Codec: codec, TopicPrefix: shipdemo.TopicPrefix,
		Reader: func(ctx context.Context, database, table string) (snapshot.ChunkReader, error) {
			return capture.NewSnapshotReader(ctx, b.ship, shipdemo.Logical, database, table)
		},
		Ends: func(ctx context.Context, topic string) (map[int32]int64, error) {
			return kafkaread.Ends(ctx, brokers, topic)
		},
		Terminal: b.st.Watermarks, Upload: tr.Upload, ChunkRows: 50, Clock: clock}
	r, err := snapshot.New(ctx, b.cfg)
	require.NoError(t, err)
	b.runner.Store(r)
	b.startClient = func() {
		cl, err := client.Build(client.Parts{NodeID: shipdemo.Node, ConnectorID: conn, Rules: rs, Store: b.st,
			Transport: tr, Clock: clock, Wrap: func(n client.Normalizer) client.Normalizer { return &filter{b: b, next: n} }},
			client.Config{Brokers: brokers, TopicPrefix: shipdemo.TopicPrefix, ReceiptEvery: 100 * time.Millisecond, Barrier: b})
		require.NoError(t, err)
		b.cl = cl
		cctx, stop := context.WithCancel(runCtx)
		done := make(chan struct{})
		b.stopClient = func() { stop(); <-done }
		go func() { defer close(done); _ = cl.Run(cctx) }()
	}
	b.startClient()
	t.Cleanup(func() { b.stopClient() })
	return b
}

// task returns the task's stored progress.
func (b *bench) task(t *testing.T, id string) snapshot.Progress { return progress(t, b.st.DB(), id) }

// progress returns task id's progress from the client database db.
func progress(t *testing.T, db *sql.DB, id string) snapshot.Progress {
	t.Helper()
	ps, err := snapshot.List(t.Context(), db)
	require.NoError(t, err)
	for _, p := range ps {
		if p.ID == id {
			return p
		}
	}
	t.Fatalf("no task %s", id)
	return snapshot.Progress{}
}

// stepUntil steps the live runner until cond holds, "restarting" it (a
// new runner from the stored state) whenever a step fails.
func (b *bench) stepUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		if _, err := b.runner.Load().Step(t.Context()); err != nil {
			r, err := snapshot.New(t.Context(), b.cfg)
			require.NoError(t, err)
			b.runner.Store(r)
		}
		return cond()
	}, time.Minute, 20*time.Millisecond, what)
}

// exec runs one local write on the ship.
func (b *bench) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	_, err := b.ship.ExecContext(t.Context(), q, args...)
	require.NoError(t, err)
}

// dump is a table's rows with their revisions, in key order.
func dump(t *testing.T, db *sql.DB) []string { return dumpWhere(t, db, "TRUE") }

// dumpWhere is dump of the rows where cond holds.
func dumpWhere(t *testing.T, db *sql.DB, cond string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), "SELECT CONCAT_WS('|', "+crewCols+", _sync_revision, _sync_origin) FROM crew "+
		"WHERE "+cond+" ORDER BY id", args...)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestSnapshotChangesDuringSnapshot snapshots a table of 300 rows the shore
// never had while its rows change — updates and deletes of rows already
// sent and not yet sent, inserts before and after the cursor — with the
// runner stopped at each of its fault points once and restarted from its
// stored state, and the client restarted while it held changes back; then
// requires the shore's table to equal the ship's row by
// row (values, revisions, origins), every event of the snapshot and of the
// replay applied, and no conflict.
func TestSnapshotChangesDuringSnapshot(t *testing.T) {
	b := setup(t, 300)
	ctx := t.Context()
	// A change before the task: captured and applied before the baseline.
	b.exec(t, "INSERT INTO crew ("+crewCols+") VALUES (400, 'early', 'cook', 1.50, '2026-01-01')")
	require.Eventually(t, func() bool { return len(dump(t, b.shore)) == 1 }, time.Minute, 20*time.Millisecond,
		"the early insert applied before the task begins")

	failed := map[string]bool{}
	var mu sync.Mutex
	b.cfg.Fault = func(point string) error {
		mu.Lock()
		defer mu.Unlock()
		if !failed[point] {
			failed[point] = true
			return errors.New("injected crash at " + point)
		}
		return nil
	}
	r, err := snapshot.New(ctx, b.cfg)
	require.NoError(t, err)
	b.runner.Store(r)

	require.NoError(t, b.cfg.Store.Create(ctx, snapshot.Task{ID: "snap-1", RuleID: "crew", RuleVersion: 1,
		Database: b.shipName, Table: "crew", LagThreshold: 0}))
	require.ErrorIs(t, b.cfg.Store.Create(ctx, snapshot.Task{ID: "snap-2", RuleID: "crew", RuleVersion: 1,
		Database: b.shipName, Table: "crew"}), snapshot.ErrActive)

	b.stepUntil(t, "first chunk sent", func() bool { p := b.task(t, "snap-1"); return p.Chunks >= 1 && p.Received >= 50 })
	// Rows 1–50 are sent; 51–300 are not. Change both kinds.
	h0 := b.held.Load()
	b.exec(t, "UPDATE crew SET name = 'moved twice a' WHERE id = 10")
	b.exec(t, "UPDATE crew SET name = 'moved twice b' WHERE id = 10")
	b.exec(t, "DELETE FROM crew WHERE id = 20")
	b.exec(t, "UPDATE crew SET rank_code = 'bosun' WHERE id = 200")
	b.exec(t, "DELETE FROM crew WHERE id = 250")
	b.exec(t, "UPDATE crew SET wage = 9.99 WHERE id = 260")
	b.exec(t, "DELETE FROM crew WHERE id = 260")
	b.exec(t, "INSERT INTO crew ("+crewCols+") VALUES (0, 'behind the cursor', 'AB', 1.00, '2026-01-01')")
	b.exec(t, "INSERT INTO crew ("+crewCols+") VALUES (1000, 'ahead of the cursor', 'AB', 2.00, '2026-01-01')")
	b.exec(t, "UPDATE crew SET name = 'early, changed' WHERE id = 400")

	// The client stops while it holds the changes behind the barrier (a
	// crash: what it held was never saved) and a new one starts on the same
	// state; it reads them again from the topic and holds them again.
	require.Eventually(t, func() bool { return b.held.Load() > h0 }, time.Minute, 10*time.Millisecond)
	b.stopClient()
	heldBefore := b.held.Load()
	b.startClient()

	b.stepUntil(t, "baseline read", func() bool {
		return b.task(t, "snap-1").State == snapshot.CatchingUp ||
			b.task(t, "snap-1").State == snapshot.Completed
	})
	// Changes after the baseline: replayed normally.
	b.exec(t, "UPDATE crew SET name = 'after the baseline' WHERE id = 30")
	b.exec(t, "DELETE FROM crew WHERE id = 31")
	b.stepUntil(t, "caught up", func() bool { return b.task(t, "snap-1").State == snapshot.Completed })

	want := dump(t, b.ship)
	require.Equal(t, 300+3-4, len(want), "300 rows, 3 inserted, 4 deleted")
	require.Eventually(t, func() bool {
		return b.cl.Waiting() == 0 && strings.Join(dump(t, b.shore), "\n") == strings.Join(want, "\n")
	}, time.Minute, 50*time.Millisecond, "the shore's table equals the ship's")

	p := b.task(t, "snap-1")
	t.Logf("task: %+v", p)
	require.Equal(t, snapshot.Completed, p.State)
	require.Empty(t, p.Error)
	require.Equal(t, p.Events, p.Applied, "every SNAPSHOT event APPLIED")
	require.Zero(t, p.Conflicts)
	require.Zero(t, p.Rejected)
	var open, bad int
	require.NoError(t, b.st.DB().QueryRowContext(ctx, "SELECT count(*) FILTER (WHERE state <> 'TERMINAL'), "+
		"count(*) FILTER (WHERE result <> 'APPLIED') FROM event_state").Scan(&open, &bad))
	require.Zero(t, open, "every event of the ship has its final result")
	require.Zero(t, bad, "every event of the ship was APPLIED (no conflict, no rejection)")
	require.Len(t, failed, 3, "every fault point was passed: %v", failed)
	// Held: the changes made during the baseline. Covered: the update of
	// 200, the delete of 250, both changes of 260, the insert of 1000 and
	// the update of 400 — each already in its snapshot row (or its
	// absence); the insert of 400 came before the pinned position, and its
	// snapshot row (the updated one) is applied over it.
	require.Greater(t, b.held.Load(), heldBefore, "held again after the client's restart")
	require.Equal(t, int64(6), b.covered.Load())
	// The shore's view of the same baseline.
	bs, err := snapshot.ShoreBaselines(ctx, b.pg, shipdemo.Node)
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Equal(t, snapshot.ShoreBaseline{Node: shipdemo.Node, TaskID: "snap-1", RuleID: "crew", RuleVersion: 1,
		Received: p.Events, Applied: p.Events, First: bs[0].First, Last: bs[0].Last}, bs[0])
	others, err := snapshot.ShoreBaselines(ctx, b.pg, "another-node")
	require.NoError(t, err)
	require.Empty(t, others)
	for _, p := range []string{faultpoint.ShipsyncSnapshotAfterPin, faultpoint.ShipsyncSnapshotAfterChunk, faultpoint.ShipsyncSnapshotAfterUpload} {
		require.True(t, failed[p], p)
	}
}
