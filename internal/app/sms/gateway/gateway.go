package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/relayhq/relay/internal/app/sms/cmpp"
	"github.com/relayhq/relay/internal/app/sms/cmpp/cmppconn"
	"github.com/relayhq/relay/internal/faultpoint"
)

// Gateway consumes submit commands from the command stream, submits each at
// most once to its channel's supplier, and writes results, status reports
// and MO to the result and report streams. Create it with New and run it
// with Run; it is safe for concurrent use.
type Gateway struct {
	cfg      Config
	log      *slog.Logger
	rdb      redis.UniversalClient
	store    store
	channels map[string]*channel
	sem      chan struct{}
	wg       sync.WaitGroup

	acquireMu sync.Mutex // held while a batch takes its slots in sem
	mu        sync.Mutex
	inflight  map[uint64]chan struct{} // submit ids in work in this process
	ran       bool

	late    *lateTable
	reports *reportWriter // writes the report stream's entries in pipelines
	stats   counters
}

type channel struct {
	name    string
	spID    string
	version cmpp.Version
	pool    *cmppconn.Pool
}

// New checks cfg and builds the channels' pools (not yet connected).
func New(cfg Config) (*Gateway, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &Gateway{
		cfg:      cfg,
		log:      cfg.Logger,
		rdb:      cfg.Redis,
		store:    store{q: cfg.DB},
		channels: map[string]*channel{},
		sem:      make(chan struct{}, cfg.Concurrency),
		inflight: map[uint64]chan struct{}{},
		late:     newLateTable(2 * cfg.SubmitTimeout),
		reports:  newReportWriter(cfg.Redis, cfg.ReportStream),
	}
	for _, cc := range cfg.Channels {
		pc := cc.Pool
		ch := &channel{name: cc.Name, spID: pc.Conn.SourceAddr, version: pc.Conn.Version}
		pc.Conn.DeliverFunc = g.deliverFunc(ch)
		pc.Conn.LateResponseFunc = g.lateFunc()
		if pc.Conn.Clock == nil {
			pc.Conn.Clock = cfg.Clock
		}
		if pc.Conn.Logger == nil {
			pc.Conn.Logger = cfg.Logger
		}
		pool, err := cmppconn.NewPool(pc)
		if err != nil {
			return nil, fmt.Errorf("gateway: channel %q: %w", cc.Name, err)
		}
		ch.pool = pool
		g.channels[cc.Name] = ch
	}
	return g, nil
}

// Run creates the consumer group if needed (reading the command stream from
// its start), starts the channels' connections, and consumes commands until
// ctx ends: first this consumer's own pending entries, then new ones
// (XREADGROUP >), with an XAUTOCLAIM pass at start and every ClaimInterval
// for entries a dead gateway left pending. When ctx ends it stops reading,
// lets the commands in work finish (each bounded by SubmitTimeout), closes
// the connections (bounded by StopTimeout) and returns nil; it returns an
// error only when it cannot start. It may be called once.
func (g *Gateway) Run(ctx context.Context) error {
	g.mu.Lock()
	if g.ran {
		g.mu.Unlock()
		return errors.New("gateway: Run called twice")
	}
	g.ran = true
	g.mu.Unlock()
	c := g.cfg
	err := g.rdb.XGroupCreateMkStream(ctx, c.CommandStream, c.Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("gateway: create group %q on %q: %w", c.Group, c.CommandStream, err)
	}
	// The report writer outlives every writer of the report stream: the
	// connections (stopped below) and the late writer (stopped by the
	// deferred call after this one); what they queued is written before
	// it stops.
	g.reports.start(context.WithoutCancel(ctx))
	defer g.reports.stop()
	var lateDone sync.WaitGroup
	lateDone.Go(func() { g.writeLate(context.WithoutCancel(ctx)) })
	defer func() {
		g.late.close()
		lateDone.Wait()
	}()
	for _, ch := range g.channels {
		if err := ch.pool.Start(ctx); err != nil {
			return fmt.Errorf("gateway: channel %q: %w", ch.name, err)
		}
	}
	work := context.WithoutCancel(ctx) // commands in work finish after ctx ends
	// Own pending entries first, then one XAUTOCLAIM pass, before any new
	// entry is read: at start nothing of ours is in work, so neither pass
	// can take an entry this process is working on.
	g.readOwnPending(ctx, work)
	g.ClaimPass(ctx, work)
	var bg sync.WaitGroup
	bg.Go(func() { g.claimLoop(ctx, work) })
	g.readLoop(ctx, work)
	bg.Wait()
	g.wg.Wait()
	stopCtx, cancel := g.timeout(work, c.StopTimeout)
	defer cancel()
	for _, ch := range g.channels {
		if err := ch.pool.Stop(stopCtx); err != nil {
			g.log.Warn("sms gateway: channel stop", "channel", ch.name, "err", err)
		}
	}
	return nil
}

