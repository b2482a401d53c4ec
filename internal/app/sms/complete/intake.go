package complete

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/relayhq/relay/internal/app/sms/gateway"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/relaytype"
	"github.com/relayhq/relay/relaywork"
)

// Defaults of IntakeConfig.
const (
	// GroupDefault is the intake's consumer group on the result and report
	// streams.
	GroupDefault = "sms-callback"
	// IntakeReadCountDefault is the most entries one read takes (across
	// both streams): one transaction records them.
	IntakeReadCountDefault = 256
	// IntakeMinIdleDefault is how long an entry stays pending with another
	// consumer before this one takes it over (XAUTOCLAIM).
	IntakeMinIdleDefault = time.Minute
	// IntakeClaimIntervalDefault is how often pending entries are checked
	// for takeover and parked reports swept.
	IntakeClaimIntervalDefault = 5 * time.Second
	// SweepLimitDefault bounds one sweep of parked reports.
	SweepLimitDefault = 500
)

// WorkQueue is the relaywork queue of the completion: one work record per
// attempt, key WorkKey(attempt).
const WorkQueue = "sms-completion"

// WorkKey is the work key of an attempt.
func WorkKey(attempt int64) string { return "attempt:" + strconv.FormatInt(attempt, 10) }

// attemptOfKey is the attempt of a work key.
func attemptOfKey(key string) (int64, error) {
	s, ok := strings.CutPrefix(key, "attempt:")
	if !ok {
		return 0, fmt.Errorf("sms complete: work key %s is not an attempt's", relaytype.QuoteValue(key))
	}
	return strconv.ParseInt(s, 10, 64)
}

// IntakeConfig configures NewIntake.
type IntakeConfig struct {
	// Pool is the PostgreSQL pool of the intake: its own, apart from the
	// stages that feed the gateway (a backlog of callbacks must not take
	// their connections). Required.
	Pool *pgxpool.Pool
	// Redis holds the gateway's streams. Required.
	Redis *redis.Client
	// Work is the completion's work store (queue WorkQueue). Required.
	Work *relaywork.Store
	// Clock stamps received_at and paces the loops. Required.
	Clock relaytype.Clock
	// Consumer names this process in the group; required.
	Consumer string
	// Group, ResultStream, ReportStream: defaults GroupDefault and the
	// gateway's stream defaults.
	Group, ResultStream, ReportStream string
	// ReadCount, Block, MinIdle, ClaimInterval, SweepLimit: defaults
	// above; Block is the XREADGROUP wait (default one second).
	ReadCount     int
	Block         time.Duration
	MinIdle       time.Duration
	ClaimInterval time.Duration
	SweepLimit    int
	// Logger: default slog.Default(). Logs never carry a number or content.
	Logger *slog.Logger
}

// IntakeStats counts what the intake did since it started. Raced counts
// batches run again because a submit they write changed under them.
type IntakeStats struct {
	Batches, Entries, Events, Matched, Malformed, MO, Raced int64
}

// errSubmitChanged: a submit a batch writes (its Msg_Id, or the result of a
// segment awaiting its report) was changed by another transaction after the
// batch's snapshot; ResultsRecord's write did not see the new row. The
// batch's transaction is rolled back and run again (submitChangedTries in
// all), then left pending like any failed batch.
var errSubmitChanged = errors.New("a submit changed under the batch")

const submitChangedTries = 3

// Intake reads the gateway's result and report streams into the
// completion's event log: one transaction per read records every fact
// (results, late SubmitResps, reports; a report not matchable yet is
// parked), matches parked reports the batch's results made matchable, and
// bumps the work record of every attempt with a new fact; the entries are
// acked only after the commit. A crash before the commit leaves them
// pending (read again); after it, the facts are stored once however often
// they are delivered.
type Intake struct {
	cfg IntakeConfig
	log *slog.Logger

	batches, entries, events, matched, malformed, mo, raced atomic.Int64
}

