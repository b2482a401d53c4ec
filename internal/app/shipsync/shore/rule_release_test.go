package shore_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/testdb"
)

// shapes is a TargetSchema from a map.
type shapes map[string]shore.TableShape

func (s shapes) TableShape(_ context.Context, table string) (shore.TableShape, error) {
	return s[table], nil
}

var voyageShape = shapes{"voyage": {Columns: []string{"id", "name", "eta"}, Key: []string{"id"}}}

var (
	author   = shore.Audit{Actor: "alice", Reason: "new column"}
	approver = shore.Audit{Actor: "bob", Reason: "reviewed"}
)

// shipRule is a node-side rule of voyage in the rules file's form.
func shipRule(version uint64, direction string) []byte {
	return fmt.Appendf(nil, `{"id": "voyage-log", "version": %d, "direction": %q, "database": "ship", "table": "voyage",
		"key_columns": ["id"], "included_columns": ["id", "name"]}`, version, direction)
}

// draft registers voyage-log at version and drafts its release to targets.
func (b *bundle) draft(t *testing.T, version uint64, ship []byte, targets ...string) *shore.Release {
	t.Helper()
	ctx := t.Context()
	require.NoError(t, b.reg.RegisterRule(ctx, shore.Rule{ID: "voyage-log", Version: version, SourceTable: "voyage",
		TargetTable: "voyage", KeyColumns: []string{"id"}, Columns: []string{"id", "name", "eta"},
		InsertOverTombstone: true}, op))
	rel, err := b.reg.DraftRelease(ctx, shore.RuleRef{ID: "voyage-log", Version: version}, ship, targets, author)
	require.NoError(t, err)
	require.Equal(t, shore.ReleaseDraft, rel.State)
	return rel
}

// step moves rel to state `to` by actor a and returns the release after.
func (b *bundle) step(t *testing.T, rel *shore.Release, to shore.ReleaseState, a shore.Audit) *shore.Release {
	t.Helper()
	got, err := b.reg.Transition(t.Context(), shore.TransitionParams{Ref: rel.RuleRef, To: to,
		ExpectRevision: rel.Revision, Audit: a, Schema: voyageShape})
	require.NoError(t, err)
	require.Equal(t, to, got.State)
	require.Equal(t, rel.Revision+1, got.Revision)
	return got
}

// distribute takes a draft to DISTRIBUTING.
func (b *bundle) distribute(t *testing.T, rel *shore.Release) *shore.Release {
	t.Helper()
	rel = b.step(t, rel, shore.ReleaseValidated, author)
	rel = b.step(t, rel, shore.ReleaseApproved, approver)
	return b.step(t, rel, shore.ReleaseDistributing, author)
}

// heartbeat reports node runs config version cv.
func (b *bundle) heartbeat(t *testing.T, node string, cv uint64, rej *pb.ConfigRejection) {
	t.Helper()
	require.NoError(t, b.reg.ObserveNode(t.Context(), node, &pb.Heartbeat{NodeId: node, ConfigVersion: cv,
		ConfigRejection: rej}))
}

func (b *bundle) state(t *testing.T, version uint64) shore.ReleaseState {
	t.Helper()
	rel, err := b.reg.Release(t.Context(), shore.RuleRef{ID: "voyage-log", Version: version})
	require.NoError(t, err)
	return rel.State
}

func (b *bundle) configVersion(t *testing.T, node string) uint64 {
	t.Helper()
	cv, err := b.reg.NodeConfigVersion(t.Context(), b.d.Pool(), node)
	require.NoError(t, err)
	return cv
}

// offered is the version of voyage-log node's config offers (0: none).
func (b *bundle) offered(t *testing.T, node string) uint64 {
	t.Helper()
	nc, err := b.reg.NodeConfig(t.Context(), node)
	require.NoError(t, err)
	for _, r := range nc.Releases {
		if r.RuleId == "voyage-log" {
			return r.RuleVersion
		}
	}
	return 0
}

