package arbiter

import (
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/faultpoint"
	"github.com/relayhq/relay/internal/sqlfile"
	"github.com/relayhq/relay/relaytype"
)

//go:embed queries.sql
var queriesSQL string

var stmts = sqlfile.MustParse("arbiter/queries.sql", queriesSQL, "CaseClaim", "CaseRelease", "CaseGet", "CaseLockOwned", "CaseLock",
	"CaseSetState", "CaseRecord", "DecisionTime", "CaseSupersede", "EvidenceLatest", "EvidenceList", "InboxEventBody",
	"DecisionAttempt", "DecisionInsert", "DecisionGet", "AnswersClaim", "AnswerProcessed", "DecisionAnswers", "CaseList",
	"StreamLock", "HeadLock")

// Defaults of Config.
const (
	LeaseDefault     = 60 * time.Second
	ManualSLADefault = 24 * time.Hour
	BatchDefault     = 32
	ShoreNodeDefault = "shore"
)

// Conflict case states.
const (
	StateDetected     = "DETECTED"
	StateAutoDeciding = "AUTO_DECIDING"
	StatePending      = "PENDING_MANUAL"
	StateDecided      = "DECIDED"
	StateDispatched   = "DISPATCHED"
	StateAcknowledged = "ACKNOWLEDGED"
	StateExpired      = "EXPIRED"
	StateCancelled    = "CANCELLED"
)

// Errors of the operator's calls.
var (
	// ErrStale: the shore's row is no longer the one the evidence (or the
	// operator) saw; refresh the evidence and decide again.
	ErrStale = errors.New("arbiter: the shore's row changed since the evidence was recorded; refresh and decide again")
	// ErrState: the case is not in a state that allows the call.
	ErrState = errors.New("arbiter: the case is not in a state that allows this")
	// ErrNotFound: no such case.
	ErrNotFound = errors.New("arbiter: no such conflict case")
	// ErrLeaseLost: another arbiter took the case over (a late arbiter's
	// writes are refused).
	ErrLeaseLost = errors.New("arbiter: the case's lease is held by another arbiter")
)

// Config configures an Arbiter.
type Config struct {
	// Pool is the shore's PostgreSQL. Required.
	Pool *pgxpool.Pool
	// Target is the shore's business database. Required.
	Target *apply.Target
	// ShoreNode is the shore's node id (default ShoreNodeDefault): the
	// origin of the shore's versions and of an operator's values.
	ShoreNode string
	// Instance names this arbiter as a lease owner. Required.
	Instance string
	// Lease is how long a claimed case stays this arbiter's (default
	// LeaseDefault); a case whose lease ran out is taken over.
	Lease time.Duration
	// ManualSLA is how long an operator has for a PENDING_MANUAL case
	// (default ManualSLADefault).
	ManualSLA time.Duration
	// Batch is how many cases and answers one Step takes (default
	// BatchDefault).
	Batch int
	Clock relaytype.Clock
	// Logger; default discards.
	Logger *slog.Logger

	// beforeDecide, when set (tests), runs after a case is claimed and
	// before its verdict is stored; an error stops the Step there, as a
	// crash would.
	beforeDecide func(conflictID string) error
	// beforeDispatch, when set (tests), runs before a decided case is
	// written and sent.
	beforeDispatch func(conflictID string) error
}

// Arbiter decides conflict cases (seed 004 §11): automatically by the
// rule's policy, or hands them to an operator; writes a decision to the
// shore database when the node's or the operator's version wins; sends the
// decision to the node; and closes the case on the node's answer. Several
// arbiters may run: a case is worked on under a lease, which another takes
// over once it runs out.
type Arbiter struct {
	cfg Config
	log *slog.Logger
}

// New returns an Arbiter for cfg.
func New(cfg Config) (*Arbiter, error) {
	switch {
	case cfg.Pool == nil || cfg.Target == nil || cfg.Clock == nil:
		return nil, errors.New("arbiter: Pool, Target and Clock are required")
	case cfg.Instance == "":
		return nil, errors.New("arbiter: Instance is required")
	}
	cfg.ShoreNode = cmp.Or(cfg.ShoreNode, ShoreNodeDefault)
	cfg.Lease = cmp.Or(cfg.Lease, LeaseDefault)
	cfg.ManualSLA = cmp.Or(cfg.ManualSLA, ManualSLADefault)
	cfg.Batch = cmp.Or(cfg.Batch, BatchDefault)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Arbiter{cfg: cfg, log: cfg.Logger}, nil
}

// StepResult counts what one Step did.
type StepResult struct {
	// Answers: node answers acted on.
	Answers int
	// Decided, Manual, Expired: verdicts stored.
	Decided, Manual, Expired int
	// Dispatched: decisions sent to their node.
	Dispatched int
}

// Busy reports whether the step did anything (another may find more).
func (r StepResult) Busy() bool {
	return r.Answers+r.Decided+r.Manual+r.Expired+r.Dispatched > 0
}

// ReleaseTimeoutDefault bounds the release of a stopping arbiter's leases
// (Run), which runs after Run's ctx has ended.
const ReleaseTimeoutDefault = 5 * time.Second

// Run steps every interval (or at once after a busy step) until ctx ends.
// A failed step is logged and retried. When ctx ends, Run gives up the
// leases of the cases it was working on (Release, on a context of its own
// bounded by ReleaseTimeoutDefault) before it returns, so that another
// arbiter takes them over at once instead of after the lease time.
func (a *Arbiter) Run(ctx context.Context, every time.Duration) error {
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeoutDefault)
		defer cancel()
		n, err := a.Release(rctx)
		if err != nil {
			a.log.Warn("shipsync arbiter: release of the leases on stop failed; they run out instead", "err", err)
		} else if n > 0 {
			a.log.Info("shipsync arbiter: stopped; released the leases of unfinished cases", "released", n)
		}
	}()
	for {
		r, err := a.Step(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			a.log.Warn("shipsync arbiter: step failed; retrying", "err", err)
		}
		if err == nil && r.Busy() {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.cfg.Clock.After(every):
		}
	}
}

