package load

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaytype"
)

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("load/queries.sql", queriesSQL, "DrainProgress", "DrainPending", "SubmitRate")

// PollDefault is how often Drain looks at the messages, at most: a look
// that took longer than PollDefault/pollShare is followed by a wait of
// pollShare times as long, so the watching never takes more than about a
// pollShare-th of one of the server's cores from the chain it watches (a
// look probes every message still undecided, thousands at the end of a
// high tier).
const PollDefault = 100 * time.Millisecond

// pollShare: see PollDefault.
const pollShare = 20

// ErrDrainTimeout is returned (wrapped, with the counts) by Drain when the
// timeout passed before every message was decided.
var ErrDrainTimeout = errors.New("load: drain timed out")

// DrainResult is where Drain stopped.
type DrainResult struct {
	// Total is the number of messages accepted since the tier began; Done
	// those refused or completed.
	Total, Done int
	// Elapsed is the time Drain waited.
	Elapsed time.Duration
}

// Drain waits until every sms_message accepted at or after since is refused
// or completed, looking every PollDefault on clock, and calls progress (when
// not nil) after each look with the counts. It returns ErrDrainTimeout
// (wrapped) when timeout passes first (0: no timeout) and ctx's error when
// ctx ends.
//
// The watching must not take the CPU the chain needs to drain: one scan of
// the tier's messages finds those undecided, the polls after it probe only
// those by primary key, and the end is confirmed by another scan (which also
// sees any message accepted after the first one).
func Drain(ctx context.Context, pool *pgxpool.Pool, since time.Time, clock relaytype.Clock, timeout time.Duration,
	progress func(done, total int)) (DrainResult, error) {
	if pool == nil || clock == nil {
		return DrainResult{}, errors.New("load: drain: pool and clock are required")
	}
	began := clock.Now()
	var total int
	var pending []int64
	scan := true
	for {
		var err error
		looked := clock.Now()
		if scan {
			err = pool.QueryRow(ctx, stmts["DrainProgress"], since, nil).Scan(&total, &pending)
		} else {
			err = pool.QueryRow(ctx, stmts["DrainPending"], pending).Scan(&pending)
		}
		if err != nil {
			return DrainResult{}, fmt.Errorf("load: drain: %w", err)
		}
		res := DrainResult{Total: total, Done: total - len(pending), Elapsed: clock.Now().Sub(began)}
		if progress != nil {
			progress(res.Done, total)
		}
		if len(pending) == 0 {
			if scan {
				return res, nil
			}
			scan = true // confirm at once: a message accepted after the last scan
			continue
		}
		scan = false
		if timeout > 0 && res.Elapsed >= timeout {
			return res, fmt.Errorf("%w after %s: %d of %d messages decided", ErrDrainTimeout, timeout, res.Done, res.Total)
		}
		select {
		case <-clock.After(max(PollDefault, pollShare*clock.Now().Sub(looked))):
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
}

// Window delimits a tier by the messages' accepted_at: From inclusive, To
// exclusive (zero: no end).
type Window struct {
	From, To time.Time
}

// SubmitRateResult is a tier's full supplier submit rate.
type SubmitRateResult struct {
	// Messages is the tier's messages; Full those whose every recipient's
	// first attempt had every segment accepted by the supplier (the gateway
	// settled it ACCEPTED): first submits only, retries never count.
	// Segments is the supplier submits of the Full messages.
	Messages, Full, Segments int64
	// From is the tier's first accept (the API's accepted_at), To the last
	// settle of a Full message's first-attempt submit (gateway_submit
	// settled_at).
	From, To time.Time
	// PerSecond is Full / (To − From): full supplier submits per second.
	PerSecond float64
}

// SubmitRate measures the tier in w: full supplier submits per second
// counted at the gateway's settlement, as "messages whose first attempt
// went through whole". The gateway's table must be in pool's database.
func SubmitRate(ctx context.Context, pool *pgxpool.Pool, w Window) (SubmitRateResult, error) {
	var r SubmitRateResult
	var to any
	if !w.To.IsZero() {
		to = w.To
	}
	var from, last *time.Time
	if err := pool.QueryRow(ctx, stmts["SubmitRate"], w.From, to).Scan(&r.Full, &r.Segments, &r.Messages, &from, &last); err != nil {
		return r, fmt.Errorf("load: submit rate: %w", err)
	}
	if from != nil {
		r.From = from.UTC()
	}
	if last != nil {
		r.To = last.UTC()
	}
	if d := r.To.Sub(r.From); r.Full > 0 && d > 0 {
		r.PerSecond = float64(r.Full) / d.Seconds()
	}
	return r, nil
}
