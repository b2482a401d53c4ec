package shore

import (
	"bytes"
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/internal/sqlfile"
)

//go:embed rule_release.sql
var releaseSQL string

var releaseStmts = sqlfile.MustParse("shore/rule_release.sql", releaseSQL,
	"ReleaseInsert", "ReleaseEdit", "ReleaseLock", "ReleaseList", "ReleaseNodes", "ReleaseSetState", "ReleaseOfState",
	"ReleaseNodeOffer", "ReleaseNodeRunning", "ReleaseNodeOpen", "ReleaseNodeReject", "ReleasePending",
	"NodeConfigBump", "NodeConfigVersion", "NodeConfigLock", "NodeReleases", "ExpiryInsert", "ExpiryOffered",
	"ExpiryReport", "ExpiryList", "TargetColumns")

// ReleaseState is where a rule version is in its release (seed 004 §8.2).
// Only an ACTIVE version is what the nodes run; a version in flight
// (DISTRIBUTING, ROLLBACK_TARGET) is offered to them and runs on a node once
// the node has validated it.
type ReleaseState string

// Release states.
const (
	// ReleaseDraft: registered, editable (a new version replaces it).
	ReleaseDraft ReleaseState = "DRAFT"
	// ReleaseValidated: the shore's hard checks passed (Validate).
	ReleaseValidated ReleaseState = "VALIDATED"
	// ReleaseApproved: someone other than the author approved it, with a
	// reason.
	ReleaseApproved ReleaseState = "APPROVED"
	// ReleaseDistributing: offered to its target nodes in their config.
	ReleaseDistributing ReleaseState = "DISTRIBUTING"
	// ReleaseActive: every target node validated it and runs it.
	ReleaseActive ReleaseState = "ACTIVE"
	// ReleaseFailed: a target node's validation refused it; the nodes keep
	// (or return to) the last ACTIVE version.
	ReleaseFailed ReleaseState = "FAILED"
	// ReleaseSuperseded: another version took its place.
	ReleaseSuperseded ReleaseState = "SUPERSEDED"
	// ReleaseRollbackTarget: chosen by a rollback; offered to the nodes
	// again until every target runs it, then ACTIVE.
	ReleaseRollbackTarget ReleaseState = "ROLLBACK_TARGET"
)

// Release errors.
var (
	// ErrUnknownRelease: no release of that rule version.
	ErrUnknownRelease = errors.New("shore: no release of that rule version")
	// ErrStaleRelease: the release moved since the caller read it (its
	// revision differs from the expected one): read it again.
	ErrStaleRelease = errors.New("shore: release changed since it was read")
	// ErrReleaseState: the transition is not allowed from the release's
	// state.
	ErrReleaseState = errors.New("shore: transition not allowed from the release's state")
	// ErrSameApprover: the author of a release cannot approve it.
	ErrSameApprover = errors.New("shore: a release is approved by someone other than its author")
	// ErrReasonRequired: approvals, rollbacks and expiry approvals need a
	// reason.
	ErrReasonRequired = errors.New("shore: a reason is required")
	// ErrNoRollbackTarget: no earlier version of the rule ran, or the one
	// named never did.
	ErrNoRollbackTarget = errors.New("shore: no version to roll back to")
	// ErrTwoWayExpiry: expiry approvals are for one-way rules only.
	ErrTwoWayExpiry = errors.New("shore: a two-way rule's backlog cannot be expired")
)

// Release is one rule version's release: its state, the node-side rule it
// distributes and the nodes it targets.
type Release struct {
	RuleRef
	State ReleaseState
	// Revision counts the release's transitions; a transition names the
	// revision it expects (optimistic concurrency).
	Revision int64
	// ShipRule is the node-side rule, the rules file's JSON form of one
	// rule.
	ShipRule json.RawMessage
	// Targets are the node ids that run the rule.
	Targets            []string
	Author, Approver   string
	Failure            string
	CreatedAt, Updated time.Time
	// Nodes are the targets' progress once distributed (by node id).
	Nodes []ReleaseNode
}