// Release gives up every lease this arbiter's Instance holds on cases still
// to decide or dispatch and returns how many. Call it only when this
// arbiter is not stepping (Run does, once its steps have ended); a write
// this arbiter attempts afterwards on such a case is refused (ErrLeaseLost).
func (a *Arbiter) Release(ctx context.Context) (int, error) {
	tag, err := a.cfg.Pool.Exec(ctx, stmts["CaseRelease"], a.cfg.Instance)
	if err != nil {
		return 0, fmt.Errorf("arbiter: release the leases of %q: %w", a.cfg.Instance, err)
	}
	return int(tag.RowsAffected()), nil
}

// Step acts on the nodes' answers, then claims cases and works each one as
// far as it goes: verdict, shore write, dispatch.
func (a *Arbiter) Step(ctx context.Context) (StepResult, error) {
	var res StepResult
	n, err := a.answers(ctx)
	res.Answers = n
	if err != nil {
		return res, err
	}
	claimed, err := a.claim(ctx)
	if err != nil {
		return res, err
	}
	for _, c := range claimed {
		if err := a.work(ctx, c, &res); err != nil {
			return res, fmt.Errorf("case %s: %w", c.id, err)
		}
	}
	return res, nil
}

// kase is a claimed case.
type kase struct {
	id, state, rule string
	ruleVersion     int64
	pkHash          []byte
	pkText          string
}

