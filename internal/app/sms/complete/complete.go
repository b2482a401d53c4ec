package complete

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/relayhq/relay"
	"github.com/relayhq/relay/internal/app/sms/route"
	"github.com/relayhq/relay/internal/app/sms/rules"
	"github.com/relayhq/relay/internal/app/sms/tenancy"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
	"github.com/relayhq/relay/relaywork"
)

// Defaults of Config.
const (
	// ResultDeadlineDefault: a segment without a submit result this long
	// after its attempt was written is unknown.
	ResultDeadlineDefault = 10 * time.Minute
	// ReportDeadlineDefault: a segment whose asked-for report has not come
	// this long after its attempt was written is unknown (suppliers keep
	// reports up to three days).
	ReportDeadlineDefault = 72 * time.Hour
	// ResendsDefault: the commands of segments without a submit result are
	// published again twice, a result deadline apart, before the segments
	// are unknown.
	ResendsDefault = 2
	// MaxAttemptsDefault: the first attempt and one retry through another
	// channel.
	MaxAttemptsDefault = 2
	// RetryWindowDefault: no retry for a message accepted longer ago.
	RetryWindowDefault = 72 * time.Hour
	// BatchSizeDefault is the most work records one transaction completes.
	BatchSizeDefault = 32
	// PollIntervalDefault is the wait after a claim found nothing.
	PollIntervalDefault = 50 * time.Millisecond
)

// Outcomes of a number of a message (sms_message.outcomes).
const (
	OutcomeDelivered = "delivered"
	OutcomeFailed    = "failed"
	OutcomeUnknown   = "unknown"
)

// WebhookTarget is the engine outbox target of customer notifications.
const WebhookTarget = "sms-webhook"

// Config configures NewCompleter.
type Config struct {
	// Driver is the PostgreSQL store (its pool runs the completion's
	// transactions; the engine outbox takes the commands and
	// notifications). Required.
	Driver *relaypgx.Driver
	// Work is the work store of queue WorkQueue. Required.
	Work *relaywork.Store
	// Clock: decisions, deadlines and ledger times. Required.
	Clock relaytype.Clock
	// Owner names this process's claims; required.
	Owner string
	// Deadlines: defaults ResultDeadlineDefault, ReportDeadlineDefault.
	Deadlines Deadlines
	// MaxAttempts (≥ 1) and RetryWindow: defaults above.
	MaxAttempts int
	RetryWindow time.Duration
	// Route is applied to a retry's choice (and its re-check).
	Route rules.RouteOpts
	// CommandStream is the stream a retry's commands go to; default
	// route.Stream.
	CommandStream string
	// BatchSize, PollInterval: defaults above.
	BatchSize    int
	PollInterval time.Duration
	// Logger: default slog.Default(); never a number or content.
	Logger *slog.Logger
}

// Stats counts what the completer did since it started.
type Stats struct {
	Batches, Claims, Fenced, Decided, Retries, Completed, Refunds, Failures, Resends int64
}

// Completer decides attempts from their facts under fenced work records
// (relaywork queue WorkQueue), retries failed ones through another channel
// once, settles every number, completes messages and queues their
// notifications. Several completers (in one process or many) share the
// queue: a work record is processed by one at a time, and a completer whose
// lease lapsed cannot commit (relaywork.ErrFenced).
type Completer struct {
	cfg   Config
	log   *slog.Logger
	rules *tenancy.Cache // the routing snapshot of retries, read again only when the rules changed

	batches, claims, fenced, decided, retries, completed, refunds, failures, resends atomic.Int64
}

