package client

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/relayclock"
)

var rulesT0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// configStub is a shore serving one NodeConfig at GET /sync/v1/config.
type configStub struct {
	mu sync.Mutex
	nc *pb.NodeConfig
}

func (s *configStub) set(nc *pb.NodeConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nc = nc
}

func (s *configStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path != shore.PathConfig {
		http.NotFound(w, r)
		return
	}
	b, _ := proto.Marshal(s.nc)
	w.Header().Set("Content-Type", shore.ContentType)
	_, _ = w.Write(b)
}

// fuelRule is the node-side rule of ops.fuel at version, excluding note
// when hide is set.
func fuelRule(version uint64, direction string, extra string) []byte {
	return fmt.Appendf(nil, `{"id": "fuel", "version": %d, "direction": %q, "database": "ops", "table": "fuel",
		"key_columns": ["tank"], "revisioned": false%s}`, version, direction, extra)
}

type rulesParts struct {
	ctx   context.Context
	path  string
	store *Store
	stub  *configStub
	c     *Client
}

func rulesSetup(t *testing.T) *rulesParts {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "client.db")
	st, err := OpenStore(ctx, path, "g", relayclock.NewFake(rulesT0))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	stub := &configStub{}
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	tr, err := NewTransport(srv.URL, nil, 0)
	require.NoError(t, err)
	t.Cleanup(tr.Close)
	return &rulesParts{ctx: ctx, path: path, store: st, stub: stub, c: fuelClient(t, st, tr)}
}

// fuelClient builds node ship-1's client over st and tr, with the local
// uplink rule of ops.fuel at version 1 (never run).
func fuelClient(t *testing.T, st *Store, tr *Transport) *Client {
	t.Helper()
	local, err := normalize.LoadRules(strings.NewReader(`{"rules": [` + string(fuelRule(1, "UPLINK", "")) + `]}`))
	require.NoError(t, err)
	c, err := Build(Parts{NodeID: "ship-1", ConnectorID: "ship1-mysql", Rules: local, Store: st, Transport: tr,
		Clock: relayclock.NewFake(rulesT0), Types: cdc.TypeMap{"ops.fuel": {"tank": {Type: "int32", Required: true},
			"note": {Type: "string"}}}},
		Config{Brokers: []string{"127.0.0.1:1"}, TopicPrefix: "sync.cdc."})
	require.NoError(t, err)
	return c
}

// record is a Debezium insert of ops.fuel tank captured at.
func record(off int64, tank int, at time.Time) *kgo.Record {
	return &kgo.Record{Topic: "sync.cdc.ops.fuel", Partition: 0, Offset: off, Key: fmt.Appendf(nil, `{"tank":%d}`, tank),
		Value: fmt.Appendf(nil, `{"op":"c","after":{"tank":%d,"note":"n%d"},
		"source":{"version":"2.7.3.Final","connector":"mysql","db":"ops","table":"fuel","ts_ms":%d},"ts_ms":%d}`,
			tank, tank, at.UnixMilli(), at.UnixMilli())}
}

// normalizeOne runs the client's normaliser on one record.
func (p *rulesParts) normalizeOne(t *testing.T) normalize.Outcome {
	t.Helper()
	ev, err := p.c.cfg.Decoder.Decode(cdc.Message{Topic: "sync.cdc.ops.fuel", Key: []byte(`{"tank":1}`),
		Value: record(0, 1, rulesT0).Value})
	require.NoError(t, err)
	o, err := p.c.cfg.Normalizer.Normalize(p.ctx, normalize.Source{Topic: "sync.cdc.ops.fuel"}, ev, rulesT0)
	require.NoError(t, err)
	return o
}

