package client

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/remote"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
)

var dt0 = time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)

// shoreStub serves a node's commands (the cursor is the index of the next
// one) and takes its acks, keeping the first result per command; it fails
// the next failAcks ack posts with 503 and Retry-After.
type shoreStub struct {
	mu       sync.Mutex
	commands []*pb.Command
	cursors  []string
	acks     map[string]*pb.CommandAck
	order    []string // command ids in the order their first ack came
	posts    int
	failAcks int
}

func (s *shoreStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reply := func(m proto.Message) {
		b, _ := proto.Marshal(m)
		_, _ = w.Write(b)
	}
	switch r.URL.Path {
	case shore.PathCommands:
		cursor := r.URL.Query().Get("cursor")
		s.cursors = append(s.cursors, cursor)
		from, _ := strconv.Atoi(cursor)
		from = min(from, len(s.commands))
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		to := min(from+limit, len(s.commands))
		reply(&pb.CommandPage{Commands: s.commands[from:to], NextCursor: strconv.Itoa(to), More: to < len(s.commands)})
	case shore.PathAcks:
		s.posts++
		if s.failAcks > 0 {
			s.failAcks--
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var b pb.CommandAckBatch
		if proto.Unmarshal(body, &b) != nil || b.NodeId != "ship-1" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var resp pb.CommandAckResponse
		for _, a := range b.Acks {
			st := &pb.EventStatus{EventId: a.CommandId, Status: pb.ReceiveStatus_RECEIVE_STATUS_RECEIVED}
			if _, ok := s.acks[a.CommandId]; !ok {
				s.acks[a.CommandId] = a
				s.order = append(s.order, a.CommandId)
			}
			resp.Statuses = append(resp.Statuses, st)
		}
		reply(&resp)
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// results are the acked results in the order the commands were first
// acknowledged.
func (s *shoreStub) results() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.order))
	for _, id := range s.order {
		out = append(out, commandResultName(s.acks[id].Result))
	}
	return out
}

// spy is the remote applier as the client sees it; before each apply it
// checks what must already be saved: the command in inbound_command, and
// what it will write in applied_command, where the normaliser looks.
type spy struct {
	t       *testing.T
	st      *Store
	remote  *remote.Applier
	mu      sync.Mutex
	applied []string // command ids, in apply order
}

func (s *spy) Intent(cmd *pb.Command) (normalize.AppliedCommand, bool) { return s.remote.Intent(cmd) }

func (s *spy) Apply(ctx context.Context, cmd *pb.Command) (*pb.CommandAck, error) {
	var stored int
	if err := s.st.db.QueryRowContext(ctx, "SELECT count(*) FROM inbound_command WHERE command_id = ?", cmd.CommandId).
		Scan(&stored); err != nil || stored != 1 {
		s.t.Errorf("command %s applied before it was stored (%d, %v)", cmd.CommandId, stored, err)
	}
	if in, ok := s.remote.Intent(cmd); ok {
		got, found, err := s.st.Applied(ctx, "shore", strings.ToLower(cmd.CommandId))
		if err != nil || !found || got != in {
			s.t.Errorf("command %s: applied_command before the write: %v %t %v, want %v", cmd.CommandId, got, found, err, in)
		}
	}
	s.mu.Lock()
	s.applied = append(s.applied, cmd.CommandId)
	s.mu.Unlock()
	return s.remote.Apply(ctx, cmd)
}

func (s *spy) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.applied)
}

// downParts is a downlink test's ship: a MariaDB database with the voyage
// table and the ledger, the node's rules, a state store file and a stub
// shore serving commands, on a fake clock.
type downParts struct {
	mdb    *sql.DB
	db     string
	target *apply.Target
	rules  *normalize.RuleSet
	clock  *relayclock.Fake
	path   string
	stub   *shoreStub
	tr     *Transport
}

