package apply

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/relayhq/relay"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaydriver"
	"github.com/relayhq/relay/relaydriver/relaypgx"
	"github.com/relayhq/relay/relaytype"
)

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("apply/queries.sql", queriesSQL, "EventLoad", "HeadLockMany", "JobCommittedMany",
	"HeadUpsertMany", "ReceiptInsertMany", "JobFinalMany")

// Defaults of Config.
const (
	WorkersDefault   = 4
	BatchSizeDefault = 512
	TxBatchDefault   = 64
	// UrgentWorkersDefault is Config.UrgentWorkers' default.
	UrgentWorkersDefault = 1
)

// applierAudit is the audit identity of what the applier records.
var applierAudit = shore.Audit{Actor: "shore-applier", Reason: "detected while applying an uplink event"}

// Config configures an Applier.
type Config struct {
	// Driver is the shore's PostgreSQL (inbox, heads, receipts, the engine
	// queue shore.ApplyQueue). Required.
	Driver *relaypgx.Driver
	// Target is the shore business database. Required.
	Target *Target
	// Clock stamps every record. Required.
	Clock relaytype.Clock
	// InstanceID names this applier's leases (a stable id lets a restarted
	// process take its own leases back at once). Empty: a random one.
	InstanceID string
	// Workers, BatchSize and TxBatch are the engine's (default 4, 512, 64):
	// how many batches run at once, how many events one claim takes and how
	// many share one transaction (and one target round trip).
	Workers, BatchSize, TxBatch int
	// UrgentWorkers run the urgent queue (shore.UrgentApplyQueue: the rules
	// of Inbox.SetUrgentRules) beside Workers, so its events never wait
	// behind the other rules' backlog (default UrgentWorkersDefault).
	UrgentWorkers int
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Registerer, when set, receives the engine's metrics of the apply queue.
	Registerer prometheus.Registerer
}

// Applier applies released events to the target. Start it with
// Engine().Start, or drive it with Engine().Work in tests.
type Applier struct {
	cfg    Config
	engine *relay.Engine
	urgent *relay.Engine
	mu     sync.Mutex
	rules  map[shore.RuleRef]*shore.Rule
}

// New returns an Applier on cfg.
func New(cfg Config) (*Applier, error) {
	switch {
	case cfg.Driver == nil:
		return nil, errors.New("apply: Config.Driver is nil")
	case cfg.Target == nil:
		return nil, errors.New("apply: Config.Target is nil")
	case cfg.Clock == nil:
		return nil, errors.New("apply: Config.Clock is nil")
	}
	cfg.Workers = cmp.Or(cfg.Workers, WorkersDefault)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, BatchSizeDefault)
	cfg.TxBatch = cmp.Or(cfg.TxBatch, TxBatchDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Applier{cfg: cfg, rules: map[shore.RuleRef]*shore.Rule{}}
	// An applied event's queue message is deleted with its receipt
	// (DeleteSucceeded): the receipt and the apply job are its record, and
	// what dedupes a release is the inbox — an event is released once, when
	// its stream's lock passes its sequence — not the queue. The delete
	// writes no index entry, where a SUCCEEDED row version wrote three.
	e, err := relay.NewEngine(cfg.Driver, relay.Config{Queue: shore.ApplyQueue, Mode: relay.ModePerKey, Handler: a,
		Workers: cfg.Workers, BatchSize: cfg.BatchSize, TxBatch: cfg.TxBatch, InstanceID: cfg.InstanceID,
		DeleteSucceeded: true, Clock: cfg.Clock, Logger: cfg.Logger, Registerer: cfg.Registerer})
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	a.engine = e
	cfg.UrgentWorkers = cmp.Or(cfg.UrgentWorkers, UrgentWorkersDefault)
	if a.urgent, err = relay.NewEngine(cfg.Driver, relay.Config{Queue: shore.UrgentApplyQueue, Mode: relay.ModePerKey,
		Handler: a, Workers: cfg.UrgentWorkers, BatchSize: cfg.BatchSize, TxBatch: cfg.TxBatch,
		InstanceID: cfg.InstanceID, DeleteSucceeded: true, Clock: cfg.Clock, Logger: cfg.Logger,
		Registerer: cfg.Registerer}); err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	return a, nil
}