// TestRuleSwitchIsAtomic: the client takes a released rule set whole and
// keeps it across a restart; a set with one bad rule is refused as a whole
// (the previous set keeps running) and reported; the shore's later fix is
// taken.
func TestRuleSwitchIsAtomic(t *testing.T) {
	t.Parallel()
	p := rulesSetup(t)
	rt := p.c.RuleRuntime()
	require.NotNil(t, rt)
	require.Zero(t, rt.ConfigVersion())
	o := p.normalizeOne(t)
	require.EqualValues(t, 1, o.Event.RuleVersion, "the local rules run until the shore releases others")
	require.Len(t, o.Event.After.Columns, 2)

	p.stub.set(&pb.NodeConfig{ConfigVersion: 2, Releases: []*pb.RuleRelease{
		{RuleId: "fuel", RuleVersion: 2, Rule: fuelRule(2, "UPLINK", `, "excluded_columns": ["note"]`)}}})
	require.NoError(t, p.c.followConfig(p.ctx, 2))
	require.EqualValues(t, 2, rt.ConfigVersion())
	require.Nil(t, rt.Rejection())
	o = p.normalizeOne(t)
	require.EqualValues(t, 2, o.Event.RuleVersion)
	require.Len(t, o.Event.After.Columns, 1, "note is excluded by version 2")

	// Version 3 of fuel is valid, the new rule "tank" is not: nothing of it
	// is taken.
	p.stub.set(&pb.NodeConfig{ConfigVersion: 3, Releases: []*pb.RuleRelease{
		{RuleId: "fuel", RuleVersion: 3, Rule: fuelRule(3, "UPLINK", "")},
		{RuleId: "tank", RuleVersion: 1, Rule: []byte(`{"id": "tank", "version": 1, "direction": "UPLINK",
			"database": "ops", "table": "tank", "key_columns": ["id"], "transforms": [{"column": "x", "transform": "exec@1"}]}`)}}})
	require.NoError(t, p.c.followConfig(p.ctx, 3))
	require.EqualValues(t, 2, rt.ConfigVersion(), "the previous set keeps running")
	rej := rt.Rejection()
	require.NotNil(t, rej)
	require.EqualValues(t, 3, rej.ConfigVersion)
	require.Equal(t, "tank", rej.RuleId)
	require.Contains(t, rej.Problem, "transforms[0]")
	require.EqualValues(t, 2, p.normalizeOne(t).Event.RuleVersion)
	hb := &pb.Heartbeat{}
	require.NoError(t, p.c.rulesHeartbeat(p.ctx, hb))
	require.EqualValues(t, 2, hb.ConfigVersion)
	require.Equal(t, rej, hb.ConfigRejection, "the refusal goes to the shore")
	require.NoError(t, p.c.followConfig(p.ctx, 3), "a refused version is not fetched again")

	var status, validation string
	require.NoError(t, p.store.db.QueryRowContext(p.ctx,
		"SELECT status, validation FROM rule_snapshot WHERE rule_id = 'tank'").Scan(&status, &validation))
	require.Equal(t, "FAILED", status)
	require.Contains(t, validation, "transforms[0]")

	// A restart runs what ran: fuel@2 under config version 2.
	rt2, err := NewRuleRuntime(p.ctx, normalize.Config{NodeID: "ship-1", ConnectorID: "ship1-mysql"}, rt.local, p.store, p.store)
	require.NoError(t, err)
	require.EqualValues(t, 2, rt2.ConfigVersion())

	// The shore fails the release and goes back: config 4 is taken.
	p.stub.set(&pb.NodeConfig{ConfigVersion: 4, Releases: []*pb.RuleRelease{
		{RuleId: "fuel", RuleVersion: 2, Rule: fuelRule(2, "UPLINK", `, "excluded_columns": ["note"]`)}}})
	require.NoError(t, p.c.followConfig(p.ctx, 4))
	require.EqualValues(t, 4, rt.ConfigVersion())
	require.Nil(t, rt.Rejection())
}