// timeout is context.WithTimeout on the gateway's clock.
func (g *Gateway) timeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	timer := g.cfg.Clock.After(d)
	go func() {
		select {
		case <-timer:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// wait waits d on the clock; false when ctx ended first.
func (g *Gateway) wait(ctx context.Context, d time.Duration) bool {
	select {
	case <-g.cfg.Clock.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

// readOwnPending re-reads this consumer's pending entries (XREADGROUP 0):
// what a previous life of this consumer read and did not ack.
func (g *Gateway) readOwnPending(ctx, work context.Context) {
	start := "0"
	for ctx.Err() == nil {
		res, err := g.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: g.cfg.Group, Consumer: g.cfg.Consumer,
			Streams: []string{g.cfg.CommandStream, start}, Count: int64(g.cfg.ReadCount), Block: -1}).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			g.log.Warn("sms gateway: read own pending", "err", err)
			return
		}
		if len(res) == 0 || len(res[0].Messages) == 0 {
			return
		}
		msgs := res[0].Messages
		g.dispatch(ctx, work, msgs)
		start = msgs[len(msgs)-1].ID
	}
}

// readLoop reads new entries until ctx ends.
func (g *Gateway) readLoop(ctx, work context.Context) {
	for ctx.Err() == nil {
		res, err := g.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: g.cfg.Group, Consumer: g.cfg.Consumer,
			Streams: []string{g.cfg.CommandStream, ">"}, Count: int64(g.cfg.ReadCount), Block: g.cfg.Block}).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if isNoGroup(err) {
				// The stream or its group is gone (a Redis restarted
				// without persistence, a deleted key): create it again and
				// read on. What the old stream held is lost; its submits
				// end by the completion's deadlines, never resent.
				if cerr := g.rdb.XGroupCreateMkStream(ctx, g.cfg.CommandStream, g.cfg.Group, "0").Err(); cerr == nil ||
					strings.HasPrefix(cerr.Error(), "BUSYGROUP") {
					g.log.Warn("sms gateway: the consumer group was gone; created again", "stream", g.cfg.CommandStream,
						"group", g.cfg.Group)
					continue
				}
			}
			g.log.Warn("sms gateway: read", "err", err)
			g.wait(ctx, time.Second)
			continue
		}
		for _, s := range res {
			g.dispatch(ctx, work, s.Messages)
		}
	}
}

// claimLoop runs an XAUTOCLAIM pass every ClaimInterval.
func (g *Gateway) claimLoop(ctx, work context.Context) {
	for g.wait(ctx, g.cfg.ClaimInterval) {
		g.ClaimPass(ctx, work)
		if g.cfg.TrimCommands {
			if _, err := g.TrimPass(ctx); err != nil && ctx.Err() == nil {
				g.log.Warn("sms gateway: trim the command stream", "err", err)
			}
		}
	}
}

// ClaimPass takes over, with XAUTOCLAIM, every pending entry idle at least
// MinIdle (left by a gateway that died, or whose command could not be
// settled) and works on it; it returns once the pass has scanned the whole
// pending list, without waiting for the work. ctx governs the reads, work
// the commands' processing. Run calls it; it is exported for tests.
func (g *Gateway) ClaimPass(ctx, work context.Context) {
	start := "0-0"
	for ctx.Err() == nil {
		msgs, next, err := g.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{Stream: g.cfg.CommandStream, Group: g.cfg.Group,
			MinIdle: g.cfg.MinIdle, Start: start, Count: int64(g.cfg.ReadCount), Consumer: g.cfg.Consumer}).Result()
		if err != nil {
			if ctx.Err() == nil {
				g.log.Warn("sms gateway: xautoclaim", "err", err)
			}
			return
		}
		g.stats.claimed.Add(int64(len(msgs)))
		g.dispatch(ctx, work, msgs)
		if next == "0-0" || next == "" {
			return
		}
		start = next
	}
}

