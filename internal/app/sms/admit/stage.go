package admit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/sms/complete"
	"github.com/relayhq/relay/internal/app/sms/route"
	"github.com/relayhq/relay/internal/app/sms/rules"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
	"github.com/relayhq/relay/relaywork"
)

// Queue is the engine queue of the inbox: the API enqueues into it, the
// stage processes it.
const Queue = "sms-admit"

// Defaults of the stage's engine (EngineConfig).
const (
	// TxBatchDefault is how many messages share one transaction (one
	// snapshot, one counter lock round, one commit).
	TxBatchDefault = 64
	// BatchSizeDefault is how many messages the stage holds leased at most.
	// The engine claims again once a quarter of them are done, so under a
	// backlog each claim after the first takes a quarter of BatchSize, split
	// evenly over the workers: 512 makes that 128, two transactions of 64.
	// With 64 (and TxBatch 32) the claims took 16 and the transactions 8
	// messages while thousands waited, and paid a batch's statements and
	// commit for each 8: relay sms load measured the stage's PostgreSQL CPU
	// per message down by about a third and the full submit rate up by
	// 40-50 % with 512 and 64 (2026-12-03, docs/benchmarks.md).
	BatchSizeDefault = 512
	// WorkersDefault is the workers, each running one transaction at a time.
	WorkersDefault = 2
	// WakeDelayDefault is how long the stage waits, once an accepted request
	// wakes it, before it claims: a stage that keeps up otherwise claims a
	// few messages per wake and pays a batch's statements and commit for
	// each few. The messages wait that much longer; the API's answer does not
	// (it answers once the request is in the inbox).
	WakeDelayDefault = 20 * time.Millisecond
)

// The states of an sms_message row.
const (
	StateAccepted = "accepted"
	StateAdmitted = "admitted"
	StateRefused  = "refused"
)

// StageConfig configures NewStage.
type StageConfig struct {
	// Driver is the PostgreSQL store of the engine and the sms tables; the
	// snapshot is read on its pool, outside the engine's transaction.
	// Required.
	Driver *relaypgx.Driver
	// Clock chooses the limit windows and stamps decisions and ledger
	// entries. Required.
	Clock relaytype.Clock
	// Route is passed to rules.Snapshot.Check (RequireConnected stays off
	// until the gateway reports connection states).
	Route rules.RouteOpts
	// Work is the completion's work store: each attempt written gets its
	// work record, woken at the result deadline (complete.EnsureWork).
	// Required.
	Work *relaywork.Store
	// CommandStream is the stream the gateway reads commands from (the
	// outbox events' topic); default route.Stream.
	CommandStream string
	// Deadlines are the completion's (for the wake-up time); zero values
	// take its defaults.
	Deadlines complete.Deadlines
	// Logger: default slog.Default().
	Logger *slog.Logger
}

// Stage is the admission stage: a relay.BatchHandler for Queue. Safe for
// concurrent use by the engine's workers.
type Stage struct {
	cfg   StageConfig
	log   *slog.Logger
	rules *tenancy.Cache // the rules snapshot, read again only when they changed
	// afterCount, when set (tests only), runs with the batch's counter keys
	// after they were read and counted, before anything is written.
	afterCount func(keys []string)
}

// NewStage returns the stage.
func NewStage(cfg StageConfig) (*Stage, error) {
	switch {
	case cfg.Driver == nil:
		return nil, errors.New("admit: StageConfig.Driver is nil")
	case cfg.Clock == nil:
		return nil, errors.New("admit: StageConfig.Clock is nil")
	case cfg.Work == nil:
		return nil, errors.New("admit: StageConfig.Work is nil")
	}
	s := &Stage{cfg: cfg, log: cfg.Logger, rules: tenancy.NewCache(cfg.Driver.Pool(), cfg.Clock)}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s, nil
}

