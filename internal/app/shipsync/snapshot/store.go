package snapshot

import (
	"context"
	"database/sql"
	_ "embed" // queries.sql
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaytype"
)

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("snapshot/queries.sql", queriesSQL,
	"TaskInsert", "TaskList", "TaskPin", "TaskState", "TaskChunk", "OutboxInsert", "OutboxList", "OutboxDelete",
	"RowPut", "RowGet", "RowApplyFrom", "EventInsert", "EventReceived", "EventBlocked", "EventCounts", "EventOpen",
	"RowProblems", "ProblemCounts", "TaskResult")

// Store is the tasks' state in the ship client's SQLite database (the
// tables of the client's migration 003). Safe for concurrent use.
type Store struct {
	db    *sql.DB
	clock relaytype.Clock
}

// NewStore returns the store over db, the client's database
// (client.Store.DB), migrated.
func NewStore(db *sql.DB, clock relaytype.Clock) *Store { return &Store{db: db, clock: clock} }

func (s *Store) now() int64 { return s.clock.Now().UnixMicro() }

// Create stores a new PENDING task. ErrActive when the rule has an
// unfinished task.
func (s *Store) Create(ctx context.Context, t Task) error {
	if err := t.validate(); err != nil {
		return err
	}
	now := s.now()
	var window sql.NullInt64
	if !t.WindowNow.IsZero() {
		window = sql.NullInt64{Int64: t.WindowNow.UnixMicro(), Valid: true}
	}
	_, err := s.db.ExecContext(ctx, stmts["TaskInsert"], t.ID, t.RuleID, int64(t.RuleVersion), t.Database, t.Table,
		t.LagThreshold, window, now, now)
	if err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed: snapshot_task.rule_id") {
		return ErrActive
	}
	if err != nil {
		return fmt.Errorf("snapshot: create task: %w", err)
	}
	return nil
}

