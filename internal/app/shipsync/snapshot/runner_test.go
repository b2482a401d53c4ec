package snapshot_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/capture"
	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/client"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/shipdemo"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/snapshot"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/internal/dsn/mysqldsn"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
)

// fakeShore records the event ids uploaded to it and answers RECEIVED, or
// refuses the ids in refuse.
type fakeShore struct {
	mu     sync.Mutex
	codec  *wire.Codec
	sent   map[string]int
	seqs   []uint64
	refuse map[string]bool
}

func (f *fakeShore) Upload(_ context.Context, body []byte) (*pb.UploadResponse, error) {
	b, err := f.codec.Decode(body)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &pb.UploadResponse{BatchId: b.BatchID, OthersReceived: true}
	for _, ev := range b.Events {
		f.sent[ev.EventId]++
		f.seqs = append(f.seqs, ev.SourceSequence)
		if f.refuse[ev.EventId] {
			resp.Statuses = append(resp.Statuses, &pb.EventStatus{EventId: ev.EventId,
				Status: pb.ReceiveStatus_RECEIVE_STATUS_PERMANENT_REJECTED, Reason: pb.RejectReason_REJECT_REASON_INVALID_FIELD})
		}
	}
	return resp, nil
}

// unit is a runner over a real ship table and client state, with a fake
// shore, fake end offsets and fake checkpoints.
type unit struct {
	cfg      snapshot.Config
	st       *client.Store
	shore    *fakeShore
	ship     *sql.DB
	shipName string
	mu       sync.Mutex
	ends     map[int32]int64
	terminal map[client.TP]client.Watermark
}

func newUnit(t *testing.T, ship *sql.DB, shipName string, rows int) *unit {
	t.Helper()
	ctx := t.Context()
	u := &unit{ship: ship, shipName: shipName, ends: map[int32]int64{0: 0, 1: 0}, terminal: map[client.TP]client.Watermark{}}
	if ship == nil {
		u.shipName = "relay_snap_unit_" + fmt.Sprintf("%x", rand.Uint32())
		dsn, drop, err := mysqldsn.CreateScratch(ctx, testdb.MariaDBServer(), u.shipName)
		require.NoError(t, err)
		t.Cleanup(drop)
		u.ship, err = sql.Open("mysql", dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = u.ship.Close() })
		require.NoError(t, shipdemo.CreateTables(ctx, u.ship))
		for id := 1; id <= rows; id++ {
			_, err := u.ship.ExecContext(ctx, "INSERT INTO crew ("+crewCols+", _sync_revision, _sync_origin, _sync_updated_at) "+
				"VALUES (?, 'n', 'AB', 1.00, '2026-01-02 03:04:05', ?, ?, '2026-01-02 03:04:05')", id, uuid.NewString(), shipdemo.Node)
			require.NoError(t, err)
		}
	}
	clock := relayclock.System{}
	var err error
	u.st, err = client.OpenStore(ctx, filepath.Join(t.TempDir(), "client.db"), "g", clock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = u.st.Close() })
	rs, err := normalize.NewRuleSet(shipdemo.ShipRules(u.shipName)...)
	require.NoError(t, err)
	norm, err := normalize.New(normalize.Config{NodeID: shipdemo.Node, ConnectorID: "c"}, rs, u.st)
	require.NoError(t, err)
	dec, err := cdc.New(cdc.Config{})
	require.NoError(t, err)
	codec, err := wire.NewCodec(wire.Config{})
	require.NoError(t, err)
	u.shore = &fakeShore{codec: codec, sent: map[string]int{}, refuse: map[string]bool{}}
	u.cfg = snapshot.Config{NodeID: shipdemo.Node, Store: snapshot.NewStore(u.st.DB(), clock), Rules: rs, Normalizer: norm,
		Decoder: dec, Codec: codec, TopicPrefix: shipdemo.TopicPrefix, ChunkRows: 10, Clock: clock,
		Reader: func(ctx context.Context, database, table string) (snapshot.ChunkReader, error) {
			return capture.NewSnapshotReader(ctx, u.ship, shipdemo.Logical, database, table)
		},
		Ends: func(context.Context, string) (map[int32]int64, error) {
			u.mu.Lock()
			defer u.mu.Unlock()
			out := map[int32]int64{}
			for p, o := range u.ends {
				out[p] = o
			}
			return out, nil
		},
		Terminal: func(context.Context) (map[client.TP]client.Watermark, error) {
			u.mu.Lock()
			defer u.mu.Unlock()
			out := map[client.TP]client.Watermark{}
			for tp, w := range u.terminal {
				out[tp] = w
			}
			return out, nil
		},
		Upload: u.shore.Upload}
	return u
}

func (u *unit) topic() string { return shipdemo.TopicPrefix + u.shipName + ".crew" }

func (u *unit) setTerminal(p int32, off int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	tp := client.TP{Topic: u.topic(), Partition: p}
	u.terminal[tp] = client.Watermark{TP: tp, TerminalNext: off}
}

func (u *unit) state(t *testing.T, id string) snapshot.Progress { return progress(t, u.st.DB(), id) }

