package smscrash

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/internal/app/sms/supplier"
)

// Check names what Reconcile compares: a run whose commands were submitIds
// 1 to Commands, pushed as Entries entries on CommandStream.
type Check struct {
	// DB holds the gateway_submit table.
	DB *pgxpool.Pool
	// Redis holds CommandStream (consumed by Group) and ResultStream.
	Redis                              redis.UniversalClient
	CommandStream, ResultStream, Group string
	// Record is the supplier's record file, read after the supplier stopped.
	Record string
	// Commands is the number of submitIds (1 to Commands); Entries the
	// number of command entries pushed (duplicates included).
	Commands, Entries int
}

// Report is what Reconcile found.
type Report struct {
	// Rows counts the gateway_submit rows per state.
	Rows map[gateway.State]int
	// Accepted and Rejected count submitIds settled so; UnknownSubmitted
	// the UNKNOWN ones the supplier's record holds (the Submit reached it),
	// UnknownNotSubmitted those it does not.
	Accepted, Rejected, UnknownSubmitted, UnknownNotSubmitted int
	// RecordSubmits counts the Submits in the supplier's record, Boots the
	// supplier's lives on it.
	RecordSubmits, Boots int
	// Results counts the entries of the result stream, ReEmitted those that
	// repeat an event id already written.
	Results, ReEmitted int
	// Pending is the group's XPENDING count; Undelivered the command
	// entries the group has not read yet.
	Pending, Undelivered int64
	// Problems lists every broken rule, one line each; empty when the run
	// is clean.
	Problems []string
}

// OK reports whether no problem was found.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// Write prints the figures and, when there are problems, up to 20 of them.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "rows:      %d accepted, %d rejected, %d unknown (%d of them in the supplier's record, %d not), %d claimed, %d not sent\n",
		r.Accepted, r.Rejected, r.UnknownSubmitted+r.UnknownNotSubmitted, r.UnknownSubmitted, r.UnknownNotSubmitted,
		r.Rows[gateway.StateClaimed], r.Rows[gateway.StateNotSent])
	fmt.Fprintf(w, "supplier:  %d submits recorded over %d supplier lives\n", r.RecordSubmits, r.Boots)
	fmt.Fprintf(w, "results:   %d written, %d of them re-emitted copies\n", r.Results, r.ReEmitted)
	fmt.Fprintf(w, "queue:     %d pending, %d undelivered\n", r.Pending, r.Undelivered)
	if r.OK() {
		fmt.Fprintln(w, "ok: every submitId submitted at most once (exactly once when accepted), settled, "+
			"its result written with identical copies and equal to its row; nothing pending")
		return
	}
	fmt.Fprintf(w, "FAILED: %d problems: %s\n", len(r.Problems), r.problemList(20))
}

// problemList joins the first k problems.
func (r *Report) problemList(k int) string {
	s := strings.Join(r.Problems[:min(k, len(r.Problems))], "; ")
	if len(r.Problems) > k {
		s += fmt.Sprintf("; and %d more", len(r.Problems)-k)
	}
	return s
}

// row is one gateway_submit row as reconciled.
type row struct {
	state  gateway.State
	msgID  uint64
	result string
}

