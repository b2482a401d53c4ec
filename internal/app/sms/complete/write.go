package complete

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/sms/route"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/relaywork"
)

// loadMessages locks the messages of attempts ids (in id order) and reads
// every attempt of each.
func (c *Completer) loadMessages(ctx context.Context, tx pgx.Tx, ids []int64) (map[int64]*message, error) {
	rows, err := tx.Query(ctx, stmts["AttemptMessages"], ids)
	if err != nil {
		return nil, fmt.Errorf("sms complete: messages of attempts: %w", err)
	}
	mids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("sms complete: messages of attempts: %w", err)
	}
	rows, err = tx.Query(ctx, stmts["MessagesLock"], mids)
	if err != nil {
		return nil, fmt.Errorf("sms complete: lock messages: %w", err)
	}
	msgs := make(map[int64]*message, len(mids))
	for rows.Next() {
		m := &message{}
		if err := rows.Scan(&m.id, &m.app, &m.account, &m.webhook, &m.clientID, &m.numbers, &m.carriers, &m.segments,
			&m.unit, &m.text, &m.state, &m.acceptedAt); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sms complete: lock messages: %w", err)
		}
		msgs[m.id] = m
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sms complete: lock messages: %w", err)
	}
	rows, err = tx.Query(ctx, stmts["AttemptsOfMessages"], mids)
	if err != nil {
		return nil, fmt.Errorf("sms complete: attempts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		a := &attempt{}
		if err := rows.Scan(&a.id, &a.message, &a.recipient, &a.no, &a.retryOf, &a.channel, &a.mode, &a.segments, &a.state,
			&a.createdAt); err != nil {
			return nil, fmt.Errorf("sms complete: attempts: %w", err)
		}
		if m := msgs[a.message]; m != nil {
			m.attempts = append(m.attempts, a)
		}
	}
	return msgs, rows.Err()
}

// loadFacts reads the submits and the facts of attempts ids.
func loadFacts(ctx context.Context, tx pgx.Tx, ids []int64) (map[int64][]Segment, map[int64][]Fact, error) {
	b := &pgx.Batch{}
	b.Queue(stmts["SubmitsOfAttempts"], ids)
	b.Queue(stmts["EventsOfAttempts"], ids)
	res := tx.SendBatch(ctx, b)
	defer res.Close()
	segs := map[int64][]Segment{}
	rows, err := res.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("sms complete: submits: %w", err)
	}
	for rows.Next() {
		var s Segment
		var sid, att int64
		if err := rows.Scan(&sid, &att, &s.Registered); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("sms complete: submits: %w", err)
		}
		s.SubmitID = uint64(sid)
		segs[att] = append(segs[att], s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("sms complete: submits: %w", err)
	}
	facts := map[int64][]Fact{}
	rows, err = res.Query()
	if err != nil {
		return nil, nil, fmt.Errorf("sms complete: facts: %w", err)
	}
	for rows.Next() {
		var f Fact
		var att, sid int64
		if err := rows.Scan(&f.ID, &att, &f.Kind, &sid, &f.State, &f.At); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("sms complete: facts: %w", err)
		}
		f.Submit = uint64(sid)
		facts[att] = append(facts[att], f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("sms complete: facts: %w", err)
	}
	return segs, facts, nil
}