// TestReleaseLifecycle: DRAFT → VALIDATED → APPROVED → DISTRIBUTING →
// ACTIVE once every target node reports the config version that offered
// it; each step audited, optimistic, and the approval four-eyed.
func TestReleaseLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.addNode(t, "ship-1")
	b.addNode(t, "ship-2")
	rel := b.draft(t, 2, shipRule(2, "UPLINK"), "ship-2", "ship-1")
	require.Equal(t, []string{"ship-1", "ship-2"}, rel.Targets)

	_, err := b.reg.Transition(ctx, shore.TransitionParams{Ref: rel.RuleRef, To: shore.ReleaseApproved,
		ExpectRevision: rel.Revision, Audit: approver})
	require.ErrorIs(t, err, shore.ErrReleaseState, "a draft is validated before it is approved")
	// A draft is editable (optimistically); the edit counts as a revision.
	_, err = b.reg.EditDraft(ctx, rel.RuleRef, shipRule(2, "UPLINK"), []string{"ship-1"}, rel.Revision+1, author)
	require.ErrorIs(t, err, shore.ErrStaleRelease)
	rel, err = b.reg.EditDraft(ctx, rel.RuleRef, shipRule(2, "UPLINK"), []string{"ship-2", "ship-1", "ship-2"}, rel.Revision, author)
	require.NoError(t, err)
	require.EqualValues(t, 2, rel.Revision)
	require.Equal(t, []string{"ship-1", "ship-2"}, rel.Targets)
	rel = b.step(t, rel, shore.ReleaseValidated, author)
	_, err = b.reg.EditDraft(ctx, rel.RuleRef, shipRule(2, "UPLINK"), []string{"ship-1"}, 0, author)
	require.ErrorIs(t, err, shore.ErrReleaseState, "a validated release is not edited")

	_, err = b.reg.Transition(ctx, shore.TransitionParams{Ref: rel.RuleRef, To: shore.ReleaseApproved,
		ExpectRevision: rel.Revision, Audit: author})
	require.ErrorIs(t, err, shore.ErrSameApprover)
	_, err = b.reg.Transition(ctx, shore.TransitionParams{Ref: rel.RuleRef, To: shore.ReleaseApproved,
		ExpectRevision: rel.Revision, Audit: shore.Audit{Actor: "bob"}})
	require.ErrorIs(t, err, shore.ErrReasonRequired)
	_, err = b.reg.Transition(ctx, shore.TransitionParams{Ref: rel.RuleRef, To: shore.ReleaseApproved,
		ExpectRevision: rel.Revision - 1, Audit: approver})
	require.ErrorIs(t, err, shore.ErrStaleRelease)
	rel = b.step(t, rel, shore.ReleaseApproved, approver)
	require.Equal(t, "bob", rel.Approver)

	require.EqualValues(t, 1, b.configVersion(t, "ship-1"))
	require.Zero(t, b.offered(t, "ship-1"), "an approved version is not offered yet")
	rel = b.step(t, rel, shore.ReleaseDistributing, author)
	require.EqualValues(t, 2, b.configVersion(t, "ship-1"))
	require.EqualValues(t, 2, b.offered(t, "ship-1"))
	nc, err := b.reg.NodeConfig(ctx, "ship-1")
	require.NoError(t, err)
	require.JSONEq(t, string(shipRule(2, "UPLINK")), string(nc.Releases[0].Rule))
	require.Contains(t, nc.Rules, &pb.RuleRef{RuleId: "voyage-log", RuleVersion: 2}, "the node may upload the new version")

	b.heartbeat(t, "ship-1", 1, nil)
	require.Equal(t, shore.ReleaseDistributing, b.state(t, 2), "ship-1 still runs config 1")
	b.heartbeat(t, "ship-1", 2, nil)
	require.Equal(t, shore.ReleaseDistributing, b.state(t, 2), "ship-2 has not reported it")
	b.heartbeat(t, "ship-2", 2, nil)
	require.Equal(t, shore.ReleaseActive, b.state(t, 2))
	got, err := b.reg.Release(ctx, rel.RuleRef)
	require.NoError(t, err)
	for _, n := range got.Nodes {
		require.Equal(t, "RUNNING", n.State, n.NodeID)
	}

	// The next version supersedes it once it is ACTIVE.
	b.distribute(t, b.draft(t, 3, shipRule(3, "UPLINK"), "ship-1", "ship-2"))
	require.EqualValues(t, 3, b.offered(t, "ship-1"))
	b.heartbeat(t, "ship-1", 3, nil)
	b.heartbeat(t, "ship-2", 3, nil)
	require.Equal(t, shore.ReleaseActive, b.state(t, 3))
	require.Equal(t, shore.ReleaseSuperseded, b.state(t, 2))

	log, err := b.reg.AuditLog(ctx)
	require.NoError(t, err)
	var actions []string
	for _, e := range log {
		if e.ObjectType == "rule" && e.ObjectID == "voyage-log@2" {
			actions = append(actions, e.Action+" "+e.Actor+" "+e.Before+"→"+e.After)
		}
	}
	require.Equal(t, []string{
		"rule.register tester →voyage → voyage key id",
		"rule.draft alice →DRAFT, 2 target nodes",
		"rule.edit alice 2 target nodes→DRAFT, 2 target nodes",
		"rule.validate alice DRAFT→VALIDATED",
		"rule.approve bob VALIDATED→APPROVED",
		"rule.distribute alice APPROVED→DISTRIBUTING",
		"rule.activate node:ship-2 DISTRIBUTING→ACTIVE on 2 nodes",
	}, actions)
}

