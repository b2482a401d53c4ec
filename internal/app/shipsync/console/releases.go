package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/relayhq/relay/internal/app/shipsync/eta"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/relaytype"
)

// Release is a rule version's release as the API shows it.
type Release struct {
	Rule     string             `json:"rule"`
	Version  uint64             `json:"version"`
	State    shore.ReleaseState `json:"state"`
	Revision int64              `json:"revision"`
	Targets  []string           `json:"targets"`
	Author   string             `json:"author"`
	Approver string             `json:"approver"`
	Failure  string             `json:"failure"`
	Created  time.Time          `json:"created"`
	Updated  time.Time          `json:"updated"`
	Nodes    []ReleaseNode      `json:"nodes"`
	ShipRule json.RawMessage    `json:"ship_rule"`
}

func releaseOf(r *shore.Release) Release {
	nodes := make([]ReleaseNode, len(r.Nodes))
	for i, n := range r.Nodes {
		nodes[i] = ReleaseNode{Node: n.NodeID, ConfigVersion: n.ConfigVersion, State: n.State, Problem: n.Problem}
	}
	return Release{Rule: r.ID, Version: r.Version, State: r.State, Revision: r.Revision, Targets: r.Targets,
		Author: r.Author, Approver: r.Approver, Failure: r.Failure, Created: r.CreatedAt, Updated: r.Updated, Nodes: nodes,
		ShipRule: r.ShipRule}
}

// ReleaseNode is one target node's progress with a release: OFFERED,
// RUNNING or REJECTED (with the node's problem).
type ReleaseNode struct {
	Node          string `json:"node"`
	ConfigVersion uint64 `json:"config_version"`
	State         string `json:"state"`
	Problem       string `json:"problem"`
}

// releases lists the releases (?rule= one rule's).
func (c *Console) releases(ctx context.Context, r *http.Request, _ User) (int, any) {
	rs, err := c.reg.ListRuleVersions(ctx, r.URL.Query().Get("rule"))
	if err != nil {
		return c.internal(ctx, "rule releases", err)
	}
	out := make([]Release, len(rs))
	for i, rel := range rs {
		out[i] = releaseOf(rel)
	}
	return http.StatusOK, map[string]any{"releases": out}
}

// draftRequest is the body of POST /api/v1/rule-releases.
type draftRequest struct {
	Rule    string `json:"rule"`
	Version uint64 `json:"version"`
	// ShipRule is the node-side rule: one rule in the rules file's JSON
	// form, whose id and version are Rule and Version.
	ShipRule json.RawMessage `json:"ship_rule"`
	Targets  []string        `json:"targets"`
	Reason   string          `json:"reason"`
}

// draft opens the release of a registered rule version as DRAFT (admin).
func (c *Console) draft(ctx context.Context, r *http.Request, u User) (int, any) {
	var req draftRequest
	if e := bodyWithReason(r, &req, &req.Reason, "a release draft"); e != nil {
		return http.StatusBadRequest, *e
	}
	if req.Rule == "" || req.Version == 0 || len(req.ShipRule) == 0 || len(req.Targets) == 0 {
		return fail(http.StatusBadRequest, "rule, version, ship_rule and targets are required")
	}
	rel, err := c.reg.DraftRelease(ctx, shore.RuleRef{ID: req.Rule, Version: req.Version}, req.ShipRule, req.Targets,
		shore.Audit{Actor: u.Actor, Reason: req.Reason})
	if err != nil {
		return c.registryError(ctx, "release draft", err)
	}
	return http.StatusOK, releaseOf(rel)
}

// transitionRequest is the body of POST
// /api/v1/rule-releases/{rule}/{version}/transition.
type transitionRequest struct {
	// To is VALIDATED, APPROVED or DISTRIBUTING.
	To string `json:"to"`
	// ExpectRevision is the release revision the admin looked at.
	ExpectRevision int64  `json:"expect_revision"`
	Reason         string `json:"reason"`
}