func downSetup(t *testing.T, commands ...*pb.Command) *downParts {
	t.Helper()
	ctx := t.Context()
	mdb, dsn := testdb.MariaDBWithDSN(t)
	p := &downParts{mdb: mdb, clock: relayclock.NewFake(dt0), path: filepath.Join(t.TempDir(), "client.db"),
		stub: &shoreStub{commands: commands, acks: map[string]*pb.CommandAck{}}}
	require.NoError(t, mdb.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&p.db))
	_, err := mdb.ExecContext(ctx, "CREATE TABLE voyage (id BIGINT PRIMARY KEY, note VARCHAR(20), "+apply.SyncColumns+")")
	require.NoError(t, err)
	p.target, err = apply.OpenTarget(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.target.Close() })
	require.NoError(t, p.target.EnsureLedger(ctx))
	p.rules, err = normalize.NewRuleSet(normalize.Rule{ID: "voyage-log", Version: 1, Direction: normalize.DirectionBoth,
		Database: p.db, Table: "voyage", KeyColumns: []string{"id"}, Revisioned: true})
	require.NoError(t, err)
	srv := httptest.NewServer(p.stub)
	t.Cleanup(srv.Close)
	p.tr, err = NewTransport(srv.URL, nil, 0)
	require.NoError(t, err)
	t.Cleanup(p.tr.Close)
	return p
}

// client opens the state store (again, after a restart) and returns a
// client running the downlink through a spy on a fresh remote applier.
func (p *downParts) client(t *testing.T) (*Client, *spy) {
	t.Helper()
	st, err := OpenStore(t.Context(), p.path, "g", p.clock)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	ra, err := remote.New(remote.Config{Target: p.target, Rules: p.rules, Clock: p.clock})
	require.NoError(t, err)
	s := &spy{t: t, st: st, remote: ra}
	c, err := Build(Parts{NodeID: "ship-1", ConnectorID: "capture-t", Rules: p.rules, Store: st, Transport: p.tr,
		Clock: p.clock, Logger: slog.New(slog.DiscardHandler)}, Config{Brokers: []string{"unused:9092"},
		TopicPrefix: "sync.cdc.t.", Remote: s, CommandPage: 2, CommandPollEvery: time.Minute})
	require.NoError(t, err)
	return c, s
}

func downCmdID(n int) string { return fmt.Sprintf("d0000000-0000-4000-8000-%012x", n) }

func downRev(n int) string { return fmt.Sprintf("33333333-0000-4000-8000-%012x", n) }

// downChange is command n: the shore's op on voyage record id.
func downChange(n int, op pb.Operation, id int64, base, result, note string) *pb.Command {
	key := []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: id}}}
	ev := &pb.ChangeEvent{EventId: downCmdID(500 + n), OriginNodeId: "shore", RuleId: "voyage-log", RuleVersion: 1,
		PrimaryKey: key, Operation: op, BaseRevision: base, ResultRevision: result, SourceSequence: uint64(n)}
	if op != pb.Operation_OPERATION_DELETE {
		ev.After = &pb.RowImage{Columns: append(key, &pb.ColumnValue{Name: "note",
			Value: &pb.ColumnValue_StringValue{StringValue: note}})}
	}
	return &pb.Command{CommandId: downCmdID(n), Sequence: uint64(n), CreatedAt: timestamppb.New(dt0),
		Body: &pb.Command_Change{Change: ev}}
}

const (
	opIns = pb.Operation_OPERATION_INSERT
	opUpd = pb.Operation_OPERATION_UPDATE
	opDel = pb.Operation_OPERATION_DELETE
)

func (p *downParts) note(t *testing.T, id int64) (string, bool) {
	t.Helper()
	var note string
	err := p.mdb.QueryRowContext(t.Context(), "SELECT note FROM voyage WHERE id = ?", id).Scan(&note)
	if err == sql.ErrNoRows {
		return "", false
	}
	require.NoError(t, err)
	return note, true
}