// EngineConfig returns the engine configuration of the stage: Queue,
// ModeUnordered (claims with FOR UPDATE SKIP LOCKED in a short lease-only
// transaction), BatchSizeDefault, TxBatchDefault, WorkersDefault, WakeDelayDefault, with s as
// the handler (nil for a producer-only engine, as the API alone needs).
func EngineConfig(s *Stage, instanceID string, clock relaytype.Clock, log *slog.Logger) relay.Config {
	cfg := relay.Config{Queue: Queue, Mode: relay.ModeUnordered, BatchSize: BatchSizeDefault, TxBatch: TxBatchDefault,
		Workers: WorkersDefault, WakeDelay: WakeDelayDefault, InstanceID: instanceID, Clock: clock, Logger: log}
	if s != nil {
		cfg.Handler = s
	}
	return cfg
}

// Handle decides one message (the engine's path for a message alone: a
// retry, the savepoint fallback): HandleBatch of one.
func (s *Stage) Handle(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
	return s.HandleBatch(ctx, tx, []*relay.Delivery{d})[0]
}

// inboxRow is an sms_message row as the stage reads it.
type inboxRow struct {
	id                          int64
	app                         int64
	numbers                     []string
	sign, template, content, st string
	params                      map[string]string
}

// decision is what the stage decided for one message.
type decision struct {
	ID       int64    `json:"id"`
	Numbers  []string `json:"numbers"`
	Content  string   `json:"content"`
	Carriers []string `json:"carriers"`
	Segments *int     `json:"segments"`
	UnitLi   []int64  `json:"unit_li"`
	AmountLi *int64   `json:"amount_li"`
	State    string   `json:"state"`
	Reason   *string  `json:"reason"`
	Detail   *string  `json:"detail"`

	account int64
	limits  []limitDelta
	plans   []*rules.Plan // per number, once admitted: stage B routes from them
	app     int64
}

// limitDelta is how much a message adds under one limit key: the numbers
// of the message for the daily key, one for a number's frequency key.
type limitDelta struct {
	rules.LimitKey
	n int
}

func (d *decision) admitted() bool { return d.State == StateAdmitted }

// refuse makes d a refusal for reason; detail never holds a number or the
// content.
func (d *decision) refuse(r rules.Reason, detail string) {
	reason, text := string(r), relaytype.BoundText(detail, 200)
	d.State, d.Reason, d.Detail = StateRefused, &reason, &text
	d.Carriers, d.Segments, d.UnitLi, d.AmountLi, d.limits, d.plans = nil, nil, nil, nil, nil, nil
}

// giveBack returns an admitted-then-refused message's counts to counts.
func (d *decision) giveBack(limits []limitDelta, counts map[string]*counter) {
	for _, l := range limits {
		counts[l.Key].n -= l.n
	}
}

// HandleBatch decides ds in the engine's transaction tx, in this order:
// read the inbox rows; load one snapshot (tenancy.Load, its own read-only
// transaction); check every message and number; look up the accounts; read
// the batch's limit counters and count; route the admitted messages (stage
// B: attempts and submits); write every decision; then the writes that lock
// rows other batches share, each set in a fixed order and held to the
// commit: the freezes (account rows, in account order), the counts (counter
// rows, in key order, each guarded by its limit) and the gateway commands
// (each channel's outbox key row). A refusal is Succeeded (the row holds
// it); a store error — a counter raced past its limit among them
// (ErrCountersRaced) — retries the whole batch (INFRA). A message without an
// inbox row is Dead (PROTOCOL): it was not enqueued by the API.
func (s *Stage) HandleBatch(ctx context.Context, tx relay.Tx, ds []*relay.Delivery) []relay.Result {
	out := make([]relay.Result, len(ds))
	all := func(res relay.Result) []relay.Result {
		for i := range out {
			out[i] = res
		}
		return out
	}
	ptx, err := relaypgx.PgxTx(tx)
	if err != nil {
		return all(relay.Dead(relaytype.ClassUnsupported, err))
	}
	if err := s.decideBatch(ctx, tx, ptx, ds, out); err != nil {
		if errors.Is(err, ErrCountersRaced) {
			// The batch that raced it has committed (the guarded write
			// waited for it): decide again now, from its counts.
			return all(relay.RetryAfter(0, relaytype.ClassInfra, err))
		}
		return all(relay.Retry(relaytype.ClassInfra, err))
	}
	return out
}