func (a *Arbiter) claim(ctx context.Context) ([]kase, error) {
	rows, err := a.cfg.Pool.Query(ctx, stmts["CaseClaim"], a.cfg.Instance, a.cfg.Clock.Now(), a.cfg.Lease.Milliseconds(),
		a.cfg.Batch)
	if err != nil {
		return nil, fmt.Errorf("arbiter: claim cases: %w", err)
	}
	var out []kase
	var k kase
	_, err = pgx.ForEachRow(rows, []any{&k.id, &k.state, &k.rule, &k.ruleVersion, &k.pkHash, &k.pkText}, func() error {
		out = append(out, k)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("arbiter: claim cases: %w", err)
	}
	return out, nil
}

// work takes a claimed case through its verdict and its dispatch.
func (a *Arbiter) work(ctx context.Context, c kase, res *StepResult) error {
	if c.state == StateAutoDeciding {
		faultpoint.Hit(faultpoint.ShipsyncArbiterAfterClaim)
		if a.cfg.beforeDecide != nil {
			if err := a.cfg.beforeDecide(c.id); err != nil {
				return err
			}
		}
		d, err := a.dispute(ctx, c)
		if err != nil {
			return err
		}
		v := Judge(d.Dispute, a.cfg.Clock.Now())
		switch v.Outcome {
		case Manual:
			res.Manual++
			return a.setState(ctx, c.id, a.cfg.Instance, StatePending, v.Reason, "conflict.manual")
		case Expire:
			res.Expired++
			return a.setState(ctx, c.id, a.cfg.Instance, StateExpired, v.Reason, "conflict.expired", func(tx pgx.Tx) error {
				return a.reopen(ctx, tx, c, d)
			})
		}
		dec := a.decision(c, d, v.Winner, "policy", d.Rule.Conflict.Policy, v.Reason)
		if err := a.storeDecision(ctx, c.id, a.cfg.Instance, dec, shore.Audit{Actor: "arbiter " + a.cfg.Instance,
			Reason: v.Reason}); err != nil {
			return err
		}
		res.Decided++
	}
	ok, err := a.dispatch(ctx, c)
	if err != nil {
		return err
	}
	if ok {
		res.Dispatched++
	} else {
		res.Expired++
	}
	return nil
}

// loaded is a case's dispute with what building it read.
type loaded struct {
	Dispute
	key  []*pb.ColumnValue
	tomb string // the shore's tombstone revision, when its side is deleted
	// reported: the node's version is what the node said it held when a
	// command met it, not an event the shore received — its upload may
	// still be on its way, unless processed: the shore has received that
	// version from the node already (applied, or found conflicting).
	reported, processed bool
}

// dispute reads a case's rule, latest evidence and the shore's row now.
func (a *Arbiter) dispute(ctx context.Context, c kase) (*loaded, error) {
	rules, err := shore.LoadRules(ctx, a.cfg.Pool, []shore.RuleRef{{ID: c.rule, Version: uint64(c.ruleVersion)}})
	if err != nil {
		return nil, err
	}
	rule := rules[shore.RuleRef{ID: c.rule, Version: uint64(c.ruleVersion)}]
	if rule == nil {
		return nil, fmt.Errorf("arbiter: rule %s version %d is not registered", c.rule, c.ruleVersion)
	}
	var key pb.RowImage
	if err := protojson.Unmarshal([]byte(c.pkText), &key); err != nil {
		return nil, fmt.Errorf("arbiter: record key: %w", err)
	}
	var e evidence
	err = a.cfg.Pool.QueryRow(ctx, stmts["EvidenceLatest"], c.id).Scan(&e.origin, &e.eventID, &e.op, &e.base, &e.result,
		&e.curRev, &e.curOrigin, &e.curEvent, &e.curTomb, &e.curRow, &e.foundIn)
	if err != nil {
		return nil, fmt.Errorf("arbiter: evidence: %w", err)
	}
	l := &loaded{Dispute: Dispute{Rule: rule}, key: key.Columns}
	if e.foundIn == "node" {
		// A node met the shore's change: the incoming side is the shore's.
		l.reported = true
		if e.op != pb.Operation_OPERATION_DELETE.String() {
			l.EvidenceShore = e.result
		} else {
			l.tomb = e.result
		}
		l.Node = Version{Node: e.curOrigin, Revision: e.curRev, Exists: !e.curTomb}
		if len(e.curRow) > 0 {
			l.Node.Row = &pb.RowImage{}
			if err := proto.Unmarshal(e.curRow, l.Node.Row); err != nil {
				return nil, fmt.Errorf("arbiter: evidence row: %w", err)
			}
		}
		if l.Node.Revision != "" {
			err := a.cfg.Pool.QueryRow(ctx, stmts["NodeVersionProcessed"], c.rule, c.pkHash, l.Node.Node,
				l.Node.Revision).Scan(&l.processed)
			if err != nil {
				return nil, fmt.Errorf("arbiter: whether the node's version reached the shore: %w", err)
			}
		}
	} else {
		// The shore met a node's change.
		if !e.curTomb {
			l.EvidenceShore = e.curRev
		} else {
			l.tomb = e.curRev
		}
		l.Node = Version{Node: e.origin, Revision: e.result, Exists: e.op != pb.Operation_OPERATION_DELETE.String()}
		if l.Node.Exists {
			var raw []byte
			if err := a.cfg.Pool.QueryRow(ctx, stmts["InboxEventBody"], e.origin, e.eventID).Scan(&raw); err != nil {
				return nil, fmt.Errorf("arbiter: the conflicting event: %w", err)
			}
			var ev pb.ChangeEvent
			if err := proto.Unmarshal(raw, &ev); err != nil {
				return nil, fmt.Errorf("arbiter: the conflicting event: %w", err)
			}
			l.Node.Row = ev.After
		}
	}
	cur, err := a.readShore(ctx, rule, key.Columns)
	if err != nil {
		return nil, err
	}
	l.Shore = cur
	return l, nil
}

// evidence is one sync_conflict_evidence row.
type evidence struct {
	origin, eventID, op, base, result, curRev, curOrigin, curEvent, foundIn string
	curTomb                                                                 bool
	curRow                                                                  []byte
}

// table is the shore table of rule.
func table(rule *shore.Rule) *apply.Table {
	return &apply.Table{Name: rule.TargetTable, Columns: rule.Columns}
}

// readShore reads the shore's row of key now. (Inspect with an empty stamp
// never finds a ledger row, so it reads the row.)
func (a *Arbiter) readShore(ctx context.Context, rule *shore.Rule, key []*pb.ColumnValue) (Version, error) {
	fs, err := a.cfg.Target.Inspect(ctx, []apply.Conditional{{Table: table(rule), Key: key}})
	if err != nil {
		return Version{}, err
	}
	f := fs[0]
	v := Version{Node: a.cfg.ShoreNode, Exists: f.Exists}
	if f.Exists {
		v.Revision, v.Row = f.Revision, f.Row
		if f.Origin != "" {
			v.Node = f.Origin
		}
	}
	return v, nil
}

// decisionNamespace makes decision ids: UUIDv5 of the case (and the
// attempt, from the second on).
var decisionNamespace = uuid.MustParse("0b7e4f0c-3a5d-4e8b-9c61-2f4d8a9e1c37")

// Decision is a case's decision as stored.
type Decision struct {
	ID, DecidedBy, Policy, Choice, WinnerNode, Node, ExpectedNode string
	Row                                                           *pb.RowImage
	Tombstone                                                     bool
	Revision, ExpectedShore, Reason                               string
	At                                                            time.Time
}

// decision builds the decision of case c for winner (WinnerShore or
// WinnerNode).
func (a *Arbiter) decision(c kase, l *loaded, winner, by, policy, reason string) *Decision {
	d := &Decision{ID: uuid.NewSHA1(decisionNamespace, []byte(c.id)).String(), DecidedBy: by, Policy: policy,
		Node: l.Node.Node, Reason: reason, ExpectedShore: l.EvidenceShore}
	if l.Node.Exists {
		d.ExpectedNode = l.Node.Revision
	}
	if winner == WinnerShore {
		d.Choice, d.WinnerNode, d.Tombstone, d.Row = "SHORE", l.Shore.Node, !l.Shore.Exists, keyed(l.Shore.Row, l.key)
		d.Revision = l.Shore.Revision
		switch {
		case !l.Shore.Exists:
			d.Revision = cmp.Or(l.tomb, uuid.NewSHA1(decisionNamespace, []byte(c.id+"/tombstone")).String())
		case l.reported && !l.processed && (!l.Node.Exists || !strings.EqualFold(l.Node.Revision, l.Shore.Revision)):
			// The node's version is one it reported and the shore has not
			// received: a change it made may still be on its way up, made
			// over the shore's revision, and would apply cleanly after the
			// node was told to drop it — the shore on the node's version,
			// the node on the shore's. The shore's row is written again
			// under a new revision (dispatch), so such a change meets a
			// revision it was not made over and is recorded as a conflict;
			// or, applied before that write, it makes the write fail and
			// the case expire. A version the shore has received (applied,
			// or found conflicting) has nothing on its way: the plain
			// decision is safe, and spares the node's next edits a new
			// revision to conflict with.
			d.Revision = uuid.NewString()
		}
		return d
	}
	d.Choice, d.WinnerNode, d.Tombstone, d.Row, d.Revision = "NODE", l.Node.Node, !l.Node.Exists, keyed(l.Node.Row, l.key),
		l.Node.Revision
	return d
}

// keyed is row with its key columns holding the record key's own values: a
// row read back from a database holds them as text, and a decision must
// not look like it changes the key.
func keyed(row *pb.RowImage, key []*pb.ColumnValue) *pb.RowImage {
	if row == nil {
		return nil
	}
	out := &pb.RowImage{Columns: make([]*pb.ColumnValue, len(row.Columns))}
	for i, c := range row.Columns {
		out.Columns[i] = c
		for _, k := range key {
			if k.GetName() == c.GetName() {
				out.Columns[i] = &pb.ColumnValue{Name: c.Name, Value: k.Value}
			}
		}
	}
	return out
}

// storeDecision appends d to case id (held by owner; "" for an operator's
// decision, which needs the case PENDING_MANUAL) and moves it to DECIDED.
func (a *Arbiter) storeDecision(ctx context.Context, id, owner string, d *Decision, who shore.Audit) error {
	now := a.cfg.Clock.Now()
	d.At = now
	var row []byte
	if d.Row != nil && !d.Tombstone {
		var err error
		if row, err = proto.Marshal(d.Row); err != nil {
			return err
		}
	}
	return pgx.BeginFunc(ctx, a.cfg.Pool, func(tx pgx.Tx) error {
		if err := a.lock(ctx, tx, id, owner, StatePending); err != nil {
			return err
		}
		var attempt int
		if err := tx.QueryRow(ctx, stmts["DecisionAttempt"], id).Scan(&attempt); err != nil {
			return err
		}
		if attempt > 1 {
			d.ID = uuid.NewSHA1(decisionNamespace, []byte(fmt.Sprintf("%s/%d", id, attempt))).String()
		}
		if _, err := tx.Exec(ctx, stmts["DecisionInsert"], d.ID, id, attempt, d.DecidedBy, d.Policy, d.Choice, d.WinnerNode, d.Node,
			d.ExpectedNode, row, d.Tombstone, d.Revision, d.ExpectedShore, d.Reason, now); err != nil {
			return fmt.Errorf("arbiter: store decision: %w", err)
		}
		if _, err := tx.Exec(ctx, stmts["CaseSetState"], id, StateDecided, bounded(d.Reason), nil, now); err != nil {
			return err
		}
		// Keep the lease: the same arbiter dispatches at once.
		if owner != "" {
			if _, err := tx.Exec(ctx, "UPDATE sync_conflict_case SET lease_owner = $2, lease_until = $3 WHERE conflict_id = $1",
				id, owner, now.Add(a.cfg.Lease)); err != nil {
				return err
			}
		}
		after := fmt.Sprintf("%s (%s): %s", d.Choice, d.Policy, bounded(d.Reason))
		if owner == "" {
			return shore.RecordAuditChange(ctx, tx, now, who, "conflict.decided", "conflict", id, StatePending, after)
		}
		return shore.RecordAudit(ctx, tx, now, who, "conflict.decided", "conflict", id, after)
	})
}

// lock locks case id in tx: held by owner when owner is set (ErrLeaseLost
// otherwise), in state want when owner is "" (ErrState otherwise).
func (a *Arbiter) lock(ctx context.Context, tx pgx.Tx, id, owner, want string) error {
	var state string
	if owner != "" {
		err := tx.QueryRow(ctx, stmts["CaseLockOwned"], id, owner).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrLeaseLost
		}
		return err
	}
	err := tx.QueryRow(ctx, stmts["CaseLock"], id).Scan(&state)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ErrNotFound
	case err != nil:
		return err
	case state != want:
		return fmt.Errorf("%w: it is %s", ErrState, state)
	}
	return nil
}