// NewCompleter returns a completer.
func NewCompleter(cfg Config) (*Completer, error) {
	switch {
	case cfg.Driver == nil:
		return nil, errors.New("sms complete: Config.Driver is nil")
	case cfg.Work == nil:
		return nil, errors.New("sms complete: Config.Work is nil")
	case cfg.Clock == nil:
		return nil, errors.New("sms complete: Config.Clock is nil")
	case cfg.Owner == "":
		return nil, errors.New("sms complete: Config.Owner is empty")
	case cfg.MaxAttempts < 0:
		return nil, fmt.Errorf("sms complete: Config.MaxAttempts %d is negative", cfg.MaxAttempts)
	}
	cfg.Deadlines.Result = cmp.Or(cfg.Deadlines.Result, ResultDeadlineDefault)
	cfg.Deadlines.Report = cmp.Or(cfg.Deadlines.Report, ReportDeadlineDefault)
	switch {
	case cfg.Deadlines.Resends == 0:
		cfg.Deadlines.Resends = ResendsDefault
	case cfg.Deadlines.Resends < 0:
		cfg.Deadlines.Resends = 0
	}
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, MaxAttemptsDefault)
	cfg.RetryWindow = cmp.Or(cfg.RetryWindow, RetryWindowDefault)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, BatchSizeDefault)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, PollIntervalDefault)
	c := &Completer{cfg: cfg, log: cfg.Logger, rules: tenancy.NewCache(cfg.Driver.Pool(), cfg.Clock)}
	if c.log == nil {
		c.log = slog.Default()
	}
	return c, nil
}

// Stats returns the counts so far.
func (c *Completer) Stats() Stats {
	return Stats{Batches: c.batches.Load(), Claims: c.claims.Load(), Fenced: c.fenced.Load(), Decided: c.decided.Load(),
		Retries: c.retries.Load(), Completed: c.completed.Load(), Refunds: c.refunds.Load(), Failures: c.failures.Load(),
		Resends: c.resends.Load()}
}

// EnsureWork creates, in tx, the work records of new attempts — idle,
// woken at the result deadline — so that an attempt whose gateway result
// never comes is still decided by the timeout rule. Stage B and a retry
// call it with the attempts they write.
func EnsureWork(ctx context.Context, tx pgx.Tx, work *relaywork.Store, attempts []int64, now time.Time, dl Deadlines) error {
	if len(attempts) == 0 {
		return nil
	}
	keys := make([]string, len(attempts))
	for i, a := range attempts {
		keys[i] = WorkKey(a)
	}
	wake := now.Add(cmp.Or(dl.Result, ResultDeadlineDefault))
	if err := work.Ensure(ctx, tx, keys, wake); err != nil {
		return fmt.Errorf("sms complete: work of new attempts: %w", err)
	}
	return nil
}

// Run claims and completes batches until ctx ends; it releases its claims
// on the way out. A batch that fails is run again claim by claim, so one
// bad record does not hold the others back; a claim that fails alone is
// failed in the work store (retried with backoff, then needs_review).
func (c *Completer) Run(ctx context.Context) error {
	defer func() {
		if _, err := c.cfg.Work.Release(context.WithoutCancel(ctx), c.cfg.Owner); err != nil {
			c.log.Warn("sms complete: release claims", "err", err)
		}
	}()
	for ctx.Err() == nil {
		claims, err := c.cfg.Work.Claim(ctx, c.cfg.Owner, c.cfg.BatchSize)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			c.log.Warn("sms complete: claim", "err", err)
			c.pause(ctx, time.Second)
			continue
		}
		if len(claims) == 0 {
			c.pause(ctx, c.cfg.PollInterval)
			continue
		}
		c.Process(ctx, claims)
	}
	return nil
}

func (c *Completer) pause(ctx context.Context, d time.Duration) {
	select {
	case <-c.cfg.Clock.After(d):
	case <-ctx.Done():
	}
}

// Process completes claims: in one transaction, or claim by claim when
// that fails. Exported for tests; Run calls it.
func (c *Completer) Process(ctx context.Context, claims []relaywork.Claim) {
	c.claims.Add(int64(len(claims)))
	err := c.processTx(ctx, claims)
	if err == nil {
		return
	}
	if len(claims) == 1 {
		c.fail(ctx, claims[0], err)
		return
	}
	c.log.Warn("sms complete: batch failed; running its claims one by one", "claims", len(claims), "err", err)
	for _, cl := range claims {
		if err := c.processTx(ctx, []relaywork.Claim{cl}); err != nil {
			c.fail(ctx, cl, err)
		}
	}
}

