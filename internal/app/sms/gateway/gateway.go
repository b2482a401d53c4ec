package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

	mu       sync.Mutex
	inflight map[uint64]chan struct{} // submit ids in work in this process
	ran      bool

	stats counters
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
	}
	for _, cc := range cfg.Channels {
		pc := cc.Pool
		ch := &channel{name: cc.Name, spID: pc.Conn.SourceAddr, version: pc.Conn.Version}
		pc.Conn.DeliverFunc = g.deliverFunc(ch)
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
		for _, m := range res[0].Messages {
			g.dispatch(ctx, work, m)
			start = m.ID
		}
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
			g.log.Warn("sms gateway: read", "err", err)
			g.wait(ctx, time.Second)
			continue
		}
		for _, s := range res {
			for _, m := range s.Messages {
				g.dispatch(ctx, work, m)
			}
		}
	}
}

// claimLoop runs an XAUTOCLAIM pass every ClaimInterval.
func (g *Gateway) claimLoop(ctx, work context.Context) {
	for g.wait(ctx, g.cfg.ClaimInterval) {
		g.ClaimPass(ctx, work)
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
		for _, m := range msgs {
			g.stats.claimed.Add(1)
			g.dispatch(ctx, work, m)
		}
		if next == "0-0" || next == "" {
			return
		}
		start = next
	}
}

// dispatch hands m to a worker once one is free.
func (g *Gateway) dispatch(ctx, work context.Context, m redis.XMessage) {
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return // not acked: it stays pending
	}
	g.wg.Go(func() {
		defer func() { <-g.sem }()
		g.handle(work, m)
	})
}

// lock serialises the work on one submit id within this process: a command
// delivered twice waits for the first delivery to settle, then finds it
// settled and re-emits its result.
func (g *Gateway) lock(id uint64) func() {
	for {
		g.mu.Lock()
		ch, busy := g.inflight[id]
		if !busy {
			ch = make(chan struct{})
			g.inflight[id] = ch
			g.mu.Unlock()
			return func() {
				g.mu.Lock()
				delete(g.inflight, id)
				g.mu.Unlock()
				close(ch)
			}
		}
		g.mu.Unlock()
		<-ch
	}
}

// handle works on one command entry. It acks the entry only after its
// result is in the result stream, and the result only after the row is
// settled in PostgreSQL. Any failure before that leaves the entry pending
// for XAUTOCLAIM.
func (g *Gateway) handle(ctx context.Context, m redis.XMessage) {
	cmd, err := ParseCommand(m.Values)
	if err != nil {
		g.stats.malformed.Add(1)
		g.log.Warn("sms gateway: malformed command", "entry", m.ID, "err", err)
		res := Result{EventID: "malformed:" + m.ID, SubmitID: cmd.SubmitID, State: StateRejected,
			Result: "malformed: " + strings.TrimPrefix(err.Error(), ErrMalformed.Error()+": ")}
		g.finish(ctx, m.ID, res)
		return
	}
	unlock := g.lock(cmd.SubmitID)
	defer unlock()
	now := g.now()
	claimed, err := g.store.claim(ctx, cmd.SubmitID, cmd.Channel, g.cfg.Consumer, now)
	if err != nil {
		g.log.Warn("sms gateway: claim", "submit_id", cmd.SubmitID, "err", err)
		return
	}
	if !claimed {
		g.settled(ctx, m.ID, cmd.SubmitID)
		return
	}
	faultpoint.Hit(faultpoint.GatewayAfterClaim)
	row := g.submit(ctx, cmd)
	faultpoint.Hit(faultpoint.GatewayAfterSubmit)
	ok, err := g.store.settle(ctx, row, g.cfg.Consumer, now, g.now())
	faultpoint.Hit(faultpoint.GatewayAfterSettle)
	switch {
	case err != nil:
		// The row stays CLAIMED: a later delivery finds it stale and
		// settles it UNKNOWN, which is what it is to anyone but us.
		g.log.Error("sms gateway: settle", "submit_id", cmd.SubmitID, "state", row.State, "err", err)
		return
	case !ok:
		// Our claim was judged stale meanwhile and settled UNKNOWN, which
		// stays the recorded result; what we learnt is logged for the
		// reconciliation.
		g.log.Warn("sms gateway: claim taken over before settlement", "submit_id", cmd.SubmitID,
			"state", row.State, "msg_id", row.MsgID, "result", row.Result)
		g.settled(ctx, m.ID, cmd.SubmitID)
		return
	case row.State == StateNotSent:
		return // not acked: claimed again on its next delivery
	}
	g.finish(ctx, m.ID, resultOf(row))
}