// ReleaseNode is one target node's progress with a release.
type ReleaseNode struct {
	NodeID string
	// ConfigVersion is the node config version that offered it.
	ConfigVersion uint64
	// State is OFFERED, RUNNING or REJECTED.
	State   string
	Problem string
}

// MaxShipRule bounds a release's node-side rule (JSON bytes).
const MaxShipRule = 64 << 10

// DraftRelease opens the release of the registered rule version ref as
// DRAFT: shipRule is the node-side rule (the rules file's JSON form of one
// rule, whose id and version must be ref's) and targets the node ids that
// will run it (registered, active). It is audited (action rule.draft).
func (r *Registry) DraftRelease(ctx context.Context, ref RuleRef, shipRule []byte, targets []string, a Audit) (*Release, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	if ref.Version < 1 || ref.Version > math.MaxInt64 {
		return nil, errors.New("shore: draft release: rule version must be ≥ 1")
	}
	shipRule, targets, err := checkDraft(shipRule, targets)
	if err != nil {
		return nil, fmt.Errorf("shore: draft release: %w", err)
	}
	err = pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		got, err := LoadRules(ctx, tx, []RuleRef{ref})
		if err != nil {
			return err
		}
		if got[ref] == nil {
			return fmt.Errorf("rule %s version %d is not registered (relay shipsync rule add)", ref.ID, ref.Version)
		}
		for _, n := range targets {
			if err := lockActive(ctx, tx, n); err != nil {
				return err
			}
		}
		now := r.clock.Now()
		if _, err := tx.Exec(ctx, releaseStmts["ReleaseInsert"], ref.ID, int64(ref.Version), string(shipRule), targets,
			a.Actor, now); err != nil {
			if isUnique(err) {
				return fmt.Errorf("a release of rule %s version %d exists already (a change is a new version)", ref.ID, ref.Version)
			}
			return err
		}
		return audit(ctx, tx, now, a, "rule.draft", "rule", ref.String(), nil,
			ptr(fmt.Sprintf("%s, %d target nodes", ReleaseDraft, len(targets))))
	})
	if err != nil {
		return nil, fmt.Errorf("shore: draft release of %s: %w", ref, err)
	}
	return r.Release(ctx, ref)
}

// EditDraft replaces the node-side rule and the targets of a DRAFT release
// (expectRevision as read, 0: any), audited (rule.edit). A release past
// DRAFT is not edited (ErrReleaseState): a change is a new version.
func (r *Registry) EditDraft(ctx context.Context, ref RuleRef, shipRule []byte, targets []string, expectRevision int64,
	a Audit) (*Release, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	shipRule, targets, err := checkDraft(shipRule, targets)
	if err != nil {
		return nil, fmt.Errorf("shore: edit draft: %w", err)
	}
	err = pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		rel, err := lockRelease(ctx, tx, ref, expectRevision)
		if err != nil {
			return err
		}
		if rel.State != ReleaseDraft {
			return fmt.Errorf("%w: %s is %s; only a DRAFT is edited (a change is a new version)", ErrReleaseState, ref, rel.State)
		}
		for _, n := range targets {
			if err := lockActive(ctx, tx, n); err != nil {
				return err
			}
		}
		now := r.clock.Now()
		if _, err := tx.Exec(ctx, releaseStmts["ReleaseEdit"], ref.ID, int64(ref.Version), string(shipRule), targets, now); err != nil {
			return err
		}
		return audit(ctx, tx, now, a, "rule.edit", "rule", ref.String(), ptr(fmt.Sprintf("%d target nodes", len(rel.Targets))),
			ptr(fmt.Sprintf("%s, %d target nodes", ReleaseDraft, len(targets))))
	})
	if err != nil {
		return nil, fmt.Errorf("shore: edit draft of %s: %w", ref, err)
	}
	return r.Release(ctx, ref)
}

