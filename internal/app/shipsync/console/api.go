package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/relayhq/relay/internal/app/shipsync/arbiter"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/snapshot"
	"github.com/relayhq/relay/relaytype"
)

// me answers who the token belongs to.
func (c *Console) me(_ context.Context, _ *http.Request, u User) (int, any) {
	return http.StatusOK, map[string]string{"actor": u.Actor, "role": u.Role}
}

// Node is one node as the API shows it.
type Node struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Online bool   `json:"online"`
	// LastHeartbeat is nil before the first one.
	LastHeartbeat *time.Time `json:"last_heartbeat,omitempty"`
	Health        string     `json:"health"`
	ConfigVersion int64      `json:"config_version"`
	ActiveCerts   int        `json:"active_certs"`
	// Received is every event the shore stored from the node; Backlog
	// those still without a terminal result.
	Received int64 `json:"received"`
	Backlog  int64 `json:"backlog"`
	// Receipts by result.
	Applied   int64 `json:"applied"`
	Conflicts int64 `json:"conflicts"`
	Rejected  int64 `json:"rejected"`
	// Throughput is terminal results per second over the throughput
	// window.
	Throughput float64 `json:"throughput"`
	// CommandsIssued and CommandsAcked: the node's command stream (the
	// downlink backlog is their difference).
	CommandsIssued int64 `json:"commands_issued"`
	CommandsAcked  int64 `json:"commands_acked"`
	// Ship is the backlog the node last reported of itself (events not yet
	// terminal, by rule) with the ETA of its drain and the ETA's inputs.
	Ship   *ShipBacklog `json:"ship_backlog"`
	Alerts []string     `json:"alerts"`
}

// listNodes reads every node (id "") or one.
func (c *Console) listNodes(ctx context.Context, id string) ([]Node, error) {
	now := c.cfg.Clock.Now()
	rows, err := c.cfg.Pool.Query(ctx, stmts["NodeList"], id, now.Add(-c.cfg.ThroughputWindow))
	if err != nil {
		return nil, err
	}
	out := []Node{}
	var n Node
	var hb *time.Time
	var created time.Time
	var recent int64
	_, err = pgx.ForEachRow(rows, []any{&n.ID, &n.State, &created, &hb, &n.Health, &n.ConfigVersion, &n.ActiveCerts,
		&n.Received, &n.Backlog, &n.Applied, &n.Conflicts, &n.Rejected, &recent, &n.CommandsIssued, &n.CommandsAcked},
		func() error {
			x := n
			x.LastHeartbeat, x.Alerts = hb, []string{}
			x.Online = hb != nil && now.Sub(*hb) <= c.cfg.OnlineWithin
			x.Throughput = float64(recent) / c.cfg.ThroughputWindow.Seconds()
			switch {
			case x.State != "active":
				x.Alerts = append(x.Alerts, "node "+x.State)
			case hb == nil:
				x.Alerts = append(x.Alerts, "no heartbeat yet")
			case !x.Online:
				x.Alerts = append(x.Alerts, "heartbeat timeout (last "+now.Sub(*hb).Round(time.Second).String()+" ago)")
			}
			if h := strings.TrimPrefix(x.Health, "HEALTH_STATE_"); h != "" && h != "HEALTHY" {
				x.Alerts = append(x.Alerts, "health "+x.Health)
			}
			out = append(out, x)
			return nil
		})
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Ship, err = c.shipBacklog(ctx, out[i].ID); err != nil {
			return nil, err
		}
		out[i].Alerts = append(out[i].Alerts, backlogAlerts(out[i].Ship, now)...)
	}
	return out, nil
}

// nodes lists the nodes.
func (c *Console) nodes(ctx context.Context, _ *http.Request, _ User) (int, any) {
	ns, err := c.listNodes(ctx, "")
	if err != nil {
		return c.internal(ctx, "nodes", err)
	}
	return http.StatusOK, map[string]any{"nodes": ns}
}