// NewIntake returns an intake.
func NewIntake(cfg IntakeConfig) (*Intake, error) {
	switch {
	case cfg.Pool == nil:
		return nil, errors.New("sms complete: IntakeConfig.Pool is nil")
	case cfg.Redis == nil:
		return nil, errors.New("sms complete: IntakeConfig.Redis is nil")
	case cfg.Work == nil:
		return nil, errors.New("sms complete: IntakeConfig.Work is nil")
	case cfg.Clock == nil:
		return nil, errors.New("sms complete: IntakeConfig.Clock is nil")
	case cfg.Consumer == "":
		return nil, errors.New("sms complete: IntakeConfig.Consumer is empty")
	}
	cfg.Group = cmp.Or(cfg.Group, GroupDefault)
	cfg.ResultStream = cmp.Or(cfg.ResultStream, gateway.ResultStreamDefault)
	cfg.ReportStream = cmp.Or(cfg.ReportStream, gateway.ReportStreamDefault)
	cfg.ReadCount = cmp.Or(cfg.ReadCount, IntakeReadCountDefault)
	cfg.Block = cmp.Or(cfg.Block, time.Second)
	cfg.MinIdle = cmp.Or(cfg.MinIdle, IntakeMinIdleDefault)
	cfg.ClaimInterval = cmp.Or(cfg.ClaimInterval, IntakeClaimIntervalDefault)
	cfg.SweepLimit = cmp.Or(cfg.SweepLimit, SweepLimitDefault)
	in := &Intake{cfg: cfg, log: cfg.Logger}
	if in.log == nil {
		in.log = slog.Default()
	}
	return in, nil
}

// Stats returns the counts so far.
func (in *Intake) Stats() IntakeStats {
	return IntakeStats{Batches: in.batches.Load(), Entries: in.entries.Load(), Events: in.events.Load(),
		Matched: in.matched.Load(), Malformed: in.malformed.Load(), MO: in.mo.Load(), Raced: in.raced.Load()}
}

// Run creates the group on both streams (from their start), reads this
// consumer's own pending entries, then new ones, until ctx ends; every
// ClaimInterval it takes over entries idle with other consumers and sweeps
// parked reports. A failed batch is left pending and read again after a
// pause. It returns nil when ctx ends.
func (in *Intake) Run(ctx context.Context) error {
	if err := in.Init(ctx); err != nil {
		return err
	}
	if err := in.drainOwn(ctx); err != nil && ctx.Err() == nil {
		in.log.Warn("sms intake: own pending entries", "err", err)
	}
	next := in.cfg.Clock.Now().Add(in.cfg.ClaimInterval)
	for ctx.Err() == nil {
		if !in.cfg.Clock.Now().Before(next) {
			in.housekeep(ctx)
			next = in.cfg.Clock.Now().Add(in.cfg.ClaimInterval)
		}
		res, err := in.cfg.Redis.XReadGroup(ctx, &redis.XReadGroupArgs{Group: in.cfg.Group, Consumer: in.cfg.Consumer,
			Streams: []string{in.cfg.ResultStream, in.cfg.ReportStream, ">", ">"}, Count: int64(in.cfg.ReadCount),
			Block: in.cfg.Block}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if isNoGroup(err) {
			// A stream or the group is gone (a Redis restarted without
			// persistence): create them again and read on. What was lost
			// is decided by the deadlines.
			if err = in.Init(ctx); err == nil {
				in.log.Warn("sms intake: the consumer group was gone; created again", "group", in.cfg.Group)
				continue
			}
		}
		if err == nil {
			err = in.Process(ctx, res)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			in.log.Warn("sms intake: batch left pending", "err", err)
			in.pause(ctx, time.Second)
		}
	}
	return nil
}

// Init creates the consumer group on both streams (from their start) if it
// does not exist. Run calls it.
func (in *Intake) Init(ctx context.Context) error {
	for _, s := range []string{in.cfg.ResultStream, in.cfg.ReportStream} {
		err := in.cfg.Redis.XGroupCreateMkStream(ctx, s, in.cfg.Group, "0").Err()
		if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			return fmt.Errorf("sms intake: create group %q on %q: %w", in.cfg.Group, s, err)
		}
	}
	return nil
}