func (c *Completer) fail(ctx context.Context, cl relaywork.Claim, err error) {
	c.failures.Add(1)
	c.log.Warn("sms complete: work failed", "key", cl.Key, "err", err)
	if ferr := c.cfg.Work.Fail(ctx, cl, err); ferr != nil && !errors.Is(ferr, relaywork.ErrFenced) {
		c.log.Warn("sms complete: record the failure", "key", cl.Key, "err", ferr)
	}
}

// errNeedSnapshot rolls a batch back to load a routing snapshot outside the
// transaction (a retry must be routed, and no lock is held while the
// snapshot loads); the batch then runs again with it.
var errNeedSnapshot = errors.New("sms complete: a retry needs a routing snapshot")

func (c *Completer) processTx(ctx context.Context, claims []relaywork.Claim) error {
	var snap *rules.Snapshot
	for {
		err := pgx.BeginFunc(ctx, c.cfg.Driver.Pool(), func(tx pgx.Tx) error {
			return c.batchTx(ctx, tx, claims, snap)
		})
		if errors.Is(err, errNeedSnapshot) && snap == nil {
			if snap, err = c.rules.Get(ctx); err != nil {
				return fmt.Errorf("sms complete: snapshot: %w", err)
			}
			continue
		}
		if err == nil {
			c.batches.Add(1)
		}
		return err
	}
}

// message is a locked message of a batch.
type message struct {
	id, app, account  int64
	webhook, clientID string
	numbers, carriers []string
	segments          int
	unit              []int64
	text, state       string
	acceptedAt        time.Time
	attempts          []*attempt // every attempt
}

// attempt is an sms_attempt row of a batch.
type attempt struct {
	id, message, retryOf, channel int64
	recipient, no, segments       int
	mode, state                   string
	createdAt                     time.Time
	// new state decided in this batch ("" none)
	decided, detail string
}

// final is the attempt's state after this batch.
func (a *attempt) final() string { return cmp.Or(a.decided, a.state) }

// plan is what a batch writes.
type plan struct {
	now                    time.Time
	decideID               []int64
	decideState, decideWhy []string
	noteID                 []int64
	noteText               []string
	segID                  []int64
	segResult, segStat     []string
	timeoutID              []int64
	timeoutWhy             []string
	resendID               []int64
	resendNth              []int
	resendNote             []string
	retries                []*route.Attempt
	entries                map[int64][]tenancy.Entry // by account
	events                 []*relay.OutboxEvent
	done                   []doneItem
	completed              []completedMsg
}

type doneItem struct {
	claim relaywork.Claim
	wake  time.Time
}

type completedMsg struct {
	ID       int64    `json:"id"`
	Outcomes []string `json:"outcomes"`
}

func (c *Completer) batchTx(ctx context.Context, tx pgx.Tx, claims []relaywork.Claim, snap *rules.Snapshot) error {
	now := c.cfg.Clock.Now()
	// 1. The work rows, in key order, fenced: a claim that lapsed is left
	// to its new holder.
	held, fenced, err := c.cfg.Work.LockMany(ctx, tx, claims)
	if err != nil {
		return err
	}
	c.fenced.Add(int64(len(fenced)))
	var ids []int64
	byAttempt := map[int64]relaywork.Claim{}
	for _, cl := range held {
		id, err := attemptOfKey(cl.Key)
		if err != nil {
			return err
		}
		ids = append(ids, id)
		byAttempt[id] = cl
	}
	if len(held) == 0 {
		return nil
	}
	faultpoint.Hit(faultpoint.SmsCompleteAfterLock)
	// 2. Their messages, locked in id order, with every attempt of each.
	msgs, err := c.loadMessages(ctx, tx, ids)
	if err != nil {
		return err
	}
	// 3. The claimed attempts' submits and facts.
	segs, facts, err := loadFacts(ctx, tx, ids)
	if err != nil {
		return err
	}
	p := &plan{now: now, entries: map[int64][]tenancy.Entry{}}
	touched := map[int64]*message{}
	for _, id := range ids {
		a, m := findAttempt(msgs, id)
		if a == nil {
			// The work of an attempt that does not exist: nothing to do
			// but close the work (cannot happen: both are written together).
			p.done = append(p.done, doneItem{claim: byAttempt[id]})
			continue
		}
		wake, err := c.decide(p, m, a, segs[id], facts[id], snap)
		if err != nil {
			return err
		}
		touched[m.id] = m
		p.done = append(p.done, doneItem{claim: byAttempt[id], wake: wake})
	}
	for _, m := range touched {
		c.completeMessage(p, m)
	}
	return c.write(ctx, tx, p)
}