// checkDraft checks a draft's node-side rule and targets (sorted, without
// duplicates).
func checkDraft(shipRule []byte, targets []string) ([]byte, []string, error) {
	if len(shipRule) == 0 || len(shipRule) > MaxShipRule || !json.Valid(shipRule) {
		return nil, nil, fmt.Errorf("the node-side rule must be one JSON object of at most %d bytes", MaxShipRule)
	}
	targets = slices.Compact(slices.Sorted(slices.Values(targets)))
	if len(targets) == 0 || targets[0] == "" {
		return nil, nil, errors.New("no target nodes")
	}
	return shipRule, targets, nil
}

// String is "id@version".
func (ref RuleRef) String() string { return fmt.Sprintf("%s@%d", ref.ID, ref.Version) }

// Release returns the release of ref with its nodes (ErrUnknownRelease).
func (r *Registry) Release(ctx context.Context, ref RuleRef) (*Release, error) {
	all, err := r.ListRuleVersions(ctx, ref.ID)
	if err != nil {
		return nil, err
	}
	for _, rel := range all {
		if rel.RuleRef == ref {
			return rel, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrUnknownRelease, ref)
}

// ListRuleVersions returns the releases of rule ruleID ("" for every rule)
// with their target nodes' progress, by rule id and version.
func (r *Registry) ListRuleVersions(ctx context.Context, ruleID string) ([]*Release, error) {
	rows, err := r.pool.Query(ctx, releaseStmts["ReleaseList"], ruleID)
	if err != nil {
		return nil, fmt.Errorf("shore: list releases: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanRelease)
	if err != nil {
		return nil, fmt.Errorf("shore: list releases: %w", err)
	}
	byRef := make(map[RuleRef]*Release, len(out))
	for _, rel := range out {
		byRef[rel.RuleRef] = rel
	}
	rows, err = r.pool.Query(ctx, releaseStmts["ReleaseNodes"], ruleID)
	if err != nil {
		return nil, fmt.Errorf("shore: list releases: %w", err)
	}
	var ref RuleRef
	var v, cv int64
	var n ReleaseNode
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&ref.ID, &v, &n.NodeID, &cv, &n.State, &n.Problem, &at}, func() error {
		ref.Version, n.ConfigVersion = uint64(v), uint64(cv)
		if rel := byRef[ref]; rel != nil {
			rel.Nodes = append(rel.Nodes, n)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("shore: list releases: %w", err)
	}
	return out, nil
}

func scanRelease(row pgx.CollectableRow) (*Release, error) {
	var rel Release
	var v int64
	var ship string
	err := row.Scan(&rel.ID, &v, &rel.State, &rel.Revision, &ship, &rel.Targets, &rel.Author, &rel.Approver,
		&rel.Failure, &rel.CreatedAt, &rel.Updated)
	rel.Version, rel.ShipRule = uint64(v), json.RawMessage(ship)
	return &rel, err
}

// TransitionParams is one step of a release.
type TransitionParams struct {
	Ref RuleRef
	// To is ReleaseValidated (from DRAFT), ReleaseApproved (from VALIDATED)
	// or ReleaseDistributing (from APPROVED). The other states are reached
	// by the nodes' reports (ACTIVE, FAILED) and by Rollback.
	To ReleaseState
	// ExpectRevision is the release's revision as the caller read it; the
	// transition is refused with ErrStaleRelease if it moved since.
	ExpectRevision int64
	// Audit is who and why; approving needs a reason and an actor other
	// than the release's author.
	Audit Audit
	// Schema reads the target table's shape for VALIDATED (required then).
	Schema TargetSchema
}

// Transition moves a release one step, audited (rule.validate,
// rule.approve, rule.distribute), in one transaction:
//
//   - VALIDATED: the node-side rule compiles (transforms whitelisted, names
//     valid) and agrees with the shore rule (id, version, table, key in
//     order, carried columns, conflict policy), and the target table has
//     every column with exactly the key as its primary key. A failure
//     leaves it DRAFT and returns a *ValidationError listing every problem.
//   - APPROVED: by an actor other than the author, with a reason.
//   - DISTRIBUTING: each target node is allowed the version, its config
//     version increases, and its config offers the version from now on.
func (r *Registry) Transition(ctx context.Context, p TransitionParams) (*Release, error) {
	if err := p.Audit.validate(); err != nil {
		return nil, err
	}
	from := map[ReleaseState]ReleaseState{ReleaseValidated: ReleaseDraft, ReleaseApproved: ReleaseValidated,
		ReleaseDistributing: ReleaseApproved}[p.To]
	switch {
	case from == "":
		return nil, fmt.Errorf("shore: transition to %q: only VALIDATED, APPROVED and DISTRIBUTING are asked for", p.To)
	case p.To == ReleaseApproved && strings.TrimSpace(p.Audit.Reason) == "":
		return nil, fmt.Errorf("%w to approve a release", ErrReasonRequired)
	case p.To == ReleaseValidated && p.Schema == nil:
		return nil, errors.New("shore: validate: no target schema to check against")
	}
	var shape TableShape
	var rule *Rule
	err := pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		rel, err := lockRelease(ctx, tx, p.Ref, p.ExpectRevision)
		if err != nil {
			return err
		}
		if rel.State != from {
			return fmt.Errorf("%w: %s is %s, %s needs %s", ErrReleaseState, p.Ref, rel.State, p.To, from)
		}
		now := r.clock.Now()
		var approver *string
		switch p.To {
		case ReleaseValidated:
			got, err := LoadRules(ctx, tx, []RuleRef{p.Ref})
			if err != nil {
				return err
			}
			rule = got[p.Ref]
			if shape, err = p.Schema.TableShape(ctx, rule.TargetTable); err != nil {
				return fmt.Errorf("validate: target table %s: %w", rule.TargetTable, err)
			}
			if err := ValidateRelease(rule, rel.ShipRule, shape); err != nil {
				return err
			}
		case ReleaseApproved:
			if rel.Author == p.Audit.Actor {
				return fmt.Errorf("%w (%s)", ErrSameApprover, p.Audit.Actor)
			}
			approver = &p.Audit.Actor
		case ReleaseDistributing:
			if err := r.offer(ctx, tx, rel, now, true); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, releaseStmts["ReleaseSetState"], p.Ref.ID, int64(p.Ref.Version), p.To, approver, nil,
			now); isUnique(err) {
			return fmt.Errorf("%w: another version of rule %s is in flight (wait for it or roll it back)", ErrReleaseState, p.Ref.ID)
		} else if err != nil {
			return err
		}
		return audit(ctx, tx, now, p.Audit, "rule."+strings.ToLower(map[ReleaseState]string{ReleaseValidated: "validate",
			ReleaseApproved: "approve", ReleaseDistributing: "distribute"}[p.To]), "rule", p.Ref.String(),
			ptr(string(rel.State)), ptr(string(p.To)))
	})
	if err != nil {
		return nil, fmt.Errorf("shore: release %s: %w", p.Ref, err)
	}
	return r.Release(ctx, p.Ref)
}

// lockRelease locks ref's release and checks its revision (expect 0: any).
func lockRelease(ctx context.Context, tx pgx.Tx, ref RuleRef, expect int64) (*Release, error) {
	rows, err := tx.Query(ctx, releaseStmts["ReleaseLock"], ref.ID, int64(min(ref.Version, math.MaxInt64)))
	if err != nil {
		return nil, err
	}
	rel, err := pgx.CollectExactlyOneRow(rows, scanRelease)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("%w: %s", ErrUnknownRelease, ref)
	case err != nil:
		return nil, err
	case expect != 0 && rel.Revision != expect:
		return nil, fmt.Errorf("%w: %s is at revision %d (%s), not %d", ErrStaleRelease, ref, rel.Revision, rel.State, expect)
	}
	return rel, nil
}