// dispatch hands msgs, the entries of one read, to workers in batches of
// at most Concurrency entries, each once that many slots are free. Slots
// are taken under acquireMu, so the read loop and a claim pass never hold
// part of a batch's slots each while waiting for the rest.
func (g *Gateway) dispatch(ctx, work context.Context, msgs []redis.XMessage) {
	for len(msgs) > 0 {
		n := min(len(msgs), g.cfg.Concurrency)
		part := msgs[:n:n]
		msgs = msgs[n:]
		if !g.acquire(ctx, n) {
			return // not acked: they stay pending
		}
		g.wg.Go(func() {
			defer g.release(n)
			g.work(ctx, work, part)
		})
	}
}

func (g *Gateway) acquire(ctx context.Context, n int) bool {
	g.acquireMu.Lock()
	defer g.acquireMu.Unlock()
	for i := range n {
		select {
		case g.sem <- struct{}{}:
		case <-ctx.Done():
			g.release(i)
			return false
		}
	}
	return true
}

func (g *Gateway) release(n int) {
	for range n {
		<-g.sem
	}
}

// work runs one batch. Entries whose submit id is in work elsewhere in this
// process (a duplicate in the same read, or in a batch still running) are
// left out of it and then run one at a time, each waiting for its id. The
// commands that were not sent are retried after each NotSentBackoff wait
// (on the clock; until ctx ends); what is still not sent stays pending.
func (g *Gateway) work(ctx, work context.Context, msgs []redis.XMessage) {
	busy, again := g.batch(work, msgs, g.tryLock)
	for _, m := range busy {
		_, notSent := g.batch(work, []redis.XMessage{m}, func(id uint64) (func(), bool) { return g.lock(id), true })
		again = append(again, notSent...)
	}
	for _, d := range g.cfg.NotSentBackoff {
		if len(again) == 0 || !g.wait(ctx, d) {
			return
		}
		g.stats.retries.Add(int64(len(again)))
		busy, again = g.batch(work, again, g.tryLock)
		again = append(again, busy...) // in work elsewhere: tried again after the next wait
	}
}

// lock serialises the work on one submit id within this process: a command
// delivered twice waits for the first delivery to settle, then finds it
// settled and re-emits its result.
func (g *Gateway) lock(id uint64) func() {
	for {
		unlock, ok := g.tryLock(id)
		if ok {
			return unlock
		}
		g.mu.Lock()
		ch := g.inflight[id]
		g.mu.Unlock()
		if ch != nil {
			<-ch
		}
	}
}

// tryLock takes id's lock if it is free.
func (g *Gateway) tryLock(id uint64) (unlock func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, busy := g.inflight[id]; busy {
		return nil, false
	}
	ch := make(chan struct{})
	g.inflight[id] = ch
	return func() {
		g.mu.Lock()
		delete(g.inflight, id)
		g.mu.Unlock()
		close(ch)
	}, true
}

// pending is one command of a batch.
type pending struct {
	entry  string
	values map[string]any
	cmd    Command
	row    Row
}