func findAttempt(msgs map[int64]*message, id int64) (*attempt, *message) {
	for _, m := range msgs {
		for _, a := range m.attempts {
			if a.id == id {
				return a, m
			}
		}
	}
	return nil, nil
}

// decide applies Decide to one claimed attempt and plans what follows.
// It returns the work's wake-up time (zero: none).
func (c *Completer) decide(p *plan, m *message, a *attempt, segs []Segment, facts []Fact, snap *rules.Snapshot) (time.Time, error) {
	v := Decide(View{Segments: segs, CreatedAt: a.createdAt}, facts, p.now, c.cfg.Deadlines)
	for _, s := range v.Segments {
		p.segID, p.segResult, p.segStat = append(p.segID, int64(s.SubmitID)), append(p.segResult, s.Result), append(p.segStat, s.Stat)
	}
	if a.state != AttemptQueued {
		// Decided earlier: a new fact changes nothing but may be kept.
		c.late(p, m, a, v)
		return time.Time{}, nil
	}
	if v.State == AttemptQueued {
		if len(v.Resend) > 0 {
			if err := c.resend(p, m, a, v.Resend, facts, snap); err != nil {
				return time.Time{}, err
			}
		}
		return v.WakeAt, nil
	}
	c.decided.Add(1)
	a.decided, a.detail = v.State, relaytype.BoundText(v.Detail, 200)
	if len(v.Conflicts) > 0 {
		a.detail = relaytype.BoundText(a.detail+"; "+strings.Join(v.Conflicts, "; "), 300)
	}
	if v.TimedOut {
		p.timeoutID, p.timeoutWhy = append(p.timeoutID, a.id), append(p.timeoutWhy, relaytype.BoundText(v.Detail, 200))
	}
	p.decideID, p.decideState, p.decideWhy = append(p.decideID, a.id), append(p.decideState, v.State), append(p.decideWhy, a.detail)
	if v.State == AttemptFailed {
		retried, err := c.retry(p, m, a, snap)
		if err != nil || retried {
			return time.Time{}, err
		}
	}
	c.settle(p, m, a.recipient, v.State)
	return time.Time{}, nil
}

// resend plans publishing again the commands of a's segments in submits
// (their result deadline passed): the same submitIds, rebuilt from the
// message's text and the attempt's channel; the gateway submits a command
// it never claimed and answers one it did from its row. A resend fact
// counts it. When the channel, or the rules for this number, no longer
// allow it, nothing is published: the fact alone moves the deadline on.
func (c *Completer) resend(p *plan, m *message, a *attempt, submits []uint64, facts []Fact, snap *rules.Snapshot) error {
	if snap == nil {
		return errNeedSnapshot
	}
	nth := 1
	for _, f := range facts {
		if f.Kind == KindResend {
			nth++
		}
	}
	note := "commands published again"
	ch := snap.Channel(a.channel)
	plan, err := snap.Check(rules.Request{AppID: m.app, Number: m.numbers[a.recipient], Content: m.text}, p.now, c.cfg.Route)
	var srcID string
	if err == nil && ch != nil && ch.Active {
		for _, cand := range plan.Candidates {
			if cand.ChannelID == a.channel {
				srcID = cand.SrcID
			}
		}
	}
	if srcID == "" {
		note = "not published again: the channel or the rules no longer allow it"
	} else {
		ra := &route.Attempt{ID: a.id, MessageID: m.id, Recipient: a.recipient, AttemptNo: a.no, Number: plan.Number,
			Text: plan.Text, MsgFmt: plan.MsgFmt, Channel: ch, SrcID: srcID}
		if err := route.Split(ra); err != nil {
			return err
		}
		for _, ev := range route.Events([]*route.Attempt{ra}, c.cfg.CommandStream) {
			sid, _ := strconv.ParseUint(strings.TrimPrefix(ev.ID, "cmd:"), 10, 64)
			if slices.Contains(submits, sid) {
				ev.ID += ":r" + strconv.Itoa(nth)
				p.events = append(p.events, ev)
			}
		}
		c.resends.Add(1)
	}
	p.resendID, p.resendNth, p.resendNote = append(p.resendID, a.id), append(p.resendNth, nth), append(p.resendNote, note)
	return nil
}