// TestValidateRefusals: the shore's hard checks list every problem and leave
// the release DRAFT.
func TestValidateRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.addNode(t, "ship-1")
	for i, tc := range []struct {
		ship  string
		shape shore.TableShape
		want  []string
	}{
		{`{"id": "voyage-log", "version": VERSION, "direction": "UPLINK", "database": "ship", "table": "voyage",
			"key_columns": ["id"], "transforms": [{"column": "name", "transform": "shell@1"}]}`, voyageShape["voyage"],
			[]string{"node-side rule: normalize: rule \"voyage-log\" (rules[0]): transforms[0]"}},
		{`{"id": "voyage-log", "version": VERSION, "direction": "UPLINK", "database": "ship", "table": "voyages",
			"key_columns": ["name"], "included_columns": ["name", "speed"]}`, voyageShape["voyage"],
			[]string{`column "speed" is carried but not accepted`, "key columns [name] (after mappings) differ",
				`node-side rule selects table "voyages"`}},
		{string(shipRule(99, "UPLINK")), shore.TableShape{Columns: []string{"id", "name"}, Key: []string{"id", "name"}},
			[]string{"node-side rule is voyage-log@", `target table voyage has no column "eta"`,
				"target table voyage's primary key [id name] differs"}},
		{strings.ReplaceAll(string(shipRule(1, "UPLINK")), `"version": 1`, `"version": VERSION`), shore.TableShape{}, []string{"target table voyage does not exist"}},
	} {
		version := uint64(i + 1)
		ship := strings.ReplaceAll(tc.ship, "VERSION", fmt.Sprint(version))
		rel := b.draft(t, version, []byte(ship), "ship-1")
		_, err := b.reg.Transition(t.Context(), shore.TransitionParams{Ref: rel.RuleRef, To: shore.ReleaseValidated,
			ExpectRevision: rel.Revision, Audit: author, Schema: shapes{"voyage": tc.shape}})
		var ve *shore.ValidationError
		require.ErrorAs(t, err, &ve, "case %d", i)
		require.Len(t, ve.Problems, len(tc.want), "case %d: %v", i, ve.Problems)
		for j, w := range tc.want {
			require.Contains(t, ve.Problems[j], w, "case %d", i)
		}
		require.Equal(t, shore.ReleaseDraft, b.state(t, version))
	}
}