// Reconcile checks a finished run against its rules, all of them derived
// from the record, the table and the streams alone:
//
//   - every submitId has one gateway_submit row, settled ACCEPTED, REJECTED
//     or UNKNOWN (never CLAIMED or NOT_SENT), and no other row exists;
//   - in the supplier's record every Submit carries a pushed submitId as
//     its key, and no key appears twice: nothing was submitted twice;
//   - ACCEPTED: the key appears exactly once, with the row's Msg_Id;
//     REJECTED: not at all (the supplier records accepted Submits only);
//     UNKNOWN: once or not at all (counted apart);
//   - the result stream holds at least one result per submitId and no
//     other; every copy of one event id carries identical values, equal to
//     the row's state, Msg_Id and result;
//   - the command stream holds Entries entries, all delivered to the group
//     and acked (XPENDING 0, nothing undelivered).
//
// It returns an error only when it cannot read something.
func Reconcile(ctx context.Context, c Check) (*Report, error) {
	rep := &Report{Rows: map[gateway.State]int{}}
	bad := func(f string, a ...any) { rep.Problems = append(rep.Problems, fmt.Sprintf(f, a...)) }
	inRange := func(id uint64) bool { return id >= 1 && id <= uint64(c.Commands) }

	rows, err := loadRows(ctx, c.DB)
	if err != nil {
		return nil, err
	}
	for id, rw := range rows {
		rep.Rows[rw.state]++
		if !inRange(id) {
			bad("gateway_submit holds submitId %d, never pushed", id)
		}
	}
	for id := uint64(1); id <= uint64(c.Commands); id++ {
		rw, ok := rows[id]
		switch {
		case !ok:
			bad("submitId %d: no gateway_submit row", id)
		case rw.state != gateway.StateAccepted && rw.state != gateway.StateRejected && rw.state != gateway.StateUnknown:
			bad("submitId %d: left %s", id, rw.state)
		}
	}

	rec, err := supplier.ReadRecord(c.Record)
	if err != nil {
		return nil, err
	}
	rep.RecordSubmits, rep.Boots = len(rec.Entries), rec.Boots
	if rec.TornTail {
		bad("the supplier's record ends in a partial line")
	}
	submits := map[uint64]int{}
	msgIDs := map[uint64]uint64{}
	for _, e := range rec.Entries {
		id, err := strconv.ParseUint(e.Key, 10, 64)
		if err != nil || !inRange(id) {
			bad("the supplier's record holds a Submit with key %q, never pushed", e.Key)
			continue
		}
		if submits[id]++; submits[id] == 2 {
			bad("submitId %d: submitted more than once", id)
		}
		msgIDs[id] = e.MsgID
	}
	for id := uint64(1); id <= uint64(c.Commands); id++ {
		rw, ok := rows[id]
		if !ok {
			continue
		}
		k := submits[id]
		switch rw.state {
		case gateway.StateAccepted:
			rep.Accepted++
			switch {
			case k != 1:
				bad("submitId %d: ACCEPTED, in the supplier's record %d times", id, k)
			case msgIDs[id] != rw.msgID:
				bad("submitId %d: ACCEPTED with Msg_Id %d, the supplier's record says %d", id, rw.msgID, msgIDs[id])
			}
		case gateway.StateRejected:
			rep.Rejected++
			if k != 0 {
				bad("submitId %d: REJECTED, in the supplier's record %d times", id, k)
			}
		case gateway.StateUnknown:
			if k == 0 {
				rep.UnknownNotSubmitted++
			} else {
				rep.UnknownSubmitted++
			}
		}
	}

	first := map[uint64]gateway.Result{}
	err = scanStream(ctx, c.Redis, c.ResultStream, func(m redis.XMessage) {
		rep.Results++
		res, err := gateway.ParseResult(m.Values)
		switch {
		case err != nil:
			bad("result %s: %v", m.ID, err)
			return
		case !inRange(res.SubmitID) || res.EventID != gateway.SubmitEventID(res.SubmitID):
			bad("result %s: event %q, submitId %d: not a pushed submitId's result", m.ID, res.EventID, res.SubmitID)
			return
		}
		f, seen := first[res.SubmitID]
		if !seen {
			first[res.SubmitID] = res
			return
		}
		rep.ReEmitted++
		if f != res {
			bad("event %s: copies differ: %+v, then %+v", res.EventID, f, res)
		}
	})
	if err != nil {
		return nil, err
	}
	for id := uint64(1); id <= uint64(c.Commands); id++ {
		res, ok := first[id]
		rw, hasRow := rows[id]
		switch {
		case !ok:
			bad("submitId %d: no result", id)
		case hasRow && (res.State != rw.state || res.MsgID != rw.msgID || res.Result != rw.result):
			bad("submitId %d: result %s msg_id %d %q, row %s msg_id %d %q", id, res.State, res.MsgID, res.Result,
				rw.state, rw.msgID, rw.result)
		}
	}

	entries, err := c.Redis.XLen(ctx, c.CommandStream).Result()
	if err != nil {
		return nil, fmt.Errorf("smscrash: XLEN %s: %w", c.CommandStream, err)
	}
	if entries != int64(c.Entries) {
		bad("the command stream holds %d entries, %d were pushed", entries, c.Entries)
	}
	q, err := queueState(ctx, c.Redis, c.CommandStream, c.Group)
	if err != nil {
		return nil, err
	}
	rep.Pending, rep.Undelivered = q.pending, q.undelivered
	if q.pending != 0 {
		bad("%d command entries pending (delivered, never acked)", q.pending)
	}
	if q.undelivered != 0 {
		bad("%d command entries never delivered to the group", q.undelivered)
	}
	return rep, nil
}

func loadRows(ctx context.Context, db *pgxpool.Pool) (map[uint64]row, error) {
	rs, err := db.Query(ctx, stmts["Rows"])
	if err != nil {
		return nil, fmt.Errorf("smscrash: read gateway_submit: %w", err)
	}
	defer rs.Close()
	out := map[uint64]row{}
	for rs.Next() {
		var id, state, msgID string
		var rw row
		if err := rs.Scan(&id, &state, &msgID, &rw.result); err != nil {
			return nil, fmt.Errorf("smscrash: read gateway_submit: %w", err)
		}
		rw.state = gateway.State(state)
		n, err := strconv.ParseUint(id, 10, 64)
		if err == nil && msgID != "" {
			rw.msgID, err = strconv.ParseUint(msgID, 10, 64)
		}
		if err != nil {
			return nil, fmt.Errorf("smscrash: read gateway_submit: submit %s: %w", id, err)
		}
		out[n] = rw
	}
	return out, rs.Err()
}

// scanStream calls f on every entry of stream, in order, 1,000 at a time.
func scanStream(ctx context.Context, rdb redis.UniversalClient, stream string, f func(redis.XMessage)) error {
	start := "-"
	for {
		msgs, err := rdb.XRangeN(ctx, stream, start, "+", 1000).Result()
		if err != nil {
			return fmt.Errorf("smscrash: XRANGE %s: %w", stream, err)
		}
		for _, m := range msgs {
			f(m)
		}
		if len(msgs) < 1000 {
			return nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// queue is a consumer group's state on its stream.
type queue struct {
	// pending is XPENDING's count; undelivered the entries after the
	// group's last delivered id.
	pending, undelivered int64
}

// queueState reads group's state on stream. A group that does not exist
// yet has delivered nothing.
func queueState(ctx context.Context, rdb redis.UniversalClient, stream, group string) (queue, error) {
	groups, err := rdb.XInfoGroups(ctx, stream).Result()
	if err != nil && !strings.Contains(err.Error(), "no such key") {
		return queue{}, fmt.Errorf("smscrash: XINFO GROUPS %s: %w", stream, err)
	}
	last := "0-0"
	var q queue
	for _, g := range groups {
		if g.Name == group {
			last, q.pending = g.LastDeliveredID, g.Pending
		}
	}
	// Counted, not XINFO's lag: lag is unknown (-1) in some states of a
	// stream, and the count is what the rule is about.
	msgs, err := rdb.XRangeN(ctx, stream, "("+last, "+", 1<<20).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return queue{}, fmt.Errorf("smscrash: XRANGE %s: %w", stream, err)
	}
	q.undelivered = int64(len(msgs))
	return q, nil
}