// batch works on the command entries msgs, taking each submit id's lock
// with lock, and returns the entries whose lock it could not take,
// untouched, and those of the commands that were not sent. Each step runs once for the whole batch: one claim statement,
// the Submits in parallel, one settle statement, the results in one
// pipeline, one XACK. It acks an entry only after its result is in the
// result stream, and writes the result only after the row is settled in
// PostgreSQL; any failure before that leaves the entry pending, for its
// next delivery or XAUTOCLAIM.
func (g *Gateway) batch(ctx context.Context, msgs []redis.XMessage, lock func(uint64) (func(), bool)) (busy, notSent []redis.XMessage) {
	var (
		out     []outResult // results to write, then ack
		work    []*pending  // commands to claim
		unlocks []func()
	)
	defer func() {
		for _, u := range unlocks {
			u()
		}
	}()
	for _, m := range msgs {
		cmd, err := ParseCommand(m.Values)
		if err != nil {
			g.stats.malformed.Add(1)
			g.log.Warn("sms gateway: malformed command", "entry", m.ID, "err", err)
			out = append(out, outResult{entry: m.ID, res: Result{EventID: "malformed:" + m.ID, SubmitID: cmd.SubmitID,
				State: StateRejected, Result: "malformed: " + strings.TrimPrefix(err.Error(), ErrMalformed.Error()+": ")}})
			continue
		}
		unlock, ok := lock(cmd.SubmitID)
		if !ok {
			busy = append(busy, m)
			continue
		}
		unlocks = append(unlocks, unlock)
		work = append(work, &pending{entry: m.ID, values: m.Values, cmd: cmd})
	}
	results, unsent := g.claimSubmitSettle(ctx, work)
	g.finish(ctx, append(out, results...))
	for _, p := range unsent {
		notSent = append(notSent, redis.XMessage{ID: p.entry, Values: p.values})
	}
	return busy, notSent
}

// outResult is a result to write and the entry to ack after it.
type outResult struct {
	entry string
	res   Result
}

// claimSubmitSettle claims work's submit ids, submits what it claimed,
// settles the outcomes and returns the results to write — those of the
// settled commands and of the commands found settled before — and the
// commands settled NOT_SENT.
func (g *Gateway) claimSubmitSettle(ctx context.Context, work []*pending) (out []outResult, notSent []*pending) {
	if len(work) == 0 {
		return nil, nil
	}
	slices.SortFunc(work, func(a, b *pending) int { return cmp.Compare(a.cmd.SubmitID, b.cmd.SubmitID) })
	ids, channels := make([]uint64, len(work)), make([]string, len(work))
	for i, p := range work {
		ids[i], channels[i] = p.cmd.SubmitID, p.cmd.Channel
	}
	now := g.now()
	claimed, err := g.store.claim(ctx, ids, channels, g.cfg.Consumer, now)
	if err != nil {
		g.log.Warn("sms gateway: claim; the commands stay pending", "commands", len(work), "err", err)
		return nil, nil
	}
	faultpoint.Hit(faultpoint.GatewayAfterClaim)
	var mine []*pending
	for _, p := range work {
		if !claimed[p.cmd.SubmitID] {
			if r, ok := g.settled(ctx, p.cmd.SubmitID); ok {
				out = append(out, outResult{entry: p.entry, res: r})
			}
			continue
		}
		mine = append(mine, p)
	}
	if len(mine) == 0 {
		return out, nil
	}
	var wg sync.WaitGroup
	for _, p := range mine {
		wg.Go(func() { p.row = g.submit(ctx, p.cmd) })
	}
	wg.Wait()
	faultpoint.Hit(faultpoint.GatewayAfterSubmit)
	rows := make([]Row, len(mine))
	for i, p := range mine {
		rows[i] = p.row
	}
	settled, err := g.store.settle(ctx, rows, g.cfg.Consumer, now, g.now())
	if err != nil {
		// The rows stay CLAIMED: a later delivery finds them stale and
		// settles them UNKNOWN, which is what they are to anyone but us.
		for _, p := range mine {
			g.log.Error("sms gateway: settle", "submit_id", p.cmd.SubmitID, "state", p.row.State, "err", err)
		}
		return out, nil
	}
	faultpoint.Hit(faultpoint.GatewayAfterSettle)
	for _, p := range mine {
		switch {
		case !settled[p.cmd.SubmitID]:
			// Our claim was judged stale meanwhile and settled UNKNOWN,
			// which stays the recorded result; what we learnt is logged
			// for the reconciliation.
			g.log.Warn("sms gateway: claim taken over before settlement", "submit_id", p.cmd.SubmitID,
				"state", p.row.State, "msg_id", p.row.MsgID, "result", p.row.Result)
			if r, ok := g.settled(ctx, p.cmd.SubmitID); ok {
				out = append(out, outResult{entry: p.entry, res: r})
			}
		case p.row.State == StateNotSent:
			notSent = append(notSent, p) // not acked: claimed again when it is retried or delivered again
		default:
			out = append(out, outResult{entry: p.entry, res: resultOf(p.row)})
		}
	}
	return out, notSent
}