// Engine is the per-key engine running the applier on shore.ApplyQueue;
// UrgentEngine the one on shore.UrgentApplyQueue.
func (a *Applier) Engine() *relay.Engine { return a.engine }

// UrgentEngine: see Engine.
func (a *Applier) UrgentEngine() *relay.Engine { return a.urgent }

// Start starts both engines.
func (a *Applier) Start(ctx context.Context) error {
	if err := a.urgent.Start(ctx); err != nil {
		return err
	}
	if err := a.engine.Start(ctx); err != nil {
		return errors.Join(err, a.urgent.Stop(ctx))
	}
	return nil
}

// ReleaseWaitDefault bounds how long Stop waits, once ctx has ended, for
// the interrupted engines to return before it releases their leases.
const ReleaseWaitDefault = 2 * time.Second

// Stop stops both engines, waiting at most until ctx ends for the batches in
// flight to finish. Events whose batch did not finish in time (their handlers
// are cancelled) would keep this instance's lease until it expires; Stop
// releases those leases, so another applier takes the events over at once
// rather than after the lease time. This is safe while a cancelled handler
// still runs: its final write checks the lease owner and is refused, and a
// target write it made is recognised by the ledger. The release runs on a
// context of its own, bounded by ReleaseWaitDefault.
func (a *Applier) Stop(ctx context.Context) error {
	err := errors.Join(a.engine.Stop(ctx), a.urgent.Stop(ctx))
	if err == nil {
		return nil // every claimed batch finished: no lease left
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseWaitDefault)
	defer cancel()
	// The loops were cancelled: wait for them to return, then release.
	_ = a.engine.Stop(rctx)
	_ = a.urgent.Stop(rctx)
	n, rerr := a.ReleaseLeases(rctx)
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	a.cfg.Logger.InfoContext(rctx, "shipsync apply: stopped before its batches finished; released their leases",
		"instance_id", a.cfg.InstanceID, "released", n)
	return err
}

// ReleaseLeases clears every lease this applier's instance id (its own or
// the engines' generated one) holds on
// unfinished events of both apply queues and returns how many it cleared.
// Call it only when no engine of this InstanceID is processing (Stop does).
func (a *Applier) ReleaseLeases(ctx context.Context) (int, error) {
	total := 0
	for _, e := range []*relay.Engine{a.engine, a.urgent} {
		n, err := a.cfg.Driver.GetExecutor().MessageLeaseRelease(ctx, &relaydriver.MessageLeaseReleaseParams{
			Queue: e.Queue(), Owner: e.InstanceID()})
		if err != nil {
			return total, fmt.Errorf("apply: release the leases of %q on %s: %w", e.InstanceID(), e.Queue(), err)
		}
		total += n
	}
	return total, nil
}

// Notify wakes both engines (new events were released).
func (a *Applier) Notify() {
	a.urgent.Notify()
	a.engine.Notify()
}

// Work runs both queues until neither has work it can do now (tests);
// it returns how many events it finished.
func (a *Applier) Work(ctx context.Context) (int, error) {
	total := 0
	for range 1000 {
		u, err := a.urgent.Work(ctx)
		if err != nil {
			return total, err
		}
		n, err := a.engine.Work(ctx)
		if err != nil {
			return total, err
		}
		total += u + n
		if u+n == 0 {
			return total, nil
		}
	}
	return total, errors.New("apply: still busy after 1,000 rounds")
}

// Handle applies one event: HandleBatch of one.
func (a *Applier) Handle(ctx context.Context, tx relay.Tx, d *relay.Delivery) relay.Result {
	return a.HandleBatch(ctx, tx, []*relay.Delivery{d})[0]
}

// item is one event of a batch as the applier works on it.
type item struct {
	inboxID         int64
	origin, eventID string
	rule            string
	pkHash          []byte
	pkText          string
	ev              *pb.ChangeEvent
	hasReceipt      bool
	job             string
	plan            Plan
	ruleDef         *shore.Rule
	head            Head
	outcome         outcome
	reason          pb.RejectReason
	detail          string
	learnt          string
	found           Found
	foundInTarget   bool
}

// outcome is an event's terminal result.
type outcome int

const (
	outNone outcome = iota
	outApplied
	outConflict
	outRejected
)