// Overview is the fleet at a glance.
type Overview struct {
	Nodes               int       `json:"nodes"`
	Online              int       `json:"online"`
	Backlog             int64     `json:"backlog"`
	ShipBacklog         int64     `json:"ship_backlog"`
	ShipBacklogBytes    int64     `json:"ship_backlog_bytes"`
	CommandsOutstanding int64     `json:"commands_outstanding"`
	Throughput          float64   `json:"throughput"`
	PendingManual       int       `json:"pending_manual"`
	OverdueManual       int       `json:"overdue_manual"`
	Alerts              []string  `json:"alerts"`
	NodeList            []Node    `json:"node_list"`
	ThroughputWindow    string    `json:"throughput_window"`
	OnlineWithin        string    `json:"online_within"`
	Generated           time.Time `json:"generated"`
}

// overview answers the node overview page.
func (c *Console) overview(ctx context.Context, _ *http.Request, _ User) (int, any) {
	ns, err := c.listNodes(ctx, "")
	if err != nil {
		return c.internal(ctx, "overview", err)
	}
	now := c.cfg.Clock.Now()
	o := Overview{Nodes: len(ns), NodeList: ns, Alerts: []string{}, ThroughputWindow: c.cfg.ThroughputWindow.String(),
		OnlineWithin: c.cfg.OnlineWithin.String(), Generated: now}
	for _, n := range ns {
		if n.Online {
			o.Online++
		}
		o.Backlog += n.Backlog
		if n.Ship != nil {
			o.ShipBacklog, o.ShipBacklogBytes = o.ShipBacklog+n.Ship.Events, o.ShipBacklogBytes+n.Ship.RawBytes
		}
		o.CommandsOutstanding += n.CommandsIssued - n.CommandsAcked
		o.Throughput += n.Throughput
		for _, a := range n.Alerts {
			o.Alerts = append(o.Alerts, n.ID+": "+a)
		}
	}
	if err := c.cfg.Pool.QueryRow(ctx, stmts["ConflictCounts"], now).Scan(&o.PendingManual, &o.OverdueManual); err != nil {
		return c.internal(ctx, "overview", err)
	}
	if o.PendingManual > 0 {
		o.Alerts = append(o.Alerts, fmt.Sprintf("%d conflict case(s) wait for an operator", o.PendingManual))
	}
	if o.OverdueManual > 0 {
		o.Alerts = append(o.Alerts, fmt.Sprintf("%d conflict case(s) past their manual deadline", o.OverdueManual))
	}
	return http.StatusOK, o
}

// node answers one node's detail.
func (c *Console) node(ctx context.Context, r *http.Request, _ User) (int, any) {
	id := r.PathValue("id")
	ns, err := c.listNodes(ctx, id)
	if err != nil {
		return c.internal(ctx, "node", err)
	}
	if len(ns) == 0 {
		return fail(http.StatusNotFound, "no such node")
	}
	type cert struct {
		Fingerprint string    `json:"fingerprint"`
		State       string    `json:"state"`
		NotBefore   time.Time `json:"not_before"`
		NotAfter    time.Time `json:"not_after"`
	}
	type rule struct {
		Rule    string `json:"rule"`
		Version int64  `json:"version"`
	}
	type stream struct {
		Connector    string     `json:"connector"`
		Partition    string     `json:"partition"`
		NextSequence string     `json:"next_sequence"`
		Held         int        `json:"held"`
		GapSince     *time.Time `json:"gap_since,omitempty"`
	}
	certs, err := collect(ctx, c, "NodeCerts", id, func(row pgx.CollectableRow) (cert, error) {
		var x cert
		return x, row.Scan(&x.Fingerprint, &x.State, &x.NotBefore, &x.NotAfter)
	})
	if err != nil {
		return c.internal(ctx, "node certificates", err)
	}
	rules, err := collect(ctx, c, "NodeRules", id, func(row pgx.CollectableRow) (rule, error) {
		var x rule
		return x, row.Scan(&x.Rule, &x.Version)
	})
	if err != nil {
		return c.internal(ctx, "node rules", err)
	}
	streams, err := collect(ctx, c, "NodeStreams", id, func(row pgx.CollectableRow) (stream, error) {
		var x stream
		return x, row.Scan(&x.Connector, &x.Partition, &x.NextSequence, &x.Held, &x.GapSince)
	})
	if err != nil {
		return c.internal(ctx, "node streams", err)
	}
	type baseline struct {
		Task        string    `json:"task"`
		Rule        string    `json:"rule"`
		RuleVersion uint64    `json:"rule_version"`
		Received    int64     `json:"received"`
		Applied     int64     `json:"applied"`
		Conflicts   int64     `json:"conflicts"`
		Rejected    int64     `json:"rejected"`
		First       time.Time `json:"first"`
		Last        time.Time `json:"last"`
	}
	bs, err := snapshot.ShoreBaselines(ctx, c.cfg.Pool, id)
	if err != nil {
		return c.internal(ctx, "node snapshots", err)
	}
	snaps := make([]baseline, len(bs))
	for i, b := range bs {
		snaps[i] = baseline{Task: b.TaskID, Rule: b.RuleID, RuleVersion: b.RuleVersion, Received: b.Received,
			Applied: b.Applied, Conflicts: b.Conflicts, Rejected: b.Rejected, First: b.First, Last: b.Last}
	}
	return http.StatusOK, map[string]any{"node": ns[0], "certs": certs, "rules": rules, "streams": streams,
		"snapshots": snaps}
}