// Tasks returns every task, oldest first.
func (s *Store) Tasks(ctx context.Context) ([]Task, error) {
	rows, err := s.db.QueryContext(ctx, stmts["TaskList"])
	if err != nil {
		return nil, fmt.Errorf("snapshot: list tasks: %w", err)
	}
	defer rows.Close()
	var out []Task
	for rows.Next() {
		var t Task
		var version int64
		var positions, cursor, errText, result sql.NullString
		var lag, completed, window sql.NullInt64
		var created, updated int64
		if err := rows.Scan(&t.ID, &t.RuleID, &version, &t.Database, &t.Table, &t.State, &positions, &cursor,
			&t.ReadDone, &t.Chunks, &t.RowsRead, &t.NextSeq, &t.LagThreshold, &lag, &errText, &created, &updated,
			&completed, &window, &result); err != nil {
			return nil, fmt.Errorf("snapshot: list tasks: %w", err)
		}
		t.RuleVersion, t.Lag, t.Error = uint64(version), lag.Int64, errText.String
		t.CreatedAt, t.UpdatedAt = time.UnixMicro(created).UTC(), time.UnixMicro(updated).UTC()
		if completed.Valid {
			t.CompletedAt = time.UnixMicro(completed.Int64).UTC()
		}
		if window.Valid {
			t.WindowNow = time.UnixMicro(window.Int64).UTC()
		}
		if result.Valid {
			t.Result = new(WindowResult)
			if err := json.Unmarshal([]byte(result.String), t.Result); err != nil {
				return nil, fmt.Errorf("snapshot: task %s: stored window result does not decode: %w", t.ID, err)
			}
		}
		if positions.Valid {
			if err := json.Unmarshal([]byte(positions.String), &t.Positions); err != nil {
				return nil, fmt.Errorf("snapshot: task %s: stored positions do not decode: %w", t.ID, err)
			}
		}
		if cursor.Valid {
			if err := json.Unmarshal([]byte(cursor.String), &t.Cursor); err != nil {
				return nil, fmt.Errorf("snapshot: task %s: stored cursor does not decode: %w", t.ID, err)
			}
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// List returns every task with its events counted, oldest first: the
// snapshot view of the management console.
func (s *Store) List(ctx context.Context) ([]Progress, error) {
	ts, err := s.Tasks(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, stmts["EventCounts"])
	if err != nil {
		return nil, fmt.Errorf("snapshot: count events: %w", err)
	}
	defer rows.Close()
	counts := map[string][6]int64{}
	for rows.Next() {
		var topic string
		var c [6]int64
		if err := rows.Scan(&topic, &c[0], &c[1], &c[2], &c[3], &c[4], &c[5]); err != nil {
			return nil, fmt.Errorf("snapshot: count events: %w", err)
		}
		counts[topic] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("snapshot: count events: %w", err)
	}
	problems, err := s.problemCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Progress, len(ts))
	for i, t := range ts {
		c := counts[t.Topic()]
		out[i] = Progress{Task: t, Events: c[0], Received: c[1], Terminal: c[2], Applied: c[3], Conflicts: c[4], Rejected: c[5],
			Exceptions: problems[t.ID]}
	}
	return out, nil
}

// problemCounts counts each task's exceptions.
func (s *Store) problemCounts(ctx context.Context) (map[string]int64, error) {
	rows, err := s.db.QueryContext(ctx, stmts["ProblemCounts"])
	if err != nil {
		return nil, fmt.Errorf("snapshot: count exceptions: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("snapshot: count exceptions: %w", err)
		}
		out[id] = n
	}
	return out, rows.Err()
}

// List returns the snapshot tasks of the ship client database db with
// their progress (see Store.List).
func List(ctx context.Context, db *sql.DB) ([]Progress, error) {
	return (&Store{db: db}).List(ctx)
}

// pin stores the task's start position.
func (s *Store) pin(ctx context.Context, id string, ps []Position) error {
	b, _ := json.Marshal(ps)
	if _, err := s.db.ExecContext(ctx, stmts["TaskPin"], string(b), s.now(), id); err != nil {
		return fmt.Errorf("snapshot: pin task %s: %w", id, err)
	}
	return nil
}

// setState moves an unfinished task to st with its lag and error.
func (s *Store) setState(ctx context.Context, id string, st State, lag int64, why string) error {
	now := s.now()
	var e sql.NullString
	if why != "" {
		e = sql.NullString{String: why, Valid: true}
	}
	if _, err := s.db.ExecContext(ctx, stmts["TaskState"], string(st), lag, e, now, string(st), now, id); err != nil {
		return fmt.Errorf("snapshot: task %s to %s: %w", id, st, err)
	}
	return nil
}

// chunkEvent is one row of a chunk: its event as event_state indexes it
// (ID "" for a row skipped by the rule) and its snapshot revision.
type chunkEvent struct {
	ID          string
	Seq         uint64
	RuleID      string
	RuleVersion uint64
	Priority    int
	RawBytes    int
	BusinessAt  time.Time
	CapturedAt  time.Time
	KeyHash     []byte
	Revision    string
	// Problem says why a windowed task did not send the row (its business
	// time); "" for a row sent or skipped.
	Problem string
}

// chunk is one chunk read: its encoded events and where reading goes on.
type chunk struct {
	No      int64 // the task's chunks before it
	Events  []byte
	Index   []chunkEvent
	Cursor  [][]byte
	Done    bool
	Rows    int
	NextSeq uint64
}

// saveChunk stores a chunk read — its events to send, their index, the
// records' snapshot revisions and the task's new cursor — in one
// transaction. A chunk stored already (the same No) changes nothing.
func (s *Store) saveChunk(ctx context.Context, t *Task, c chunk) error {
	var cursor sql.NullString
	if c.Cursor != nil {
		b, _ := json.Marshal(c.Cursor)
		cursor = sql.NullString{String: string(b), Valid: true}
	}
	now := s.now()
	return s.inTx(ctx, "save chunk", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, stmts["TaskChunk"], cursor, c.Done, c.Rows, c.NextSeq, now, t.ID, c.No)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errors.New("the task moved on (another runner?)")
		}
		if c.Events != nil {
			if _, err := tx.ExecContext(ctx, stmts["OutboxInsert"], t.ID, c.No, c.Events); err != nil {
				return err
			}
		}
		for _, e := range c.Index {
			problem := sql.NullString{String: e.Problem, Valid: e.Problem != ""}
			if _, err := tx.ExecContext(ctx, stmts["RowPut"], t.ID, e.KeyHash, e.Revision, problem); err != nil {
				return err
			}
			if e.ID == "" {
				continue // a skipped row or an exception: its revision only
			}
			var biz sql.NullInt64
			if !e.BusinessAt.IsZero() {
				biz = sql.NullInt64{Int64: e.BusinessAt.UnixMicro(), Valid: true}
			}
			if _, err := tx.ExecContext(ctx, stmts["EventInsert"], e.ID, t.Topic(), int64(e.Seq), int64(e.Seq), e.RuleID,
				int64(e.RuleVersion), e.Priority, e.RawBytes, biz, e.CapturedAt.UnixMicro(), now, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// outboxEntry is a stored chunk not yet received.
type outboxEntry struct {
	No     int64
	Events []byte
}

// outbox returns the task's chunks not yet received, in order.
func (s *Store) outbox(ctx context.Context, id string) ([]outboxEntry, error) {
	rows, err := s.db.QueryContext(ctx, stmts["OutboxList"], id)
	if err != nil {
		return nil, fmt.Errorf("snapshot: read outbox of %s: %w", id, err)
	}
	defer rows.Close()
	var out []outboxEntry
	for rows.Next() {
		var e outboxEntry
		if err := rows.Scan(&e.No, &e.Events); err != nil {
			return nil, fmt.Errorf("snapshot: read outbox of %s: %w", id, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// received records a chunk's upload answer: received ids, refused ids
// (blocked, with their reasons), and the chunk gone from the outbox when
// nothing of it waits for a retry.
func (s *Store) received(ctx context.Context, id string, no int64, ids []string, refused map[string]string, done bool) error {
	now := s.now()
	return s.inTx(ctx, "record upload answer", func(tx *sql.Tx) error {
		if len(ids) > 0 {
			b, _ := json.Marshal(ids)
			if _, err := tx.ExecContext(ctx, stmts["EventReceived"], now, string(b)); err != nil {
				return err
			}
		}
		for eid, why := range refused {
			if _, err := tx.ExecContext(ctx, stmts["EventBlocked"], why, now, eid); err != nil {
				return err
			}
		}
		if done {
			if _, err := tx.ExecContext(ctx, stmts["OutboxDelete"], id, no); err != nil {
				return err
			}
		}
		return nil
	})
}

// open counts the task's events without their final result.
func (s *Store) open(ctx context.Context, t *Task) (int64, error) {
	var n int64
	if err := s.db.QueryRowContext(ctx, stmts["EventOpen"], t.Topic()).Scan(&n); err != nil {
		return 0, fmt.Errorf("snapshot: count open events of %s: %w", t.ID, err)
	}
	return n, nil
}

// row returns a record's snapshot revision and apply-from offset (-1: not
// met); a record the snapshot did not hold has revision "".
func (s *Store) row(ctx context.Context, id string, keyHash []byte) (string, int64, error) {
	var rev string
	var from sql.NullInt64
	err := s.db.QueryRowContext(ctx, stmts["RowGet"], id, keyHash).Scan(&rev, &from)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", -1, nil
	case err != nil:
		return "", 0, fmt.Errorf("snapshot: read snapshot row: %w", err)
	case !from.Valid:
		return rev, -1, nil
	}
	return rev, from.Int64, nil
}

// Exception is a row a windowed task did not send because of its business
// time: the SHA-256 of its source key (KeyHash) and why.
type Exception struct {
	KeyHash []byte
	Problem string
}

// Exceptions returns the rows task id did not send because of their
// business time, by key hash.
func (s *Store) Exceptions(ctx context.Context, id string) ([]Exception, error) {
	rows, err := s.db.QueryContext(ctx, stmts["RowProblems"], id)
	if err != nil {
		return nil, fmt.Errorf("snapshot: exceptions of %s: %w", id, err)
	}
	defer rows.Close()
	var out []Exception
	for rows.Next() {
		var e Exception
		if err := rows.Scan(&e.KeyHash, &e.Problem); err != nil {
			return nil, fmt.Errorf("snapshot: exceptions of %s: %w", id, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// setResult stores a completed task's window reconcile result.
func (s *Store) setResult(ctx context.Context, id string, r *WindowResult) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("snapshot: task %s: encode result: %w", id, err)
	}
	res, err := s.db.ExecContext(ctx, stmts["TaskResult"], string(b), s.now(), id)
	if err != nil {
		return fmt.Errorf("snapshot: task %s: store result: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("snapshot: task %s: not COMPLETED", id)
	}
	return nil
}

// setApplyFrom stores a record's apply-from offset.
func (s *Store) setApplyFrom(ctx context.Context, id string, keyHash []byte, from int64) error {
	if _, err := s.db.ExecContext(ctx, stmts["RowApplyFrom"], id, keyHash, from); err != nil {
		return fmt.Errorf("snapshot: store apply-from: %w", err)
	}
	return nil
}

func (s *Store) inTx(ctx context.Context, what string, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("snapshot: %s: %w", what, err)
	}
	if err := fn(tx); err != nil {
		return errors.Join(fmt.Errorf("snapshot: %s: %w", what, err), tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("snapshot: %s: commit: %w", what, err)
	}
	return nil
}