// offer offers rel to each of its target nodes: their config versions
// increase and (allow) they may upload its events.
func (r *Registry) offer(ctx context.Context, tx pgx.Tx, rel *Release, now time.Time, allow bool) error {
	for _, n := range rel.Targets {
		if err := lockActive(ctx, tx, n); err != nil {
			return err
		}
		cv, err := bumpConfig(ctx, tx, n, now)
		if err != nil {
			return err
		}
		if allow {
			if _, err := tx.Exec(ctx, stmts["RuleAllow"], n, rel.ID, int64(rel.Version), now); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, releaseStmts["ReleaseNodeOffer"], rel.ID, int64(rel.Version), n, cv, now); err != nil {
			return err
		}
	}
	return nil
}

func bumpConfig(ctx context.Context, tx pgx.Tx, node string, now time.Time) (int64, error) {
	var cv int64
	err := tx.QueryRow(ctx, releaseStmts["NodeConfigBump"], node, now).Scan(&cv)
	return cv, err
}

// RollbackParams names a rollback.
type RollbackParams struct {
	RuleID string
	// ToVersion is the version to return to; 0 picks the ACTIVE version
	// when a newer one is in flight, else the highest SUPERSEDED version
	// below the ACTIVE one.
	ToVersion uint64
	// ExpectRevision, when not 0, is the revision the caller read of the
	// rule's current version (the ACTIVE one, or the one in flight if any).
	ExpectRevision int64
	// Audit: a reason is required.
	Audit Audit
}