// collect runs query name with arg and collects its rows.
func collect[T any](ctx context.Context, c *Console, name string, arg any, f func(pgx.CollectableRow) (T, error)) ([]T, error) {
	rows, err := c.cfg.Pool.Query(ctx, stmts[name], arg)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, f)
	if out == nil {
		out = []T{}
	}
	return out, err
}

// rules lists the registered rule versions.
func (c *Console) rules(ctx context.Context, _ *http.Request, _ User) (int, any) {
	rs, err := c.reg.RegisteredRules(ctx)
	if err != nil {
		return c.internal(ctx, "rules", err)
	}
	type rule struct {
		ID          string   `json:"id"`
		Version     uint64   `json:"version"`
		SourceTable string   `json:"source_table"`
		TargetTable string   `json:"target_table"`
		KeyColumns  []string `json:"key_columns"`
		Columns     []string `json:"columns"`
		Policy      string   `json:"policy"`
		TimeColumn  string   `json:"time_column"`
		Status      string   `json:"status"`
	}
	out := make([]rule, len(rs))
	for i, r := range rs {
		out[i] = rule{ID: r.ID, Version: r.Version, SourceTable: r.SourceTable, TargetTable: r.TargetTable,
			KeyColumns: r.KeyColumns, Columns: r.Columns, Policy: r.Conflict.Policy, TimeColumn: r.Conflict.TimeColumn,
			Status: "REGISTERED"}
	}
	return http.StatusOK, map[string]any{"rules": out,
		"lifecycle": "release states (draft, validated, approved, distributing, active, rollback) are not served yet"}
}

// keyRef is a short, stable reference to a record key: the first 12 hex
// digits of the SHA-256 of its text (never the key itself).
func keyRef(pkText string) string {
	s := sha256.Sum256([]byte(pkText))
	return hex.EncodeToString(s[:6])
}

// keyText is a record key as "col=value, …" (shown to operators only).
func keyText(pkText string) string {
	var key pb.RowImage
	if err := protojson.Unmarshal([]byte(pkText), &key); err != nil {
		return "(unreadable key)"
	}
	parts := make([]string, len(key.Columns))
	for i, c := range key.Columns {
		parts[i] = c.GetName() + "=" + valueText(c)
	}
	return strings.Join(parts, ", ")
}

// valueText is a column value as a console shows it.
func valueText(c *pb.ColumnValue) string {
	switch v := c.GetValue().(type) {
	case nil:
		return ""
	case *pb.ColumnValue_Null:
		return "NULL"
	case *pb.ColumnValue_IntValue:
		return strconv.FormatInt(v.IntValue, 10)
	case *pb.ColumnValue_UintValue:
		return strconv.FormatUint(v.UintValue, 10)
	case *pb.ColumnValue_DoubleValue:
		return strconv.FormatFloat(v.DoubleValue, 'g', -1, 64)
	case *pb.ColumnValue_DecimalValue:
		return v.DecimalValue
	case *pb.ColumnValue_StringValue:
		return v.StringValue
	case *pb.ColumnValue_BytesValue:
		return "0x" + hex.EncodeToString(v.BytesValue)
	case *pb.ColumnValue_BoolValue:
		return strconv.FormatBool(v.BoolValue)
	case *pb.ColumnValue_TimestampValue:
		return v.TimestampValue.AsTime().UTC().Format(time.RFC3339Nano)
	default:
		b, _ := protojson.Marshal(c)
		return string(b)
	}
}