func (s *Stage) decideBatch(ctx context.Context, rtx relay.Tx, tx pgx.Tx, ds []*relay.Delivery, out []relay.Result) error {
	now := s.cfg.Clock.Now()
	ids := make([]int64, len(ds))
	for i, d := range ds {
		ids[i] = d.Message.ID
	}
	inbox, err := loadInbox(ctx, tx, ids)
	if err != nil {
		return err
	}
	snap, err := s.rules.Get(ctx)
	if err != nil {
		return fmt.Errorf("sms admit: snapshot: %w", err)
	}
	accounts := map[int64]int64{}
	var decs []*decision
	for i, d := range ds {
		row, ok := inbox[d.Message.ID]
		if !ok {
			out[i] = relay.Dead(relaytype.ClassProtocol, fmt.Errorf("sms admit: message %d has no inbox row", d.Message.ID))
			continue
		}
		out[i] = relay.Succeeded()
		if row.st != StateAccepted {
			continue // decided by an earlier attempt that committed
		}
		dec, ent, err := s.decide(snap, row, now)
		if err != nil {
			return err
		}
		if dec.admitted() {
			acc, ok := accounts[ent]
			if !ok {
				acc, err = tenancy.AccountOf(ctx, tx, ent)
				if err != nil && !errors.Is(err, relaytype.ErrNotFound) {
					return err
				}
				accounts[ent] = acc // 0: none
			}
			if acc == 0 {
				dec.refuse(rules.ReasonInsufficientBalance, "the enterprise has no account")
			}
			dec.account = acc
		}
		decs = append(decs, dec)
	}
	if len(decs) == 0 {
		return nil
	}
	counts, err := s.count(ctx, tx, decs)
	if err != nil {
		return err
	}
	atts, err := s.route(ctx, tx, snap, decs, counts, now)
	if err != nil {
		return err
	}
	if err := writeDecisions(ctx, tx, decs, now); err != nil {
		return err
	}
	faultpoint.Hit(faultpoint.AdmitBeforeFreeze)
	if err := s.freeze(ctx, tx, decs, counts, now); err != nil {
		return err
	}
	faultpoint.Hit(faultpoint.AdmitAfterFreeze)
	return s.queueCommands(ctx, rtx, tx, decs, atts, now)
}

// route is stage B for the batch's admitted messages: one attempt per
// number through the channel rules.Pick chooses among the plan's
// candidates (keyed by message and number, so a replay chooses the same),
// written with their submits by route.Write, which re-checks channel,
// registration and tenant in SQL. A message with a number the re-check
// refused is refused alone (no_channel), its counts given back and its
// other attempts taken back.
func (s *Stage) route(ctx context.Context, tx pgx.Tx, snap *rules.Snapshot, decs []*decision, counts map[string]*counter,
	now time.Time) (map[int64][]*route.Attempt, error) {
	var all []*route.Attempt
	for _, d := range decs {
		if !d.admitted() {
			continue
		}
		for i, p := range d.plans {
			cand, ok := route.Choose(p.Candidates, nil, uint64(d.ID)<<7|uint64(i))
			ch := snap.Channel(cand.ChannelID)
			if !ok || ch == nil {
				return nil, fmt.Errorf("sms admit: message %d: an admitted plan without a channel", d.ID)
			}
			all = append(all, &route.Attempt{MessageID: d.ID, Recipient: i, AttemptNo: 1, AppID: d.app,
				SignatureID: p.Signature.ID, Number: p.Number, Text: p.Text, MsgFmt: p.MsgFmt, Channel: ch, SrcID: cand.SrcID})
		}
	}
	written, refused, err := route.Write(ctx, tx, all, now, route.Options{RequireConnected: s.cfg.Route.RequireConnected})
	if err != nil {
		return nil, fmt.Errorf("sms admit: %w", err)
	}
	byMsg := make(map[int64][]*route.Attempt, len(decs))
	for _, a := range written {
		byMsg[a.MessageID] = append(byMsg[a.MessageID], a)
	}
	if len(refused) == 0 {
		return byMsg, nil
	}
	gone := map[int64]bool{}
	for _, a := range refused {
		gone[a.MessageID] = true
	}
	var back []int64
	for _, d := range decs {
		if !gone[d.ID] {
			continue
		}
		limits := d.limits
		d.refuse(rules.ReasonNoChannel, "the chosen channel, its signature registration or the tenant changed after the routing snapshot")
		d.giveBack(limits, counts)
		back = append(back, d.ID)
		delete(byMsg, d.ID)
	}
	return byMsg, route.Delete(ctx, tx, back)
}