// settled handles a command whose row exists and was not claimed by us.
func (g *Gateway) settled(ctx context.Context, entryID string, submitID uint64) {
	row, err := g.store.load(ctx, submitID)
	if err != nil {
		g.log.Warn("sms gateway: load", "submit_id", submitID, "err", err)
		return
	}
	switch row.State {
	case StateNotSent:
		return // claimed by a concurrent delivery meanwhile; stays pending
	case StateClaimed:
		now := g.now()
		if now.Sub(row.ClaimedAt) < g.cfg.StaleClaim {
			g.stats.busy.Add(1)
			return // in work in another gateway: stays pending, redelivered after MinIdle
		}
		// A claim never settled: the gateway died between its claim and the
		// Submit's outcome. The supplier may have it: UNKNOWN, never resent.
		stale := Row{SubmitID: submitID, State: StateUnknown, Result: ResultClaimNotSettled}
		ok, err := g.store.settle(ctx, stale, row.ClaimedBy, row.ClaimedAt, now)
		if err != nil {
			g.log.Warn("sms gateway: settle stale claim", "submit_id", submitID, "err", err)
			return
		}
		if !ok {
			return // settled meanwhile; the next delivery re-emits it
		}
		g.stats.staleClaims.Add(1)
		row.State, row.Result = StateUnknown, ResultClaimNotSettled
	default:
		g.stats.duplicates.Add(1)
	}
	g.finish(ctx, entryID, resultOf(row))
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
		g.log.Warn("sms gateway: outcome unknown", "submit_id", cmd.SubmitID, "channel", ch.name, "err", err)
	}
	return row
}

// finish writes res to the result stream, then acks the entry.
func (g *Gateway) finish(ctx context.Context, entryID string, res Result) {
	if err := g.rdb.XAdd(ctx, &redis.XAddArgs{Stream: g.cfg.ResultStream, Values: res.Values()}).Err(); err != nil {
		g.log.Warn("sms gateway: write result; stays pending", "event_id", res.EventID, "err", err)
		return
	}
	g.stats.results.Add(1)
	faultpoint.Hit(faultpoint.GatewayAfterResult)
	if err := g.rdb.XAck(ctx, g.cfg.CommandStream, g.cfg.Group, entryID).Err(); err != nil {
		g.log.Warn("sms gateway: ack; result will be re-emitted", "entry", entryID, "err", err)
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
	// over by XAUTOCLAIM; Results results written.
	Malformed, Claimed, Results int64
	// Reports and MO count events written to the report stream;
	// BadReports reports that did not decode (answered, not written).
	Reports, MO, BadReports int64
}

type counters struct {
	submits, accepted, rejected, unknown, notSent       atomic.Int64
	duplicates, staleClaims, busy                       atomic.Int64
	malformed, claimed, results, reports, mo, badDelivs atomic.Int64
}

// Stats returns the counters.
func (g *Gateway) Stats() Stats {
	c := &g.stats
	return Stats{Submits: c.submits.Load(), Accepted: c.accepted.Load(), Rejected: c.rejected.Load(),
		Unknown: c.unknown.Load(), NotSent: c.notSent.Load(), Duplicates: c.duplicates.Load(),
		StaleClaims: c.staleClaims.Load(), Busy: c.busy.Load(), Malformed: c.malformed.Load(),
		Claimed: c.claimed.Load(), Results: c.results.Load(), Reports: c.reports.Load(), MO: c.mo.Load(),
		BadReports: c.badDelivs.Load()}
}