// settled returns the result of a command whose row exists and was not
// claimed by us; ok false when it has none yet (it stays pending).
func (g *Gateway) settled(ctx context.Context, submitID uint64) (Result, bool) {
	row, err := g.store.load(ctx, submitID)
	if err != nil {
		g.log.Warn("sms gateway: load", "submit_id", submitID, "err", err)
		return Result{}, false
	}
	switch row.State {
	case StateNotSent:
		return Result{}, false // claimed by a concurrent delivery meanwhile; stays pending
	case StateClaimed:
		now := g.now()
		if now.Sub(row.ClaimedAt) < g.cfg.StaleClaim {
			g.stats.busy.Add(1)
			return Result{}, false // in work in another gateway: stays pending, redelivered after MinIdle
		}
		// A claim never settled: the gateway died between its claim and the
		// Submit's outcome. The supplier may have it: UNKNOWN, never resent.
		stale := Row{SubmitID: submitID, State: StateUnknown, Result: ResultClaimNotSettled}
		ok, err := g.store.settle(ctx, []Row{stale}, row.ClaimedBy, row.ClaimedAt, now)
		if err != nil {
			g.log.Warn("sms gateway: settle stale claim", "submit_id", submitID, "err", err)
			return Result{}, false
		}
		if !ok[submitID] {
			return Result{}, false // settled meanwhile; the next delivery re-emits it
		}
		g.stats.staleClaims.Add(1)
		row.State, row.Result = StateUnknown, ResultClaimNotSettled
	default:
		g.stats.duplicates.Add(1)
	}
	return resultOf(row), true
}

// ResultClaimNotSettled is the Result of a submit found CLAIMED past
// StaleClaim.
const ResultClaimNotSettled = "outcome unknown: claimed, never settled"

// submit sends cmd on its channel and returns the row to settle.
func (g *Gateway) submit(ctx context.Context, cmd Command) Row {
	row := Row{SubmitID: cmd.SubmitID, Channel: cmd.Channel}
	ch := g.channels[cmd.Channel]
	if ch == nil {
		g.stats.rejected.Add(1)
		row.State, row.Result = StateRejected, "unknown channel"
		return row
	}
	sctx, cancel := g.timeout(ctx, g.cfg.SubmitTimeout)
	defer cancel()
	g.stats.submits.Add(1)
	res, err := ch.pool.Submit(sctx, cmd.submit(ch.spID))
	switch res.Outcome {
	case cmppconn.OutcomeAccepted:
		g.stats.accepted.Add(1)
		row.State, row.MsgID, row.Result = StateAccepted, res.MsgID, "0"
	case cmppconn.OutcomeRejected:
		g.stats.rejected.Add(1)
		row.State, row.MsgID = StateRejected, res.MsgID
		row.Result = strconv.FormatUint(uint64(res.Result), 10) + " " + cmppconn.ResultText(res.Result)
	case cmppconn.OutcomeNotSent, cmppconn.OutcomeFlowControl:
		g.stats.notSent.Add(1)
		row.State, row.Result = StateNotSent, res.Outcome.String()
		g.log.Info("sms gateway: not sent; stays pending", "submit_id", cmd.SubmitID, "channel", ch.name, "err", err)
	default:
		g.stats.unknown.Add(1)
		row.State, row.Result = StateUnknown, "outcome unknown"
		g.fileUnknown(ch, cmd.SubmitID, res)
		g.log.Warn("sms gateway: outcome unknown", "submit_id", cmd.SubmitID, "channel", ch.name, "err", err)
	}
	return row
}