// Rollback returns rule p.RuleID to a version that ran before (SUPERSEDED)
// or to the ACTIVE one when a newer version is in flight: the current
// ACTIVE version and any version in flight become SUPERSEDED, the target
// becomes ROLLBACK_TARGET and is offered to its nodes (new config
// versions) until every one runs it, then it is ACTIVE again. Audited
// (rule.rollback) with the reason.
func (r *Registry) Rollback(ctx context.Context, p RollbackParams) (*Release, error) {
	if err := p.Audit.validate(); err != nil {
		return nil, err
	}
	if strings.TrimSpace(p.Audit.Reason) == "" {
		return nil, fmt.Errorf("%w to roll back", ErrReasonRequired)
	}
	var target RuleRef
	err := pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, releaseStmts["ReleaseOfState"], p.RuleID,
			[]string{string(ReleaseActive), string(ReleaseDistributing), string(ReleaseRollbackTarget), string(ReleaseSuperseded)})
		if err != nil {
			return err
		}
		type vs struct {
			v     uint64
			state ReleaseState
		}
		list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (vs, error) {
			var x vs
			var v int64
			err := row.Scan(&v, &x.state)
			x.v = uint64(v)
			return x, err
		})
		if err != nil {
			return err
		}
		var current, active uint64
		for _, x := range list {
			switch x.state {
			case ReleaseActive:
				active = x.v
				current = max(current, x.v)
			case ReleaseDistributing, ReleaseRollbackTarget:
				current = x.v
			}
		}
		if current == 0 {
			return fmt.Errorf("%w: rule %s has no ACTIVE version or version in flight", ErrNoRollbackTarget, p.RuleID)
		}
		to := p.ToVersion
		switch {
		case to != 0:
		case active != 0 && active != current:
			to = active // a version in flight: back to the ACTIVE one
		default: // the highest earlier version that ran
			for _, x := range list {
				if x.v < current && x.state == ReleaseSuperseded {
					to = x.v
				}
			}
		}
		ok := to != current && slices.ContainsFunc(list, func(x vs) bool {
			return x.v == to && (x.state == ReleaseSuperseded || x.state == ReleaseActive)
		})
		if !ok {
			return fmt.Errorf("%w: rule %s version %d (a version that ran before, other than the current %d)",
				ErrNoRollbackTarget, p.RuleID, to, current)
		}
		curRel, err := lockRelease(ctx, tx, RuleRef{p.RuleID, current}, p.ExpectRevision)
		if err != nil {
			return err
		}
		now := r.clock.Now()
		for _, x := range list {
			if x.v != to && (x.state == ReleaseActive || x.state == ReleaseDistributing || x.state == ReleaseRollbackTarget) {
				if _, err := tx.Exec(ctx, releaseStmts["ReleaseSetState"], p.RuleID, int64(x.v), ReleaseSuperseded, nil,
					nil, now); err != nil {
					return err
				}
			}
		}
		target = RuleRef{p.RuleID, to}
		toRel, err := lockRelease(ctx, tx, target, 0)
		if err != nil {
			return err
		}
		// Every node of the versions that change is offered a new config.
		if err := r.offerAgain(ctx, tx, curRel, now); err != nil {
			return err
		}
		next := ReleaseRollbackTarget
		if to == active {
			next = ReleaseActive // the in-flight version is dropped; the nodes return to the ACTIVE one
		} else {
			if active != 0 && active != current {
				activeRel, err := lockRelease(ctx, tx, RuleRef{p.RuleID, active}, 0)
				if err != nil {
					return err
				}
				if err := r.offerAgain(ctx, tx, activeRel, now); err != nil {
					return err
				}
			}
			if err := r.offer(ctx, tx, toRel, now, true); err != nil {
				return err
			}
		}
		if next != toRel.State {
			if _, err := tx.Exec(ctx, releaseStmts["ReleaseSetState"], p.RuleID, int64(to), next, nil, nil, now); err != nil {
				return err
			}
		}
		return audit(ctx, tx, now, p.Audit, "rule.rollback", "rule", p.RuleID,
			ptr(fmt.Sprintf("version %d %s", current, curRel.State)), ptr(fmt.Sprintf("version %d %s", to, next)))
	})
	if err != nil {
		return nil, fmt.Errorf("shore: roll back rule %s: %w", p.RuleID, err)
	}
	return r.Release(ctx, target)
}