// applyAll records every sent snapshot event as APPLIED, as the client's
// receipt loop does.
func (u *unit) applyAll(t *testing.T) {
	t.Helper()
	_, err := u.st.DB().ExecContext(t.Context(),
		"UPDATE event_state SET state = 'TERMINAL', result = 'APPLIED' WHERE topic LIKE 'snapshot/%' AND state = 'RECEIVED'")
	require.NoError(t, err)
}

// TestRunnerLifecycle drives one task through every state by hand: the
// barrier holding the whole topic until the start is pinned and then from
// the pinned offsets on, PENDING until the changes before the start are
// final, the chunks (one resent after a fault once the shore answered,
// with the same ids and sequences), BASELINE until every event is final,
// CATCHING_UP until the lag is under the threshold.
func TestRunnerLifecycle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := newUnit(t, nil, "", 25)
	u.ends = map[int32]int64{0: 5, 1: 0}
	fail := map[string]bool{faultpoint.ShipsyncSnapshotAfterUpload: true}
	u.cfg.Fault = func(p string) error {
		if fail[p] {
			delete(fail, p)
			return fmt.Errorf("injected at %s", p)
		}
		return nil
	}
	r, err := snapshot.New(ctx, u.cfg)
	require.NoError(t, err)
	require.NoError(t, u.cfg.Store.Create(ctx, snapshot.Task{ID: "t1", RuleID: "crew", RuleVersion: 1, Database: u.shipName,
		Table: "crew", LagThreshold: 2}))
	tp := func(p int32) client.TP { return client.TP{Topic: u.topic(), Partition: p} }
	other := client.TP{Topic: shipdemo.TopicPrefix + u.shipName + ".fuel_log", Partition: 0}

	// Not yet seen by the runner: nothing held.
	require.False(t, r.Hold(tp(0), 0))
	_, err = r.Step(ctx)
	require.NoError(t, err)
	p := u.state(t, "t1")
	require.Equal(t, snapshot.Pending, p.State, "the change before the start is not final yet")
	require.Len(t, p.Positions, 2)
	require.False(t, r.Hold(tp(0), 4), "before the start: processed normally")
	require.True(t, r.Hold(tp(0), 5))
	require.True(t, r.Hold(tp(1), 0))
	require.True(t, r.Hold(tp(7), 0), "a partition the start does not know is held whole")
	require.False(t, r.Hold(other, 100), "another rule's topic")

	u.setTerminal(0, 5)
	_, err = r.Step(ctx)
	require.NoError(t, err)
	require.Equal(t, snapshot.Baseline, u.state(t, "t1").State)

	// Chunk 0: sent, the answer lost to a crash; the next step sends it
	// again from the outbox, then reads on.
	_, err = r.Step(ctx)
	require.ErrorContains(t, err, "injected")
	require.Len(t, u.shore.sent, 10)
	for i := 0; i < 5 && u.state(t, "t1").ReadDone == false; i++ {
		_, err = r.Step(ctx)
		require.NoError(t, err)
	}
	p = u.state(t, "t1")
	require.True(t, p.ReadDone)
	require.Equal(t, int64(25), p.RowsRead)
	require.Equal(t, int64(25), p.Events)
	require.Equal(t, int64(25), p.Received)
	require.Len(t, u.shore.sent, 25, "25 distinct ids")
	resent := 0
	for _, n := range u.shore.sent {
		if n == 2 {
			resent++
		}
	}
	require.Equal(t, 10, resent, "the first chunk went twice, with the same ids")
	require.Equal(t, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, u.shore.seqs[10:20], "and the same sequences")
	require.True(t, r.Hold(tp(0), 5), "held until the shore applied the baseline")

	_, err = r.Step(ctx)
	require.NoError(t, err)
	require.Equal(t, snapshot.Baseline, u.state(t, "t1").State, "receipts outstanding")
	u.applyAll(t)
	_, err = r.Step(ctx)
	require.NoError(t, err)
	require.Equal(t, snapshot.CatchingUp, u.state(t, "t1").State)
	require.False(t, r.Hold(tp(0), 5), "the barrier lifted")

	u.mu.Lock()
	u.ends = map[int32]int64{0: 9, 1: 1}
	u.mu.Unlock()
	_, err = r.Step(ctx)
	require.NoError(t, err)
	p = u.state(t, "t1")
	require.Equal(t, snapshot.CatchingUp, p.State)
	require.Equal(t, int64(4+1), p.Lag)
	u.setTerminal(0, 8)
	_, err = r.Step(ctx)
	require.NoError(t, err)
	p = u.state(t, "t1")
	require.Equal(t, snapshot.Completed, p.State)
	require.Equal(t, int64(1+1), p.Lag)
	require.False(t, p.CompletedAt.IsZero())

	// The same task read again into another state file numbers the same
	// rows with the same ids: ids depend on the task and the row only.
	v := newUnit(t, u.ship, u.shipName, 0)
	r2, err := snapshot.New(ctx, v.cfg)
	require.NoError(t, err)
	require.NoError(t, v.cfg.Store.Create(ctx, snapshot.Task{ID: "t1", RuleID: "crew", RuleVersion: 1, Database: u.shipName, Table: "crew"}))
	for i := 0; i < 10 && !v.state(t, "t1").ReadDone; i++ {
		_, err = r2.Step(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, u.shore.sent, func() map[string]int {
		m := map[string]int{}
		for id := range v.shore.sent {
			m[id] = u.shore.sent[id]
		}
		return m
	}(), "the same 25 ids")
	require.Len(t, v.shore.sent, 25)
}