// TestNodeRejectionFailsRelease: a node's validation refuses the offered
// version; the release FAILS, every target gets a new config version, and
// the config returns to the last ACTIVE version.
func TestNodeRejectionFailsRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.addNode(t, "ship-1")
	b.addNode(t, "ship-2")
	b.distribute(t, b.draft(t, 1, shipRule(1, "UPLINK"), "ship-1", "ship-2"))
	b.heartbeat(t, "ship-1", 2, nil)
	b.heartbeat(t, "ship-2", 2, nil)
	require.Equal(t, shore.ReleaseActive, b.state(t, 1))

	b.distribute(t, b.draft(t, 2, shipRule(2, "UPLINK"), "ship-1", "ship-2"))
	require.EqualValues(t, 3, b.configVersion(t, "ship-1"))
	b.heartbeat(t, "ship-2", 3, nil) // ship-2 runs it
	// A rejection of an older config version is stale and ignored.
	b.heartbeat(t, "ship-1", 2, &pb.ConfigRejection{ConfigVersion: 2, RuleId: "voyage-log", RuleVersion: 2, Problem: "old"})
	require.Equal(t, shore.ReleaseDistributing, b.state(t, 2))
	b.heartbeat(t, "ship-1", 2, &pb.ConfigRejection{ConfigVersion: 3, RuleId: "voyage-log", RuleVersion: 2,
		Problem: "table ship.voyage has no column name"})
	require.Equal(t, shore.ReleaseFailed, b.state(t, 2))
	require.Equal(t, shore.ReleaseActive, b.state(t, 1), "the last good version stays ACTIVE")
	require.EqualValues(t, 4, b.configVersion(t, "ship-1"))
	require.EqualValues(t, 4, b.configVersion(t, "ship-2"), "ship-2 goes back as well")
	require.EqualValues(t, 1, b.offered(t, "ship-2"))
	rel, err := b.reg.Release(t.Context(), shore.RuleRef{ID: "voyage-log", Version: 2})
	require.NoError(t, err)
	require.Equal(t, "node ship-1: table ship.voyage has no column name", rel.Failure)
	// A failed version is not distributed again.
	_, err = b.reg.Transition(t.Context(), shore.TransitionParams{Ref: rel.RuleRef, To: shore.ReleaseDistributing,
		ExpectRevision: rel.Revision, Audit: author})
	require.ErrorIs(t, err, shore.ErrReleaseState)
}

// TestRollback: back to the last good version (reason required, audited),
// offered again until the nodes run it; and a version in flight dropped in
// favour of the ACTIVE one.
func TestRollback(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.addNode(t, "ship-1")
	for v := uint64(1); v <= 2; v++ {
		b.distribute(t, b.draft(t, v, shipRule(v, "UPLINK"), "ship-1"))
		b.heartbeat(t, "ship-1", b.configVersion(t, "ship-1"), nil)
		require.Equal(t, shore.ReleaseActive, b.state(t, v))
	}
	_, err := b.reg.Rollback(ctx, shore.RollbackParams{RuleID: "voyage-log", Audit: shore.Audit{Actor: "bob"}})
	require.ErrorIs(t, err, shore.ErrReasonRequired)
	_, err = b.reg.Rollback(ctx, shore.RollbackParams{RuleID: "voyage-log", ToVersion: 7, Audit: approver})
	require.ErrorIs(t, err, shore.ErrNoRollbackTarget)
	_, err = b.reg.Rollback(ctx, shore.RollbackParams{RuleID: "voyage-log", ExpectRevision: 1, Audit: approver})
	require.ErrorIs(t, err, shore.ErrStaleRelease)

	cv := b.configVersion(t, "ship-1")
	rel, err := b.reg.Rollback(ctx, shore.RollbackParams{RuleID: "voyage-log", Audit: approver})
	require.NoError(t, err)
	require.EqualValues(t, 1, rel.Version)
	require.Equal(t, shore.ReleaseRollbackTarget, rel.State)
	require.Equal(t, shore.ReleaseSuperseded, b.state(t, 2))
	require.Greater(t, b.configVersion(t, "ship-1"), cv)
	require.EqualValues(t, 1, b.offered(t, "ship-1"))
	b.heartbeat(t, "ship-1", b.configVersion(t, "ship-1"), nil)
	require.Equal(t, shore.ReleaseActive, b.state(t, 1))

	// A version in flight rolled back: the nodes return to the ACTIVE one.
	b.distribute(t, b.draft(t, 3, shipRule(3, "UPLINK"), "ship-1"))
	require.EqualValues(t, 3, b.offered(t, "ship-1"))
	rel, err = b.reg.Rollback(ctx, shore.RollbackParams{RuleID: "voyage-log", Audit: approver})
	require.NoError(t, err)
	require.EqualValues(t, 1, rel.Version)
	require.Equal(t, shore.ReleaseActive, rel.State)
	require.Equal(t, shore.ReleaseSuperseded, b.state(t, 3))
	require.EqualValues(t, 1, b.offered(t, "ship-1"))

	log, err := b.reg.AuditLog(ctx)
	require.NoError(t, err)
	var rollbacks []string
	for _, e := range log {
		if e.Action == "rule.rollback" {
			rollbacks = append(rollbacks, e.Before+"→"+e.After+" "+e.Reason)
		}
	}
	require.Equal(t, []string{"version 2 ACTIVE→version 1 ROLLBACK_TARGET reviewed",
		"version 3 DISTRIBUTING→version 1 ACTIVE reviewed"}, rollbacks)
}