// offerAgain gives rel's targets a new config version (what they should
// run changed without a new version being offered).
func (r *Registry) offerAgain(ctx context.Context, tx pgx.Tx, rel *Release, now time.Time) error {
	for _, n := range rel.Targets {
		if _, err := bumpConfig(ctx, tx, n, now); err != nil {
			return err
		}
	}
	return nil
}

// ValidationError lists every problem the shore's hard checks of a release
// found.
type ValidationError struct {
	Problems []string
}

// Error joins the problems.
func (e *ValidationError) Error() string {
	return "validation failed: " + strings.Join(e.Problems, "; ")
}

// TableShape is a target table's columns (table order) and primary key
// (key order).
type TableShape struct {
	Columns, Key []string
}

// TargetSchema reads the shape of a table of the shore database.
type TargetSchema interface {
	// TableShape returns the table's shape; a table that does not exist
	// has no columns.
	TableShape(ctx context.Context, table string) (TableShape, error)
}

// MariaDBSchema reads table shapes from the current database of DB
// (information_schema).
type MariaDBSchema struct{ DB *sql.DB }

// TableShape implements TargetSchema.
func (s MariaDBSchema) TableShape(ctx context.Context, table string) (TableShape, error) {
	rows, err := s.DB.QueryContext(ctx, releaseStmts["TargetColumns"], table)
	if err != nil {
		return TableShape{}, err
	}
	defer rows.Close()
	var shape TableShape
	keyPos := map[int]string{}
	for rows.Next() {
		var c string
		var pos int
		if err := rows.Scan(&c, &pos); err != nil {
			return TableShape{}, err
		}
		shape.Columns = append(shape.Columns, c)
		if pos > 0 {
			keyPos[pos] = c
		}
	}
	for i := 1; i <= len(keyPos); i++ {
		shape.Key = append(shape.Key, keyPos[i])
	}
	return shape, rows.Err()
}