// ReadOnce reads what is new on both streams now (no wait) and processes
// it as one batch; it returns how many entries it read.
func (in *Intake) ReadOnce(ctx context.Context) (int, error) {
	res, err := in.cfg.Redis.XReadGroup(ctx, &redis.XReadGroupArgs{Group: in.cfg.Group, Consumer: in.cfg.Consumer,
		Streams: []string{in.cfg.ResultStream, in.cfg.ReportStream, ">", ">"}, Count: int64(in.cfg.ReadCount),
		Block: -1}).Result()
	if isNoGroup(err) {
		// Gone (see Run): created again; nothing to read in new streams.
		return 0, in.Init(ctx)
	}
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sms intake: read: %w", err)
	}
	n := 0
	for _, s := range res {
		n += len(s.Messages)
	}
	return n, in.Process(ctx, res)
}

func (in *Intake) pause(ctx context.Context, d time.Duration) {
	select {
	case <-in.cfg.Clock.After(d):
	case <-ctx.Done():
	}
}

// drainOwn processes this consumer's pending entries (a previous life's).
func (in *Intake) drainOwn(ctx context.Context) error {
	for _, s := range []string{in.cfg.ResultStream, in.cfg.ReportStream} {
		start := "0"
		for ctx.Err() == nil {
			res, err := in.cfg.Redis.XReadGroup(ctx, &redis.XReadGroupArgs{Group: in.cfg.Group, Consumer: in.cfg.Consumer,
				Streams: []string{s, start}, Count: int64(in.cfg.ReadCount), Block: -1}).Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			if len(res) == 0 || len(res[0].Messages) == 0 {
				break
			}
			if err := in.Process(ctx, res); err != nil {
				return err
			}
			start = res[0].Messages[len(res[0].Messages)-1].ID
		}
	}
	return nil
}

// housekeep takes over idle pending entries and sweeps parked reports.
func (in *Intake) housekeep(ctx context.Context) {
	for _, s := range []string{in.cfg.ResultStream, in.cfg.ReportStream} {
		start := "0-0"
		for ctx.Err() == nil {
			msgs, next, err := in.cfg.Redis.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: s, Group: in.cfg.Group,
				MinIdle: in.cfg.MinIdle, Start: start, Count: int64(in.cfg.ReadCount), Consumer: in.cfg.Consumer}).Result()
			if err != nil {
				in.log.Warn("sms intake: xautoclaim", "stream", s, "err", err)
				break
			}
			if len(msgs) > 0 {
				if err := in.Process(ctx, []redis.XStream{{Stream: s, Messages: msgs}}); err != nil {
					in.log.Warn("sms intake: claimed batch left pending", "err", err)
					break
				}
			}
			if next == "0-0" || next == "" {
				break
			}
			start = next
		}
	}
	if _, err := in.Sweep(ctx); err != nil && ctx.Err() == nil {
		in.log.Warn("sms intake: sweep parked reports", "err", err)
	}
}

// batch is one read's facts, by statement.
type batch struct {
	rKey, rChan, rKind, rState, rMsg, rDetail []string
	rSubmit                                   []int64
	pKey, pChan, pMsg, pStat                  []string
	newMsgIDs                                 []string
	xKey, xSource, xWhy                       []string            // entries that do not parse
	acks                                      map[string][]string // stream → entry ids
}

