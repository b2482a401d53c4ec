package relayintake

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaysource"
	"github.com/relayhq/relay/relaytype"
)

// A late row is a source row whose id was released as a permanent hole and
// that became visible afterwards: its transaction committed later than
// Config.MaxCommitDelay. The design accepts that such a row is not enqueued
// (seed 000 §4.1 step 4), but never silently: the intake finds it, marks the
// hole found (once), counts it and logs it once; an operator ingests it
// explicitly with IngestLate. Nothing ingests it automatically.

// lateDue reports whether a late-row check should run at now.
func (in *Intake) lateDue(now time.Time) bool {
	return in.cfg.LateCheckWindow >= 0 &&
		(in.lateChecked.IsZero() || now.Sub(in.lateChecked) >= in.cfg.LateCheckInterval)
}

// checkLate looks for rows in the unfound holes released within
// LateCheckWindow (at most LateCheckLimit ids, oldest id first): one bounded
// range read per run of consecutive hole ids, so the cost is one store query
// plus one source query per run. Each row found marks its hole found; only
// the call that marks it counts and logs it. It returns how many it marked.
func (in *Intake) checkLate(ctx context.Context, now time.Time) (int, error) {
	p := in.cfg.Queue
	ex := in.driver.GetExecutor()
	holes, err := ex.HoleListUnfound(ctx, p, now.Add(-in.cfg.LateCheckWindow), in.cfg.LateCheckLimit)
	if err != nil {
		return 0, fmt.Errorf("relayintake: queue %q: late check: %w", p, err)
	}
	found := 0
	for i := 0; i < len(holes); {
		// holes[i:j] is a run of consecutive ids.
		j := i + 1
		for j < len(holes) && holes[j].ID == holes[j-1].ID+1 {
			j++
		}
		first, last := holes[i].ID, holes[j-1].ID
		rows, err := in.src.ReadAfter(ctx, first-1, j-i)
		if err != nil {
			return found, fmt.Errorf("relayintake: queue %q: late check: read source ids %d..%d: %w", p, first, last, err)
		}
		released := make(map[int64]time.Time, j-i)
		for _, h := range holes[i:j] {
			released[h.ID] = h.ReleasedAt
		}
		for _, r := range rows {
			if r.ID < first || r.ID > last {
				continue // a row after the run: enqueued by the intake already
			}
			ok, err := ex.HoleMarkFound(ctx, p, r.ID, now)
			if err != nil {
				return found, fmt.Errorf("relayintake: queue %q: late check: %w", p, err)
			}
			if !ok {
				continue // found already (another instance): counted there
			}
			found++
			in.m.late.Inc()
			in.cfg.Logger.WarnContext(ctx, "intake: late row found in a released permanent hole; not enqueued (ingest it explicitly: relay admin late-ingest)",
				"queue", p, "id", r.ID, "released_at", released[r.ID], "found_at", now,
				"max_commit_delay", in.cfg.MaxCommitDelay)
		}
		i = j
	}
	return found, nil
}

// LateRows returns the queue's late rows (holes whose row was found after
// their release), ingested or not, in id order. It reads the store only and
// is safe to call while Run runs. ctx governs the read.
func (in *Intake) LateRows(ctx context.Context) ([]*relaytype.Hole, error) {
	hs, err := in.driver.GetExecutor().HoleListFound(ctx, in.cfg.Queue)
	if err != nil {
		return nil, fmt.Errorf("relayintake: queue %q: late rows: %w", in.cfg.Queue, err)
	}
	return hs, nil
}

// Outcomes of IngestLate per id.
const (
	// IngestOutcomeIngested: the row was enqueued now.
	IngestOutcomeIngested = "ingested"
	// IngestOutcomeAlready: the row was ingested before; nothing was enqueued.
	IngestOutcomeAlready = "already_ingested"
	// IngestOutcomeNotLate: the id is not a late row found by the intake (not
	// a hole, or its row was not found); nothing was enqueued.
	IngestOutcomeNotLate = "not_late"
	// IngestOutcomeRowGone: the source no longer has the row; nothing was
	// enqueued.
	IngestOutcomeRowGone = "row_gone"
	// IngestOutcomeIDTaken: a message with the id exists already (enqueued by
	// another writer); nothing was enqueued and the hole stays not ingested.
	IngestOutcomeIDTaken = "id_taken"
)

// IngestLateResult is the outcome of ingesting one late row.
type IngestLateResult struct {
	// ID is the late row's (and hole's) id.
	ID int64 `json:"id"`
	// Outcome is one of the IngestOutcome constants.
	Outcome string `json:"outcome"`
	// MessageID is the message the row was ingested as (now or before); 0
	// when none.
	MessageID int64 `json:"message_id"`
}

