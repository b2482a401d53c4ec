package client

import (
	"bytes"
	"context"
	"database/sql"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
	"github.com/relayhq/relay/internal/sqlfile"
)

//go:embed rules.sql
var rulesSQL string

var ruleStmts = sqlfile.MustParse("client/rules.sql", rulesSQL,
	"SnapshotActive", "SnapshotSupersede", "SnapshotUpsert", "ExpiredResult", "ExpiredCounts")

// metaConfigVersion names the config version the node runs in client_meta.
const metaConfigVersion = "config_version"

// RuleRuntime is the node's rule set as the shore releases it: the local
// rules (the rules file) overlaid, rule by rule, with the rule versions the
// shore's config says to run. It is the client's Normalizer. A new config
// is validated whole and switched to at once — every rule of it or none —
// and the switch is stored (rule_snapshot, the config version) before it
// takes effect, so a restart runs what ran before it. A config that fails
// validation leaves the previous set running and is reported to the shore
// (Heartbeat.config_rejection). Safe for concurrent use: Normalize reads
// the current set without locking.
type RuleRuntime struct {
	cfg     normalize.Config
	local   *normalize.RuleSet
	applied normalize.AppliedLookup
	store   *Store

	cur atomic.Pointer[ruleState]

	mu        sync.Mutex // serialises Apply; guards rejection
	rejection *pb.ConfigRejection
}

// ruleState is one immutable rule set with what came with it.
type ruleState struct {
	n *normalize.Normalizer
	// version is the config version it came from (0: the local rules).
	version uint64
	// expiries are the expiry approvals of that config, by rule id.
	expiries map[string][]expiry
	// approvals are the approvals' ids, for the heartbeat's reports.
	approvals []string
	// dirs is each rule's direction, by rule id.
	dirs map[string]normalize.Direction
}

type expiry struct {
	id     string
	before time.Time
}