// Process records the facts of one read in one transaction and acks the
// entries after the commit. Exported for tests; Run calls it.
func (in *Intake) Process(ctx context.Context, streams []redis.XStream) error {
	b := batch{acks: map[string][]string{}}
	n := 0
	for _, s := range streams {
		for _, m := range s.Messages {
			n++
			b.acks[s.Stream] = append(b.acks[s.Stream], m.ID)
			var why string
			source := "result"
			if s.Stream == in.cfg.ResultStream {
				why = in.addResult(&b, m)
			} else {
				source, why = "report", in.addReport(&b, m)
			}
			if why != "" {
				in.malformed.Add(1)
				in.log.Warn("sms intake: entry not usable; recorded and acked", "stream", s.Stream, "entry", m.ID, "why", why)
				b.xKey, b.xSource, b.xWhy = append(b.xKey, "entry:"+s.Stream+":"+m.ID), append(b.xSource, source), append(b.xWhy, why)
			}
		}
	}
	if n == 0 {
		return nil
	}
	now := in.cfg.Clock.Now()
	attempts := map[int64]bool{}
	collect := func(rows pgx.Rows, err error) (int, error) {
		if err != nil {
			return 0, err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		for _, id := range ids {
			attempts[id] = true
		}
		return len(ids), err
	}
	var events, matched int
	record := func(tx pgx.Tx) error {
		clear(attempts)
		events, matched = 0, 0
		if len(b.rKey) > 0 {
			// An event that cannot decide anything (an accepted segment
			// that waits for its report) is recorded without waking the
			// completion: see ResultsRecord.
			rows, err := tx.Query(ctx, stmts["ResultsRecord"], b.rKey, b.rSubmit, b.rChan, b.rKind, b.rState, b.rMsg,
				b.rDetail, now)
			var attempt *int64
			var decisive *bool
			var toWrite, written int64
			if err == nil {
				_, err = pgx.ForEachRow(rows, []any{&attempt, &decisive, &toWrite, &written}, func() error {
					switch {
					case attempt == nil: // the counts row
						if written != toWrite {
							return fmt.Errorf("%d of %d submits written: %w", written, toWrite, errSubmitChanged)
						}
					default:
						events++
						if *decisive {
							attempts[*attempt] = true
						}
					}
					return nil
				})
			}
			if err != nil {
				return fmt.Errorf("record results: %w", err)
			}
		}
		if len(b.pKey) > 0 {
			k, err := collect(tx.Query(ctx, stmts["ReportsRecord"], b.pKey, b.pChan, b.pMsg, b.pStat, now))
			if err != nil {
				return fmt.Errorf("record reports: %w", err)
			}
			events += k
		}
		if len(b.xKey) > 0 {
			if _, err := tx.Exec(ctx, stmts["RejectsRecord"], b.xKey, b.xSource, b.xWhy, now); err != nil {
				return fmt.Errorf("record unusable entries: %w", err)
			}
		}
		if len(b.newMsgIDs) > 0 {
			k, err := collect(tx.Query(ctx, stmts["ParkedMatch"], b.newMsgIDs, now, len(b.newMsgIDs)*4))
			if err != nil {
				return fmt.Errorf("match parked reports: %w", err)
			}
			matched += k
		}
		return in.bump(ctx, tx, attempts)
	}
	err := pgx.BeginFunc(ctx, in.cfg.Pool, record)
	for try := 1; errors.Is(err, errSubmitChanged) && try < submitChangedTries; try++ {
		// The other writer has committed by now (the lock waited for it):
		// the batch runs again at once and sees its row.
		in.raced.Add(1)
		err = pgx.BeginFunc(ctx, in.cfg.Pool, record)
	}
	if err != nil {
		return fmt.Errorf("sms intake: %w", err)
	}
	in.batches.Add(1)
	in.entries.Add(int64(n))
	in.events.Add(int64(events))
	in.matched.Add(int64(matched))
	faultpoint.Hit(faultpoint.SmsIntakeAfterCommit)
	for s, ids := range b.acks {
		if err := in.cfg.Redis.XAck(ctx, s, in.cfg.Group, ids...).Err(); err != nil {
			// Recorded; the entries are read again and stored once.
			return fmt.Errorf("sms intake: ack %d entries of %s: %w", len(ids), s, err)
		}
	}
	return nil
}

func (in *Intake) bump(ctx context.Context, tx pgx.Tx, attempts map[int64]bool) error {
	if len(attempts) == 0 {
		return nil
	}
	keys := make([]string, 0, len(attempts))
	for a := range attempts {
		keys = append(keys, WorkKey(a))
	}
	if err := in.cfg.Work.Bump(ctx, tx, keys); err != nil {
		return fmt.Errorf("bump work: %w", err)
	}
	return nil
}

// addResult adds a result entry to b, or says why it cannot be used.
func (in *Intake) addResult(b *batch, m redis.XMessage) string {
	r, err := gateway.ParseResult(m.Values)
	switch {
	case err != nil:
		return "result does not parse"
	case r.SubmitID == 0 || r.EventID == "" || len(r.EventID) > 200:
		// The result of a command the gateway could not parse: nothing of
		// ours to tie it to.
		return "result of a malformed command"
	}
	msgID := ""
	if r.MsgID != 0 {
		msgID = strconv.FormatUint(r.MsgID, 10)
		b.newMsgIDs = append(b.newMsgIDs, msgID)
	}
	b.rKey, b.rSubmit, b.rChan = append(b.rKey, r.EventID), append(b.rSubmit, int64(r.SubmitID)), append(b.rChan, r.Channel)
	b.rKind, b.rState, b.rMsg = append(b.rKind, KindResult), append(b.rState, string(r.State)), append(b.rMsg, msgID)
	b.rDetail = append(b.rDetail, relaytype.BoundText(r.Result, 200))
	return ""
}

// addReport adds a report stream entry to b, or says why it cannot be used
// (an inbound MO message is not the send chain's: counted, not recorded).
func (in *Intake) addReport(b *batch, m redis.XMessage) string {
	get := func(k string) string { s, _ := m.Values[k].(string); return s }
	key, kind, channel := get("event_id"), get("kind"), get("channel")
	switch kind {
	case "mo":
		in.mo.Add(1)
		return ""
	case "report":
		msgID, stat := get("msg_id"), get("stat")
		if key == "" || channel == "" || !decimal(msgID) || stat == "" || len(stat) > 16 || len(key) > 200 {
			return "report without event_id, channel, a decimal msg_id or stat"
		}
		b.pKey, b.pChan, b.pMsg, b.pStat = append(b.pKey, key), append(b.pChan, channel), append(b.pMsg, msgID), append(b.pStat, stat)
	case "late_resp":
		sid, err := strconv.ParseUint(get("submit_id"), 10, 64)
		msgID, code := get("msg_id"), get("result")
		if key == "" || channel == "" || err != nil || sid == 0 || !decimal(code) || len(code) > 16 || (msgID != "" && !decimal(msgID)) {
			return "late_resp without event_id, channel, submit_id or result"
		}
		if msgID == "0" {
			msgID = ""
		}
		if msgID != "" {
			b.newMsgIDs = append(b.newMsgIDs, msgID)
		}
		b.rKey, b.rSubmit, b.rChan = append(b.rKey, key), append(b.rSubmit, int64(sid)), append(b.rChan, channel)
		b.rKind, b.rState, b.rMsg, b.rDetail = append(b.rKind, KindLateResp), append(b.rState, code), append(b.rMsg, msgID), append(b.rDetail, "")
	default:
		return "unknown kind"
	}
	return ""
}

func decimal(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Sweep matches parked reports whose submit has its Msg_Id by now (two
// transactions that recorded a report and its result at the same moment
// cannot see each other; this closes that gap), at most SweepLimit per
// call, and bumps their attempts' work. It returns how many it matched.
func (in *Intake) Sweep(ctx context.Context) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, in.cfg.Pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, stmts["ParkedMatch"], nil, in.cfg.Clock.Now(), in.cfg.SweepLimit)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		n = len(ids)
		attempts := make(map[int64]bool, len(ids))
		for _, id := range ids {
			attempts[id] = true
		}
		return in.bump(ctx, tx, attempts)
	})
	if err != nil {
		return 0, fmt.Errorf("sms intake: sweep: %w", err)
	}
	in.matched.Add(int64(n))
	return n, nil
}

// isNoGroup reports whether err says a stream or its consumer group does
// not exist: Redis's NOGROUP, or UNBLOCKED for a read that was waiting
// when the stream was deleted.
func isNoGroup(err error) bool {
	return err != nil && (strings.HasPrefix(err.Error(), "NOGROUP") || strings.HasPrefix(err.Error(), "UNBLOCKED"))
}