// finish writes the results to the result stream in one pipeline, then
// acks, in one XACK, the entries whose result was written.
func (g *Gateway) finish(ctx context.Context, out []outResult) {
	if len(out) == 0 {
		return
	}
	pipe := g.rdb.Pipeline()
	adds := make([]*redis.StringCmd, len(out))
	for i, o := range out {
		adds[i] = pipe.XAdd(ctx, &redis.XAddArgs{Stream: g.cfg.ResultStream, Values: o.res.Values()})
	}
	_, _ = pipe.Exec(ctx) // each command's error is read below
	acks := make([]string, 0, len(out))
	for i, o := range out {
		if err := adds[i].Err(); err != nil {
			g.log.Warn("sms gateway: write result; stays pending", "event_id", o.res.EventID, "err", err)
			continue
		}
		acks = append(acks, o.entry)
	}
	g.stats.results.Add(int64(len(acks)))
	if len(acks) == 0 {
		return
	}
	faultpoint.Hit(faultpoint.GatewayAfterResult)
	if err := g.rdb.XAck(ctx, g.cfg.CommandStream, g.cfg.Group, acks...).Err(); err != nil {
		g.log.Warn("sms gateway: ack; the results will be re-emitted", "entries", len(acks), "err", err)
	}
}

func (g *Gateway) now() time.Time { return g.cfg.Clock.Now().UTC().Truncate(time.Microsecond) }

func resultOf(r Row) Result {
	return Result{EventID: SubmitEventID(r.SubmitID), SubmitID: r.SubmitID, Channel: r.Channel,
		State: r.State, MsgID: r.MsgID, Result: r.Result}
}

// SubmitEventID is the event id of the result of submitId id: the same on
// every re-emission, so consumers dedupe on it.
func SubmitEventID(id uint64) string { return "submit:" + strconv.FormatUint(id, 10) }

// Stats are the gateway's counters since New.
type Stats struct {
	// Submits counts Submits handed to a pool; Accepted, Rejected, Unknown,
	// NotSent their outcomes (Rejected also counts unknown channels).
	Submits, Accepted, Rejected, Unknown, NotSent int64
	// Duplicates counts commands found already settled (result re-emitted);
	// StaleClaims claims of dead gateways settled UNKNOWN; Busy deliveries
	// left pending because another gateway held a fresh claim.
	Duplicates, StaleClaims, Busy int64
	// Malformed counts commands acked as malformed; Claimed entries taken
	// over by XAUTOCLAIM; Results results written; Retries in-process
	// retries of commands that were not sent.
	Malformed, Claimed, Results, Retries int64
	// Reports and MO count events written to the report stream;
	// BadReports reports that did not decode (answered, not written); Late
	// SubmitResps that came for submits settled UNKNOWN.
	Reports, MO, BadReports, Late int64
	// Trimmed counts command entries removed by TrimPass.
	Trimmed int64
}

type counters struct {
	submits, accepted, rejected, unknown, notSent       atomic.Int64
	duplicates, staleClaims, busy                       atomic.Int64
	malformed, claimed, results, reports, mo, badDelivs atomic.Int64
	retries, late, trimmed                              atomic.Int64
}

// Stats returns the counters.
func (g *Gateway) Stats() Stats {
	c := &g.stats
	return Stats{Submits: c.submits.Load(), Accepted: c.accepted.Load(), Rejected: c.rejected.Load(),
		Unknown: c.unknown.Load(), NotSent: c.notSent.Load(), Duplicates: c.duplicates.Load(),
		StaleClaims: c.staleClaims.Load(), Busy: c.busy.Load(), Malformed: c.malformed.Load(),
		Claimed: c.claimed.Load(), Results: c.results.Load(), Retries: c.retries.Load(), Reports: c.reports.Load(), MO: c.mo.Load(),
		BadReports: c.badDelivs.Load(), Late: c.late.Load(), Trimmed: c.trimmed.Load()}
}

// isNoGroup reports whether err says a stream or its consumer group does
// not exist: Redis's NOGROUP, or UNBLOCKED for a read that was waiting
// when the stream was deleted.
func isNoGroup(err error) bool {
	return err != nil && (strings.HasPrefix(err.Error(), "NOGROUP") || strings.HasPrefix(err.Error(), "UNBLOCKED"))
}