// reopen opens (or adds to) the record's next case when case c expires
// because the shore's row moved on: the shore's row as it is now against
// the node's version in the latest evidence. Without it a record could stay
// different on the two sides with every case closed, when the change that
// moved the shore's row had met the node before (its evidence is in the
// expired case) and nothing else is on its way. Nothing is opened when the
// two versions are the same.
func (a *Arbiter) reopen(ctx context.Context, tx pgx.Tx, c kase, l *loaded) error {
	if l.Shore.Exists == l.Node.Exists && (!l.Shore.Exists || strings.EqualFold(l.Shore.Revision, l.Node.Revision)) {
		return nil
	}
	op, result := pb.Operation_OPERATION_UPDATE, l.Shore.Revision
	if !l.Shore.Exists {
		op, result = pb.Operation_OPERATION_DELETE, cmp.Or(l.tomb, uuid.NewSHA1(decisionNamespace, []byte(c.id+"/absent")).String())
	}
	now := a.cfg.Clock.Now()
	next, _, err := shore.OpenConflict(ctx, tx, c.rule, uint64(c.ruleVersion), c.pkHash, c.pkText, shore.Evidence{
		Origin: a.cfg.ShoreNode, EventID: uuid.NewSHA1(decisionNamespace, []byte(c.id+"/reopen")).String(), Operation: op,
		Result: result, CurrentRevision: l.Node.Revision, CurrentOrigin: l.Node.Node, CurrentTombstone: !l.Node.Exists,
		CurrentRow: l.Node.Row, FoundIn: "node"}, now)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "UPDATE sync_conflict_case SET superseded_by = coalesce(superseded_by, $2) WHERE conflict_id = $1",
		c.id, next); err != nil {
		return err
	}
	return shore.RecordAudit(ctx, tx, now, shore.Audit{Actor: "arbiter " + a.cfg.Instance}, "conflict.detected", "conflict",
		next, "reopened from "+c.id+": the shore's row moved on")
}

// setState moves case id (held by owner) to state with reason, audited;
// then, in the same transaction, runs each of then.
func (a *Arbiter) setState(ctx context.Context, id, owner, state, reason, action string, then ...func(pgx.Tx) error) error {
	now := a.cfg.Clock.Now()
	var due any
	if state == StatePending {
		due = now.Add(a.cfg.ManualSLA)
	}
	return pgx.BeginFunc(ctx, a.cfg.Pool, func(tx pgx.Tx) error {
		if err := a.lock(ctx, tx, id, owner, ""); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, stmts["CaseSetState"], id, state, bounded(reason), due, now); err != nil {
			return err
		}
		if err := shore.RecordAudit(ctx, tx, now, shore.Audit{Actor: "arbiter " + a.cfg.Instance, Reason: bounded(reason)},
			action, "conflict", id, state); err != nil {
			return err
		}
		for _, f := range then {
			if err := f(tx); err != nil {
				return err
			}
		}
		return nil
	})
}