// NewRuleRuntime returns the runtime for local with what the store says ran
// last (the ACTIVE snapshot rows and their config version). A stored set
// that no longer validates (a rule file changed under it) is dropped, with
// the local rules running, config version 0, so the shore offers it again.
func NewRuleRuntime(ctx context.Context, cfg normalize.Config, local *normalize.RuleSet, applied normalize.AppliedLookup,
	store *Store) (*RuleRuntime, error) {
	rt := &RuleRuntime{cfg: cfg, local: local, applied: applied, store: store}
	st, err := rt.state(local)
	if err != nil {
		return nil, err
	}
	rt.cur.Store(st)
	if store == nil {
		return rt, nil
	}
	rows, err := store.db.QueryContext(ctx, ruleStmts["SnapshotActive"])
	if err != nil {
		return nil, fmt.Errorf("client: rule snapshot: %w", err)
	}
	var released []normalize.Rule
	for rows.Next() {
		var content string
		if err := rows.Scan(&content); err != nil {
			rows.Close()
			return nil, fmt.Errorf("client: rule snapshot: %w", err)
		}
		var r normalize.Rule
		if err := json.Unmarshal([]byte(content), &r); err == nil {
			released = append(released, r)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("client: rule snapshot: %w", err)
	}
	cv, err := store.meta(ctx, metaConfigVersion)
	if err != nil {
		return nil, err
	}
	version, _ := strconv.ParseUint(cv, 10, 64)
	if len(released) > 0 || version > 0 {
		if st, err := rt.build(released); err == nil {
			st.version = version
			rt.cur.Store(st)
		}
	}
	return rt, nil
}

// Normalize implements Normalizer with the current rule set.
func (rt *RuleRuntime) Normalize(ctx context.Context, src normalize.Source, ev *cdc.Event, trustedNow time.Time) (normalize.Outcome, error) {
	return rt.cur.Load().n.Normalize(ctx, src, ev, trustedNow)
}

// ConfigVersion is the config version the node runs (0: its local rules).
func (rt *RuleRuntime) ConfigVersion() uint64 { return rt.cur.Load().version }

// Rejection is the last config the node refused, until a config is taken.
func (rt *RuleRuntime) Rejection() *pb.ConfigRejection {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.rejection
}

// build validates local overlaid by released (by rule id) as one set.
func (rt *RuleRuntime) build(released []normalize.Rule) (*ruleState, error) {
	byID := map[string]bool{}
	for _, r := range released {
		byID[r.ID] = true
	}
	var all []normalize.Rule
	for _, r := range rt.local.Rules() {
		if !byID[r.ID] {
			all = append(all, *r)
		}
	}
	all = append(all, released...)
	set, err := normalize.NewRuleSet(all...)
	if err != nil {
		return nil, err
	}
	return rt.state(set)
}

// state is the runtime state of set, without a config.
func (rt *RuleRuntime) state(set *normalize.RuleSet) (*ruleState, error) {
	n, err := normalize.New(rt.cfg, set, rt.applied)
	if err != nil {
		return nil, err
	}
	st := &ruleState{n: n, dirs: map[string]normalize.Direction{}, expiries: map[string][]expiry{}}
	for _, r := range set.Rules() {
		st.dirs[r.ID] = r.Direction
	}
	return st, nil
}

// Apply takes the shore's config nc: when its version differs from the one
// running, every released rule is decoded and the whole set validated; on
// success the set is stored and switched to at once, else the previous set
// keeps running and the refusal (the first failing rule and why) is kept
// for the next heartbeat. The error is only for the store.
func (rt *RuleRuntime) Apply(ctx context.Context, nc *pb.NodeConfig) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	old := rt.cur.Load()
	if nc.ConfigVersion == old.version && old.version != 0 {
		return nil
	}
	released := make([]normalize.Rule, 0, len(nc.Releases))
	refuse := func(rel *pb.RuleRelease, problem string) error {
		rt.rejection = &pb.ConfigRejection{ConfigVersion: nc.ConfigVersion, Problem: wire.Bound(problem, 300)}
		if rel != nil {
			rt.rejection.RuleId, rt.rejection.RuleVersion = rel.RuleId, rel.RuleVersion
		}
		if rt.store == nil {
			return nil
		}
		return rt.store.saveSnapshot(ctx, nc, "FAILED", problem, rt.rejection.RuleId)
	}
	for _, rel := range nc.Releases {
		var r normalize.Rule
		dec := json.NewDecoder(bytes.NewReader(rel.Rule))
		if err := dec.Decode(&r); err != nil {
			return refuse(rel, "rule "+rel.RuleId+": not a rule: "+err.Error())
		}
		if r.ID != rel.RuleId || r.Version != rel.RuleVersion {
			return refuse(rel, fmt.Sprintf("rule %s@%d: content is %s@%d", rel.RuleId, rel.RuleVersion, wire.Bound(r.ID, 64), r.Version))
		}
		released = append(released, r)
	}
	st, err := rt.build(released)
	if err != nil {
		var re *normalize.RuleError
		var rel *pb.RuleRelease
		if errors.As(err, &re) {
			i := slices.IndexFunc(nc.Releases, func(x *pb.RuleRelease) bool { return x.RuleId == re.ID })
			if i >= 0 {
				rel = nc.Releases[i]
			}
		}
		return refuse(rel, err.Error())
	}
	if rt.store != nil {
		if err := rt.store.saveSnapshot(ctx, nc, "ACTIVE", "", ""); err != nil {
			return err // not switched: the stored state and the running one stay the same
		}
	}
	st.version = nc.ConfigVersion
	for _, e := range nc.ExpiryApprovals {
		if e.CapturedBefore == nil || e.ApprovalId == "" {
			continue
		}
		st.expiries[e.RuleId] = append(st.expiries[e.RuleId], expiry{e.ApprovalId, e.CapturedBefore.AsTime()})
		st.approvals = append(st.approvals, e.ApprovalId)
	}
	rt.cur.Store(st)
	rt.rejection = nil
	return nil
}

// expiredBy returns the approval that expires an event of rule ruleID
// captured at capturedAt ("" when none does). Only a one-way (UPLINK) rule's
// events expire: the node checks this again whatever the shore sent.
func (rt *RuleRuntime) expiredBy(ruleID string, capturedAt time.Time) string {
	st := rt.cur.Load()
	if st.dirs[ruleID] != normalize.DirectionUplink {
		return ""
	}
	for _, e := range st.expiries[ruleID] {
		if capturedAt.Before(e.before) {
			return e.id
		}
	}
	return ""
}

// saveSnapshot stores nc's releases with status (ACTIVE: every previous
// ACTIVE row becomes SUPERSEDED and the config version is stored; FAILED: only failed, the rule that failed or all of them) in one
// transaction.
func (s *Store) saveSnapshot(ctx context.Context, nc *pb.NodeConfig, status, problem, failed string) error {
	return s.tx(ctx, "save rule snapshot", nil, func(tx *sql.Tx, now int64) error {
		if status == "ACTIVE" {
			if _, err := tx.ExecContext(ctx, ruleStmts["SnapshotSupersede"], now); err != nil {
				return err
			}
		}
		for _, rel := range nc.Releases {
			if status == "FAILED" && failed != "" && rel.RuleId != failed {
				continue
			}
			if _, err := tx.ExecContext(ctx, ruleStmts["SnapshotUpsert"], rel.RuleId, int64(rel.RuleVersion), string(rel.Rule),
				status, nullable(wire.Bound(problem, 300)), now); err != nil {
				return err
			}
		}
		if status != "ACTIVE" {
			return nil
		}
		_, err := tx.ExecContext(ctx, stmts["MetaSet"], metaConfigVersion, strconv.FormatUint(nc.ConfigVersion, 10))
		return err
	})
}

