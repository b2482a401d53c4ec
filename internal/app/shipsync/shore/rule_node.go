package shore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

// ExpiryOfferedFor is how long an expiry approval stays in a node's config
// after the node reported applying it (events of the rule captured before
// the boundary and read late from the queue are still expired meanwhile).
const ExpiryOfferedFor = 30 * 24 * time.Hour

// NodeConfigVersion returns the config version node is offered (1 until a
// release or an approval changes what it should do).
func (r *Registry) NodeConfigVersion(ctx context.Context, q Querier, node string) (uint64, error) {
	rows, err := q.Query(ctx, releaseStmts["NodeConfigVersion"], node)
	if err != nil {
		return 0, fmt.Errorf("shore: config version: %w", err)
	}
	v, err := pgx.CollectExactlyOneRow(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("shore: config version: %w", err)
	}
	return uint64(v), nil
}

// NodeReleases returns what node should run per rule (the version in flight
// to it, else the ACTIVE one, with the node-side rule) and the expiry
// approvals it is offered, for GET /sync/v1/config.
func (r *Registry) NodeReleases(ctx context.Context, q Querier, node string) ([]*pb.RuleRelease, []*pb.ExpiryApproval, error) {
	rows, err := q.Query(ctx, releaseStmts["NodeReleases"], node)
	if err != nil {
		return nil, nil, fmt.Errorf("shore: node releases: %w", err)
	}
	rels, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*pb.RuleRelease, error) {
		var rel pb.RuleRelease
		var v int64
		var ship string
		err := row.Scan(&rel.RuleId, &v, &ship)
		rel.RuleVersion, rel.Rule = uint64(v), []byte(ship)
		return &rel, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("shore: node releases: %w", err)
	}
	rows, err = q.Query(ctx, releaseStmts["ExpiryOffered"], node, r.clock.Now().Add(-ExpiryOfferedFor))
	if err != nil {
		return nil, nil, fmt.Errorf("shore: node expiry approvals: %w", err)
	}
	exps, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*pb.ExpiryApproval, error) {
		var e pb.ExpiryApproval
		var before time.Time
		err := row.Scan(&e.ApprovalId, &e.RuleId, &before)
		e.CapturedBefore = timestamppb.New(before)
		return &e, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("shore: node expiry approvals: %w", err)
	}
	return rels, exps, nil
}

// ObserveNode takes what a heartbeat says about the node's rules, in one
// transaction: a ConfigRejection of the node's current config version fails
// the release(s) in flight to it that it names (all of them when it names
// none in flight) and offers every target of a failed release a new config
// (they return to the ACTIVE version); otherwise the node runs every
// release in flight it was offered at or before the config version it
// reports, and a release every target runs becomes ACTIVE (the previous
// ACTIVE version SUPERSEDED). Expiry reports are recorded once. Every state
// change is audited with actor "node:<id>".
func (r *Registry) ObserveNode(ctx context.Context, node string, hb *pb.Heartbeat) error {
	if hb.ConfigRejection == nil && hb.ConfigVersion == 0 && len(hb.ExpiryReports) == 0 {
		return nil // a node that does not take releases
	}
	err := pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var cv int64
		if err := tx.QueryRow(ctx, releaseStmts["NodeConfigLock"], node).Scan(&cv); errors.Is(err, pgx.ErrNoRows) {
			cv = 1
		} else if err != nil {
			return err
		}
		now := r.clock.Now()
		by := Audit{Actor: "node:" + node}
		if rej := hb.ConfigRejection; rej != nil && rej.ConfigVersion == uint64(cv) {
			if err := r.reject(ctx, tx, node, rej, by, now); err != nil {
				return err
			}
		} else if hb.ConfigVersion > 0 && hb.ConfigVersion <= uint64(cv) {
			if err := r.running(ctx, tx, node, int64(hb.ConfigVersion), by, now); err != nil {
				return err
			}
		}
		for _, rep := range hb.ExpiryReports {
			if _, err := uuid.Parse(rep.ApprovalId); err != nil {
				continue // not an approval of ours; nothing to record
			}
			if _, err := tx.Exec(ctx, releaseStmts["ExpiryReport"], node, rep.ApprovalId,
				int64(min(rep.Events, math.MaxInt64)), int64(min(rep.RawBytes, math.MaxInt64)), now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: observe node rules: %w", ErrStore, err)
	}
	return nil
}

func (r *Registry) reject(ctx context.Context, tx pgx.Tx, node string, rej *pb.ConfigRejection, by Audit, now time.Time) error {
	rows, err := tx.Query(ctx, releaseStmts["ReleaseNodeOpen"], node)
	if err != nil {
		return err
	}
	open, err := pgx.CollectRows(rows, scanRef)
	if err != nil {
		return err
	}
	named := RuleRef{rej.RuleId, rej.RuleVersion}
	failing := open
	for _, ref := range open {
		if ref == named {
			failing = []RuleRef{ref}
		}
	}
	problem := wire.Bound(rej.Problem, 300)
	for _, ref := range failing {
		rel, err := lockRelease(ctx, tx, ref, 0)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, releaseStmts["ReleaseNodeReject"], ref.ID, int64(ref.Version), node, problem, now); err != nil {
			return err
		}
		failure := fmt.Sprintf("node %s: %s", node, problem)
		if _, err := tx.Exec(ctx, releaseStmts["ReleaseSetState"], ref.ID, int64(ref.Version), ReleaseFailed, nil, failure,
			now); err != nil {
			return err
		}
		if err := r.offerAgain(ctx, tx, rel, now); err != nil {
			return err
		}
		if err := audit(ctx, tx, now, by, "rule.fail", "rule", ref.String(), ptr(string(rel.State)),
			ptr(string(ReleaseFailed)+": "+failure)); err != nil {
			return err
		}
	}
	return nil
}