// late handles new facts of an attempt decided before: a failure reported
// for a number charged as unknown is refunded (once: the refund's key); a
// fact of an attempt that was retried is kept for audit and changes
// nothing; any other contradiction is noted.
func (c *Completer) late(p *plan, m *message, a *attempt, v Verdict) {
	retried := slices.ContainsFunc(m.attempts, func(x *attempt) bool { return x.retryOf == a.id })
	var note string
	switch {
	case (v.State == AttemptQueued || v.State == a.state) && len(v.Conflicts) == 0:
		return
	case v.State == AttemptQueued || v.State == a.state:
		// The verdict stands; a later fact contradicts the one it used.
		note = "contradicting fact kept: " + strings.Join(v.Conflicts, "; ")
		if retried {
			note = "late fact after the retry: " + strings.Join(v.Conflicts, "; ")
		}
	case retried:
		note = "late fact after the retry: " + v.State
	case a.state == AttemptUnknown && v.State == AttemptFailed:
		note = "reported failed after it was charged as unknown: refunded"
		c.refunds.Add(1)
		p.entries[m.account] = append(p.entries[m.account], tenancy.Entry{Kind: tenancy.KindRefund,
			IdemKey: recipientKey("refund", m.id, a.recipient), Amount: amount(m, a.recipient),
			Note: "sms message " + strconv.FormatInt(m.id, 10), At: p.now})
	default:
		note = "late fact contradicts " + a.state + ": " + v.State
	}
	p.noteID, p.noteText = append(p.noteID, a.id), append(p.noteText, note)
}

// retry plans the retry of failed attempt a through another channel, if
// the rules allow one: attempts left, inside the retry window, no retry
// yet, the message still allowed by the current rules (app, enterprise,
// blacklist, signature) and a channel left that was not tried. The
// routing needs a snapshot: without one the batch is rolled back to load
// it (errNeedSnapshot). retried is false when no retry is allowed.
func (c *Completer) retry(p *plan, m *message, a *attempt, snap *rules.Snapshot) (bool, error) {
	if a.no >= c.cfg.MaxAttempts || !p.now.Before(m.acceptedAt.Add(c.cfg.RetryWindow)) {
		return false, nil
	}
	if slices.ContainsFunc(m.attempts, func(x *attempt) bool { return x.retryOf == a.id }) {
		return true, nil // made by an earlier run that committed: nothing to redo
	}
	if snap == nil {
		return false, errNeedSnapshot
	}
	plan, err := snap.Check(rules.Request{AppID: m.app, Number: m.numbers[a.recipient], Content: m.text}, p.now, c.cfg.Route)
	if err != nil {
		if _, ok := rules.ReasonOf(err); !ok {
			return false, err
		}
		a.detail = relaytype.BoundText(a.detail+"; no retry: "+string(mustReason(err)), 300)
		p.decideWhy[len(p.decideWhy)-1] = a.detail
		return false, nil
	}
	var tried []int64
	for _, x := range m.attempts {
		if x.recipient == a.recipient {
			tried = append(tried, x.channel)
		}
	}
	cand, ok := route.Choose(plan.Candidates, tried, uint64(m.id)<<7|uint64(a.recipient))
	ch := snap.Channel(cand.ChannelID)
	if !ok || ch == nil {
		a.detail = relaytype.BoundText(a.detail+"; no retry: no other channel", 300)
		p.decideWhy[len(p.decideWhy)-1] = a.detail
		return false, nil
	}
	p.retries = append(p.retries, &route.Attempt{MessageID: m.id, Recipient: a.recipient, AttemptNo: a.no + 1,
		RetryOf: a.id, AppID: m.app, SignatureID: plan.Signature.ID, Number: plan.Number, Text: plan.Text,
		MsgFmt: plan.MsgFmt, Channel: ch, SrcID: cand.SrcID})
	// The retry counts as the recipient's latest attempt from here on.
	m.attempts = append(m.attempts, &attempt{id: -1, message: m.id, retryOf: a.id, channel: ch.ID,
		recipient: a.recipient, no: a.no + 1, state: AttemptQueued})
	c.retries.Add(1)
	return true, nil
}