// HandleBatch applies ds (events of distinct keys) in tx: the steps of the
// package comment. Every event ends Succeeded with its receipt written, or
// the batch fails as a whole with Retry (a target or store outage) and the
// engine runs its events again — which the job and the ledger make safe.
func (a *Applier) HandleBatch(ctx context.Context, rtx relay.Tx, ds []*relay.Delivery) []relay.Result {
	tx, err := relaypgx.PgxTx(rtx)
	if err != nil {
		return fail(len(ds), relay.Dead(relaytype.ClassInternal, err))
	}
	items, res := a.load(ctx, tx, ds)
	if res != nil {
		return fail(len(ds), *res)
	}
	now := a.cfg.Clock.Now()
	faultpoint.Hit(faultpoint.ShipsyncApplyAfterLock)

	// Steps 4–6: the writes.
	var ws []Conditional
	var wi []*item
	for _, it := range items {
		if it.outcome == outNone && it.plan.Action == Write {
			w := ChangeWrite(ruleTable(it.ruleDef), it.ev, it.plan.Op, it.ev.EventId, it.inboxID)
			w.Base = cmp.Or(it.plan.Base, w.Base)
			ws = append(ws, w)
			wi = append(wi, it)
		}
	}
	changed, refused, err := a.cfg.Target.Apply(ctx, ws, now)
	if err != nil {
		return fail(len(ds), relay.Retry(classOf(err), fmt.Errorf("apply: target write: %w", err)))
	}
	faultpoint.Hit(faultpoint.ShipsyncApplyAfterTarget)
	var committed []int64
	var unchanged []Conditional
	var ui []*item
	for i, it := range wi {
		switch {
		case refused[i] != nil:
			it.outcome, it.reason, it.detail = outRejected, pb.RejectReason_REJECT_REASON_TARGET_REFUSED, refused[i].Error()
		case changed[i]:
			it.outcome, it.learnt = outApplied, "write"
			committed = append(committed, it.inboxID)
		default:
			unchanged = append(unchanged, ws[i])
			ui = append(ui, it)
		}
	}
	if len(committed) > 0 {
		if _, err := a.cfg.Driver.Pool().Exec(ctx, stmts["JobCommittedMany"], committed, now); err != nil {
			// Not fatal to correctness (the ledger answers the same
			// question), but the batch cannot finalize on a store that
			// failed: run it again.
			return fail(len(ds), relay.Retry(relaytype.ClassInfra, fmt.Errorf("apply: record TARGET_COMMITTED: %w", err)))
		}
	}
	faultpoint.Hit(faultpoint.ShipsyncApplyAfterRecorded)
	fs, err := a.cfg.Target.Inspect(ctx, unchanged)
	if err != nil {
		return fail(len(ds), relay.Retry(classOf(err), err))
	}
	for i, it := range ui {
		switch f := fs[i]; {
		case f.Applied:
			it.outcome, it.learnt = outApplied, "ledger"
			continue
		case f.Exists && f.EventID == it.eventID && f.Revision == it.ev.ResultRevision:
			// §10.3: the row holds this very event's write (made by an
			// earlier attempt): idempotent success.
			it.outcome, it.learnt = outApplied, "target"
			continue
		}
		it.outcome, it.found, it.foundInTarget = outConflict, fs[i], true
	}
	for _, it := range items {
		if it.outcome == outNone && it.plan.Action == Conflict {
			it.outcome = outConflict
		}
	}
	// Step 7.
	if err := a.finalize(ctx, tx, items, now); err != nil {
		return fail(len(ds), relay.Retry(relaytype.ClassInfra, fmt.Errorf("apply: finalize: %w", err)))
	}
	faultpoint.Hit(faultpoint.ShipsyncApplyBeforeCommit)
	out := make([]relay.Result, len(ds))
	for i := range out {
		out[i] = relay.Succeeded()
	}
	return out
}

// ruleTable is the target table a registered rule writes.
func ruleTable(r *shore.Rule) *Table { return &Table{Name: r.TargetTable, Columns: r.Columns} }

