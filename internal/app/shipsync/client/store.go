package client

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaydriver/relaysqlite"
	"github.com/relayhq/relay/relaymigrate"
	"github.com/relayhq/relay/relaytype"
)

// Line is the name of the client's migration line.
const Line = "shipsync-client"

//go:embed migration
var migrationFS embed.FS

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("client/queries.sql", queriesSQL,
	"WatermarkList", "WatermarkSave", "EventStates", "EventInsert", "EventReceived", "EventRetry", "EventBlock",
	"EventTerminal", "EventCounts", "ResultCounts", "MetaGet", "MetaSet", "AppliedGet", "BacklogByRule", "MetaSetMax", "EventList", "BlockedList",
	"CommandSequence", "CommandInsert", "CommandsUnapplied", "CommandIntent", "CommandResult", "AppliedResult",
	"CommandsUnacked", "CommandAcked", "DownlinkMarkSave", "DownlinkMark", "CommandCounts")

// MigrationLine returns the client's migration line (SQLite).
func MigrationLine() relaymigrate.Line {
	sub, err := fs.Sub(migrationFS, "migration")
	if err != nil {
		panic(fmt.Sprintf("client: embedded migrations: %v", err)) // cannot happen: the path is a constant
	}
	return relaymigrate.Line{Name: Line, FS: sub}
}

// Event states kept in event_state (CONSUMED and IN_FLIGHT exist only in
// memory: a crash turns both back into "read again from the topic").
const (
	StateReady           = "READY"
	StateReceived        = "RECEIVED"
	StateRetryWait       = "RETRY_WAIT"
	StateTerminal        = "TERMINAL"
	StateBlocked         = "BLOCKED"
	StateExpiredApproved = "EXPIRED_APPROVED"
)

// Store is the client's SQLite state.
type Store struct {
	d     *relaysqlite.Driver
	db    *sql.DB
	clock relaytype.Clock
	group string
}

// OpenStore opens (creating) the state database at path, applies the
// client's migrations and returns the store for consumer group group.
func OpenStore(ctx context.Context, path, group string, clock relaytype.Clock) (*Store, error) {
	d, err := relaysqlite.Open(ctx, path)
	if err != nil {
		return nil, err
	}
	if _, err := relaymigrate.Up(ctx, d, clock, MigrationLine()); err != nil {
		return nil, errors.Join(fmt.Errorf("client: migrate %s: %w", path, err), d.Close())
	}
	return &Store{d: d, db: d.DB(), clock: clock, group: group}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.d.Close() }

// DB is the state database, for the tables other ship-side parts keep in it
// (the snapshot tasks of migration 003).
func (s *Store) DB() *sql.DB { return s.db }

// TP names a topic partition.
type TP struct {
	Topic     string
	Partition int32
}

func (tp TP) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// Watermark is one partition's checkpoints (see partition_watermark).
type Watermark struct {
	TP
	ReadNext, ReceivedNext, TerminalNext int64
	NextSeq                              uint64
}

func micros(t time.Time) int64 { return t.UnixMicro() }

// Watermarks returns the uplink checkpoints of every partition seen.
func (s *Store) Watermarks(ctx context.Context) (map[TP]Watermark, error) {
	rows, err := s.db.QueryContext(ctx, stmts["WatermarkList"], "up", s.group)
	if err != nil {
		return nil, fmt.Errorf("client: read watermarks: %w", err)
	}
	defer rows.Close()
	out := map[TP]Watermark{}
	for rows.Next() {
		var w Watermark
		if err := rows.Scan(&w.Topic, &w.Partition, &w.ReadNext, &w.ReceivedNext, &w.TerminalNext, &w.NextSeq); err != nil {
			return nil, fmt.Errorf("client: read watermarks: %w", err)
		}
		out[w.TP] = w
	}
	return out, rows.Err()
}

// known is what event_state holds about an event already produced.
type known struct {
	Seq   uint64 // 0 when not numbered
	State string
}

// eventStates returns the stored state of those of ids that have one.
func (s *Store) eventStates(ctx context.Context, ids []string) (map[string]known, error) {
	out := map[string]known{}
	if len(ids) == 0 {
		return out, nil
	}
	arr, _ := json.Marshal(ids)
	rows, err := s.db.QueryContext(ctx, stmts["EventStates"], string(arr))
	if err != nil {
		return nil, fmt.Errorf("client: read event states: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, st string
		var seq sql.NullInt64
		if err := rows.Scan(&id, &seq, &st); err != nil {
			return nil, fmt.Errorf("client: read event states: %w", err)
		}
		out[id] = known{Seq: uint64(seq.Int64), State: st}
	}
	return out, rows.Err()
}

// newEvent is an event_state row to insert.
type newEvent struct {
	ID          string
	TP          TP
	Offset      int64
	Seq         uint64 // 0: not numbered (blocked)
	RuleID      string
	RuleVersion uint64
	Priority    int
	State       string
	Reason      string
	RawBytes    int
	BusinessAt  time.Time // zero: none
	CapturedAt  time.Time
}

// tx runs fn in one write transaction and then saves marks.
func (s *Store) tx(ctx context.Context, what string, marks []Watermark, fn func(tx *sql.Tx, now int64) error) error {
	now := micros(s.clock.Now())
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("client: %s: %w", what, err)
	}
	if fn != nil {
		if err := fn(tx, now); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("client: %s: %w", what, err)
		}
	}
	for _, w := range marks {
		if _, err := tx.ExecContext(ctx, stmts["WatermarkSave"], "up", s.group, w.Topic, w.Partition,
			w.ReadNext, w.ReceivedNext, w.TerminalNext, w.NextSeq, now); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("client: %s: save watermark %s: %w", what, w.TP, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("client: %s: commit: %w", what, err)
	}
	return nil
}