// transition moves a release one step (admin; a reason required).
func (c *Console) transition(ctx context.Context, r *http.Request, u User) (int, any) {
	var req transitionRequest
	if e := bodyWithReason(r, &req, &req.Reason, "a release step"); e != nil {
		return http.StatusBadRequest, *e
	}
	reason := req.Reason
	v, err := strconv.ParseUint(r.PathValue("version"), 10, 63)
	if err != nil || v == 0 {
		return fail(http.StatusBadRequest, "the version must be a positive integer")
	}
	if req.ExpectRevision <= 0 {
		return fail(http.StatusBadRequest, "expect_revision is required: the release revision you looked at")
	}
	to := shore.ReleaseState(strings.ToUpper(strings.TrimSpace(req.To)))
	if to != shore.ReleaseValidated && to != shore.ReleaseApproved && to != shore.ReleaseDistributing {
		return fail(http.StatusBadRequest, "to must be VALIDATED, APPROVED or DISTRIBUTING")
	}
	rel, err := c.reg.Transition(ctx, shore.TransitionParams{Ref: shore.RuleRef{ID: r.PathValue("rule"), Version: v},
		To: to, ExpectRevision: req.ExpectRevision, Audit: shore.Audit{Actor: u.Actor, Reason: reason},
		Schema: shore.MariaDBSchema{DB: c.cfg.Target.DB()}})
	if err != nil {
		return c.registryError(ctx, "release transition", err)
	}
	return http.StatusOK, releaseOf(rel)
}

// rollbackRequest is the body of POST /api/v1/rules/{rule}/rollback.
type rollbackRequest struct {
	// ToVersion 0 picks the version to return to (see shore.Rollback).
	ToVersion      uint64 `json:"to_version"`
	ExpectRevision int64  `json:"expect_revision"`
	Reason         string `json:"reason"`
}

// rollback returns a rule to an earlier version (admin; a reason required).
func (c *Console) rollback(ctx context.Context, r *http.Request, u User) (int, any) {
	var req rollbackRequest
	if e := bodyWithReason(r, &req, &req.Reason, "a rollback"); e != nil {
		return http.StatusBadRequest, *e
	}
	reason := req.Reason
	if req.ExpectRevision <= 0 {
		return fail(http.StatusBadRequest, "expect_revision is required: the revision of the rule's current version you looked at")
	}
	rel, err := c.reg.Rollback(ctx, shore.RollbackParams{RuleID: r.PathValue("rule"), ToVersion: req.ToVersion,
		ExpectRevision: req.ExpectRevision, Audit: shore.Audit{Actor: u.Actor, Reason: reason}})
	if err != nil {
		return c.registryError(ctx, "rollback", err)
	}
	return http.StatusOK, releaseOf(rel)
}

// registryError answers an error of the registry's release and expiry
// calls: its refusals as 4xx with their (payload-free) message, store
// errors as 500.
func (c *Console) registryError(ctx context.Context, what string, err error) (int, any) {
	msg := relaytype.BoundText(strings.TrimPrefix(err.Error(), "shore: "), 600)
	var ve *shore.ValidationError
	switch {
	case errors.Is(err, shore.ErrUnknownRelease), errors.Is(err, shore.ErrUnknownNode):
		return fail(http.StatusNotFound, msg)
	case errors.Is(err, shore.ErrStaleRelease):
		return fail(http.StatusConflict, msg+"; refresh and try again")
	case errors.Is(err, shore.ErrReleaseState), errors.Is(err, shore.ErrNoRollbackTarget), errors.Is(err, shore.ErrNodeRevoked):
		return fail(http.StatusConflict, msg)
	case errors.Is(err, shore.ErrReasonRequired):
		return fail(http.StatusBadRequest, msg)
	case errors.As(err, &ve), errors.Is(err, shore.ErrSameApprover), errors.Is(err, shore.ErrTwoWayExpiry):
		return fail(http.StatusUnprocessableEntity, msg)
	case isStoreError(err) || errors.Is(err, shore.ErrStore):
		return c.internal(ctx, what, err)
	default:
		// The registry's own checks (a missing owner, a boundary in the
		// future) are plain errors without a store error inside.
		return fail(http.StatusUnprocessableEntity, msg)
	}
}

