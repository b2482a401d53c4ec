package simulate

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/relayhq/relay/internal/sqlfile"
)

//go:embed mailbox.sql
var mailboxSQL string

var queries = sqlfile.MustParse("simulate/mailbox.sql", mailboxSQL,
	"CreateInbox", "CreateOutbox", "InboxInsert", "InboxVisible", "InboxMarks")

// CreateMailbox creates the AODB mailbox tables CMINMSGS (inbound) and
// COUTMSGS (outbound) in db's current database if they do not exist, in the
// site's exact shape (no extra columns). ctx bounds the two statements.
func CreateMailbox(ctx context.Context, db *sql.DB) error {
	for _, name := range []string{"CreateInbox", "CreateOutbox"} {
		if _, err := db.ExecContext(ctx, queries[name]); err != nil {
			return fmt.Errorf("simulate: create mailbox (%s): %w", name, err)
		}
	}
	return nil
}

// Written is the record of one Plan.Write: what the mailbox now holds.
type Written struct {
	// Rows maps each committed mailbox id to its expected PROCFLAG.
	Rows map[int64]Outcome
	// Holes are the ids consumed by rolled-back inserts: never visible, a
	// permanent hole in the id sequence for the watermark to age out.
	Holes []int64
	// Index maps each committed mailbox id to its plan index
	// (Plan.Messages()[i]: category, reason, raw content).
	Index map[int64]int
	// Late records each late insert's commit, in commit order.
	Late []LateCommit

	plan *Plan
}

// LateCommit is the evidence that one late insert committed after rows with
// higher ids: what another connection saw just before its commit.
type LateCommit struct {
	ID    int64 // the late row's id
	Index int   // its plan index
	// MaxVisibleBefore is the highest id another connection could see just
	// before the commit; above ID when later rows committed first.
	MaxVisibleBefore int64
	// VisibleBefore reports whether the late row itself was visible before its
	// commit (never, on a transactional store).
	VisibleBefore bool
	// HeldFor is how long the insert stayed uncommitted (at least Options.LateBy).
	HeldFor time.Duration
}

// Write inserts the plan into CMINMSGS in order, one row per message, at
// rate messages per second (0: as fast as possible; the plan's message i is
// inserted no earlier than i/rate seconds after the start). MSGCONTENT is the
// raw content (NULL for a nil Raw); RECEIVETIME is the insert time (NULL for
// Message.NullReceiveTime); PROCFLAG and PROCTIME stay NULL for the pipeline
// to write. A CategoryRollback insert is made in a transaction that rolls
// back, leaving a hole; a Late insert stays in an open transaction until
// Options.LateBy has passed and a later row has committed. Ids are allocated
// at insert time, so mailbox-id order is plan order; Write fails if another
// writer interleaves (ids not increasing).
//
// progress, if not nil, is called on Write's goroutine after each insert
// with the number of plan messages handled and their total (rollbacks
// included); late inserts may still be uncommitted at that point.
//
// ctx bounds every statement and wait; on an error Write rolls back the late
// inserts still open (their ids join Holes) and returns, with the error, a
// Written that describes what the mailbox holds.
// db must allow at least two open connections (one more per late insert open
// at once).
func (p *Plan) Write(ctx context.Context, db *sql.DB, rate float64, progress func(written, total int)) (*Written, error) {
	if rate < 0 || math.IsNaN(rate) || math.IsInf(rate, 0) {
		return nil, fmt.Errorf("simulate: write: rate %v: want a finite rate >= 0", rate)
	}
	wr := &writer{db: db, lateBy: p.opts.LateBy, w: &Written{Rows: map[int64]Outcome{}, Index: map[int64]int{}, plan: p}}
	if err := wr.run(ctx, p, rate, progress); err != nil {
		return wr.w, errors.Join(err, wr.abort())
	}
	return wr.w, nil
}

type writer struct {
	db      *sql.DB
	lateBy  time.Duration
	w       *Written
	pending []*lateInsert // open late inserts, in insert (= due) order
	// lastID is the highest id allocated; lastCommitted the highest committed
	// on time (a late insert is due only once a later row has committed).
	lastID, lastCommitted int64
}

type lateInsert struct {
	tx            *sql.Tx
	id            int64
	idx           int
	inserted, due time.Time
}

func (wr *writer) run(ctx context.Context, p *Plan, rate float64, progress func(written, total int)) error {
	start := time.Now()
	for i := range p.msgs {
		if rate > 0 {
			if err := wr.waitUntil(ctx, start.Add(time.Duration(float64(i)/rate*float64(time.Second)))); err != nil {
				return err
			}
		}
		if err := wr.commitDue(ctx, false); err != nil {
			return err
		}
		if err := wr.insert(ctx, i, &p.msgs[i]); err != nil {
			return fmt.Errorf("simulate: write plan message %d (%s): %w", i, p.msgs[i].Category, err)
		}
		if progress != nil {
			progress(i+1, len(p.msgs))
		}
	}
	for len(wr.pending) > 0 {
		if err := wr.waitUntil(ctx, wr.pending[0].due); err != nil {
			return err
		}
		if err := wr.commitDue(ctx, true); err != nil {
			return err
		}
	}
	return nil
}

// waitUntil sleeps until t, committing late inserts as they fall due.
func (wr *writer) waitUntil(ctx context.Context, t time.Time) error {
	for {
		if err := wr.commitDue(ctx, false); err != nil {
			return err
		}
		if !time.Now().Before(t) {
			return nil
		}
		next := t
		for _, l := range wr.pending {
			if wr.lastCommitted > l.id && l.due.Before(next) {
				next = l.due
			}
		}
		timer := time.NewTimer(time.Until(next))
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
	}
}