// carryLate moves the evidence recorded for case id after its decision
// (made at decided) to the record's next case, opened by the first of it
// unless one is open, and notes that case as id's successor; it runs in
// the transaction that closes id (ACKNOWLEDGED or EXPIRED). A case keeps
// taking evidence until it closes — the shore's later change the node met,
// the node's later change the shore met — and a decision made before that
// evidence does not answer it (seed 004 §11.2: new evidence makes the old
// decision expire): without this the evidence would close with the case,
// and the record stay different on the two sides with every case closed.
func (a *Arbiter) carryLate(ctx context.Context, tx pgx.Tx, id string, decided, now time.Time) error {
	rows, err := tx.Query(ctx, stmts["EvidenceList"], id)
	if err != nil {
		return err
	}
	var late []shore.Evidence
	var ev shore.Evidence
	var op string
	var row []byte
	var at time.Time
	if _, err := pgx.ForEachRow(rows, []any{&ev.Origin, &ev.EventID, &op, &ev.Base, &ev.Result, &ev.CurrentRevision,
		&ev.CurrentOrigin, &ev.CurrentEventID, &ev.CurrentTombstone, &row, &ev.FoundIn, &at}, func() error {
		if !at.After(decided) {
			return nil
		}
		x := ev
		x.Operation = pb.Operation(pb.Operation_value[op])
		if len(row) > 0 {
			x.CurrentRow = &pb.RowImage{}
			if err := proto.Unmarshal(row, x.CurrentRow); err != nil {
				return fmt.Errorf("arbiter: evidence row: %w", err)
			}
		}
		late = append(late, x)
		return nil
	}); err != nil {
		return fmt.Errorf("arbiter: late evidence of %s: %w", id, err)
	}
	if len(late) == 0 {
		return nil
	}
	var rule string
	var version int64
	var hash []byte
	var text, next string
	if err := tx.QueryRow(ctx, stmts["CaseRecord"], id).Scan(&rule, &version, &hash, &text, &next); err != nil {
		return err
	}
	for _, e := range late {
		to, opened, err := shore.OpenConflict(ctx, tx, rule, uint64(version), hash, text, e, now)
		if err != nil {
			return err
		}
		if opened {
			if err := shore.RecordAudit(ctx, tx, now, shore.Audit{Actor: "arbiter " + a.cfg.Instance}, "conflict.detected",
				"conflict", to, "evidence recorded after the decision of "+id); err != nil {
				return err
			}
		}
		if next == "" {
			if _, err := tx.Exec(ctx, stmts["CaseSupersede"], id, to); err != nil {
				return err
			}
			next = to
		}
	}
	return nil
}

func bounded(s string) string {
	if len(s) > 200 {
		return s[:200]
	}
	return s
}

// dispatch writes a decided case's decision to the shore database when it
// changes the shore's row, then sends it to the node, and moves the case to
// DISPATCHED (true) — or to EXPIRED (false) when the shore's row changed
// before the write.
func (a *Arbiter) dispatch(ctx context.Context, c kase) (bool, error) {
	if a.cfg.beforeDispatch != nil {
		if err := a.cfg.beforeDispatch(c.id); err != nil {
			return false, err
		}
	}
	d, err := a.loadDecision(ctx, c.id)
	if err != nil {
		return false, err
	}
	rules, err := shore.LoadRules(ctx, a.cfg.Pool, []shore.RuleRef{{ID: c.rule, Version: uint64(c.ruleVersion)}})
	if err != nil {
		return false, err
	}
	rule := rules[shore.RuleRef{ID: c.rule, Version: uint64(c.ruleVersion)}]
	if rule == nil {
		return false, fmt.Errorf("arbiter: rule %s version %d is not registered", c.rule, c.ruleVersion)
	}
	var key pb.RowImage
	if err := protojson.Unmarshal([]byte(c.pkText), &key); err != nil {
		return false, fmt.Errorf("arbiter: record key: %w", err)
	}
	// The decided version's origin, on both sides: the winner's (the
	// shore row's own origin for SHORE), the shore's for an operator's
	// value or delete.
	origin := cmp.Or(d.WinnerNode, a.cfg.ShoreNode)
	// A SHORE decision whose revision is not the shore row's re-issues
	// that row under a new revision (see decision).
	reissue := d.Choice == "SHORE" && !d.Tombstone && !strings.EqualFold(d.Revision, d.ExpectedShore)
	if d.Choice == "VALUE" || d.Choice == "DELETE" || reissue {
		origin = a.cfg.ShoreNode
	}
	written := d.Choice != "SHORE" || reissue
	if written {
		w := apply.Conditional{Table: table(rule), Key: key.Columns, Base: d.ExpectedShore,
			Stamp: apply.Stamp{Revision: d.Revision, Origin: origin, EventID: d.ID}}
		switch {
		case d.Tombstone && d.ExpectedShore == "":
			w.Op = 0 // already absent on the shore
		case !d.Tombstone && strings.EqualFold(d.Revision, d.ExpectedShore):
			// The shore holds the decided version already (the node's
			// version is the shore's). Written anyway, the write would be
			// conditional on the revision it writes and match again on
			// every retry, its ledger row already there.
			w.Op = 0
		case d.Tombstone:
			w.Op = apply.OpDelete
		case d.ExpectedShore == "":
			w.Op, w.Values = apply.OpInsert, d.Row.GetColumns()
		default:
			w.Op, w.Values = apply.OpUpdate, d.Row.GetColumns()
		}
		if w.Op != 0 {
			changed, refused, err := a.cfg.Target.Apply(ctx, []apply.Conditional{w}, a.cfg.Clock.Now())
			if err != nil {
				return false, err
			}
			if refused[0] != nil {
				return false, a.setState(ctx, c.id, a.cfg.Instance, StatePending,
					"the shore database refused the decided row: "+refused[0].Error(), "conflict.manual")
			}
			faultpoint.Hit(faultpoint.ShipsyncArbiterAfterShoreWrite)
			if !changed[0] {
				fs, err := a.cfg.Target.Inspect(ctx, []apply.Conditional{w})
				if err != nil {
					return false, err
				}
				if !fs[0].Applied {
					l, err := a.dispute(ctx, c)
					if err != nil {
						return false, err
					}
					return false, a.setState(ctx, c.id, a.cfg.Instance, StateExpired,
						"the shore's row changed before the decision was written", "conflict.expired", func(tx pgx.Tx) error {
							if err := a.carryLate(ctx, tx, c.id, d.At, a.cfg.Clock.Now()); err != nil {
								return err
							}
							return a.reopen(ctx, tx, c, l)
						})
				}
			}
		}
	}
	now := a.cfg.Clock.Now()
	msg := &pb.ConflictDecision{DecisionId: d.ID, ConflictId: c.id, RuleId: c.rule, RuleVersion: uint64(c.ruleVersion),
		RecordKey: key.Columns, ExpectedLocalRevision: d.ExpectedNode, DecidedRevision: d.Revision, Reason: bounded(d.Reason),
		DecidedOriginNodeId: origin}
	if d.Tombstone {
		msg.Outcome = &pb.ConflictDecision_Tombstone{Tombstone: true}
	} else {
		msg.Outcome = &pb.ConflictDecision_DecidedValue{DecidedValue: d.Row}
	}
	err = pgx.BeginFunc(ctx, a.cfg.Pool, func(tx pgx.Tx) error {
		// Locks in one order with the other writers, or they deadlock: the
		// node's command stream, then the record head (the shore CDC
		// consumer's order), then the case (the shore applier takes the
		// head, then the case it records a conflict in).
		if _, err := tx.Exec(ctx, stmts["StreamLock"], d.Node); err != nil {
			return err
		}
		if written {
			if _, err := tx.Exec(ctx, stmts["HeadLock"], c.rule, c.pkHash); err != nil {
				return err
			}
		}
		if err := a.lock(ctx, tx, c.id, a.cfg.Instance, ""); err != nil {
			return err
		}
		if _, err := shore.EnqueueDecision(ctx, tx, d.Node, c.id, msg, now); err != nil {
			return err
		}
		if written {
			if err := apply.SetHead(ctx, tx, c.rule, c.pkHash, d.Revision, origin, d.ID, d.Tombstone, now); err != nil {
				return fmt.Errorf("arbiter: record head: %w", err)
			}
		}
		if d.Choice == "SHORE" {
			// The decision keeps the shore's row: it must still be the
			// shore's row. Checked holding the node's command stream (the
			// shore CDC consumer needs it to forward a change), so a
			// shore change made before this check and forwarded is seen
			// here, and one made after is forwarded after the decision.
			cur, err := a.readShore(ctx, rule, key.Columns)
			if err != nil {
				return err
			}
			if cur.Exists == d.Tombstone || (cur.Exists && !strings.EqualFold(cur.Revision, d.Revision)) {
				return errShoreMoved
			}
		}
		if _, err := tx.Exec(ctx, stmts["CaseSetState"], c.id, StateDispatched, "", nil, now); err != nil {
			return err
		}
		return shore.RecordAudit(ctx, tx, now, shore.Audit{Actor: "arbiter " + a.cfg.Instance}, "conflict.dispatched",
			"conflict", c.id, "to "+d.Node)
	})
	if errors.Is(err, errShoreMoved) {
		l, err := a.dispute(ctx, c)
		if err != nil {
			return false, err
		}
		return false, a.setState(ctx, c.id, a.cfg.Instance, StateExpired,
			"the shore's row changed before the decision was sent", "conflict.expired", func(tx pgx.Tx) error {
				if err := a.carryLate(ctx, tx, c.id, d.At, a.cfg.Clock.Now()); err != nil {
					return err
				}
				return a.reopen(ctx, tx, c, l)
			})
	}
	return err == nil, err
}