// ETA is a backlog's drain estimate with every input it was made from.
type ETA struct {
	Predictable   bool       `json:"predictable"`
	Reason        string     `json:"reason,omitempty"`
	P50           *time.Time `json:"p50,omitempty"`
	P90           *time.Time `json:"p90,omitempty"`
	LowConfidence bool       `json:"low_confidence"`
	Why           []string   `json:"why"`
	// Inputs.
	RemainingBytes int64     `json:"remaining_bytes"`
	Ratio          float64   `json:"ratio"`
	Effective      float64   `json:"effective_bps"`
	Physical       float64   `json:"physical_bps"`
	Incoming       float64   `json:"incoming_bps"`
	Net            float64   `json:"net_bps"`
	ActiveSeconds  float64   `json:"active_seconds"`
	RateLimit      float64   `json:"rate_limit_bps"`
	Availability   float64   `json:"availability"`
	Window         string    `json:"window"`
	ComputedAt     time.Time `json:"computed_at"`
}

func etaOf(e eta.Estimate) *ETA {
	out := &ETA{Predictable: e.Predictable, Reason: e.Reason, LowConfidence: e.LowConfidence, Why: e.Why,
		RemainingBytes: e.RemainingBytes, Ratio: e.Ratio, Effective: e.Effective, Physical: e.Physical, Incoming: e.Incoming,
		Net: e.Net, ActiveSeconds: e.Active.Seconds(), RateLimit: e.RateLimit, Availability: e.Availability,
		Window: e.Window, ComputedAt: e.ComputedAt}
	if !e.P50.IsZero() {
		out.P50 = &e.P50
	}
	if !e.P90.IsZero() {
		out.P90 = &e.P90
	}
	if out.Why == nil {
		out.Why = []string{}
	}
	return out
}

// ShipBacklog is what a node reported of its own backlog, with the ETA.
type ShipBacklog struct {
	Events   int64         `json:"events"`
	RawBytes int64         `json:"raw_bytes"`
	Rules    []RuleBacklog `json:"rules"`
	ETA      *ETA          `json:"eta"`
	// Unread is what the node's topics hold past its read positions (raw
	// size estimated by the node); DiskBytes its platform state on disk.
	UnreadEvents   int64 `json:"unread_events"`
	UnreadRawBytes int64 `json:"unread_raw_bytes"`
	DiskBytes      int64 `json:"disk_bytes"`
}

// RuleBacklog is one rule's backlog at a node, as its last heartbeat
// reported it.
type RuleBacklog struct {
	Direction      string     `json:"direction"`
	Rule           string     `json:"rule"`
	Priority       int32      `json:"priority"`
	State          string     `json:"state"`
	Events         int64      `json:"events"`
	RawBytes       int64      `json:"raw_bytes"`
	EstimatedBytes int64      `json:"estimated_bytes"`
	OldestCaptured *time.Time `json:"oldest_captured,omitempty"`
	NewestCaptured *time.Time `json:"newest_captured,omitempty"`
	OldestBusiness *time.Time `json:"oldest_business,omitempty"`
	NewestBusiness *time.Time `json:"newest_business,omitempty"`
	ReportedAt     time.Time  `json:"reported_at"`
}

// shipBacklog reads node's reported backlog and ETA.
func (c *Console) shipBacklog(ctx context.Context, node string) (*ShipBacklog, error) {
	b, err := c.reg.Backlog(ctx, node)
	if err != nil {
		return nil, err
	}
	rules := make([]RuleBacklog, len(b.Rules))
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	for i, x := range b.Rules {
		rules[i] = RuleBacklog{Direction: x.Direction, Rule: x.RuleID, Priority: x.Priority, State: x.State,
			Events: x.Events, RawBytes: x.RawBytes, EstimatedBytes: x.EstimatedBytes, ReportedAt: x.ReportedAt,
			OldestCaptured: opt(x.OldestCaptured), NewestCaptured: opt(x.NewestCaptured),
			OldestBusiness: opt(x.OldestBusiness), NewestBusiness: opt(x.NewestBusiness)}
	}
	return &ShipBacklog{Events: b.Events, RawBytes: b.RawBytes, Rules: rules, ETA: etaOf(b.ETA),
		UnreadEvents: b.UnreadEvents, UnreadRawBytes: b.UnreadRawBytes, DiskBytes: b.DiskBytes}, nil
}