// ChangeWrite is the conditional write of change ev to table: op's
// statement (OpFor) over ev's key, after image and base revision, stamped
// with ev's result revision and origin and with eventID — the event's own
// id on the shore, the downlink command's id on a ship (whose loop
// suppression looks the command up by it). ref goes into the ledger row.
func ChangeWrite(table *Table, ev *pb.ChangeEvent, op Op, eventID string, ref int64) Conditional {
	return Conditional{Table: table, Op: op, Key: ev.PrimaryKey, Values: ev.GetAfter().GetColumns(), Base: ev.BaseRevision,
		Stamp: Stamp{Revision: ev.ResultRevision, Origin: ev.OriginNodeId, EventID: eventID}, Ref: ref}
}

func fail(n int, r relay.Result) []relay.Result {
	out := make([]relay.Result, n)
	for i := range out {
		out[i] = r
	}
	return out
}

// classOf classifies a target failure: a schema the operator must fix is
// UNSUPPORTED (retried, so a fix is picked up), the rest INFRA.
func classOf(err error) relaytype.ErrorClass {
	var me *mysql.MySQLError
	if errors.As(err, &me) && (me.Number == 1146 || me.Number == 1054) { // no such table, no such column
		return relaytype.ClassUnsupported
	}
	return relaytype.ClassInfra
}

// load reads the batch's events, their receipts and jobs, the rules, and
// locks the record heads; it decides each event (steps 1–3). A non-nil
// Result fails the whole batch.
func (a *Applier) load(ctx context.Context, tx pgx.Tx, ds []*relay.Delivery) ([]*item, *relay.Result) {
	ids := make([]int64, len(ds))
	for i, d := range ds {
		id, err := shore.ParseApplyPayload(d.Message.Payload)
		if err != nil {
			r := relay.Dead(relaytype.ClassMalformed, err)
			return nil, &r
		}
		ids[i] = id
	}
	rows, err := tx.Query(ctx, stmts["EventLoad"], ids)
	if err != nil {
		r := relay.Retry(relaytype.ClassInfra, fmt.Errorf("apply: load events: %w", err))
		return nil, &r
	}
	byID := make(map[int64]*item, len(ids))
	var it item
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&it.inboxID, &it.origin, &it.eventID, &it.rule, &it.pkHash, &it.pkText, &raw,
		&it.hasReceipt, &it.job}, func() error {
		c := it
		c.pkHash = append([]byte(nil), it.pkHash...)
		c.ev = &pb.ChangeEvent{}
		if err := proto.Unmarshal(raw, c.ev); err != nil {
			c.ev = nil
		}
		byID[c.inboxID] = &c
		return nil
	})
	if err != nil {
		r := relay.Retry(relaytype.ClassInfra, fmt.Errorf("apply: load events: %w", err))
		return nil, &r
	}
	items := make([]*item, len(ids))
	var refs []shore.RuleRef
	for i, id := range ids {
		items[i] = byID[id]
		if items[i] == nil {
			r := relay.Dead(relaytype.ClassMalformed, fmt.Errorf("apply: inbox event %d does not exist", id))
			return nil, &r
		}
		if ev := items[i].ev; ev != nil {
			refs = append(refs, shore.RuleRef{ID: ev.RuleId, Version: ev.RuleVersion})
		}
	}
	rules, err := a.rulesFor(ctx, tx, refs)
	if err != nil {
		r := relay.Retry(relaytype.ClassInfra, err)
		return nil, &r
	}
	heads, err := lockHeads(ctx, tx, items)
	if err != nil {
		r := relay.Retry(relaytype.ClassInfra, err)
		return nil, &r
	}
	for _, it := range items {
		switch {
		case it.hasReceipt:
			// Step 2: finished before (its commit raced a lease expiry).
			it.outcome = outNone
			it.plan = Plan{}
			continue
		case it.ev == nil:
			it.outcome, it.reason, it.detail = outRejected, pb.RejectReason_REJECT_REASON_INVALID_FIELD, "stored event does not decode"
			continue
		case it.job == "TARGET_COMMITTED":
			it.outcome, it.learnt = outApplied, "job"
			it.ruleDef = rules[shore.RuleRef{ID: it.ev.RuleId, Version: it.ev.RuleVersion}]
			continue
		}
		it.ruleDef = rules[shore.RuleRef{ID: it.ev.RuleId, Version: it.ev.RuleVersion}]
		it.head = heads[headKey{it.rule, string(it.pkHash)}]
		it.plan = Decide(it.ruleDef, it.ev, it.head)
		switch it.plan.Action {
		case Reject:
			it.outcome, it.reason, it.detail = outRejected, it.plan.Reason, it.plan.Detail
		case Repeat:
			it.outcome, it.learnt = outApplied, "repeat"
			it.detail = "a repeat of a change applied already (its result revision is the record's, now or recently); nothing written"
		}
	}
	return items, nil
}