// IngestLateMax is the most ids one IngestLate call takes.
const IngestLateMax = 1000

// IngestLate enqueues the given late rows, each as a message of the queue,
// with the row's key and payload read from the source now. It is the
// operator's explicit action; the intake never calls it.
//
// The message keeps the row's id (MSG_ID = source id, seed 000 §1.2): the id
// is a released hole below the watermark, so no message has it, and the
// engine claims it next as the smallest unfinished id. A store-allocated id
// could collide with a source id still to come, whose row the intake would
// then skip as present. Each row is enqueued in one transaction with
// HoleMarkIngested, so a second call for the same id enqueues nothing and
// reports IngestOutcomeAlready. After a commit it calls Config.Notify. ctx
// governs every call; an error stops the call (the rows ingested before it
// stay ingested and are in the result).
func (in *Intake) IngestLate(ctx context.Context, ids []int64) ([]IngestLateResult, error) {
	p := in.cfg.Queue
	if len(ids) == 0 || len(ids) > IngestLateMax {
		return nil, fmt.Errorf("relayintake: queue %q: ingest late: %d ids (want 1..%d)", p, len(ids), IngestLateMax)
	}
	found, err := in.LateRows(ctx)
	if err != nil {
		return nil, err
	}
	late := make(map[int64]*relaytype.Hole, len(found))
	for _, h := range found {
		late[h.ID] = h
	}
	out := make([]IngestLateResult, 0, len(ids))
	for _, id := range ids {
		res := IngestLateResult{ID: id}
		h := late[id]
		switch {
		case h == nil:
			res.Outcome = IngestOutcomeNotLate
		case !h.IngestedAt.IsZero():
			res.Outcome, res.MessageID = IngestOutcomeAlready, h.IngestedID
		default:
			rows, err := in.src.ReadAfter(ctx, id-1, 1)
			if err != nil {
				return out, fmt.Errorf("relayintake: queue %q: ingest late %d: read source: %w", p, id, err)
			}
			if len(rows) == 0 || rows[0].ID != id {
				res.Outcome = IngestOutcomeRowGone
				break
			}
			if res.Outcome, err = in.ingestRow(ctx, rows[0]); err != nil {
				return out, err
			}
			if res.Outcome != IngestOutcomeIDTaken {
				res.MessageID = id
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// errIngestRollback rolls back an ingest that must not commit.
var errIngestRollback = errors.New("rollback")

// ingestRow enqueues one late row and marks its hole ingested, in one
// transaction.
func (in *Intake) ingestRow(ctx context.Context, r relaysource.Row) (string, error) {
	p := in.cfg.Queue
	now := in.cfg.Clock.Now()
	outcome := IngestOutcomeIngested
	err := in.inTx(ctx, func(tx relaydriver.ExecutorTx) error {
		params, err := relay.InsertParams(p, now, &relay.EnqueueParams{ID: r.ID, Key: r.Key, Payload: r.Payload, ReceivedAt: r.ReceivedAt})
		if err != nil {
			return err
		}
		res, err := tx.MessageInsertMany(ctx, params)
		if err != nil {
			return err
		}
		if res.Inserted != 1 {
			outcome = IngestOutcomeIDTaken
			return errIngestRollback
		}
		ok, err := tx.HoleMarkIngested(ctx, p, r.ID, r.ID, now)
		if err != nil {
			return err
		}
		if !ok {
			outcome = IngestOutcomeAlready // a concurrent ingest won
			return errIngestRollback
		}
		return nil
	})
	switch {
	case errors.Is(err, errIngestRollback):
		return outcome, nil
	case err != nil:
		return "", fmt.Errorf("relayintake: queue %q: ingest late %d: %w", p, r.ID, err)
	}
	in.cfg.Logger.WarnContext(ctx, "intake: late row ingested by an operator", "queue", p, "id", r.ID)
	in.mu.Lock()
	notify := in.cfg.Notify
	in.mu.Unlock()
	if notify != nil {
		notify()
	}
	return outcome, nil
}

// inTx runs fn in a transaction, committing when it returns nil and rolling
// back otherwise.
func (in *Intake) inTx(ctx context.Context, fn func(tx relaydriver.ExecutorTx) error) error {
	tx, err := in.driver.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err = fn(tx); err == nil {
		if err = tx.Commit(ctx); err == nil {
			return nil
		}
		err = fmt.Errorf("commit: %w", err)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	if rerr := tx.Rollback(rctx); rerr != nil {
		err = errors.Join(err, fmt.Errorf("rollback: %w", rerr))
	}
	return err
}