// backlogs answers the backlog disposal page: every node's reported
// backlog by rule, and the expiry approvals (?node= one node's).
func (c *Console) backlogs(ctx context.Context, r *http.Request, _ User) (int, any) {
	node := r.URL.Query().Get("node")
	ns, err := c.listNodes(ctx, node)
	if err != nil {
		return c.internal(ctx, "backlogs", err)
	}
	type row struct {
		Node    string       `json:"node"`
		Online  bool         `json:"online"`
		Backlog *ShipBacklog `json:"backlog"`
	}
	out := make([]row, len(ns))
	for i, n := range ns {
		out[i] = row{Node: n.ID, Online: n.Online, Backlog: n.Ship}
	}
	approvals, err := c.reg.ExpiryApprovals(ctx, node)
	if err != nil {
		return c.internal(ctx, "expiry approvals", err)
	}
	list := make([]Expiry, len(approvals))
	for i, a := range approvals {
		list[i] = expiryOf(a)
	}
	return http.StatusOK, map[string]any{"nodes": out, "approvals": list}
}

// expiryRequest is the body of POST /api/v1/expiry-approvals.
type expiryRequest struct {
	Node           string    `json:"node"`
	Rule           string    `json:"rule"`
	CapturedBefore time.Time `json:"captured_before"`
	EventsEstimate uint64    `json:"events_estimate"`
	BytesEstimate  uint64    `json:"bytes_estimate"`
	BusinessOwner  string    `json:"business_owner"`
	Reason         string    `json:"reason"`
}

// approveExpiry records that a node's old backlog of a one-way rule is not
// delivered (admin; a reason and the business owner required).
func (c *Console) approveExpiry(ctx context.Context, r *http.Request, u User) (int, any) {
	var req expiryRequest
	if e := bodyWithReason(r, &req, &req.Reason, "an expiry approval"); e != nil {
		return http.StatusBadRequest, *e
	}
	reason := req.Reason
	a, err := c.reg.ApproveExpiry(ctx, shore.ExpiryParams{NodeID: req.Node, RuleID: req.Rule,
		CapturedBefore: req.CapturedBefore, EventsEstimate: req.EventsEstimate, BytesEstimate: req.BytesEstimate,
		BusinessOwner: strings.TrimSpace(req.BusinessOwner), Audit: shore.Audit{Actor: u.Actor, Reason: reason}})
	if err != nil {
		return c.registryError(ctx, "expiry approval", err)
	}
	return http.StatusOK, expiryOf(a)
}

// Expiry is one immutable expiry approval and, once its node reported it,
// what the node expired.
type Expiry struct {
	ID             string     `json:"id"`
	Node           string     `json:"node"`
	Rule           string     `json:"rule"`
	RuleVersion    uint64     `json:"rule_version"`
	CapturedBefore time.Time  `json:"captured_before"`
	EventsEstimate uint64     `json:"events_estimate"`
	BytesEstimate  uint64     `json:"bytes_estimate"`
	BusinessOwner  string     `json:"business_owner"`
	Actor          string     `json:"actor"`
	Reason         string     `json:"reason"`
	Created        time.Time  `json:"created"`
	Reported       *time.Time `json:"reported,omitempty"`
	ExpiredEvents  uint64     `json:"expired_events"`
	ExpiredBytes   uint64     `json:"expired_bytes"`
}

func expiryOf(a *shore.ExpiryApproval) Expiry {
	return Expiry{ID: a.ID, Node: a.NodeID, Rule: a.RuleID, RuleVersion: a.RuleVersion, CapturedBefore: a.CapturedBefore,
		EventsEstimate: a.EventsEstimate, BytesEstimate: a.BytesEstimate, BusinessOwner: a.BusinessOwner, Actor: a.Actor,
		Reason: a.Reason, Created: a.CreatedAt, Reported: a.Reported, ExpiredEvents: a.ExpiredEvents,
		ExpiredBytes: a.ExpiredBytes}
}