// errShoreMoved: the shore's row is no longer the one a SHORE decision
// keeps (the dispatch is rolled back, the case expires and reopens).
var errShoreMoved = errors.New("arbiter: the shore's row moved on")

func (a *Arbiter) loadDecision(ctx context.Context, id string) (*Decision, error) {
	var d Decision
	var row []byte
	err := a.cfg.Pool.QueryRow(ctx, stmts["DecisionGet"], id).Scan(&d.ID, &d.DecidedBy, &d.Policy, &d.Choice, &d.WinnerNode,
		&d.Node, &d.ExpectedNode, &row, &d.Tombstone, &d.Revision, &d.ExpectedShore, &d.Reason, &d.At)
	if err != nil {
		return nil, fmt.Errorf("arbiter: decision of %s: %w", id, err)
	}
	if len(row) > 0 {
		d.Row = &pb.RowImage{}
		if err := proto.Unmarshal(row, d.Row); err != nil {
			return nil, fmt.Errorf("arbiter: decision row: %w", err)
		}
	}
	return &d, nil
}

// answers acts on the nodes' answers to decisions and the conflicts they
// reported against changes, one transaction per batch.
func (a *Arbiter) answers(ctx context.Context) (int, error) {
	n := 0
	err := pgx.BeginFunc(ctx, a.cfg.Pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, stmts["AnswersClaim"], a.cfg.Batch)
		if err != nil {
			return err
		}
		type answer struct {
			node, cmdID, kind, conflict, result, reason, curRev string
			seq                                                 int64
			curRow, body                                        []byte
		}
		var as []answer
		var x answer
		if _, err := pgx.ForEachRow(rows, []any{&x.node, &x.seq, &x.cmdID, &x.kind, &x.conflict, &x.result, &x.reason,
			&x.curRev, &x.curRow, &x.body}, func() error {
			as = append(as, x)
			return nil
		}); err != nil {
			return err
		}
		now := a.cfg.Clock.Now()
		for _, an := range as {
			var cmd pb.Command
			if err := proto.Unmarshal(an.body, &cmd); err != nil {
				return fmt.Errorf("command %d of %s: stored body unreadable: %w", an.seq, an.node, err)
			}
			var row *pb.RowImage
			if len(an.curRow) > 0 {
				row = &pb.RowImage{}
				if err := proto.Unmarshal(an.curRow, row); err != nil {
					return fmt.Errorf("command %d of %s: reported row unreadable: %w", an.seq, an.node, err)
				}
			}
			reported := shore.Evidence{CurrentRevision: an.curRev, CurrentOrigin: an.node, CurrentTombstone: row == nil,
				CurrentRow: row, FoundIn: "node"}
			switch {
			case an.kind == "decision":
				if err := a.decisionAnswer(ctx, tx, an.conflict, an.result, an.reason, cmd.GetDecision(), reported, now); err != nil {
					return err
				}
			case cmd.GetChange() != nil:
				ev := cmd.GetChange()
				hash, text, err := shore.RecordKey(ev.PrimaryKey)
				if err != nil {
					return err
				}
				reported.Origin, reported.EventID, reported.Operation = ev.OriginNodeId, ev.EventId, ev.Operation
				reported.Base, reported.Result = ev.BaseRevision, ev.ResultRevision
				id, opened, err := shore.OpenConflict(ctx, tx, ev.RuleId, ev.RuleVersion, hash, text, reported, now)
				if err != nil {
					return err
				}
				if opened {
					if err := shore.RecordAudit(ctx, tx, now, shore.Audit{Actor: "arbiter " + a.cfg.Instance},
						"conflict.detected", "conflict", id, "reported by "+an.node); err != nil {
						return err
					}
				}
			}
			if _, err := tx.Exec(ctx, stmts["AnswerProcessed"], an.node, an.seq, now); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("arbiter: answers: %w", err)
	}
	return n, nil
}