// commitDue commits every late insert whose LateBy has passed and after
// whose id a row has committed (or, with force, every one whose LateBy has
// passed).
func (wr *writer) commitDue(ctx context.Context, force bool) error {
	now := time.Now()
	var due, rest []*lateInsert
	for _, l := range wr.pending {
		if !now.Before(l.due) && (force || wr.lastCommitted > l.id) {
			due = append(due, l)
		} else {
			rest = append(rest, l)
		}
	}
	wr.pending = rest
	for i, l := range due {
		if err := wr.commitLate(ctx, l); err != nil {
			wr.pending = append(wr.pending, due[i+1:]...)
			return err
		}
	}
	return nil
}

func (wr *writer) commitLate(ctx context.Context, l *lateInsert) error {
	var maxID int64
	var seen int
	if err := wr.db.QueryRowContext(ctx, queries["InboxVisible"], l.id).Scan(&maxID, &seen); err != nil {
		_ = l.tx.Rollback()
		return fmt.Errorf("simulate: write: read visible ids before late commit of %d: %w", l.id, err)
	}
	if err := l.tx.Commit(); err != nil {
		return fmt.Errorf("simulate: write: late commit of %d: %w", l.id, err)
	}
	wr.w.Late = append(wr.w.Late, LateCommit{ID: l.id, Index: l.idx, MaxVisibleBefore: maxID, VisibleBefore: seen > 0,
		HeldFor: time.Since(l.inserted)})
	return nil
}

// insert writes one plan message: committed, rolled back or left open.
func (wr *writer) insert(ctx context.Context, i int, m *Message) error {
	var content, received any
	if m.Raw != nil {
		content = string(m.Raw)
	}
	if !m.NullReceiveTime {
		received = time.Now()
	}
	var id int64
	switch {
	case m.Category == CategoryRollback || m.Late:
		tx, err := wr.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if id, err = insertID(tx.ExecContext(ctx, queries["InboxInsert"], content, received)); err != nil {
			return errors.Join(err, tx.Rollback())
		}
		if m.Category == CategoryRollback {
			if err := tx.Rollback(); err != nil {
				return err
			}
			wr.w.Holes = append(wr.w.Holes, id)
		} else {
			now := time.Now()
			wr.pending = append(wr.pending, &lateInsert{tx: tx, id: id, idx: i, inserted: now, due: now.Add(wr.lateBy)})
		}
	default:
		var err error
		if id, err = insertID(wr.db.ExecContext(ctx, queries["InboxInsert"], content, received)); err != nil {
			return err
		}
		wr.lastCommitted = id
	}
	if id <= wr.lastID {
		return fmt.Errorf("mailbox id %d after %d: ids not increasing (another writer?)", id, wr.lastID)
	}
	wr.lastID = id
	if m.Category != CategoryRollback {
		wr.w.Rows[id] = m.Outcome
		wr.w.Index[id] = i
	}
	return nil
}

func insertID(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// abort rolls back the late inserts still open: their ids become holes.
func (wr *writer) abort() error {
	var errs []error
	for _, l := range wr.pending {
		if err := l.tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			errs = append(errs, err)
		}
		delete(wr.w.Rows, l.id)
		delete(wr.w.Index, l.id)
		wr.w.Holes = append(wr.w.Holes, l.id)
	}
	wr.pending = nil
	slices.Sort(wr.w.Holes)
	return errors.Join(errs...)
}

// CheckMarks compares the PROCFLAG the pipeline wrote on every committed row
// with the expected outcome and returns one line per difference (a row
// still unmarked, marked otherwise, missing, or a hole that became visible);
// empty means every row is marked as expected. ctx bounds the query.
func (w *Written) CheckMarks(ctx context.Context, db *sql.DB) ([]string, error) {
	ids := make([]int64, 0, len(w.Rows)+len(w.Holes))
	for id := range w.Rows {
		ids = append(ids, id)
	}
	ids = append(ids, w.Holes...)
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	rows, err := db.QueryContext(ctx, queries["InboxMarks"], ids[0], ids[len(ids)-1])
	if err != nil {
		return nil, fmt.Errorf("simulate: check marks: %w", err)
	}
	defer rows.Close()
	marks := map[int64]sql.NullString{}
	for rows.Next() {
		var id int64
		var flag sql.NullString
		if err := rows.Scan(&id, &flag); err != nil {
			return nil, fmt.Errorf("simulate: check marks: %w", err)
		}
		marks[id] = flag
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("simulate: check marks: %w", err)
	}
	var diffs []string
	for _, id := range ids {
		flag, present := marks[id]
		want, committed := w.Rows[id]
		switch {
		case !committed:
			if present {
				diffs = append(diffs, fmt.Sprintf("mailbox %d: a rolled-back insert is visible", id))
			}
		case !present:
			diffs = append(diffs, fmt.Sprintf("mailbox %d %s: row missing", id, w.describe(id)))
		case !flag.Valid:
			diffs = append(diffs, fmt.Sprintf("mailbox %d %s: not marked, want %s", id, w.describe(id), want))
		case Outcome(flag.String) != want:
			diffs = append(diffs, fmt.Sprintf("mailbox %d %s: PROCFLAG %s, want %s", id, w.describe(id), flag.String, want))
		}
	}
	return diffs, nil
}

// describe names the plan message behind a mailbox id for a diff line.
func (w *Written) describe(id int64) string {
	if w.plan == nil {
		return ""
	}
	i := w.Index[id]
	m := &w.plan.msgs[i]
	s := fmt.Sprintf("(plan #%d %s/%s", i, m.Category, m.Variant)
	if m.Msg != nil {
		s += " " + m.Msg.Meta.Kind()
	}
	if m.Reason != "" {
		s += ": " + m.Reason
	}
	return s + ")"
}