// write commits a batch's plan in tx, in the lock order: the attempts and
// messages (locked already), the retries' attempts and submits, the work
// records, then the ledger per account in account order, and the outbox
// (the retries' commands, the notifications) last.
func (c *Completer) write(ctx context.Context, tx pgx.Tx, p *plan) error {
	if len(p.decideID) > 0 {
		tag, err := tx.Exec(ctx, stmts["AttemptsDecide"], p.decideID, p.decideState, p.decideWhy, p.now)
		if err != nil {
			return fmt.Errorf("sms complete: decide attempts: %w", err)
		}
		if tag.RowsAffected() != int64(len(p.decideID)) {
			return fmt.Errorf("sms complete: decide attempts: %d of %d still queued", tag.RowsAffected(), len(p.decideID))
		}
	}
	if len(p.noteID) > 0 {
		if _, err := tx.Exec(ctx, stmts["AttemptsNote"], p.noteID, p.noteText); err != nil {
			return fmt.Errorf("sms complete: note attempts: %w", err)
		}
	}
	if len(p.segID) > 0 {
		if _, err := tx.Exec(ctx, stmts["SubmitsFacts"], p.segID, p.segResult, p.segStat); err != nil {
			return fmt.Errorf("sms complete: segment facts: %w", err)
		}
	}
	if len(p.timeoutID) > 0 {
		if _, err := tx.Exec(ctx, stmts["TimeoutsRecord"], p.timeoutID, p.timeoutWhy, p.now); err != nil {
			return fmt.Errorf("sms complete: timeouts: %w", err)
		}
	}
	if len(p.resendID) > 0 {
		if _, err := tx.Exec(ctx, stmts["ResendsRecord"], p.resendID, p.resendNth, p.resendNote, p.now); err != nil {
			return fmt.Errorf("sms complete: resends: %w", err)
		}
	}
	var events []*relay.OutboxEvent
	if len(p.retries) > 0 {
		written, refused, err := route.Write(ctx, tx, p.retries, p.now, route.Options{RequireConnected: c.cfg.Route.RequireConnected})
		if err != nil {
			return fmt.Errorf("sms complete: %w", err)
		}
		if len(refused) > 0 {
			// The re-check found the chosen channel or registration gone
			// since the snapshot: the batch runs again (the next snapshot
			// will not choose it).
			return fmt.Errorf("sms complete: %d retries refused by the re-check; the batch runs again", len(refused))
		}
		ids := make([]int64, len(written))
		for i, a := range written {
			ids[i] = a.ID
		}
		if err := EnsureWork(ctx, tx, c.cfg.Work, ids, p.now, c.cfg.Deadlines); err != nil {
			return err
		}
		events = append(events, route.Events(written, c.cfg.CommandStream)...)
	}
	if len(p.completed) > 0 {
		body, err := json.Marshal(p.completed)
		if err != nil {
			return fmt.Errorf("sms complete: encode completions: %w", err)
		}
		tag, err := tx.Exec(ctx, stmts["MessagesComplete"], body, p.now)
		if err != nil {
			return fmt.Errorf("sms complete: complete messages: %w", err)
		}
		if tag.RowsAffected() != int64(len(p.completed)) {
			return fmt.Errorf("sms complete: complete messages: %d of %d still admitted", tag.RowsAffected(), len(p.completed))
		}
	}
	done, wakes := make([]relaywork.Claim, len(p.done)), make([]time.Time, len(p.done))
	for i, d := range p.done {
		done[i], wakes[i] = d.claim, d.wake
	}
	if err := c.cfg.Work.DoneMany(ctx, tx, done, wakes); err != nil {
		return err
	}
	if err := c.post(ctx, tx, p.entries); err != nil {
		return err
	}
	events = append(events, p.events...)
	if len(events) > 0 {
		slices.SortStableFunc(events, func(a, b *relay.OutboxEvent) int {
			return cmp.Or(cmp.Compare(a.Target, b.Target), cmp.Compare(a.Key, b.Key))
		})
		if _, err := relay.AppendEventsTx(ctx, c.cfg.Driver.WrapTx(tx), events...); err != nil {
			return fmt.Errorf("sms complete: queue commands and notifications: %w", err)
		}
	}
	faultpoint.Hit(faultpoint.SmsCompleteBeforeCommit)
	return nil
}

// post writes the ledger entries, one tenancy.PostMany per account, in
// account order.
func (c *Completer) post(ctx context.Context, tx pgx.Tx, byAccount map[int64][]tenancy.Entry) error {
	accts := make([]int64, 0, len(byAccount))
	for id := range byAccount {
		if id == 0 {
			return errors.New("sms complete: a message's enterprise has no account")
		}
		accts = append(accts, id)
	}
	slices.Sort(accts)
	for _, id := range accts {
		es := byAccount[id]
		for i := range es {
			es[i].AccountID = id
		}
		res, err := tenancy.PostMany(ctx, tx, es)
		if err != nil {
			return fmt.Errorf("sms complete: settle on account %d: %w", id, err)
		}
		for i, r := range res {
			if r.Refused != nil {
				return fmt.Errorf("sms complete: settle %s: refused: %w", es[i].IdemKey, r.Refused)
			}
		}
	}
	return nil
}