// decisionAnswer acts on a node's answer to case id's decision: applied →
// ACKNOWLEDGED once every decision command of the case is; a reported
// conflict (the node no longer holds the revision the decision expected)
// → EXPIRED, and the node's version opens a new case; rejected → an
// operator decides.
func (a *Arbiter) decisionAnswer(ctx context.Context, tx pgx.Tx, id, result, reason string, d *pb.ConflictDecision,
	reported shore.Evidence, now time.Time) error {
	var state string
	if err := tx.QueryRow(ctx, stmts["CaseLock"], id).Scan(&state); err != nil {
		return fmt.Errorf("case %s: %w", id, err)
	}
	if state != StateDispatched {
		return nil // answered before, or closed otherwise
	}
	var decided time.Time
	if err := tx.QueryRow(ctx, stmts["DecisionTime"], id).Scan(&decided); err != nil {
		return fmt.Errorf("case %s: decision: %w", id, err)
	}
	who := shore.Audit{Actor: "arbiter " + a.cfg.Instance}
	switch result {
	case "COMMAND_APPLIED", "COMMAND_ALREADY_APPLIED":
		var all, ok int
		if err := tx.QueryRow(ctx, stmts["DecisionAnswers"], id).Scan(&all, &ok); err != nil {
			return err
		}
		if all != ok {
			return nil
		}
		if _, err := tx.Exec(ctx, stmts["CaseSetState"], id, StateAcknowledged, "", nil, now); err != nil {
			return err
		}
		if err := shore.RecordAudit(ctx, tx, now, who, "conflict.acknowledged", "conflict", id, StateAcknowledged); err != nil {
			return err
		}
		return a.carryLate(ctx, tx, id, decided, now)
	case "COMMAND_CONFLICT_REPORTED":
		why := "the node no longer holds the revision the decision expected"
		if reason != "" {
			why += " (" + reason + ")"
		}
		if _, err := tx.Exec(ctx, stmts["CaseSetState"], id, StateExpired, why, nil, now); err != nil {
			return err
		}
		if err := shore.RecordAudit(ctx, tx, now, who, "conflict.expired", "conflict", id, why); err != nil {
			return err
		}
		// The evidence recorded after the decision first: the node's answer
		// is newer than all of it (the decision's revision is what the
		// shore holds now, the node's what it holds), so it must be the
		// next case's latest evidence, the one that case is decided on.
		if err := a.carryLate(ctx, tx, id, decided, now); err != nil || d == nil {
			return err
		}
		hash, text, err := shore.RecordKey(d.RecordKey)
		if err != nil {
			return err
		}
		reported.Origin, reported.EventID, reported.Base, reported.Result = a.cfg.ShoreNode, d.DecisionId,
			d.ExpectedLocalRevision, d.DecidedRevision
		reported.Operation = pb.Operation_OPERATION_UPDATE
		if d.GetTombstone() {
			reported.Operation = pb.Operation_OPERATION_DELETE
		}
		next, _, err := shore.OpenConflict(ctx, tx, d.RuleId, d.RuleVersion, hash, text, reported, now)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, stmts["CaseSupersede"], id, next); err != nil {
			return err
		}
		return shore.RecordAudit(ctx, tx, now, who, "conflict.detected", "conflict", next, "superseding "+id)
	default:
		why := "the node rejected the decision"
		if reason != "" {
			why += " (" + reason + ")"
		}
		if _, err := tx.Exec(ctx, stmts["CaseSetState"], id, StatePending, why, now.Add(a.cfg.ManualSLA), now); err != nil {
			return err
		}
		return shore.RecordAudit(ctx, tx, now, who, "conflict.manual", "conflict", id, why)
	}
}

// ManualDecision is an operator's decision of a PENDING_MANUAL case.
type ManualDecision struct {
	// Choice: "SHORE" (the shore's row), "NODE" (the node's version in the
	// latest evidence), "VALUE" (Value, a complete row) or "DELETE".
	Choice string
	Value  *pb.RowImage
	// Operator and Reason are required.
	Operator, Reason string
	// SeenShoreRevision, when set, is the shore revision the operator
	// looked at ("" : no row): the decision is refused if the shore's row
	// is now another.
	SeenShoreRevision *string
}