// TestExpiredOnReadTakeNoNumber: events of a one-way rule captured before an
// approval's boundary end EXPIRED_APPROVED on read, without a stream
// sequence (the shore's stream has no gap), referencing the approval; the
// others are numbered contiguously; the heartbeat reports the count.
func TestExpiredOnReadTakeNoNumber(t *testing.T) {
	t.Parallel()
	p := rulesSetup(t)
	boundary := rulesT0.Add(-time.Hour)
	const approval = "6f1c1d5e-2a4b-4c3d-8e9f-0a1b2c3d4e5f"
	p.stub.set(&pb.NodeConfig{ConfigVersion: 2, Releases: []*pb.RuleRelease{
		{RuleId: "fuel", RuleVersion: 1, Rule: fuelRule(1, "UPLINK", "")}},
		ExpiryApprovals: []*pb.ExpiryApproval{{ApprovalId: approval, RuleId: "fuel", CapturedBefore: timestamppb.New(boundary)}}})
	require.NoError(t, p.c.followConfig(p.ctx, 2))

	var recs []*kgo.Record
	for i := range 6 {
		at := boundary.Add(time.Duration(i-2) * time.Minute) // 0 before the boundary, 2 at it, 4 after
		if i%2 == 1 {
			at = boundary.Add(-time.Duration(i) * time.Hour) // interleaved: 1, 3, 5 old
		}
		recs = append(recs, record(int64(i), i+1, at))
	}
	require.NoError(t, p.c.ingest(p.ctx, p.c.decode(recs)))

	rows, err := p.store.db.QueryContext(p.ctx, "SELECT off, coalesce(seq, 0), state, coalesce(reason, '') FROM event_state ORDER BY off")
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var off, seq int64
		var state, reason string
		require.NoError(t, rows.Scan(&off, &seq, &state, &reason))
		got = append(got, fmt.Sprintf("%d seq=%d %s %s", off, seq, state, reason))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{
		"0 seq=0 EXPIRED_APPROVED " + approval,
		"1 seq=0 EXPIRED_APPROVED " + approval,
		"2 seq=1 READY ",
		"3 seq=0 EXPIRED_APPROVED " + approval,
		"4 seq=2 READY ",
		"5 seq=0 EXPIRED_APPROVED " + approval,
	}, got)
	require.Equal(t, 2, p.c.tr.tracked(), "only the delivered events are tracked")
	// The expired events do not hold the terminal checkpoint.
	rows, err = p.store.db.QueryContext(p.ctx, "SELECT event_id FROM event_state WHERE state = 'READY'")
	require.NoError(t, err)
	var ready []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ready = append(ready, id)
	}
	require.NoError(t, rows.Err())
	p.c.mu.Lock()
	for _, id := range ready {
		require.True(t, p.c.tr.terminal(id))
	}
	marks := p.c.tr.dirtyMarks()
	p.c.mu.Unlock()
	require.Len(t, marks, 1)
	require.EqualValues(t, 6, marks[0].TerminalNext)

	hb := &pb.Heartbeat{}
	require.NoError(t, p.c.rulesHeartbeat(p.ctx, hb))
	require.Len(t, hb.ExpiryReports, 1)
	require.Equal(t, approval, hb.ExpiryReports[0].ApprovalId)
	require.EqualValues(t, 4, hb.ExpiryReports[0].Events)
	require.Positive(t, hb.ExpiryReports[0].RawBytes)
	var results int
	require.NoError(t, p.store.db.QueryRowContext(p.ctx,
		"SELECT count(*) FROM event_state WHERE result = 'EXPIRED_APPROVED'").Scan(&results))
	require.Equal(t, 4, results, "each expired event has its terminal result")

	// A two-way rule's events never expire, whatever the shore sends.
	p.stub.set(&pb.NodeConfig{ConfigVersion: 3, Releases: []*pb.RuleRelease{
		{RuleId: "fuel", RuleVersion: 2, Rule: fuelRule(2, "BOTH", `, "revisioned": true`)}},
		ExpiryApprovals: []*pb.ExpiryApproval{{ApprovalId: approval, RuleId: "fuel", CapturedBefore: timestamppb.New(boundary)}}})
	require.NoError(t, p.c.followConfig(p.ctx, 3))
	require.EqualValues(t, 3, p.c.RuleRuntime().ConfigVersion())
	require.Empty(t, p.c.RuleRuntime().expiredBy("fuel", boundary.Add(-time.Hour)))
}