// TestExpiryApproval: an approval for a one-way rule is immutable, audited,
// offered to the node and closed by its report; a two-way rule refuses it.
func TestExpiryApproval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.addNode(t, "ship-1")
	boundary := t0.Add(-24 * time.Hour)
	params := shore.ExpiryParams{NodeID: "ship-1", RuleID: "voyage-log", CapturedBefore: boundary, EventsEstimate: 10,
		BytesEstimate: 4096, BusinessOwner: "ops desk", Audit: approver}
	_, err := b.reg.ApproveExpiry(ctx, params)
	require.ErrorIs(t, err, shore.ErrUnknownRelease, "without a release the direction is unknown")

	b.distribute(t, b.draft(t, 1, shipRule(1, "UPLINK"), "ship-1"))
	b.heartbeat(t, "ship-1", 2, nil)
	noReason := params
	noReason.Audit.Reason = ""
	_, err = b.reg.ApproveExpiry(ctx, noReason)
	require.ErrorIs(t, err, shore.ErrReasonRequired)
	future := params
	future.CapturedBefore = t0.Add(time.Hour)
	_, err = b.reg.ApproveExpiry(ctx, future)
	require.ErrorContains(t, err, "not in the future")

	a, err := b.reg.ApproveExpiry(ctx, params)
	require.NoError(t, err)
	require.EqualValues(t, 1, a.RuleVersion)
	require.True(t, a.CapturedBefore.Equal(boundary))
	require.Nil(t, a.Reported)
	require.EqualValues(t, 3, b.configVersion(t, "ship-1"), "the node is told to fetch its config")
	nc, err := b.reg.NodeConfig(ctx, "ship-1")
	require.NoError(t, err)
	require.Len(t, nc.ExpiryApprovals, 1)
	require.Equal(t, a.ID, nc.ExpiryApprovals[0].ApprovalId)
	require.True(t, nc.ExpiryApprovals[0].CapturedBefore.AsTime().Equal(boundary))

	_, err = b.d.Pool().Exec(ctx, "UPDATE sync_expiry_approval SET reason = 'x'")
	require.ErrorContains(t, err, "append-only")
	_, err = b.d.Pool().Exec(ctx, "DELETE FROM sync_expiry_approval")
	require.ErrorContains(t, err, "append-only")

	require.NoError(t, b.reg.ObserveNode(ctx, "ship-1", &pb.Heartbeat{ConfigVersion: 3,
		ExpiryReports: []*pb.ExpiryReport{{ApprovalId: a.ID, Events: 7, RawBytes: 3000}, {ApprovalId: "nonsense"}}}))
	list, err := b.reg.ExpiryApprovals(ctx, "ship-1")
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.NotNil(t, list[0].Reported)
	require.EqualValues(t, 7, list[0].ExpiredEvents)
	require.EqualValues(t, 3000, list[0].ExpiredBytes)
	b.clock.Advance(shore.ExpiryOfferedFor + time.Hour)
	nc, err = b.reg.NodeConfig(ctx, "ship-1")
	require.NoError(t, err)
	require.Empty(t, nc.ExpiryApprovals, "a reported approval leaves the config after a while")

	log, err := b.reg.AuditLog(ctx)
	require.NoError(t, err)
	require.Equal(t, "backlog.expire", log[len(log)-1].Action)
	require.Equal(t, a.ID, log[len(log)-1].ObjectID)

	// A two-way rule refuses it.
	b.distribute(t, b.draft(t, 2, shipRule(2, "BOTH"), "ship-1"))
	b.heartbeat(t, "ship-1", b.configVersion(t, "ship-1"), nil)
	require.Equal(t, shore.ReleaseActive, b.state(t, 2))
	params.CapturedBefore = b.clock.Now().Add(-time.Hour)
	_, err = b.reg.ApproveExpiry(ctx, params)
	require.ErrorIs(t, err, shore.ErrTwoWayExpiry)
}