func (r *Registry) running(ctx context.Context, tx pgx.Tx, node string, cv int64, by Audit, now time.Time) error {
	rows, err := tx.Query(ctx, releaseStmts["ReleaseNodeRunning"], node, cv, now)
	if err != nil {
		return err
	}
	refs, err := pgx.CollectRows(rows, scanRef)
	if err != nil {
		return err
	}
	for _, ref := range refs {
		var pending int
		if err := tx.QueryRow(ctx, releaseStmts["ReleasePending"], ref.ID, int64(ref.Version)).Scan(&pending); err != nil {
			return err
		}
		if pending > 0 {
			continue
		}
		rel, err := lockRelease(ctx, tx, ref, 0)
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, releaseStmts["ReleaseOfState"], ref.ID, []string{string(ReleaseActive)})
		if err != nil {
			return err
		}
		prev, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (int64, error) {
			var v int64
			var s string
			err := row.Scan(&v, &s)
			return v, err
		})
		if err != nil {
			return err
		}
		for _, v := range prev {
			if _, err := tx.Exec(ctx, releaseStmts["ReleaseSetState"], ref.ID, v, ReleaseSuperseded, nil, nil, now); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, releaseStmts["ReleaseSetState"], ref.ID, int64(ref.Version), ReleaseActive, nil, nil,
			now); err != nil {
			return err
		}
		if err := audit(ctx, tx, now, by, "rule.activate", "rule", ref.String(), ptr(string(rel.State)),
			ptr(fmt.Sprintf("%s on %d nodes", ReleaseActive, len(rel.Targets)))); err != nil {
			return err
		}
	}
	return nil
}

func scanRef(row pgx.CollectableRow) (RuleRef, error) {
	var ref RuleRef
	var v int64
	err := row.Scan(&ref.ID, &v)
	ref.Version = uint64(v)
	return ref, err
}

// ExpiryParams asks that a node's old backlog of one rule is not delivered.
type ExpiryParams struct {
	NodeID, RuleID string
	// CapturedBefore is the fixed boundary: the node's events of the rule
	// captured before it, not yet terminal, end EXPIRED_APPROVED.
	CapturedBefore time.Time
	// EventsEstimate and BytesEstimate are the backlog the approver saw
	// (raw bytes; 0: unknown). The node reports what it expired.
	EventsEstimate, BytesEstimate uint64
	// BusinessOwner is who answers for the data (required).
	BusinessOwner string
	// Audit: a reason is required.
	Audit Audit
}

// ExpiryApproval is one immutable approval and, once the node reported it,
// what it expired.
type ExpiryApproval struct {
	ID, NodeID, RuleID            string
	RuleVersion                   uint64
	CapturedBefore                time.Time
	EventsEstimate, BytesEstimate uint64
	BusinessOwner, Actor, Reason  string
	CreatedAt                     time.Time
	// Reported is set once the node reported it, with its counts.
	Reported                    *time.Time
	ExpiredEvents, ExpiredBytes uint64
}