type headKey struct{ rule, pk string }

// lockHeads locks and reads the heads of the items' records.
func lockHeads(ctx context.Context, tx pgx.Tx, items []*item) (map[headKey]Head, error) {
	keys := make([]headKey, len(items))
	for i, it := range items {
		keys[i] = headKey{it.rule, string(it.pkHash)}
	}
	// One lock order for every batch: no two batches wait on each other in
	// a cycle.
	slices.SortFunc(keys, func(a, b headKey) int { return cmp.Or(strings.Compare(a.rule, b.rule), strings.Compare(a.pk, b.pk)) })
	rs, ks := make([]string, len(keys)), make([][]byte, len(keys))
	for i, k := range keys {
		rs[i], ks[i] = k.rule, []byte(k.pk)
	}
	rows, err := tx.Query(ctx, stmts["HeadLockMany"], rs, ks)
	if err != nil {
		return nil, fmt.Errorf("apply: lock record heads: %w", err)
	}
	out := map[headKey]Head{}
	var r string
	var k []byte
	var h Head
	_, err = pgx.ForEachRow(rows, []any{&r, &k, &h.Revision, &h.Origin, &h.EventID, &h.Tombstone, &h.Recent}, func() error {
		h.Found = true
		h.Recent = slices.Clone(h.Recent)
		out[headKey{r, string(k)}] = h
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("apply: lock record heads: %w", err)
	}
	return out, nil
}

// rulesFor returns the registered rules among refs, cached (a registered
// version never changes; an unregistered one is asked for again).
func (a *Applier) rulesFor(ctx context.Context, q shore.Querier, refs []shore.RuleRef) (map[shore.RuleRef]*shore.Rule, error) {
	out := make(map[shore.RuleRef]*shore.Rule, len(refs))
	var missing []shore.RuleRef
	a.mu.Lock()
	for _, r := range refs {
		if rule, ok := a.rules[r]; ok {
			out[r] = rule
		} else if _, asked := out[r]; !asked {
			missing = append(missing, r)
		}
	}
	a.mu.Unlock()
	if len(missing) == 0 {
		return out, nil
	}
	got, err := shore.LoadRules(ctx, q, missing)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for r, rule := range got {
		a.rules[r] = rule
		out[r] = rule
	}
	return out, nil
}

// finalize writes step 7 in the engine transaction.
func (a *Applier) finalize(ctx context.Context, tx pgx.Tx, items []*item, now time.Time) error {
	var hr, ho, hrev, he []string
	var hk [][]byte
	var ht []bool
	var ro, re, rr, rreason, rdetail, rapplied []string
	var rconf []*string
	var ji []int64
	var js, jl []string
	for _, it := range items {
		if it.hasReceipt {
			continue
		}
		var conflictID *string
		switch it.outcome {
		case outApplied:
			if it.plan.Action == Repeat { // the record's head stays as it is
				ji, js, jl = append(ji, it.inboxID), append(js, "FINALIZED"), append(jl, it.learnt)
				break
			}
			hr, hk = append(hr, it.rule), append(hk, it.pkHash)
			hrev, ho, he = append(hrev, it.ev.ResultRevision), append(ho, it.ev.OriginNodeId), append(he, it.eventID)
			ht = append(ht, it.ev.Operation == pb.Operation_OPERATION_DELETE)
			ji, js, jl = append(ji, it.inboxID), append(js, "FINALIZED"), append(jl, it.learnt)
		case outConflict:
			id, err := a.recordConflict(ctx, tx, it, now)
			if err != nil {
				return err
			}
			conflictID = &id
			learnt := "head"
			if it.foundInTarget {
				learnt = "write"
			}
			ji, js, jl = append(ji, it.inboxID), append(js, "CONFLICT_CAPTURED"), append(jl, learnt)
		case outRejected:
			ji, js, jl = append(ji, it.inboxID), append(js, "REJECTED"), append(jl, "head")
		default:
			return fmt.Errorf("event %d has no outcome", it.inboxID)
		}
		ro, re = append(ro, it.origin), append(re, it.eventID)
		rr = append(rr, map[outcome]string{outApplied: "APPLIED", outConflict: "CONFLICT_RECORDED", outRejected: "REJECTED"}[it.outcome])
		reason := ""
		if it.outcome == outRejected {
			reason = it.reason.String()
		}
		rreason, rdetail, rconf = append(rreason, reason), append(rdetail, bounded(it.detail)), append(rconf, conflictID)
		applied := ""
		if it.outcome == outApplied {
			applied = it.ev.ResultRevision
		}
		rapplied = append(rapplied, applied)
	}
	// The three set-based writes go in one round trip.
	var batch pgx.Batch
	var what []string
	if len(hr) > 0 {
		batch.Queue(stmts["HeadUpsertMany"], hr, hk, hrev, ho, he, ht, now)
		what = append(what, "record heads")
	}
	if len(ro) > 0 {
		batch.Queue(stmts["ReceiptInsertMany"], ro, re, rr, rreason, rdetail, rconf, rapplied, now)
		batch.Queue(stmts["JobFinalMany"], ji, js, jl, now)
		what = append(what, "receipts", "apply jobs")
	}
	if len(what) == 0 {
		return nil
	}
	br := tx.SendBatch(ctx, &batch)
	for _, w := range what {
		if _, err := br.Exec(); err != nil {
			return errors.Join(fmt.Errorf("%s: %w", w, err), br.Close())
		}
	}
	return br.Close()
}

// bounded keeps receipt details short.
func bounded(s string) string {
	if len(s) > 200 {
		return s[:200]
	}
	return s
}

// recordConflict creates the record's active conflict case or reuses it
// (seed 004 §11.2: one active case per rule + record), appends the event's
// evidence and returns the case id.
func (a *Applier) recordConflict(ctx context.Context, tx pgx.Tx, it *item, now time.Time) (string, error) {
	cur := it.head
	if it.foundInTarget {
		cur = Head{Found: it.found.Exists, Revision: it.found.Revision, Origin: it.found.Origin, EventID: it.found.EventID,
			Tombstone: !it.found.Exists}
	} else if !cur.Found {
		cur.Tombstone = true
	}
	foundIn := "record_head"
	var row *pb.RowImage
	if it.foundInTarget {
		foundIn, row = "target", it.found.Row
	}
	id, opened, err := shore.OpenConflict(ctx, tx, it.rule, it.ev.RuleVersion, it.pkHash, it.pkText, shore.Evidence{
		Origin: it.origin, EventID: it.eventID, Operation: it.ev.Operation, Base: it.ev.BaseRevision,
		Result: it.ev.ResultRevision, CurrentRevision: cur.Revision, CurrentOrigin: cur.Origin, CurrentEventID: cur.EventID,
		CurrentTombstone: cur.Tombstone, CurrentRow: row, FoundIn: foundIn}, now)
	if err != nil {
		return "", err
	}
	if opened {
		if err := shore.RecordAudit(ctx, tx, now, applierAudit, "conflict.detected", "conflict", id,
			fmt.Sprintf("rule %s, %s over %s", it.rule, it.ev.Operation, shortRev(cur.Revision))); err != nil {
			return "", fmt.Errorf("conflict audit: %w", err)
		}
	}
	return id, nil
}

// SetHead sets a record's head in tx (the arbiter's write of a decision
// moves it as an applied event does).
func SetHead(ctx context.Context, tx pgx.Tx, rule string, pkHash []byte, revision, origin, eventID string, tombstone bool,
	now time.Time) error {
	_, err := tx.Exec(ctx, stmts["HeadUpsertMany"], []string{rule}, [][]byte{pkHash}, []string{revision}, []string{origin},
		[]string{eventID}, []bool{tombstone}, now)
	return err
}

func shortRev(r string) string {
	if len(r) > 8 {
		return r[:8]
	}
	if r == "" {
		return "(none)"
	}
	return r
}