func mustReason(err error) rules.Reason {
	r, _ := rules.ReasonOf(err)
	return r
}

// settle plans the number's settlement for its final attempt state: a
// charge when delivered or unknown (the supplier may have sent it; a
// failure reported later is refunded), a release when failed.
func (c *Completer) settle(p *plan, m *message, recipient int, state string) {
	kind, key := tenancy.KindCharge, "charge"
	if state == AttemptFailed {
		kind, key = tenancy.KindRelease, "release"
	}
	p.entries[m.account] = append(p.entries[m.account], tenancy.Entry{Kind: kind,
		IdemKey: recipientKey(key, m.id, recipient), Amount: amount(m, recipient),
		Note: "sms message " + strconv.FormatInt(m.id, 10), At: p.now})
}

// recipientKey is the ledger key of a number's settlement.
func recipientKey(kind string, message int64, recipient int) string {
	return kind + ":" + strconv.FormatInt(message, 10) + ":" + strconv.Itoa(recipient)
}

// ChargeKey, ReleaseKey and RefundKey are the ledger keys of number
// recipient of message: each posted at most once.
func ChargeKey(message int64, recipient int) string {
	return recipientKey("charge", message, recipient)
}
func ReleaseKey(message int64, recipient int) string {
	return recipientKey("release", message, recipient)
}
func RefundKey(message int64, recipient int) string {
	return recipientKey("refund", message, recipient)
}

func amount(m *message, recipient int) rules.Money {
	return rules.Money(int64(m.segments) * m.unit[recipient])
}

// completeMessage plans m's completion when every number's latest attempt
// is decided, with its notification when the app takes webhooks.
func (c *Completer) completeMessage(p *plan, m *message) {
	if m.state != "admitted" {
		return
	}
	latest := make([]*attempt, len(m.numbers))
	for _, a := range m.attempts {
		if a.recipient < len(latest) && (latest[a.recipient] == nil || a.no > latest[a.recipient].no) {
			latest[a.recipient] = a
		}
	}
	outcomes := make([]string, len(m.numbers))
	for i, a := range latest {
		if a == nil || a.final() == AttemptQueued {
			return
		}
		outcomes[i] = map[string]string{AttemptDelivered: OutcomeDelivered, AttemptFailed: OutcomeFailed,
			AttemptUnknown: OutcomeUnknown}[a.final()]
	}
	m.state = "completed"
	c.completed.Add(1)
	p.completed = append(p.completed, completedMsg{ID: m.id, Outcomes: outcomes})
	if m.webhook == "" {
		return
	}
	type rcpt struct {
		Number  string `json:"number"`
		Outcome string `json:"outcome"`
	}
	body := struct {
		MessageID   int64     `json:"message_id"`
		ClientMsgID string    `json:"client_msg_id"`
		State       string    `json:"state"`
		Recipients  []rcpt    `json:"recipients"`
		CompletedAt time.Time `json:"completed_at"`
	}{MessageID: m.id, ClientMsgID: m.clientID, State: "completed", CompletedAt: p.now}
	for i, n := range m.numbers {
		body.Recipients = append(body.Recipients, rcpt{Number: n, Outcome: outcomes[i]})
	}
	payload, _ := json.Marshal(body) // cannot fail: plain values
	p.events = append(p.events, &relay.OutboxEvent{ID: "notify:" + strconv.FormatInt(m.id, 10), Target: WebhookTarget,
		Topic: m.webhook, Key: strconv.FormatInt(m.app, 10), Payload: payload})
}

// NewWorkStore returns the completion's work store on pool: queue
// WorkQueue, relaywork's defaults. clock nil takes time from the database
// (leases judged by one clock whatever the hosts'); tests pass their fake
// clock.
func NewWorkStore(pool *pgxpool.Pool, clock relaytype.Clock) (*relaywork.Store, error) {
	return relaywork.New(pool, relaywork.Config{Queue: WorkQueue, Clock: clock})
}