// TestMariaDBSchema reads a real table's columns and primary key order.
func TestMariaDBSchema(t *testing.T) {
	t.Parallel()
	db := testdb.MariaDB(t)
	ctx := t.Context()
	_, err := db.ExecContext(ctx, "CREATE TABLE leg (name varchar(20), voyage int, seq int, note text, PRIMARY KEY (voyage, seq))")
	require.NoError(t, err)
	shape, err := shore.MariaDBSchema{DB: db}.TableShape(ctx, "leg")
	require.NoError(t, err)
	require.Equal(t, []string{"name", "voyage", "seq", "note"}, shape.Columns)
	require.Equal(t, []string{"voyage", "seq"}, shape.Key)
	shape, err = shore.MariaDBSchema{DB: db}.TableShape(ctx, "absent")
	require.NoError(t, err)
	require.Empty(t, shape.Columns)
}

// TestConfigOffersRelease: through the real endpoints, the heartbeat answer
// carries the new config version, GET /sync/v1/config the release, and the
// node's next heartbeat makes it ACTIVE.
func TestConfigOffersRelease(t *testing.T) {
	t.Parallel()
	s := serve(t, setup(t), nil)
	s.addNode(t, "ship-1")
	s.distribute(t, s.draft(t, 2, shipRule(2, "UPLINK"), "ship-1"))
	c := s.client(t, "node-ship-1")
	beat := func(cv uint64) *pb.HeartbeatResponse {
		hb, err := proto.Marshal(&pb.Heartbeat{ProtocolVersion: "1.0", NodeId: "ship-1", ConfigVersion: cv})
		require.NoError(t, err)
		status, _, rb := post(t, c, s.url+shore.PathHeartbeat, hb)
		require.Equal(t, http.StatusOK, status, string(rb))
		var hr pb.HeartbeatResponse
		require.NoError(t, proto.Unmarshal(rb, &hr))
		return &hr
	}
	require.EqualValues(t, 2, beat(1).ConfigVersion)
	resp, err := c.Get(s.url + shore.PathConfig)
	require.NoError(t, err)
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var nc pb.NodeConfig
	require.NoError(t, proto.Unmarshal(rb, &nc))
	require.EqualValues(t, 2, nc.ConfigVersion)
	require.Len(t, nc.Releases, 1)
	require.EqualValues(t, 2, nc.Releases[0].RuleVersion)
	require.Equal(t, shore.ReleaseDistributing, s.state(t, 2))
	require.EqualValues(t, 2, beat(2).ConfigVersion)
	require.Equal(t, shore.ReleaseActive, s.state(t, 2))
}
