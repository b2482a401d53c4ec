package snapshot

import (
	"errors"
	"fmt"
	"regexp"
	"time"
)

// State is a snapshot task's lifecycle state.
type State string

// States, in order. FAILED ends a task that cannot go on (its Error says
// why); a new task of the rule may then start.
const (
	// Pending: created; the start position is pinned and the changes before
	// it are draining (every one needs its final result first).
	Pending State = "PENDING"
	// Baseline: the rows are being read and sent; the rule's changes from the
	// pinned position on are held.
	Baseline State = "BASELINE"
	// CatchingUp: the shore applied the whole baseline; the held changes
	// replay until the lag is under the task's threshold.
	CatchingUp State = "CATCHING_UP"
	// Completed: caught up.
	Completed State = "COMPLETED"
	// Failed: stopped for good.
	Failed State = "FAILED"
)

// Finished reports whether s is a final state.
func (s State) Finished() bool { return s == Completed || s == Failed }

// Holding reports whether a task in state s holds its rule's changes from
// the pinned position on (the catch-up barrier).
func (s State) Holding() bool { return s == Pending || s == Baseline }

// Position is the pinned CDC start of one partition: the next offset when
// the task began.
type Position struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// Task is one snapshot task as stored (snapshot_task).
type Task struct {
	ID          string
	RuleID      string
	RuleVersion uint64
	Database    string
	Table       string
	State       State
	// Positions is the pinned start (nil until pinned).
	Positions []Position
	// Cursor is the last key read (nil: none yet); ReadDone says the
	// table's end was reached.
	Cursor   [][]byte
	ReadDone bool
	Chunks   int64
	RowsRead int64
	// NextSeq is the next source_sequence of the task's own event stream.
	NextSeq uint64
	// LagThreshold is the lag (events of the rule's partitions not yet
	// final) under which CATCHING_UP completes; Lag the last measured.
	LagThreshold int64
	Lag          int64
	// WindowNow, when set, makes the task a window reconcile's snapshot:
	// the trusted instant that fixes the rule's dataset window boundary
	// (Rule.WindowStart(WindowNow), left-closed) for the whole task. Only
	// the rows inside it are sent; a row whose business time is NULL,
	// unreadable or in the future is not sent but listed (Exceptions).
	// Zero: the whole table, each row judged as a change would be.
	WindowNow time.Time
	// Result is the window reconcile's outcome once it ran (nil: not yet).
	Result      *WindowResult
	Error       string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt time.Time
}

// Progress is a task with its events counted: what the management console
// shows.
type Progress struct {
	Task
	// Events are the SNAPSHOT events numbered so far, Received those the
	// shore holds, Terminal those with a final result (Applied of them
	// APPLIED, Conflicts CONFLICT_RECORDED, Rejected REJECTED).
	Events, Received, Terminal, Applied, Conflicts, Rejected int64
	// Exceptions are the rows a windowed task did not send because of their
	// business time (Store.Exceptions lists them).
	Exceptions int64
}

// Pinned returns the pinned offset of topic/partition, and whether the
// task pinned it.
func (t *Task) Pinned(topic string, partition int32) (int64, bool) {
	for _, p := range t.Positions {
		if p.Topic == topic && p.Partition == partition {
			return p.Offset, true
		}
	}
	return 0, false
}

// Topic is the name of the task's own event stream (its events'
// source_partition is Topic + "/0"): never a CDC topic's name, whose
// prefix is a logical name.
func (t *Task) Topic() string { return "snapshot/" + t.ID }

// ErrActive: the rule has an unfinished snapshot task already.
var ErrActive = errors.New("snapshot: the rule has an unfinished snapshot task")

// ErrNotFound: no such task.
var ErrNotFound = errors.New("snapshot: no such task")

// Drained reports whether every partition of the pinned start has its
// final results up to the pinned offset, given terminal (the next offset
// past each partition's contiguous final results; a partition absent has
// none).
func (t *Task) Drained(terminal map[Position]int64) bool {
	for _, p := range t.Positions {
		if terminal[Position{Topic: p.Topic, Partition: p.Partition}] < p.Offset {
			return false
		}
	}
	return true
}

// LagOf is the number of events of the pinned partitions from the pinned
// offset on that are not yet final, given the partitions' end offsets and
// terminal positions (as for Drained).
func (t *Task) LagOf(end, terminal map[Position]int64) int64 {
	var lag int64
	for _, p := range t.Positions {
		k := Position{Topic: p.Topic, Partition: p.Partition}
		done := max(terminal[k], p.Offset)
		if e := end[k]; e > done {
			lag += e - done
		}
	}
	return lag
}

// Covered is the catch-up decision for one change of a record (a change
// from the pinned position on, read at offset): whether the record's
// snapshot row already contains it, so replaying it would repeat an older
// change. snapRev is the record's revision in the snapshot ("" when the
// snapshot did not hold the record), applyFrom the offset of the record's
// first change the snapshot does not contain (-1: not met yet); base and
// result are the change's revisions. It returns the decision and the
// applyFrom to store (unchanged when already known).
//
// A record's changes form a chain of revisions, each change's base the
// previous one's result (revisions are unique per change). The snapshot
// read the record at one link of it: the change whose result is snapRev is
// the last one the snapshot contains, and the change whose base is snapRev
// the first it does not. Changes are met in offset order, so before either
// is met every change is older than the snapshot row; a re-read after a
// crash decides the same by comparing the offset with applyFrom.
func Covered(snapRev, base, result string, offset, applyFrom int64) (covered bool, from int64) {
	if applyFrom >= 0 {
		return offset < applyFrom, applyFrom
	}
	switch {
	case base == snapRev:
		return false, offset
	case result == snapRev:
		// The last change the snapshot holds: skipped; the next applies.
		return true, offset + 1
	}
	return true, -1
}

// idRE is what a task id may be: it names the task's event stream.
var idRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// validate checks a new task.
func (t *Task) validate() error {
	switch {
	case !idRE.MatchString(t.ID):
		return errors.New("snapshot: task id must be 1–64 of A–Z a–z 0–9 . _ -")
	case t.RuleID == "" || t.RuleVersion == 0:
		return errors.New("snapshot: task needs a rule id and version")
	case t.LagThreshold < 0:
		return fmt.Errorf("snapshot: lag threshold %d is negative", t.LagThreshold)
	}
	return nil
}