// TestDownlinkAppliesInOrderAndAcks: the downlink pulls the shore's
// commands page by page (a page with more after it at once, without
// waiting on the clock), stores each page with its cursor before acting,
// records what a command will write before the write, applies the
// commands in order to the ship's database, stores and acknowledges every
// result; the checkpoint moves past them. The ship's capture of those
// writes — an insert, the stamp before a delete, the delete — is
// suppressed by the normaliser through applied_command.
func TestDownlinkAppliesInOrderAndAcks(t *testing.T) {
	t.Parallel()
	p := downSetup(t,
		downChange(1, opIns, 1, "", downRev(1), "one"),
		downChange(2, opUpd, 1, downRev(1), downRev(2), "one-b"),
		downChange(3, opIns, 2, "", downRev(3), "two"),
		downChange(4, opDel, 2, downRev(3), downRev(4), ""),
		downChange(5, opUpd, 1, downRev(9), downRev(5), "stale"),
	)
	c, s := p.client(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.downlink(ctx) }()
	require.Eventually(t, func() bool { return len(p.stub.results()) == 5 && p.clock.Waiters() == 1 },
		10*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	require.Equal(t, []string{"APPLIED", "APPLIED", "APPLIED", "APPLIED", "CONFLICT_REPORTED"}, p.stub.results())
	require.Equal(t, []string{"", "2", "4"}, p.stub.cursors[:3], "pages followed at once, each from the saved cursor")
	require.Equal(t, []string{downCmdID(1), downCmdID(2), downCmdID(3), downCmdID(4), downCmdID(5)}, s.applied)
	note, ok := p.note(t, 1)
	require.True(t, ok)
	require.Equal(t, "one-b", note)
	_, ok = p.note(t, 2)
	require.False(t, ok)
	conflict := p.stub.acks[downCmdID(5)]
	require.Equal(t, downRev(2), conflict.CurrentRevision)

	counts, err := s.st.CommandCounts(t.Context())
	require.NoError(t, err)
	require.Equal(t, CommandCounts{ByResult: map[string]int64{"APPLIED": 4, "CONFLICT_REPORTED": 1}}, counts)
	mark, err := s.st.DownlinkMark(t.Context())
	require.NoError(t, err)
	require.Equal(t, DownlinkMark{Stored: 6, Applied: 6, Acked: 6}, mark)
	require.Equal(t, uint64(6), c.Stats().DownlinkCheckpoint)
	require.Contains(t, c.Progress(), "5 acknowledged (0 failures), checkpoint 6")

	// What the ship's capture hands the normaliser for those writes.
	cid := func(n int) *pb.ColumnValue { return str("_sync_event_id", downCmdID(n)) }
	image := func(id int64, rev string, event *pb.ColumnValue) *pb.RowImage {
		return &pb.RowImage{Columns: []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: id}},
			str("_sync_revision", rev), str("_sync_origin", "shore"), event}}
	}
	key := func(id int64) []*pb.ColumnValue {
		return []*pb.ColumnValue{{Name: "id", Value: &pb.ColumnValue_IntValue{IntValue: id}}}
	}
	for i, ev := range []*cdc.Event{
		{Op: cdc.OpCreate, Key: key(1), After: image(1, downRev(1), cid(1))},
		{Op: cdc.OpUpdate, Key: key(2), Before: image(2, downRev(3), cid(3)), After: image(2, downRev(3), cid(4))},
		{Op: cdc.OpDelete, Key: key(2), Before: image(2, downRev(3), cid(4))},
	} {
		ev.Source = cdc.Source{DB: p.db, Table: "voyage", Timestamp: dt0}
		out, err := c.cfg.Normalizer.Normalize(t.Context(), normalize.Source{Topic: "sync.cdc.t.voyage", Offset: int64(i)}, ev, dt0)
		require.NoError(t, err)
		require.Equal(t, normalize.ReasonLoopSuppressed, out.Reason, "record %d: %s", i, out.Detail)
	}
	// A captured row claiming the conflicting command's id is no remote
	// apply: the command wrote nothing.
	out, err := c.cfg.Normalizer.Normalize(t.Context(), normalize.Source{Topic: "sync.cdc.t.voyage", Offset: 9},
		&cdc.Event{Op: cdc.OpCreate, Key: key(1), After: image(1, downRev(5), cid(5)),
			Source: cdc.Source{DB: p.db, Table: "voyage", Timestamp: dt0}}, dt0)
	require.NoError(t, err)
	require.Equal(t, normalize.ReasonUnknownOrigin, out.Reason)
}

func str(name, v string) *pb.ColumnValue {
	return &pb.ColumnValue{Name: name, Value: &pb.ColumnValue_StringValue{StringValue: v}}
}