// queueCommands appends the gateway commands of the messages still
// admitted after the freezes — last in the transaction, since each
// channel's outbox key row stays locked to the commit.
func (s *Stage) queueCommands(ctx context.Context, tx relay.Tx, ptx pgx.Tx, decs []*decision, atts map[int64][]*route.Attempt,
	now time.Time) error {
	var keep []*route.Attempt
	for _, d := range decs {
		if d.admitted() {
			keep = append(keep, atts[d.ID]...)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	ids := make([]int64, len(keep))
	for i, a := range keep {
		ids[i] = a.ID
	}
	if err := complete.EnsureWork(ctx, ptx, s.cfg.Work, ids, now, s.cfg.Deadlines); err != nil {
		return fmt.Errorf("sms admit: %w", err)
	}
	if _, err := relay.AppendEventsTx(ctx, tx, route.Events(keep, s.cfg.CommandStream)...); err != nil {
		return fmt.Errorf("sms admit: queue commands: %w", err)
	}
	return nil
}

// loadInbox reads the rows of ids.
func loadInbox(ctx context.Context, tx pgx.Tx, ids []int64) (map[int64]*inboxRow, error) {
	rows, err := tx.Query(ctx, stmts["MessagesLoad"], ids)
	if err != nil {
		return nil, fmt.Errorf("sms admit: read inbox: %w", err)
	}
	defer rows.Close()
	out := make(map[int64]*inboxRow, len(ids))
	for rows.Next() {
		r := &inboxRow{}
		if err := rows.Scan(&r.id, &r.app, &r.numbers, &r.sign, &r.template, &r.params, &r.content, &r.st); err != nil {
			return nil, fmt.Errorf("sms admit: read inbox: %w", err)
		}
		out[r.id] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sms admit: read inbox: %w", err)
	}
	return out, nil
}

// decide applies the rules to every number of row: all must pass, or the
// message is refused with the first refusal (its detail names the number's
// index, never the number). It returns the enterprise of an admitted
// message. An error is not a refusal: the rules failed unexpectedly.
func (s *Stage) decide(snap *rules.Snapshot, row *inboxRow, now time.Time) (*decision, int64, error) {
	d := &decision{ID: row.id, Numbers: row.numbers, Content: row.content, State: StateAdmitted, app: row.app}
	numbers := make([]string, len(row.numbers))
	seen := make(map[string]int, len(row.numbers))
	deltas := map[string]*limitDelta{}
	var ent int64
	var amount rules.Money
	for i, n := range row.numbers {
		plan, err := snap.Check(rules.Request{AppID: row.app, Number: n, SignName: row.sign, TemplateCode: row.template,
			Params: row.params, Content: row.content}, now, s.cfg.Route)
		if err != nil {
			var re *rules.Error
			if !errors.As(err, &re) {
				return nil, 0, fmt.Errorf("sms admit: message %d: %w", row.id, err)
			}
			d.refuse(re.Reason, "numbers["+strconv.Itoa(i)+"]: "+re.Detail)
			return d, 0, nil
		}
		if j, dup := seen[plan.Number]; dup {
			d.refuse(rules.ReasonBadNumber, fmt.Sprintf("numbers[%d] is numbers[%d] again", i, j))
			return d, 0, nil
		}
		seen[plan.Number] = i
		numbers[i] = plan.Number
		d.Carriers, d.plans = append(d.Carriers, plan.Carrier), append(d.plans, plan)
		d.UnitLi = append(d.UnitLi, int64(plan.UnitPrice))
		amount += plan.Amount
		segs := plan.Segments
		d.Segments, d.Content, ent = &segs, plan.Text, plan.App.EnterpriseID
		for _, k := range plan.Limits {
			if x, ok := deltas[k.Key]; ok {
				x.n++
				continue
			}
			deltas[k.Key] = &limitDelta{LimitKey: k, n: 1}
		}
	}
	a := int64(amount)
	d.Numbers, d.AmountLi = numbers, &a
	for _, x := range deltas {
		d.limits = append(d.limits, *x)
	}
	slices.SortFunc(d.limits, func(a, b limitDelta) int { return strings.Compare(a.Key, b.Key) })
	return d, ent, nil
}

// counter is one limit counter of a batch: at is the count read (0 for a
// counter that does not exist yet), n the count with the batch's admitted
// messages.
type counter struct {
	n, at, max int
	until      time.Time
}

// count reads the limit counters of decs' admitted messages (without
// locking them) and decides message after message, in claim order, whether
// all its counters have room — a message that would pass any limit is
// refused with daily_limit or frequency_limit and counts nothing. The counts
// are written once, last in the batch (writeCounters), each guarded by its
// limit there: a batch that raced another over a counter near its limit
// fails and is decided again.
func (s *Stage) count(ctx context.Context, tx pgx.Tx, decs []*decision) (map[string]*counter, error) {
	want := map[string]*counter{}
	for _, d := range decs {
		if !d.admitted() {
			continue
		}
		for _, l := range d.limits {
			if c, ok := want[l.Key]; ok {
				c.max = min(c.max, l.Max)
				continue
			}
			want[l.Key] = &counter{max: l.Max, until: l.Until}
		}
	}
	if len(want) == 0 {
		return want, nil
	}
	keys := slices.Collect(maps.Keys(want))
	rows, err := tx.Query(ctx, stmts["CountersRead"], keys)
	if err != nil {
		return nil, fmt.Errorf("sms admit: read counters: %w", err)
	}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sms admit: read counters: %w", err)
		}
		if c, ok := want[k]; ok {
			c.n, c.at = n, n
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sms admit: read counters: %w", err)
	}
	for _, d := range decs {
		if !d.admitted() {
			continue
		}
		if l, full := firstFull(d.limits, want); full {
			reason := rules.ReasonFrequencyLimit
			what := "a number's frequency limit"
			if strings.HasPrefix(l.Key, "daily:") {
				reason, what = rules.ReasonDailyLimit, "the app's daily limit"
			}
			d.refuse(reason, fmt.Sprintf("%s of %d is reached", what, l.Max))
			continue
		}
		for _, l := range d.limits {
			want[l.Key].n += l.n
		}
	}
	if s.afterCount != nil {
		s.afterCount(keys)
	}
	return want, nil
}

// firstFull returns the first of limits that has no room left for its delta.
func firstFull(limits []limitDelta, counts map[string]*counter) (limitDelta, bool) {
	for _, l := range limits {
		if c := counts[l.Key]; c.n+l.n > c.max {
			return l, true
		}
	}
	return limitDelta{}, false
}

// ErrCountersRaced: a limit counter this batch read had, at the write, too
// little room left for the batch's messages — another batch counted against
// it meanwhile. The batch is rolled back (its class is INFRA, as for any
// store error) and decided again at once, from the counts that batch
// committed.
var ErrCountersRaced = errors.New("a limit counter changed under the batch")

// writeCounters adds what the batch counted to each counter it changed, in
// key order, creating the missing ones, each guarded by its limit
// (CountersAdd).
func writeCounters(ctx context.Context, tx pgx.Tx, counts map[string]*counter, now time.Time) error {
	var keys []string
	for k, c := range counts {
		if c.n != c.at {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys) // one lock order for every batch: no deadlock between two
	ds, maxes, untils := make([]int, len(keys)), make([]int, len(keys)), make([]time.Time, len(keys))
	for i, k := range keys {
		c := counts[k]
		ds[i], maxes[i], untils[i] = c.n-c.at, c.max, c.until
	}
	tag, err := tx.Exec(ctx, stmts["CountersAdd"], keys, ds, maxes, untils, now)
	if err != nil {
		return fmt.Errorf("sms admit: write counters: %w", err)
	}
	if tag.RowsAffected() != int64(len(keys)) {
		return fmt.Errorf("sms admit: write counters: %d of %d within their limits: %w", tag.RowsAffected(), len(keys), ErrCountersRaced)
	}
	for _, k := range keys {
		counts[k].at = counts[k].n
	}
	return nil
}

// writeDecisions moves every decided message from accepted to its state.
func writeDecisions(ctx context.Context, tx pgx.Tx, decs []*decision, now time.Time) error {
	body, err := json.Marshal(decs)
	if err != nil {
		return fmt.Errorf("sms admit: encode decisions: %w", err)
	}
	tag, err := tx.Exec(ctx, stmts["MessagesDecide"], body, now)
	if err != nil {
		return fmt.Errorf("sms admit: write decisions: %w", err)
	}
	if tag.RowsAffected() != int64(len(decs)) {
		return fmt.Errorf("sms admit: write decisions: %d of %d rows still accepted", tag.RowsAffected(), len(decs))
	}
	return nil
}

// freeze posts each admitted message's freeze, in account order then
// message order, last in the transaction — one tenancy.PostMany per account
// (two pipelined round trips whatever the messages): the account row's lock is held
// only from here to the commit. A message whose
// freeze finds the balance short is turned into a refusal
// (insufficient_balance) and its counts are given back.
func (s *Stage) freeze(ctx context.Context, tx pgx.Tx, decs []*decision, counts map[string]*counter, now time.Time) error {
	var adm []*decision
	for _, d := range decs {
		if d.admitted() {
			adm = append(adm, d)
		}
	}
	slices.SortFunc(adm, func(a, b *decision) int {
		if a.account != b.account {
			return cmp.Compare(a.account, b.account)
		}
		return cmp.Compare(a.ID, b.ID)
	})
	for len(adm) > 0 {
		k := 1
		for k < len(adm) && adm[k].account == adm[0].account {
			k++
		}
		group := adm[:k]
		adm = adm[k:]
		es := make([]tenancy.Entry, len(group))
		for i, d := range group {
			es[i] = tenancy.Entry{AccountID: d.account, Kind: tenancy.KindFreeze, IdemKey: FreezeKey(d.ID),
				Amount: rules.Money(*d.AmountLi), Note: "sms message " + strconv.FormatInt(d.ID, 10), At: now}
		}
		res, err := tenancy.PostMany(ctx, tx, es)
		if err != nil {
			return fmt.Errorf("sms admit: freeze %d messages of account %d: %w", len(group), group[0].account, err)
		}
		for i, d := range group {
			r, ok := rules.ReasonOf(res[i].Refused)
			if !ok {
				continue
			}
			detail := "the available balance does not cover " + rules.Money(*d.AmountLi).String()
			if _, err := tx.Exec(ctx, stmts["MessageRefuse"], d.ID, string(r), detail); err != nil {
				return fmt.Errorf("sms admit: refuse message %d: %w", d.ID, err)
			}
			d.giveBack(d.limits, counts)
			d.refuse(r, detail)
			if err := route.Delete(ctx, tx, []int64{d.ID}); err != nil {
				return err
			}
		}
	}
	return writeCounters(ctx, tx, counts, now)
}

// FreezeKey is the ledger idempotency key of message id's freeze.
func FreezeKey(id int64) string { return "freeze:" + strconv.FormatInt(id, 10) }

// SweepCounters deletes up to limit limit counters whose window ended
// before now and returns how many it deleted. The worker role runs it
// every minute; a counter is only ever counted inside its window, so
// deleting it afterwards changes no decision.
func SweepCounters(ctx context.Context, pool *pgxpool.Pool, now time.Time, limit int) (int64, error) {
	tag, err := pool.Exec(ctx, stmts["CountersSweep"], now, limit)
	if err != nil {
		return 0, fmt.Errorf("sms admit: sweep counters: %w", err)
	}
	return tag.RowsAffected(), nil
}