// ValidateRelease is the shore's hard check of a release: the node-side rule
// shipRule compiles under the node's own validator (names, transforms from
// the whitelist, filter, window) and agrees with the shore rule — same id
// and version, its table is the one the shore rule names, its key (after
// field mappings) is the shore rule's key in order, every column it names
// explicitly is one the shore rule accepts, a two-way rule is revisioned, a
// LAST_WRITER_WINS time column is carried — and the target table has every
// shore rule column with the key as its primary key. It returns a
// *ValidationError listing every problem, or nil.
func ValidateRelease(rule *Rule, shipRule []byte, target TableShape) error {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var sr normalize.Rule
	dec := json.NewDecoder(bytes.NewReader(shipRule))
	if err := dec.Decode(&sr); err != nil {
		return &ValidationError{Problems: []string{"node-side rule: " + wire.Bound(err.Error(), 200)}}
	}
	if set, err := normalize.NewRuleSet(sr); err != nil {
		bad("node-side rule: %s", wire.Bound(err.Error(), 200))
	} else {
		sr = *set.Rules()[0]
	}
	if sr.ID != rule.ID || sr.Version != rule.Version {
		bad("node-side rule is %s@%d, the release is %s", wire.Bound(sr.ID, 64), sr.Version, RuleRef{rule.ID, rule.Version})
	}
	if sr.Table != rule.SourceTable {
		bad("node-side rule selects table %q, the shore rule's events name %q", wire.Bound(sr.Table, 64), rule.SourceTable)
	}
	event := func(c string) string {
		if to, ok := sr.FieldMappings[c]; ok {
			return to
		}
		return c
	}
	var keys []string
	for _, k := range sr.KeyColumns {
		keys = append(keys, event(k))
	}
	if !slices.Equal(keys, rule.KeyColumns) {
		bad("key columns %v (after mappings) differ from the shore rule's %v", keys, rule.KeyColumns)
	}
	carried := map[string]bool{}
	for _, c := range sr.IncludedColumns {
		carried[event(c)] = true
		if !slices.Contains(rule.Columns, event(c)) {
			bad("column %q is carried but not accepted by the shore rule", wire.Bound(event(c), 64))
		}
	}
	for src, to := range sr.FieldMappings {
		if !slices.Contains(rule.Columns, to) {
			bad("mapping of %q names %q, not accepted by the shore rule", wire.Bound(src, 64), wire.Bound(to, 64))
		}
	}
	if sr.Direction == normalize.DirectionBoth && !sr.Revisioned {
		bad("a two-way rule must be revisioned")
	}
	if p := rule.Conflict; p.Policy == PolicyLastWriterWins && len(carried) > 0 && !carried[p.TimeColumn] {
		bad("conflict policy %s needs time column %q carried", p.Policy, p.TimeColumn)
	}
	if sr.Direction == normalize.DirectionUplink && rule.Conflict.Policy == PolicyShoreWins && !sr.Revisioned {
		bad("conflict policy %s needs revisions; the rule is not revisioned", PolicyShoreWins)
	}
	if len(target.Columns) == 0 {
		bad("target table %s does not exist", rule.TargetTable)
	} else {
		for _, c := range rule.Columns {
			if !slices.Contains(target.Columns, c) {
				bad("target table %s has no column %q", rule.TargetTable, c)
			}
		}
		if !slices.Equal(target.Key, rule.KeyColumns) {
			bad("target table %s's primary key %v differs from the rule's key %v", rule.TargetTable, target.Key, rule.KeyColumns)
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return &ValidationError{Problems: problems}
	}
	return nil
}