// recordRead stores the events produced from one poll and the partitions'
// new read positions and sequence counters, in one transaction.
func (s *Store) recordRead(ctx context.Context, evs []newEvent, marks []Watermark) error {
	return s.tx(ctx, "record read events", marks, func(tx *sql.Tx, now int64) error {
		if len(evs) == 0 {
			return nil
		}
		st, err := tx.PrepareContext(ctx, stmts["EventInsert"])
		if err != nil {
			return err
		}
		defer st.Close()
		for _, e := range evs {
			var seq, biz sql.NullInt64
			if e.Seq > 0 {
				seq = sql.NullInt64{Int64: int64(e.Seq), Valid: true}
			}
			if !e.BusinessAt.IsZero() {
				biz = sql.NullInt64{Int64: micros(e.BusinessAt), Valid: true}
			}
			var reason sql.NullString
			if e.Reason != "" {
				reason = sql.NullString{String: e.Reason, Valid: true}
			}
			if _, err := st.ExecContext(ctx, e.ID, e.TP.Topic, e.TP.Partition, e.Offset, seq, e.RuleID, int64(e.RuleVersion),
				e.Priority, e.State, reason, e.RawBytes, biz, micros(e.CapturedAt), now, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// sendResult is what one upload's answer changes.
type sendResult struct {
	Received []string
	Retry    map[string]string // event id → reason
	Blocked  map[string]string // event id → reason
}

// recordSent stores an upload's per-event answer and the partitions' new
// received positions.
func (s *Store) recordSent(ctx context.Context, r sendResult, batchSeq uint64, marks []Watermark) error {
	return s.tx(ctx, "record upload answer", marks, func(tx *sql.Tx, now int64) error {
		if _, err := tx.ExecContext(ctx, stmts["MetaSetMax"], metaBatchSequence, strconv.FormatUint(batchSeq, 10)); err != nil {
			return err
		}
		if len(r.Received) > 0 {
			arr, _ := json.Marshal(r.Received)
			if _, err := tx.ExecContext(ctx, stmts["EventReceived"], now, string(arr)); err != nil {
				return err
			}
		}
		for id, why := range r.Retry {
			if _, err := tx.ExecContext(ctx, stmts["EventRetry"], why, now, id); err != nil {
				return err
			}
		}
		for id, why := range r.Blocked {
			if _, err := tx.ExecContext(ctx, stmts["EventBlock"], why, now, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// terminal is one final result to store.
type terminal struct {
	ID, Result, Reason, ConflictID string
}

// recordTerminal stores final results, the receipt cursor after them and
// the partitions' new terminal positions. It returns how many events
// changed (a receipt for an event already terminal, or unknown here,
// changes nothing).
func (s *Store) recordTerminal(ctx context.Context, ts []terminal, cursor string, marks []Watermark) (int, error) {
	changed := 0
	err := s.tx(ctx, "record receipts", marks, func(tx *sql.Tx, now int64) error {
		st, err := tx.PrepareContext(ctx, stmts["EventTerminal"])
		if err != nil {
			return err
		}
		defer st.Close()
		for _, t := range ts {
			res, err := st.ExecContext(ctx, t.Result, nullable(t.Reason), nullable(t.ConflictID), now, t.ID)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n > 0 {
				changed++
			}
		}
		if cursor != "" {
			if _, err := tx.ExecContext(ctx, stmts["MetaSet"], metaReceiptCursor, cursor); err != nil {
				return err
			}
		}
		return nil
	})
	return changed, err
}

// saveMarks stores watermarks alone.
func (s *Store) saveMarks(ctx context.Context, marks []Watermark) error {
	if len(marks) == 0 {
		return nil
	}
	return s.tx(ctx, "save watermarks", marks, nil)
}

func nullable(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// Names in client_meta.
const (
	metaReceiptCursor = "receipt_cursor"
	metaBatchSequence = "batch_sequence"
)

// meta returns a client_meta value ("" when unset).
func (s *Store) meta(ctx context.Context, name string) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, stmts["MetaGet"], name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("client: read %s: %w", name, err)
	}
	return v, nil
}

// Counts is the event_state census.
type Counts struct {
	ByState  map[string]int64
	ByResult map[string]int64
	Bytes    map[string]int64 // raw bytes by state
}

// Counts returns how many events are in each state and terminal result.
func (s *Store) Counts(ctx context.Context) (Counts, error) {
	c := Counts{ByState: map[string]int64{}, ByResult: map[string]int64{}, Bytes: map[string]int64{}}
	rows, err := s.db.QueryContext(ctx, stmts["EventCounts"])
	if err != nil {
		return c, fmt.Errorf("client: count events: %w", err)
	}
	for rows.Next() {
		var st string
		var n, b int64
		if err := rows.Scan(&st, &n, &b); err != nil {
			rows.Close()
			return c, err
		}
		c.ByState[st], c.Bytes[st] = n, b
	}
	rows.Close()
	rows, err = s.db.QueryContext(ctx, stmts["ResultCounts"])
	if err != nil {
		return c, fmt.Errorf("client: count results: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r sql.NullString
		var n int64
		if err := rows.Scan(&r, &n); err != nil {
			return c, err
		}
		c.ByResult[r.String] = n
	}
	return c, rows.Err()
}

// Applied looks up a downlink command applied on this node
// (applied_command), for the normaliser's loop suppression.
func (s *Store) Applied(ctx context.Context, _, eventID string) (normalize.AppliedCommand, bool, error) {
	var op, rev string
	err := s.db.QueryRowContext(ctx, stmts["AppliedGet"], eventID).Scan(&op, &rev)
	if errors.Is(err, sql.ErrNoRows) {
		return normalize.AppliedCommand{}, false, nil
	}
	if err != nil {
		return normalize.AppliedCommand{}, false, fmt.Errorf("client: read applied command: %w", err)
	}
	v, ok := pb.Operation_value[op]
	if !ok {
		return normalize.AppliedCommand{}, false, fmt.Errorf("client: applied command has operation %q", bound(op, 40))
	}
	return normalize.AppliedCommand{Operation: pb.Operation(v), ResultRevision: rev}, true, nil
}

// backlog returns the events not yet terminal, per direction, rule,
// priority and state.
func (s *Store) backlog(ctx context.Context) ([]*pb.BacklogSummary, error) {
	rows, err := s.db.QueryContext(ctx, stmts["BacklogByRule"])
	if err != nil {
		return nil, fmt.Errorf("client: read backlog: %w", err)
	}
	defer rows.Close()
	var out []*pb.BacklogSummary
	for rows.Next() {
		var b pb.BacklogSummary
		var oldest, newest, oldBiz, newBiz sql.NullInt64
		if err := rows.Scan(&b.Direction, &b.RuleId, &b.Priority, &b.State, &b.Events, &b.RawBytes, &oldest, &newest,
			&oldBiz, &newBiz); err != nil {
			return nil, fmt.Errorf("client: read backlog: %w", err)
		}
		at := func(v sql.NullInt64) *timestamppb.Timestamp {
			if !v.Valid {
				return nil
			}
			return timestamppb.New(time.UnixMicro(v.Int64))
		}
		b.OldestCapturedAt, b.NewestCapturedAt = at(oldest), at(newest)
		b.OldestBusinessAt, b.NewestBusinessAt = at(oldBiz), at(newBiz)
		out = append(out, &b)
	}
	return out, rows.Err()
}

// EventRow is one event_state row, as Events lists it.
type EventRow struct {
	ID, RuleID    string
	TP            TP
	Offset        int64
	State, Result string
	RawBytes      int
}

// Events lists every event_state row in position order (for
// reconciliation and benchmarks: the whole table in memory).
func (s *Store) Events(ctx context.Context) ([]EventRow, error) {
	rows, err := s.db.QueryContext(ctx, stmts["EventList"])
	if err != nil {
		return nil, fmt.Errorf("client: list events: %w", err)
	}
	defer rows.Close()
	var out []EventRow
	for rows.Next() {
		var e EventRow
		if err := rows.Scan(&e.ID, &e.RuleID, &e.TP.Topic, &e.TP.Partition, &e.Offset, &e.State, &e.Result,
			&e.RawBytes); err != nil {
			return nil, fmt.Errorf("client: list events: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Blocked is one blocked event: where it was read, its rule and why.
type Blocked struct {
	ID        string
	TP        TP
	Offset    int64
	RuleID    string
	Reason    string
	UpdatedAt time.Time
}

// Blocked lists up to limit blocked events in position order: each holds
// its partition's terminal checkpoint until it is resolved.
func (s *Store) Blocked(ctx context.Context, limit int) ([]Blocked, error) {
	rows, err := s.db.QueryContext(ctx, stmts["BlockedList"], limit)
	if err != nil {
		return nil, fmt.Errorf("client: list blocked: %w", err)
	}
	defer rows.Close()
	var out []Blocked
	for rows.Next() {
		var b Blocked
		var at int64
		if err := rows.Scan(&b.ID, &b.TP.Topic, &b.TP.Partition, &b.Offset, &b.RuleID, &b.Reason, &at); err != nil {
			return nil, fmt.Errorf("client: list blocked: %w", err)
		}
		b.UpdatedAt = time.UnixMicro(at).UTC()
		out = append(out, b)
	}
	return out, rows.Err()
}

// diskBytes is the size of the state database (its pages; the write-ahead
// log comes and goes with checkpoints).
func (s *Store) diskBytes(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()").Scan(&n)
	return n, err
}