// ApproveExpiry records an immutable approval that node p.NodeID's events of
// rule p.RuleID captured before p.CapturedBefore are not delivered, audited
// (backlog.expire) in the same transaction, and offers it to the node (a new
// config version). Only a one-way rule qualifies: the release of the rule
// the node should run (the one in flight to it, else the ACTIVE one) must be
// UPLINK (its version is recorded); a BOTH rule is refused with
// ErrTwoWayExpiry, a rule without a release for the node with
// ErrUnknownRelease (its direction is not known). A reason and the business
// owner are required; the boundary must not be in the future.
func (r *Registry) ApproveExpiry(ctx context.Context, p ExpiryParams) (*ExpiryApproval, error) {
	if err := p.Audit.validate(); err != nil {
		return nil, err
	}
	now := r.clock.Now()
	switch {
	case strings.TrimSpace(p.Audit.Reason) == "":
		return nil, fmt.Errorf("%w to expire backlog", ErrReasonRequired)
	case strings.TrimSpace(p.BusinessOwner) == "":
		return nil, errors.New("shore: expire backlog: the business owner is required")
	case p.CapturedBefore.IsZero() || p.CapturedBefore.After(now):
		return nil, errors.New("shore: expire backlog: the boundary must be set and not in the future")
	case p.NodeID == "" || p.RuleID == "":
		return nil, errors.New("shore: expire backlog: node and rule are required")
	}
	id := uuid.New()
	var version int64
	err := pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := lockActive(ctx, tx, p.NodeID); err != nil {
			return err
		}
		rels, _, err := r.NodeReleases(ctx, tx, p.NodeID)
		if err != nil {
			return err
		}
		var ship *pb.RuleRelease
		for _, rel := range rels {
			if rel.RuleId == p.RuleID {
				ship = rel
			}
		}
		if ship == nil {
			return fmt.Errorf("%w: rule %s has no release for node %s, so its direction is unknown", ErrUnknownRelease,
				p.RuleID, p.NodeID)
		}
		var sr struct {
			Direction normalize.Direction `json:"direction"`
		}
		if err := json.Unmarshal(ship.Rule, &sr); err != nil {
			return fmt.Errorf("rule %s: node-side rule unreadable: %w", p.RuleID, err)
		}
		if sr.Direction != normalize.DirectionUplink {
			return fmt.Errorf("%w: rule %s is %s", ErrTwoWayExpiry, p.RuleID, sr.Direction)
		}
		version = int64(ship.RuleVersion)
		if _, err := tx.Exec(ctx, releaseStmts["ExpiryInsert"], id, p.NodeID, p.RuleID, version, p.CapturedBefore,
			int64(min(p.EventsEstimate, math.MaxInt64)), int64(min(p.BytesEstimate, math.MaxInt64)), p.BusinessOwner,
			p.Audit.Actor, p.Audit.Reason, now); err != nil {
			return err
		}
		if _, err := bumpConfig(ctx, tx, p.NodeID, now); err != nil {
			return err
		}
		return audit(ctx, tx, now, p.Audit, "backlog.expire", "expiry_approval", id.String(), nil,
			ptr(fmt.Sprintf("node %s rule %s@%d captured before %s, about %d events / %d bytes, owner %s", p.NodeID,
				p.RuleID, version, p.CapturedBefore.UTC().Format(time.RFC3339), p.EventsEstimate, p.BytesEstimate,
				wire.Bound(p.BusinessOwner, 64))))
	})
	if err != nil {
		return nil, fmt.Errorf("shore: expire backlog: %w", err)
	}
	all, err := r.ExpiryApprovals(ctx, p.NodeID)
	if err != nil {
		return nil, err
	}
	for _, a := range all {
		if a.ID == id.String() {
			return a, nil
		}
	}
	return nil, fmt.Errorf("shore: expire backlog: approval %s not found after commit", id)
}

// ExpiryApprovals lists the approvals of node ("" for every node), oldest
// first.
func (r *Registry) ExpiryApprovals(ctx context.Context, node string) ([]*ExpiryApproval, error) {
	rows, err := r.pool.Query(ctx, releaseStmts["ExpiryList"], node)
	if err != nil {
		return nil, fmt.Errorf("shore: expiry approvals: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*ExpiryApproval, error) {
		var a ExpiryApproval
		var v, ev, eb int64
		var rev, rb *int64
		err := row.Scan(&a.ID, &a.NodeID, &a.RuleID, &v, &a.CapturedBefore, &ev, &eb, &a.BusinessOwner, &a.Actor,
			&a.Reason, &a.CreatedAt, &rev, &rb, &a.Reported)
		a.RuleVersion, a.EventsEstimate, a.BytesEstimate = uint64(v), uint64(ev), uint64(eb)
		if rev != nil {
			a.ExpiredEvents, a.ExpiredBytes = uint64(*rev), uint64(*rb)
		}
		return &a, err
	})
	if err != nil {
		return nil, fmt.Errorf("shore: expiry approvals: %w", err)
	}
	return out, nil
}

// NodeConfig returns what GET /sync/v1/config offers node, read in one
// snapshot: the config version, the rule versions it may upload, what it
// should run and its expiry approvals (the other fields are left zero).
func (r *Registry) NodeConfig(ctx context.Context, node string) (*pb.NodeConfig, error) {
	nc := &pb.NodeConfig{NodeId: node}
	err := pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) (err error) {
			if nc.ConfigVersion, err = r.NodeConfigVersion(ctx, tx, node); err != nil {
				return err
			}
			if nc.Rules, err = r.Rules(ctx, tx, node); err != nil {
				return err
			}
			nc.Releases, nc.ExpiryApprovals, err = r.NodeReleases(ctx, tx, node)
			return err
		})
	if err != nil {
		return nil, err
	}
	return nc, nil
}