// expiryReports settles the result of events expired on read and counts,
// per approval of the running config, the events it expired.
func (s *Store) expiryReports(ctx context.Context, approvals []string) ([]*pb.ExpiryReport, error) {
	if len(approvals) == 0 {
		return nil, nil
	}
	if _, err := s.db.ExecContext(ctx, ruleStmts["ExpiredResult"], micros(s.clock.Now())); err != nil {
		return nil, fmt.Errorf("client: expired events: %w", err)
	}
	ids, _ := json.Marshal(approvals)
	rows, err := s.db.QueryContext(ctx, ruleStmts["ExpiredCounts"], string(ids))
	if err != nil {
		return nil, fmt.Errorf("client: expired events: %w", err)
	}
	defer rows.Close()
	counts := map[string]*pb.ExpiryReport{}
	for rows.Next() {
		var r pb.ExpiryReport
		var n, b int64
		if err := rows.Scan(&r.ApprovalId, &n, &b); err != nil {
			return nil, err
		}
		r.Events, r.RawBytes = uint64(n), uint64(b)
		counts[r.ApprovalId] = &r
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]*pb.ExpiryReport, 0, len(approvals))
	for _, id := range approvals {
		r := counts[id]
		if r == nil {
			r = &pb.ExpiryReport{ApprovalId: id}
		}
		out = append(out, r)
	}
	return out, nil
}

// RuleRuntime returns the client's rule runtime, or nil when its Normalizer
// is another one (the shore's releases are then not followed).
func (c *Client) RuleRuntime() *RuleRuntime {
	if c.rules != nil {
		return c.rules
	}
	rt, _ := c.cfg.Normalizer.(*RuleRuntime)
	return rt
}

// expire marks s EXPIRED_APPROVED (with the approval id as its reason) when
// an approval of the running config covers it. Called on read, before s is
// numbered: an expired event takes no stream sequence, so the shore's
// stream has no gap for it.
func (c *Client) expire(s *slot) bool {
	rt := c.RuleRuntime()
	if rt == nil || s.ev == nil || s.ev.CapturedAt == nil {
		return false
	}
	id := rt.expiredBy(s.ruleID, s.ev.CapturedAt.AsTime())
	if id == "" {
		return false
	}
	s.state, s.reason = StateExpiredApproved, id
	return true
}

// rulesHeartbeat fills hb with the rules the node runs (config version, a
// refusal, expiry reports).
func (c *Client) rulesHeartbeat(ctx context.Context, hb *pb.Heartbeat) error {
	rt := c.RuleRuntime()
	if rt == nil {
		return nil
	}
	st := rt.cur.Load()
	hb.ConfigVersion, hb.ConfigRejection = st.version, rt.Rejection()
	reps, err := c.cfg.Store.expiryReports(ctx, st.approvals)
	hb.ExpiryReports = reps
	return err
}

// followConfig fetches and applies the shore's config when the heartbeat
// answer names another config version than the one running (and than the
// one last refused).
func (c *Client) followConfig(ctx context.Context, version uint64) error {
	rt := c.RuleRuntime()
	if rt == nil || version == 0 || version == rt.ConfigVersion() {
		return nil
	}
	if rej := rt.Rejection(); rej != nil && rej.ConfigVersion == version {
		return nil
	}
	nc, err := c.cfg.Transport.Config(ctx)
	if err != nil {
		return err
	}
	if err := rt.Apply(ctx, nc); err != nil {
		return err
	}
	if rej := rt.Rejection(); rej != nil && rej.ConfigVersion == nc.ConfigVersion {
		c.log.Error("shipsync client: the shore's rule set was refused; the previous rules keep running",
			"config_version", nc.ConfigVersion, "rule", rej.RuleId, "rule_version", rej.RuleVersion, "problem", rej.Problem)
	} else {
		c.log.Info("shipsync client: rule set switched", "config_version", nc.ConfigVersion, "releases", len(nc.Releases),
			"expiry_approvals", len(nc.ExpiryApprovals))
	}
	return nil
}