// masked replaces a value a viewer may not see.
const masked = "•••"

// ConflictSummary is a case in a listing.
type ConflictSummary struct {
	ID       string    `json:"id"`
	State    string    `json:"state"`
	Rule     string    `json:"rule"`
	KeyRef   string    `json:"key_ref"`
	Reason   string    `json:"reason"`
	Evidence int       `json:"evidence"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
}

// conflicts lists cases (?state=, ?limit= 1–1000, default 200).
func (c *Console) conflicts(ctx context.Context, r *http.Request, _ User) (int, any) {
	limit, err := intParam(r, "limit", 200, 1, 1000)
	if err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	state := strings.ToUpper(r.URL.Query().Get("state"))
	cs, err := arbiter.List(ctx, c.cfg.Pool, state, limit)
	if err != nil {
		return c.internal(ctx, "conflicts", err)
	}
	out := make([]ConflictSummary, len(cs))
	for i, s := range cs {
		out[i] = ConflictSummary{ID: s.ID, State: s.State, Rule: s.Rule, KeyRef: keyRef(s.Key), Reason: s.Reason,
			Evidence: s.Evidence, Created: s.Created, Updated: s.Updated}
	}
	return http.StatusOK, map[string]any{"conflicts": out}
}

// intParam reads query parameter name as an integer in [lo, hi] (def
// when absent).
func intParam(r *http.Request, name string, def, lo, hi int) (int, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s must be an integer from %d to %d", name, lo, hi)
	}
	return n, nil
}

// caseVersion is a case's optimistic version: it changes whenever the
// case's state or decisions do.
func (c *Console) caseVersion(ctx context.Context, id string) (string, error) {
	v, _, _, err := c.caseTimes(ctx, id)
	return v, err
}

// caseTimes returns a case's version and when it was opened and last
// changed.
func (c *Console) caseTimes(ctx context.Context, id string) (version string, created, updated time.Time, err error) {
	var decisions int
	if err := c.cfg.Pool.QueryRow(ctx, stmts["CaseVersion"], id).Scan(&updated, &decisions, &created); err != nil {
		return "", created, updated, err
	}
	return fmt.Sprintf("%d.%d", updated.UnixMicro(), decisions), created, updated, nil
}

// Cell is one column of the evidence diff.
type Cell struct {
	Column string `json:"column"`
	Node   string `json:"node"`
	Shore  string `json:"shore"`
	// InNode and InShore: the column is in that side's row.
	InNode  bool `json:"in_node"`
	InShore bool `json:"in_shore"`
	Changed bool `json:"changed"`
}

// Side is one side's version of the record.
type Side struct {
	Node     string `json:"node"`
	Revision string `json:"revision"`
	Exists   bool   `json:"exists"`
}

// conflict answers one case with its evidence and the diff of the two
// versions (values masked for viewers).
func (c *Console) conflict(ctx context.Context, r *http.Request, u User) (int, any) {
	id := r.PathValue("id")
	d, err := arbiter.Show(ctx, c.cfg.Pool, id)
	if errors.Is(err, arbiter.ErrNotFound) {
		return fail(http.StatusNotFound, "no such conflict case")
	}
	if err != nil {
		return c.internal(ctx, "conflict", err)
	}
	version, created, updated, err := c.caseTimes(ctx, id)
	if err != nil {
		return c.internal(ctx, "conflict version", err)
	}
	d.Created, d.Updated = created, updated
	see := u.may(RoleOperator)
	type sighting struct {
		Origin           string    `json:"origin"`
		EventID          string    `json:"event_id"`
		Operation        string    `json:"operation"`
		Base             string    `json:"base"`
		Result           string    `json:"result"`
		CurrentRevision  string    `json:"current_revision"`
		CurrentOrigin    string    `json:"current_origin"`
		FoundIn          string    `json:"found_in"`
		CurrentTombstone bool      `json:"current_tombstone"`
		At               time.Time `json:"at"`
	}
	out := map[string]any{"id": d.ID, "state": d.State, "reason": d.Reason, "rule": d.Rule, "key_ref": keyRef(d.Key),
		"created": d.Created, "updated": d.Updated, "superseded_by": d.Superseded, "version": version,
		"values_visible": see}
	if see {
		out["key"] = keyText(d.Key)
	}
	if d.State == arbiter.StatePending {
		out["manual_due"] = d.ManualDue
	}
	ev := make([]sighting, len(d.Evidence))
	for i, e := range d.Evidence {
		ev[i] = sighting{Origin: e.Origin, EventID: e.EventID, Operation: e.Operation, Base: e.Base, Result: e.Result,
			CurrentRevision: e.CurrentRevision, CurrentOrigin: e.CurrentOrigin, FoundIn: e.FoundIn,
			CurrentTombstone: e.CurrentTombstone, At: e.At}
	}
	out["evidence"] = ev
	if dec := d.Decision; dec != nil {
		out["decision"] = map[string]any{"id": dec.ID, "choice": dec.Choice, "policy": dec.Policy, "decided_by": dec.DecidedBy,
			"reason": dec.Reason, "revision": dec.Revision, "at": dec.At, "tombstone": dec.Tombstone}
	}
	if dis, err := c.arb.Versions(ctx, id); err != nil {
		// The diff needs the rule and the shore database; the case stands without it.
		out["versions_error"] = relayhttpInternal(ctx, c, "conflict versions", err)
	} else {
		out["policy"] = dis.Rule.Conflict.Policy
		out["node"] = Side{Node: dis.Node.Node, Revision: dis.Node.Revision, Exists: dis.Node.Exists}
		out["shore"] = Side{Node: dis.Shore.Node, Revision: dis.Shore.Revision, Exists: dis.Shore.Exists}
		out["evidence_shore_revision"] = dis.EvidenceShore
		cur := ""
		if dis.Shore.Exists {
			cur = dis.Shore.Revision
		}
		out["shore_moved"] = !strings.EqualFold(cur, dis.EvidenceShore)
		out["diff"] = diff(dis.Node.Row, dis.Shore.Row, see)
	}
	return http.StatusOK, out
}

// diff is the column-by-column comparison of the node's and the shore's
// rows, in the node row's column order then the shore's extra columns.
func diff(node, shoreRow *pb.RowImage, see bool) []Cell {
	idx := map[string]int{}
	var out []Cell
	for _, col := range node.GetColumns() {
		idx[col.GetName()] = len(out)
		out = append(out, Cell{Column: col.GetName(), Node: valueText(col), InNode: true})
	}
	for _, col := range shoreRow.GetColumns() {
		i, ok := idx[col.GetName()]
		if !ok {
			i = len(out)
			out = append(out, Cell{Column: col.GetName()})
		}
		out[i].Shore, out[i].InShore = valueText(col), true
	}
	for i := range out {
		x := &out[i]
		x.Changed = x.InNode != x.InShore || x.Node != x.Shore
		if !see {
			if x.InNode {
				x.Node = masked
			}
			if x.InShore {
				x.Shore = masked
			}
		}
	}
	if out == nil {
		out = []Cell{}
	}
	return out
}

// relayhttpInternal logs err and returns the generic text with its id.
func relayhttpInternal(ctx context.Context, c *Console, what string, err error) string {
	_, body := c.internal(ctx, what, err)
	return body.(apiError).Error
}

// decisionRequest is the body of POST /api/v1/conflicts/{id}/decision.
type decisionRequest struct {
	// Choice: SHORE, NODE, VALUE (Value, the complete row) or DELETE.
	Choice string          `json:"choice"`
	Value  json.RawMessage `json:"value,omitempty"`
	Reason string          `json:"reason"`
	// SeenVersion is the case version the operator looked at. Required.
	SeenVersion string `json:"seen_version"`
	// SeenShoreRevision, when given, is the shore revision the operator
	// looked at ("" : no row).
	SeenShoreRevision *string `json:"seen_shore_revision,omitempty"`
}

// decide stores an operator's decision of a PENDING_MANUAL case.
func (c *Console) decide(ctx context.Context, r *http.Request, u User) (int, any) {
	var req decisionRequest
	if e := bodyWithReason(r, &req, &req.Reason, "a decision"); e != nil {
		return http.StatusBadRequest, *e
	}
	id := r.PathValue("id")
	m := arbiter.ManualDecision{Choice: strings.ToUpper(strings.TrimSpace(req.Choice)), Operator: u.Actor,
		Reason: req.Reason, SeenShoreRevision: req.SeenShoreRevision}
	if len(m.Reason) > 1000 {
		return fail(http.StatusBadRequest, "the reason is longer than 1000 bytes")
	}
	if len(req.Value) > 0 && string(req.Value) != "null" {
		row, err := arbiter.ParseRow(req.Value)
		if err != nil {
			return fail(http.StatusBadRequest, "value: "+relaytype.BoundText(err.Error(), 200))
		}
		m.Value = row
	}
	if st, body, ok := c.checkVersion(ctx, id, req.SeenVersion); !ok {
		return st, body
	}
	dec, err := c.arb.Decide(ctx, id, m)
	switch {
	case errors.Is(err, arbiter.ErrNotFound):
		return fail(http.StatusNotFound, "no such conflict case")
	case errors.Is(err, arbiter.ErrStale):
		return fail(http.StatusConflict, "the shore's row changed since the evidence was recorded (or since you looked); "+
			"refresh the case and decide again")
	case errors.Is(err, arbiter.ErrState):
		return fail(http.StatusConflict, relaytype.BoundText(strings.TrimPrefix(err.Error(), "arbiter: "), 200))
	case err != nil && strings.HasPrefix(err.Error(), "arbiter: ") && !isStoreError(err):
		// The decision itself is wrong (a bad choice or value); its
		// message names columns, never values.
		return fail(http.StatusUnprocessableEntity, relaytype.BoundText(strings.TrimPrefix(err.Error(), "arbiter: "), 300))
	case err != nil:
		return c.internal(ctx, "decide", err)
	}
	return http.StatusOK, map[string]any{"id": id, "decision": dec.ID, "choice": dec.Choice, "revision": dec.Revision,
		"state": arbiter.StateDecided}
}

// isStoreError reports whether err came from the database (a pgx error
// wrapped anywhere in it).
func isStoreError(err error) bool {
	var pe interface{ SQLState() string }
	return errors.As(err, &pe) || errors.Is(err, pgx.ErrNoRows) || errors.Is(err, context.DeadlineExceeded)
}

// checkVersion answers 400 without a seen version, 404 for no case and
// 409 when the case changed since seen.
func (c *Console) checkVersion(ctx context.Context, id, seen string) (int, any, bool) {
	if seen == "" {
		return http.StatusBadRequest, apiError{"seen_version is required: the case version you looked at"}, false
	}
	v, err := c.caseVersion(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) || (err != nil && strings.Contains(err.Error(), "invalid input syntax for type uuid")) {
		return http.StatusNotFound, apiError{"no such conflict case"}, false
	}
	if err != nil {
		st, body := c.internal(ctx, "conflict version", err)
		return st, body, false
	}
	if v != seen {
		return http.StatusConflict, apiError{"the case changed since you looked at it (version " + v + "); refresh it"}, false
	}
	return 0, nil, true
}

// cancelRequest is the body of POST /api/v1/conflicts/{id}/cancellation.
type cancelRequest struct {
	Reason      string `json:"reason"`
	SeenVersion string `json:"seen_version"`
}

// cancel closes an undecided case.
func (c *Console) cancel(ctx context.Context, r *http.Request, u User) (int, any) {
	var req cancelRequest
	if e := bodyWithReason(r, &req, &req.Reason, "a cancellation"); e != nil {
		return http.StatusBadRequest, *e
	}
	reason := req.Reason
	id := r.PathValue("id")
	if st, body, ok := c.checkVersion(ctx, id, req.SeenVersion); !ok {
		return st, body
	}
	err := arbiter.Cancel(ctx, c.cfg.Pool, c.cfg.Clock, id, u.Actor, reason)
	switch {
	case errors.Is(err, arbiter.ErrNotFound):
		return fail(http.StatusNotFound, "no such conflict case")
	case errors.Is(err, arbiter.ErrState):
		return fail(http.StatusConflict, relaytype.BoundText(strings.TrimPrefix(err.Error(), "arbiter: "), 200))
	case err != nil:
		return c.internal(ctx, "cancel", err)
	}
	return http.StatusOK, map[string]any{"id": id, "state": arbiter.StateCancelled}
}

// AuditEvent is one audit entry.
type AuditEvent struct {
	ID         int64     `json:"id"`
	At         time.Time `json:"at"`
	Actor      string    `json:"actor"`
	Action     string    `json:"action"`
	ObjectType string    `json:"object_type"`
	ObjectID   string    `json:"object_id"`
	Before     string    `json:"before"`
	After      string    `json:"after"`
	Reason     string    `json:"reason"`
	TraceID    string    `json:"trace_id"`
}

// audit searches the audit log: ?actor= ?action= (exact, or a prefix
// before a dot: "conflict" finds conflict.decided) ?object_type=
// ?object_id= ?from= ?to= (RFC 3339) ?limit= (1–500, default 100)
// ?before= (an entry id: the page after it). Newest first; next_before is
// the next page's cursor (0: no more).
func (c *Console) audit(ctx context.Context, r *http.Request, _ User) (int, any) {
	q := r.URL.Query()
	limit, err := intParam(r, "limit", 100, 1, 500)
	if err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	before, err := intParam(r, "before", 0, 0, 1<<62)
	if err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	var times [2]*time.Time
	for i, name := range []string{"from", "to"} {
		if s := q.Get(name); s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return fail(http.StatusBadRequest, name+" must be an RFC 3339 time, e.g. 2026-12-03T06:00:00Z")
			}
			times[i] = &t
		}
	}
	rows, err := c.cfg.Pool.Query(ctx, stmts["AuditSearch"], q.Get("actor"), q.Get("action"), q.Get("object_type"),
		q.Get("object_id"), times[0], times[1], before, limit+1)
	if err != nil {
		return c.internal(ctx, "audit search", err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuditEvent, error) {
		var e AuditEvent
		return e, row.Scan(&e.ID, &e.At, &e.Actor, &e.Action, &e.ObjectType, &e.ObjectID, &e.Before, &e.After, &e.Reason,
			&e.TraceID)
	})
	if err != nil {
		return c.internal(ctx, "audit search", err)
	}
	var next int64
	if len(events) > limit {
		events = events[:limit]
		next = events[limit-1].ID
	}
	if events == nil {
		events = []AuditEvent{}
	}
	return http.StatusOK, map[string]any{"events": events, "next_before": next}
}

// OldestWaitingAlert is how long a change may wait on a ship before the
// node is flagged.
const OldestWaitingAlert = 72 * time.Hour

// backlogAlerts flags a node's reported backlog: not shrinking (no ETA can
// be given), a change waiting too long, events blocked for an operator.
func backlogAlerts(b *ShipBacklog, now time.Time) []string {
	if b == nil {
		return nil
	}
	var out []string
	if e := b.ETA; e != nil && !e.Predictable && e.RemainingBytes > 0 {
		out = append(out, "backlog not shrinking: "+e.Reason)
	}
	var oldest time.Time
	var blocked int64
	for _, r := range b.Rules {
		if r.OldestCaptured != nil && (oldest.IsZero() || r.OldestCaptured.Before(oldest)) {
			oldest = *r.OldestCaptured
		}
		if r.State == "BLOCKED" {
			blocked += r.Events
		}
	}
	if !oldest.IsZero() && now.Sub(oldest) > OldestWaitingAlert {
		out = append(out, "a change has waited "+now.Sub(oldest).Round(time.Hour).String()+" on the ship")
	}
	if blocked > 0 {
		out = append(out, fmt.Sprintf("%d event(s) blocked on the ship: they hold their partition until resolved", blocked))
	}
	return out
}