// TestRunnerFails: a task whose rule version is not the node's, and one
// whose event the shore refuses, end FAILED with the reason; a new task of
// the rule may then start.
func TestRunnerFails(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := newUnit(t, nil, "", 3)
	r, err := snapshot.New(ctx, u.cfg)
	require.NoError(t, err)
	require.NoError(t, u.cfg.Store.Create(ctx, snapshot.Task{ID: "v2", RuleID: "crew", RuleVersion: 2, Database: u.shipName, Table: "crew"}))
	for i := 0; i < 4; i++ {
		_, err = r.Step(ctx)
		require.NoError(t, err)
	}
	p := u.state(t, "v2")
	require.Equal(t, snapshot.Failed, p.State)
	require.Contains(t, p.Error, "version 1 since the task began (version 2)")

	// The shore refuses one event of the next task.
	require.NoError(t, u.cfg.Store.Create(ctx, snapshot.Task{ID: "r", RuleID: "crew", RuleVersion: 1, Database: u.shipName, Table: "crew"}))
	u.cfg.Upload = func(ctx context.Context, body []byte) (*pb.UploadResponse, error) {
		b, err := u.shore.codec.Decode(body)
		if err != nil {
			return nil, err
		}
		u.shore.refuse[b.Events[1].EventId] = true
		return u.shore.Upload(ctx, body)
	}
	r, err = snapshot.New(ctx, u.cfg)
	require.NoError(t, err)
	for i := 0; i < 4; i++ {
		_, err = r.Step(ctx)
		require.NoError(t, err)
	}
	p = u.state(t, "r")
	require.Equal(t, snapshot.Failed, p.State)
	require.Contains(t, p.Error, "the shore refused 1 SNAPSHOT event(s) of chunk 0 (first: REJECT_REASON_INVALID_FIELD)")
	require.Equal(t, int64(1), p.Rejected, "the refused event is BLOCKED in event_state")

	// A window reconcile's snapshot of a rule without a dataset window.
	require.NoError(t, u.cfg.Store.Create(ctx, snapshot.Task{ID: "w", RuleID: "crew", RuleVersion: 1, Database: u.shipName,
		Table: "crew", WindowNow: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}))
	for i := 0; i < 4; i++ {
		_, err = r.Step(ctx)
		require.NoError(t, err)
	}
	p = u.state(t, "w")
	require.Equal(t, snapshot.Failed, p.State)
	require.Contains(t, p.Error, "a window reconcile's snapshot needs its rule to have a dataset window")
}

// TestRunnerRunRetries: Run keeps going through failed steps (the queue's
// offsets unreachable at first) and takes the task to COMPLETED.
func TestRunnerRunRetries(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := newUnit(t, nil, "", 12)
	ends := u.cfg.Ends
	var calls atomic.Int64
	u.cfg.Ends = func(ctx context.Context, topic string) (map[int32]int64, error) {
		if calls.Add(1) <= 2 {
			return nil, errors.New("broker unreachable")
		}
		return ends(ctx, topic)
	}
	u.cfg.Every = 5 * time.Millisecond
	r, err := snapshot.New(ctx, u.cfg)
	require.NoError(t, err)
	require.NoError(t, u.cfg.Store.Create(ctx, snapshot.Task{ID: "t", RuleID: "crew", RuleVersion: 1, Database: u.shipName, Table: "crew"}))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	require.Eventually(t, func() bool {
		u.applyAll(t) // the receipts the client would record
		return u.state(t, "t").State == snapshot.Completed
	}, 30*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	require.Greater(t, calls.Load(), int64(2))
	require.Len(t, u.shore.sent, 12)
}

// TestRunnerTransferWindow: a task whose rule may not send now reads and
// sends nothing until it may.
func TestRunnerTransferWindow(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	u := newUnit(t, nil, "", 4)
	var open atomic.Bool
	u.cfg.MayTransfer = func(p normalize.Priority) bool {
		require.Equal(t, normalize.PriorityHigh, p, "the rule's priority (crew is HIGH)")
		return open.Load()
	}
	r, err := snapshot.New(ctx, u.cfg)
	require.NoError(t, err)
	require.NoError(t, u.cfg.Store.Create(ctx, snapshot.Task{ID: "w", RuleID: "crew", RuleVersion: 1, Database: u.shipName, Table: "crew"}))
	for range 3 {
		_, err = r.Step(ctx)
		require.NoError(t, err)
	}
	p := u.state(t, "w")
	require.Equal(t, snapshot.Baseline, p.State)
	require.Zero(t, p.RowsRead)
	require.Empty(t, u.shore.sent)
	open.Store(true)
	_, err = r.Step(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(4), u.state(t, "w").RowsRead)
	require.Len(t, u.shore.sent, 4)
}
