package console_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/apply"
	"github.com/relayhq/relay/internal/app/shipsync/console"
	"github.com/relayhq/relay/internal/app/shipsync/pki"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaymigrate"
)

// Tokens of the tests' users file.
const (
	viewerToken   = "viewer-token-0123456789"
	operatorToken = "operator-token-0123456789"
	adminToken    = "admin-token-0123456789ab"
)

const usersFile = "# test users\n" +
	viewerToken + " vera viewer\n" +
	operatorToken + " otto operator\n" +
	adminToken + " ada ADMIN\n"

var t0 = time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)

// bundle is a console over a migrated schema with two nodes registered.
type bundle struct {
	pool  *pgxpool.Pool
	srv   *httptest.Server
	clock *relayclock.Fake
	reg   *shore.Registry
	db    *sql.DB // the shore database
}

func setup(t *testing.T) *bundle {
	t.Helper()
	d := testdb.PGDriver(t)
	clock := relayclock.NewFake(t0)
	_, err := relaymigrate.Up(t.Context(), d, clock, shore.MigrationLines(d)...)
	require.NoError(t, err)
	db, dsn := testdb.MariaDBWithDSN(t)
	target, err := apply.OpenTarget(dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = target.Close() })
	users, err := console.ParseUsers([]byte(usersFile))
	require.NoError(t, err)
	c, err := console.New(console.Config{Pool: d.Pool(), Target: target, Users: users, Clock: clock})
	require.NoError(t, err)
	b := &bundle{srv: httptest.NewServer(c.Handler()), clock: clock, reg: shore.NewRegistry(d.Pool(), clock), db: db,
		pool: d.Pool()}
	t.Cleanup(b.srv.Close)
	p := pki.Dir{Path: filepath.Join(t.TempDir(), "pki"), Clock: clock}
	_, err = p.InitCA()
	require.NoError(t, err)
	for _, id := range []string{"ship-a", "ship-b"} {
		cert, err := p.IssueNode(id, "")
		require.NoError(t, err)
		_, err = b.reg.Add(t.Context(), cert, shore.Audit{Actor: "setup", Reason: "test fleet"})
		require.NoError(t, err)
	}
	return b
}

// call makes a request; key set adds an Idempotency-Key.
func (b *bundle) call(t *testing.T, method, path, token, key string, body any) (int, map[string]any, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, b.srv.URL+path, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var out map[string]any
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	if len(raw) > 0 && strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	}
	return res.StatusCode, out, res.Header
}

func TestParseUsers(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"",
		"short alice viewer\n",
		viewerToken + " alice\n",
		viewerToken + " alice root\n",
		viewerToken + " alice viewer\n" + viewerToken + " bob admin\n",
	} {
		_, err := console.ParseUsers([]byte(bad))
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), viewerToken, "an error never quotes a token")
	}
	us, err := console.ParseUsers([]byte(usersFile))
	require.NoError(t, err)
	require.Len(t, us, 3)
}

// TestAuthAndRoles: no token or an unknown one is 401; a viewer reads but
// may not decide (403); the answer names the actor and role.
func TestAuthAndRoles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	st, body, _ := b.call(t, "GET", "/api/v1/nodes", "", "", nil)
	require.Equal(t, http.StatusUnauthorized, st)
	require.Contains(t, body["error"], "token")
	st, _, _ = b.call(t, "GET", "/api/v1/nodes", "not-a-known-token-at-all", "", nil)
	require.Equal(t, http.StatusUnauthorized, st)

	st, body, hdr := b.call(t, "GET", "/api/v1/me", adminToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, map[string]any{"actor": "ada", "role": "admin"}, body)
	require.NotEmpty(t, hdr.Get("X-Request-Id"))

	st, body, _ = b.call(t, "POST", "/api/v1/conflicts/6f1c1f0e-0000-4000-8000-000000000000/decision", viewerToken, "k1",
		map[string]any{"choice": "SHORE", "reason": "r", "seen_version": "1"})
	require.Equal(t, http.StatusForbidden, st)
	require.Contains(t, body["error"], "operator")

	st, _, _ = b.call(t, "GET", "/api/v1/nothing-here", adminToken, "", nil)
	require.Equal(t, http.StatusNotFound, st)
}