// Decide stores an operator's decision for case id after checking it
// against the shore's row now: a row other than the evidence's (or the one
// the operator saw) refuses it with ErrStale. The next Step dispatches it.
func (a *Arbiter) Decide(ctx context.Context, id string, m ManualDecision) (*Decision, error) {
	if strings.TrimSpace(m.Operator) == "" || strings.TrimSpace(m.Reason) == "" {
		return nil, errors.New("arbiter: a manual decision needs an operator and a reason")
	}
	c, err := a.caseOf(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.state != StatePending {
		return nil, fmt.Errorf("%w: it is %s (only PENDING_MANUAL cases are decided by hand)", ErrState, c.state)
	}
	l, err := a.dispute(ctx, c)
	if err != nil {
		return nil, err
	}
	cur := ""
	if l.Shore.Exists {
		cur = l.Shore.Revision
	}
	if !strings.EqualFold(cur, l.EvidenceShore) || (m.SeenShoreRevision != nil && !strings.EqualFold(cur, *m.SeenShoreRevision)) {
		return nil, ErrStale
	}
	var d *Decision
	switch m.Choice {
	case "SHORE":
		d = a.decision(c, l, WinnerShore, m.Operator, "MANUAL", m.Reason)
	case "NODE":
		d = a.decision(c, l, WinnerNode, m.Operator, "MANUAL", m.Reason)
	case "VALUE", "DELETE":
		d = a.decision(c, l, WinnerShore, m.Operator, "MANUAL", m.Reason)
		d.Choice, d.WinnerNode, d.Revision = m.Choice, a.cfg.ShoreNode, uuid.NewString()
		d.Tombstone, d.Row = m.Choice == "DELETE", nil
		if m.Choice == "VALUE" {
			if m.Value == nil {
				return nil, errors.New("arbiter: choice VALUE needs the complete row")
			}
			if reason, detail := apply.CheckRow(l.Rule.KeyColumns, l.Rule.Columns, l.key, m.Value.Columns, "record_key",
				"value"); reason != pb.RejectReason_REJECT_REASON_UNSPECIFIED {
				return nil, fmt.Errorf("arbiter: the value: %s", detail)
			}
			d.Row = m.Value
		}
	default:
		return nil, fmt.Errorf("arbiter: choice %q: must be SHORE, NODE, VALUE or DELETE", m.Choice)
	}
	if err := a.storeDecision(ctx, id, "", d, shore.Audit{Actor: m.Operator, Reason: m.Reason}); err != nil {
		return nil, err
	}
	return d, nil
}

// Cancel closes a case no decision has been made for (DETECTED or
// PENDING_MANUAL), by an operator with a reason, audited.
func Cancel(ctx context.Context, pool *pgxpool.Pool, clock relaytype.Clock, id, operator, reason string) error {
	if strings.TrimSpace(operator) == "" || strings.TrimSpace(reason) == "" {
		return errors.New("arbiter: cancelling needs an operator and a reason")
	}
	if _, err := uuid.Parse(id); err != nil {
		return ErrNotFound
	}
	now := clock.Now()
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var state string
		err := tx.QueryRow(ctx, stmts["CaseLock"], id).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if state != StateDetected && state != StatePending {
			return fmt.Errorf("%w: it is %s (only undecided cases are cancelled)", ErrState, state)
		}
		if _, err := tx.Exec(ctx, stmts["CaseSetState"], id, StateCancelled, bounded(reason), nil, now); err != nil {
			return err
		}
		return shore.RecordAuditChange(ctx, tx, now, shore.Audit{Actor: operator, Reason: reason}, "conflict.cancelled",
			"conflict", id, state, StateCancelled)
	})
}

// Versions returns what an operator compares before deciding case id by
// hand: the node's version from its latest evidence, the shore's row as the
// shore database holds it now, and the shore revision the evidence was
// recorded against (a decision is refused when the row now is another).
func (a *Arbiter) Versions(ctx context.Context, id string) (*Dispute, error) {
	c, err := a.caseOf(ctx, id)
	if err != nil {
		return nil, err
	}
	l, err := a.dispute(ctx, c)
	if err != nil {
		return nil, err
	}
	return &l.Dispute, nil
}

// caseOf reads case id.
func (a *Arbiter) caseOf(ctx context.Context, id string) (kase, error) {
	if _, err := uuid.Parse(id); err != nil {
		return kase{}, ErrNotFound
	}
	var c kase
	var owner, reason, sup string
	var due time.Time
	err := a.cfg.Pool.QueryRow(ctx, stmts["CaseGet"], id).Scan(&c.id, &c.state, &c.rule, &c.ruleVersion, &c.pkHash,
		&c.pkText, &owner, &due, &reason, &sup)
	if errors.Is(err, pgx.ErrNoRows) {
		return kase{}, ErrNotFound
	}
	return c, err
}

// Summary is one case in a listing.
type Summary struct {
	ID, State, Rule, Key, Reason string
	Created, Updated             time.Time
	Evidence                     int
}

// List returns up to limit cases (in state, "" for all), oldest first.
func List(ctx context.Context, pool *pgxpool.Pool, state string, limit int) ([]Summary, error) {
	rows, err := pool.Query(ctx, stmts["CaseList"], state, limit)
	if err != nil {
		return nil, fmt.Errorf("arbiter: list: %w", err)
	}
	var out []Summary
	var s Summary
	_, err = pgx.ForEachRow(rows, []any{&s.ID, &s.State, &s.Rule, &s.Key, &s.Reason, &s.Created, &s.Updated, &s.Evidence},
		func() error {
			out = append(out, s)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("arbiter: list: %w", err)
	}
	return out, nil
}

// Sighting is one piece of a case's evidence as an operator sees it.
type Sighting struct {
	Origin, EventID, Operation, Base, Result string
	CurrentRevision, CurrentOrigin           string
	CurrentTombstone                         bool
	CurrentRow                               *pb.RowImage
	FoundIn                                  string
	At                                       time.Time
}

// Detail is a case with its evidence and its decision (nil: none yet).
type Detail struct {
	Summary
	Superseded string
	ManualDue  time.Time
	Evidence   []Sighting
	Decision   *Decision
}

// Show returns case id in full.
func Show(ctx context.Context, pool *pgxpool.Pool, id string) (*Detail, error) {
	if _, err := uuid.Parse(id); err != nil {
		return nil, ErrNotFound
	}
	var d Detail
	var rv int64
	var hash []byte
	var owner string
	err := pool.QueryRow(ctx, stmts["CaseGet"], id).Scan(&d.ID, &d.State, &d.Rule, &rv, &hash, &d.Key, &owner, &d.ManualDue,
		&d.Reason, &d.Superseded)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("arbiter: show: %w", err)
	}
	rows, err := pool.Query(ctx, stmts["EvidenceList"], id)
	if err != nil {
		return nil, fmt.Errorf("arbiter: show: %w", err)
	}
	var s Sighting
	var row []byte
	_, err = pgx.ForEachRow(rows, []any{&s.Origin, &s.EventID, &s.Operation, &s.Base, &s.Result, &s.CurrentRevision,
		&s.CurrentOrigin, new(string), &s.CurrentTombstone, &row, &s.FoundIn, &s.At}, func() error {
		x := s
		if len(row) > 0 {
			x.CurrentRow = &pb.RowImage{}
			if err := proto.Unmarshal(row, x.CurrentRow); err != nil {
				return err
			}
		}
		d.Evidence = append(d.Evidence, x)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("arbiter: show: %w", err)
	}
	d.Summary.Evidence = len(d.Evidence)
	a := &Arbiter{cfg: Config{Pool: pool}}
	if dec, err := a.loadDecision(ctx, id); err == nil {
		d.Decision = dec
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	return &d, nil
}