// TestDownlinkResendsAcksAfterAFailedPost: acks the shore did not answer
// stay unacknowledged — the checkpoint waits — and are sent again after
// the shore's Retry-After, on the clock; the commands are not applied
// again.
func TestDownlinkResendsAcksAfterAFailedPost(t *testing.T) {
	t.Parallel()
	p := downSetup(t, downChange(1, opIns, 1, "", downRev(1), "one"))
	p.stub.failAcks = 1
	c, s := p.client(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.downlink(ctx) }()
	require.Eventually(t, func() bool { return c.Stats().DownlinkFailures == 1 && p.clock.Waiters() == 1 },
		10*time.Second, 5*time.Millisecond)
	require.Empty(t, p.stub.results())
	mark, err := s.st.DownlinkMark(t.Context())
	require.NoError(t, err)
	require.Equal(t, DownlinkMark{Stored: 2, Applied: 2, Acked: 1}, mark, "applied, not acknowledged")

	p.clock.Advance(7 * time.Second) // the shore's Retry-After
	require.Eventually(t, func() bool { return len(p.stub.results()) == 1 && p.clock.Waiters() == 1 },
		10*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	require.Equal(t, 2, p.stub.posts)
	require.Equal(t, 1, s.count(), "applied once")
	mark, err = s.st.DownlinkMark(t.Context())
	require.NoError(t, err)
	require.Equal(t, DownlinkMark{Stored: 2, Applied: 2, Acked: 2}, mark)
}

// TestDownlinkRestartResumesFromTheCursor: a restarted client pulls from
// its saved cursor and applies only what came since; nothing applied
// before is applied again.
func TestDownlinkRestartResumesFromTheCursor(t *testing.T) {
	t.Parallel()
	p := downSetup(t, downChange(1, opIns, 1, "", downRev(1), "one"), downChange(2, opIns, 2, "", downRev(2), "two"))
	c, s := p.client(t)
	_, err := c.downlinkRound(t.Context())
	require.NoError(t, err)
	require.Equal(t, 2, s.count())
	require.NoError(t, s.st.Close())

	p.stub.mu.Lock()
	p.stub.commands = append(p.stub.commands, downChange(3, opUpd, 1, downRev(1), downRev(3), "one-b"))
	p.stub.cursors = nil
	p.stub.mu.Unlock()
	c, s = p.client(t)
	more, err := c.downlinkRound(t.Context())
	require.NoError(t, err)
	require.False(t, more)
	require.Equal(t, []string{"2"}, p.stub.cursors)
	require.Equal(t, []string{downCmdID(3)}, s.applied)
	require.Equal(t, []string{"APPLIED", "APPLIED", "APPLIED"}, p.stub.results())
	note, _ := p.note(t, 1)
	require.Equal(t, "one-b", note)
}

// TestDownlinkRecoversThroughTheLedger: a command whose write committed on
// the ship's database while its result never reached the state store (a
// crash in between) is applied again after the restart and answered
// ALREADY_APPLIED from the database's ledger — the row is not written
// twice.
func TestDownlinkRecoversThroughTheLedger(t *testing.T) {
	t.Parallel()
	cmd := downChange(1, opIns, 1, "", downRev(1), "one")
	p := downSetup(t, cmd)
	c, s := p.client(t)
	n, err := s.st.recordCommands(t.Context(), []*pb.Command{cmd}, 0, "1")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	ack, err := s.remote.Apply(t.Context(), cmd) // the write the crash left behind
	require.NoError(t, err)
	require.Equal(t, pb.CommandResult_COMMAND_APPLIED, ack.Result)
	_, err = p.mdb.ExecContext(t.Context(), "DELETE FROM voyage WHERE id = 1") // and changed since
	require.NoError(t, err)

	_, err = c.downlinkRound(t.Context())
	require.NoError(t, err)
	require.Equal(t, []string{"ALREADY_APPLIED"}, p.stub.results())
	_, ok := p.note(t, 1)
	require.False(t, ok, "not inserted again")
	require.Equal(t, []string{"1"}, p.stub.cursors, "pulled from the saved cursor")
}

// TestDownlinkRefusesAGap: a page whose sequence numbers skip one is not
// stored (nor its cursor); the downlink fails the round and pulls again.
func TestDownlinkRefusesAGap(t *testing.T) {
	t.Parallel()
	p := downSetup(t, downChange(1, opIns, 1, "", downRev(1), "one"), downChange(3, opIns, 3, "", downRev(3), "three"))
	c, s := p.client(t)
	_, err := c.downlinkRound(t.Context())
	var pe *commandPageError
	require.ErrorAs(t, err, &pe)
	require.Zero(t, s.count())
	counts, err := s.st.CommandCounts(t.Context())
	require.NoError(t, err)
	require.Empty(t, counts.ByResult)
	cursor, err := s.st.meta(t.Context(), metaCommandCursor)
	require.NoError(t, err)
	require.Empty(t, cursor)
}