// TestNodes: the list and a node's detail come from the registry, with
// online/offline from the heartbeat and alerts.
func TestNodes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	st, body, _ := b.call(t, "GET", "/api/v1/nodes", viewerToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	nodes := body["nodes"].([]any)
	require.Len(t, nodes, 2)
	first := nodes[0].(map[string]any)
	require.Equal(t, "ship-a", first["id"])
	require.Equal(t, false, first["online"])
	require.Contains(t, first["alerts"], "no heartbeat yet")
	require.EqualValues(t, 1, first["active_certs"])

	st, body, _ = b.call(t, "GET", "/api/v1/nodes/ship-b", viewerToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, "ship-b", body["node"].(map[string]any)["id"])
	require.Len(t, body["certs"], 1)
	require.Empty(t, body["snapshots"], "no snapshot sent yet")

	// A snapshot baseline the shore received: its task, counts and results.
	_, err := b.pool.Exec(t.Context(), `INSERT INTO sync_inbox_event (origin_node_id, event_id, sender_node_id, batch_id,
		rule_id, rule_version, pk_hash, pk_text, source_connector_id, source_partition, source_position, source_sequence,
		schema_version, content_hash, event, received_at) VALUES
		('ship-b', gen_random_uuid(), 'ship-b', 'b', 'crew', 1, 'k1', 'k1', 'c', 'snapshot/t-1/0', 1, 1, '1.0', '\x00', '\x00', $1),
		('ship-b', gen_random_uuid(), 'ship-b', 'b', 'crew', 1, 'k2', 'k2', 'c', 'snapshot/t-1/0', 2, 2, '1.0', '\x00', '\x00', $1)`, t0)
	require.NoError(t, err)
	_, err = b.pool.Exec(t.Context(), `INSERT INTO sync_event_receipt (origin_node_id, event_id, result, decided_at)
		SELECT origin_node_id, event_id, 'APPLIED', $1 FROM sync_inbox_event WHERE pk_text = 'k1'`, t0)
	require.NoError(t, err)
	st, body, _ = b.call(t, "GET", "/api/v1/nodes/ship-b", viewerToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	snaps := body["snapshots"].([]any)
	require.Len(t, snaps, 1)
	snap := snaps[0].(map[string]any)
	require.Equal(t, "crew", snap["rule"])
	require.EqualValues(t, 2, snap["received"])
	require.EqualValues(t, 1, snap["applied"])

	st, _, _ = b.call(t, "GET", "/api/v1/nodes/ship-z", viewerToken, "", nil)
	require.Equal(t, http.StatusNotFound, st)

	st, body, _ = b.call(t, "GET", "/api/v1/overview", viewerToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	require.EqualValues(t, 2, body["nodes"])
	require.EqualValues(t, 0, body["online"])

	// A backlog that grows faster than it drains, a change four days old
	// and blocked events are flagged.
	require.NoError(t, b.reg.Heartbeat(t.Context(), "ship-b", &pb.Heartbeat{NodeId: "ship-b", CompressionRatio: 0.5,
		CompressionRatioMeasured: true, Backlog: []*pb.BacklogSummary{
			{Direction: "up", RuleId: "r", State: "READY", Events: 10, RawBytes: 10_000,
				OldestCapturedAt: timestamppb.New(t0.Add(-96 * time.Hour))},
			{Direction: "up", RuleId: "r", State: "BLOCKED", Events: 2, RawBytes: 100}},
		Interval: &pb.TransferInterval{ElapsedSeconds: 60, ActiveSeconds: 60, EffectiveBytes: 600, IncomingRawBytes: 60_000}}))
	st, body, _ = b.call(t, "GET", "/api/v1/nodes/ship-b", viewerToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	alerts := fmt.Sprint(body["node"].(map[string]any)["alerts"])
	require.Contains(t, alerts, "backlog not shrinking")
	require.Contains(t, alerts, "a change has waited 96h0m0s on the ship")
	require.Contains(t, alerts, "2 event(s) blocked on the ship")
}

// TestWritesNeedKeyVersionAndReason: a write without Idempotency-Key is
// 400, without a reason 400, without the seen version 400, for an unknown
// case 404; a bad key length is refused too.
func TestWritesNeedKeyVersionAndReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := "/api/v1/conflicts/6f1c1f0e-0000-4000-8000-000000000000/decision"
	st, body, _ := b.call(t, "POST", path, operatorToken, "", map[string]any{"choice": "SHORE", "reason": "x", "seen_version": "1"})
	require.Equal(t, http.StatusBadRequest, st)
	require.Contains(t, body["error"], "Idempotency-Key")
	st, body, _ = b.call(t, "POST", path, operatorToken, "k-reason", map[string]any{"choice": "SHORE", "seen_version": "1"})
	require.Equal(t, http.StatusBadRequest, st)
	require.Contains(t, body["error"], "reason")
	st, body, _ = b.call(t, "POST", path, operatorToken, "k-version", map[string]any{"choice": "SHORE", "reason": "x"})
	require.Equal(t, http.StatusBadRequest, st)
	require.Contains(t, body["error"], "seen_version")
	st, _, _ = b.call(t, "POST", path, operatorToken, "k-missing", map[string]any{"choice": "SHORE", "reason": "x", "seen_version": "1"})
	require.Equal(t, http.StatusNotFound, st)
	st, body, _ = b.call(t, "POST", path, operatorToken, "k-unknown", map[string]any{"choice": "SHORE", "reason": "x",
		"seen_version": "1", "extra": 1})
	require.Equal(t, http.StatusBadRequest, st)
	require.Contains(t, body["error"], "unknown field")
	st, _, _ = b.call(t, "POST", "/api/v1/conflicts/not-a-uuid/cancellation", operatorToken, "k-bad-id",
		map[string]any{"reason": "x", "seen_version": "1"})
	require.Equal(t, http.StatusNotFound, st)
}

// TestIdempotency: a repeat of a request with its key gets the kept answer
// (marked replayed) without acting again; the same key with another body
// is 422; the same key of another actor is that actor's own.
func TestIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	path := "/api/v1/conflicts/6f1c1f0e-0000-4000-8000-000000000000/cancellation"
	req := map[string]any{"reason": "duplicate of another case", "seen_version": "1"}
	st1, body1, hdr1 := b.call(t, "POST", path, operatorToken, "key-1", req)
	require.Equal(t, http.StatusNotFound, st1, "the first answer (no such case) is kept")
	require.Empty(t, hdr1.Get("Idempotent-Replayed"))
	st2, body2, hdr2 := b.call(t, "POST", path, operatorToken, "key-1", req)
	require.Equal(t, st1, st2)
	require.Equal(t, body1, body2)
	require.Equal(t, "true", hdr2.Get("Idempotent-Replayed"))

	st, body, _ := b.call(t, "POST", path, operatorToken, "key-1", map[string]any{"reason": "another", "seen_version": "1"})
	require.Equal(t, http.StatusUnprocessableEntity, st)
	require.Contains(t, body["error"], "another request")

	st, _, hdr := b.call(t, "POST", path, adminToken, "key-1", req)
	require.Equal(t, http.StatusNotFound, st)
	require.Empty(t, hdr.Get("Idempotent-Replayed"), "keys are per actor")
}

// TestAuditSearch: registry changes are found by actor, action prefix,
// object and time range, newest first, paginated by cursor.
func TestAuditSearch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := shore.WithTrace(t.Context(), "trace-audit-1")
	for i := range 3 {
		b.clock.Advance(time.Minute)
		require.NoError(t, b.reg.AllowRule(ctx, "ship-a", "crew", uint64(i+1), shore.Audit{Actor: "ada", Reason: "rollout"}))
	}
	require.NoError(t, b.reg.Revoke(t.Context(), "ship-b", shore.Audit{Actor: "ada", Reason: "decommissioned"}))

	st, body, _ := b.call(t, "GET", "/api/v1/audit-events?actor=ada&limit=2", viewerToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	events := body["events"].([]any)
	require.Len(t, events, 2)
	require.Equal(t, "node.revoke", events[0].(map[string]any)["action"], "newest first")
	next := body["next_before"].(float64)
	require.Positive(t, next)
	st, body, _ = b.call(t, "GET", "/api/v1/audit-events?actor=ada&limit=2&before="+strconv.FormatInt(int64(next), 10), viewerToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	require.Len(t, body["events"], 2)
	require.Zero(t, body["next_before"])
	for _, e := range body["events"].([]any) {
		require.Equal(t, "trace-audit-1", e.(map[string]any)["trace_id"])
	}

	st, body, _ = b.call(t, "GET", "/api/v1/audit-events?object_type=node&object_id=ship-b&action=node", viewerToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	actions := []string{}
	for _, e := range body["events"].([]any) {
		actions = append(actions, e.(map[string]any)["action"].(string))
	}
	require.Equal(t, []string{"node.revoke", "node.add"}, actions)

	from := t0.Add(90 * time.Second).Format(time.RFC3339)
	to := t0.Add(150 * time.Second).Format(time.RFC3339)
	st, body, _ = b.call(t, "GET", "/api/v1/audit-events?from="+from+"&to="+to, viewerToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	require.Len(t, body["events"], 1, "the rule allowed at t0+2m")

	st, body, _ = b.call(t, "GET", "/api/v1/audit-events?from=yesterday", viewerToken, "", nil)
	require.Equal(t, http.StatusBadRequest, st)
	require.Contains(t, body["error"], "RFC 3339")
}

// TestConsoleFiles: the console's page is served without a token with a
// CSP, and its script has no inline script in the page.
func TestConsoleFiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	res, err := http.Get(b.srv.URL + "/console/")
	require.NoError(t, err)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, res.Header.Get("Content-Security-Policy"), "script-src 'self'")
	require.Contains(t, string(raw), `<script src="app.js"`)
	require.NotContains(t, string(raw), "<script>", "no inline script")
}

// TestReleasesAndExpiry: the rule release lifecycle and expiry approvals
// through the API — admin only, a reason and the revision seen required, a
// stale revision 409, every step audited with the request's trace id.
func TestReleasesAndExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	_, err := b.db.ExecContext(ctx, "CREATE TABLE voyage (id BIGINT PRIMARY KEY, name VARCHAR(64), eta VARCHAR(64))")
	require.NoError(t, err)
	require.NoError(t, b.reg.RegisterRule(ctx, shore.Rule{ID: "voyage-log", Version: 1, SourceTable: "voyage",
		TargetTable: "voyage", KeyColumns: []string{"id"}, Columns: []string{"id", "name", "eta"}, InsertOverTombstone: true},
		shore.Audit{Actor: "alice"}))
	ship := []byte(`{"id": "voyage-log", "version": 1, "direction": "UPLINK", "database": "ship", "table": "voyage",
		"key_columns": ["id"], "included_columns": ["id", "name"]}`)
	_, err = b.reg.DraftRelease(ctx, shore.RuleRef{ID: "voyage-log", Version: 1}, ship, []string{"ship-a"},
		shore.Audit{Actor: "alice", Reason: "first release"})
	require.NoError(t, err)

	st, body, _ := b.call(t, "GET", "/api/v1/rule-releases", viewerToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	rel := body["releases"].([]any)[0].(map[string]any)
	require.Equal(t, "DRAFT", rel["state"])
	rev := int64(rel["revision"].(float64))

	path := "/api/v1/rule-releases/voyage-log/1/transition"
	step := func(to string, rev int64) (int, map[string]any) {
		st, body, _ := b.call(t, "POST", path, adminToken, fmt.Sprintf("%s-%d", to, rev),
			map[string]any{"to": to, "expect_revision": rev, "reason": "release " + to})
		return st, body
	}
	st, _, _ = b.call(t, "POST", path, operatorToken, "op", map[string]any{"to": "VALIDATED", "expect_revision": rev, "reason": "x"})
	require.Equal(t, http.StatusForbidden, st, "releases are for admins")
	st, body, _ = b.call(t, "POST", path, adminToken, "no-reason", map[string]any{"to": "VALIDATED", "expect_revision": rev})
	require.Equal(t, http.StatusBadRequest, st)
	require.Contains(t, body["error"], "reason")

	st, body = step("VALIDATED", rev)
	require.Equal(t, http.StatusOK, st, body)
	require.Equal(t, "VALIDATED", body["state"])
	st, body = step("APPROVED", rev)
	require.Equal(t, http.StatusConflict, st, "the revision seen is stale")
	require.Contains(t, body["error"], "refresh")
	st, body = step("APPROVED", rev+1)
	require.Equal(t, http.StatusOK, st, body)
	require.Equal(t, "ada", body["approver"])
	st, body = step("DISTRIBUTING", rev+2)
	require.Equal(t, http.StatusOK, st, body)
	nodes := body["nodes"].([]any)
	require.Len(t, nodes, 1)
	cv := uint64(nodes[0].(map[string]any)["config_version"].(float64))

	st, body, _ = b.call(t, "POST", "/api/v1/rules/voyage-log/rollback", adminToken, "rb",
		map[string]any{"expect_revision": rev + 3, "reason": "back"})
	require.Equal(t, http.StatusConflict, st, "no earlier version ran")
	require.Contains(t, body["error"], "roll back")

	// The node runs it: ACTIVE; its old backlog may now be expired.
	require.NoError(t, b.reg.ObserveNode(ctx, "ship-a", &pb.Heartbeat{NodeId: "ship-a", ConfigVersion: cv}))
	b.clock.Advance(time.Hour)
	req := map[string]any{"node": "ship-a", "rule": "voyage-log", "captured_before": t0.Format(time.RFC3339),
		"events_estimate": 120, "bytes_estimate": 4096, "business_owner": "ops desk", "reason": "superseded by a resurvey"}
	st, _, _ = b.call(t, "POST", "/api/v1/expiry-approvals", operatorToken, "exp", req)
	require.Equal(t, http.StatusForbidden, st)
	st, body, _ = b.call(t, "POST", "/api/v1/expiry-approvals", adminToken, "exp", req)
	require.Equal(t, http.StatusOK, st, body)
	require.Equal(t, "ada", body["actor"])
	noOwner := map[string]any{"node": "ship-a", "rule": "voyage-log", "captured_before": t0.Format(time.RFC3339),
		"reason": "r"}
	st, body, _ = b.call(t, "POST", "/api/v1/expiry-approvals", adminToken, "exp-2", noOwner)
	require.Equal(t, http.StatusUnprocessableEntity, st)
	require.Contains(t, body["error"], "business owner")

	// A draft through the API: admin and a reason; its author may not
	// approve it (four eyes).
	require.NoError(t, b.reg.RegisterRule(ctx, shore.Rule{ID: "voyage-log", Version: 2, SourceTable: "voyage",
		TargetTable: "voyage", KeyColumns: []string{"id"}, Columns: []string{"id", "name", "eta"}, InsertOverTombstone: true},
		shore.Audit{Actor: "alice"}))
	ship2 := json.RawMessage(strings.Replace(string(ship), `"version": 1`, `"version": 2`, 1))
	draft := map[string]any{"rule": "voyage-log", "version": 2, "ship_rule": ship2, "targets": []string{"ship-a"}}
	st, _, _ = b.call(t, "POST", "/api/v1/rule-releases", operatorToken, "d-op", draft)
	require.Equal(t, http.StatusForbidden, st)
	st, body, _ = b.call(t, "POST", "/api/v1/rule-releases", adminToken, "d-0", draft)
	require.Equal(t, http.StatusBadRequest, st, "a draft needs a reason")
	require.Contains(t, body["error"], "reason")
	draft["reason"] = "add eta"
	st, body, _ = b.call(t, "POST", "/api/v1/rule-releases", adminToken, "d-1", draft)
	require.Equal(t, http.StatusOK, st, body)
	require.Equal(t, "DRAFT", body["state"])
	require.Equal(t, "ada", body["author"])
	r2 := int64(body["revision"].(float64))
	path2 := "/api/v1/rule-releases/voyage-log/2/transition"
	st, body, _ = b.call(t, "POST", path2, adminToken, "v2-val", map[string]any{"to": "VALIDATED", "expect_revision": r2, "reason": "checked"})
	require.Equal(t, http.StatusOK, st, body)
	st, body, _ = b.call(t, "POST", path2, adminToken, "v2-app", map[string]any{"to": "APPROVED", "expect_revision": r2 + 1, "reason": "mine"})
	require.Equal(t, http.StatusUnprocessableEntity, st, "the author does not approve their own release")
	require.Contains(t, body["error"], "someone other than its author")

	st, body, _ = b.call(t, "GET", "/api/v1/backlogs", viewerToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	require.Len(t, body["approvals"], 1)
	require.Len(t, body["nodes"], 2)

	st, body, _ = b.call(t, "GET", "/api/v1/audit-events?actor=ada", viewerToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	actions := map[string]bool{}
	for _, e := range body["events"].([]any) {
		ev := e.(map[string]any)
		actions[ev["action"].(string)] = true
		require.NotEmpty(t, ev["trace_id"], "an API change carries its request's trace id")
	}
	for _, a := range []string{"rule.validate", "rule.approve", "rule.distribute", "backlog.expire"} {
		require.True(t, actions[a], "audited: %s (have %v)", a, actions)
	}
}

// TestCancelConflict: an operator cancels an undecided case with the
// version seen; the old version is 409, the repeat of the request replays
// its answer, a closed case is 409, and the audit holds before and after
// with the trace id; a viewer sees the case without its key.
func TestCancelConflict(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const id = "0b0d7e52-517a-41b1-bc66-db9e7bee09e1"
	_, err := b.pool.Exec(t.Context(), `INSERT INTO sync_conflict_case (conflict_id, rule_id, rule_version, pk_hash, pk_text,
		active_conflict_key, state, created_at, updated_at) VALUES ($1, 'crew', 1, '\x01', '{"columns":[{"name":"id","intValue":"42"}]}',
		'k', 'DETECTED', $2, $2)`, id, t0)
	require.NoError(t, err)
	st, body, _ := b.call(t, "GET", "/api/v1/conflicts/"+id, viewerToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	require.Nil(t, body["key"], "a viewer does not see the record key")
	require.NotEmpty(t, body["key_ref"])
	version := body["version"].(string)
	st, body, _ = b.call(t, "GET", "/api/v1/conflicts/"+id, operatorToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, "id=42", body["key"])

	path := "/api/v1/conflicts/" + id + "/cancellation"
	st, _, _ = b.call(t, "POST", path, operatorToken, "c-old", map[string]any{"reason": "same on both sides", "seen_version": "1.0"})
	require.Equal(t, http.StatusConflict, st)
	req := map[string]any{"reason": "same on both sides", "seen_version": version}
	st, body, _ = b.call(t, "POST", path, operatorToken, "c-1", req)
	require.Equal(t, http.StatusOK, st, body)
	require.Equal(t, "CANCELLED", body["state"])
	st, _, hdr := b.call(t, "POST", path, operatorToken, "c-1", req)
	require.Equal(t, http.StatusOK, st)
	require.Equal(t, "true", hdr.Get("Idempotent-Replayed"))

	st, body, _ = b.call(t, "GET", "/api/v1/conflicts/"+id, operatorToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	st, body, _ = b.call(t, "POST", path, operatorToken, "c-2", map[string]any{"reason": "again", "seen_version": body["version"]})
	require.Equal(t, http.StatusConflict, st, "a cancelled case is closed")
	require.Contains(t, body["error"], "CANCELLED")

	st, body, _ = b.call(t, "GET", "/api/v1/audit-events?action=conflict.cancelled&object_id="+id, viewerToken, "", nil)
	require.Equal(t, http.StatusOK, st)
	events := body["events"].([]any)
	require.Len(t, events, 1)
	e := events[0].(map[string]any)
	require.Equal(t, "otto", e["actor"])
	require.Equal(t, "DETECTED", e["before"])
	require.Equal(t, "CANCELLED", e["after"])
	require.Equal(t, "same on both sides", e["reason"])
	require.NotEmpty(t, e["trace_id"])
}
