package normalize_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/wire"
)

const (
	node      = "ship-0042"
	otherNode = "shore"
	topic     = "ship0042.ops.voyage_log"
	// Revisions and event ids used by the rows below.
	rev1    = "0b6f4a1e-6d1c-4c61-9a57-2f0a6c1d9e01"
	rev2    = "0b6f4a1e-6d1c-4c61-9a57-2f0a6c1d9e02"
	cmdIns  = "7d0c3f1a-0000-4000-8000-000000000001"
	cmdUpd  = "7d0c3f1a-0000-4000-8000-000000000002"
	cmdDel  = "7d0c3f1a-0000-4000-8000-000000000003"
	cmdMiss = "7d0c3f1a-0000-4000-8000-0000000000ff"
)

// now is the tests' trusted now; changeTime the rows' source.ts_ms.
var (
	now        = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	changeTime = time.Date(2026, 12, 2, 11, 59, 58, 250e6, time.UTC)
)

// voyageTypes types ops.voyage_log for schema-less records, as a client
// would from the table's DDL (with the platform's four columns).
func voyageTypes() cdc.TypeMap {
	return cdc.TypeMap{"ops.voyage_log": {
		"id":               {Type: "int32", Required: true},
		"vessel":           {Type: "string", Required: true},
		"fuel_used":        {Type: "bytes", Name: cdc.SemanticDecimal, Scale: 4},
		"departed_at":      {Type: "int64", Name: cdc.SemanticTimestamp},
		"logged_on":        {Type: "int32", Name: cdc.SemanticDate},
		"status":           {Type: "string"},
		"note":             {Type: "string"},
		"secret":           {Type: "string"},
		"occurred":         {Type: "string"},
		"_sync_revision":   {Type: "string"},
		"_sync_origin":     {Type: "string"},
		"_sync_event_id":   {Type: "string"},
		"_sync_updated_at": {Type: "int64", Name: cdc.SemanticMicroTimestamp},
	}}
}

// row is a schema-less row image; with() returns a changed copy.
type row map[string]any

func (r row) with(kv ...any) row {
	out := row{}
	for k, v := range r {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == drop {
			delete(out, kv[i].(string))
			continue
		}
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

// drop removes a column in row.with.
var drop = &struct{}{}

// localRow is a row this node wrote locally at revision rev.
func localRow(id int, rev string) row {
	return row{
		"id": id, "vessel": "  MV Northern Tern ", "fuel_used": "ArHcfg==", // 4521.0750
		"departed_at": now.Add(-48 * time.Hour).UnixMilli(), "logged_on": 20788,
		"status": "ACTIVE", "note": nil, "secret": "s3cr3t", "occurred": nil,
		"_sync_revision": rev, "_sync_origin": node, "_sync_event_id": nil,
		"_sync_updated_at": now.UnixMicro(),
	}
}

// remoteRow is a row the remote applier wrote for command cmd at rev.
func remoteRow(id int, rev, cmd string) row {
	return localRow(id, rev).with("_sync_origin", otherNode, "_sync_event_id", cmd)
}

// rec is one raw record.
type rec struct {
	op            string
	key           any // nil: {"id": <row id>}
	before, after row
	tx            map[string]any
	headers       []cdc.Header
	tsMs          *int64 // source.ts_ms; nil: changeTime; negative: absent
}

// message builds the Kafka record for r in Debezium's schema-less form.
func (r rec) message(t testing.TB) cdc.Message {
	t.Helper()
	src := map[string]any{
		"version": "2.7.3.Final", "connector": "mysql", "name": "ship0042", "snapshot": "false",
		"db": "ops", "table": "voyage_log", "server_id": 4201, "file": "mysql-bin.000214", "pos": 17400, "row": 0,
		"ts_ms": changeTime.UnixMilli(),
	}
	if r.tsMs != nil {
		src["ts_ms"] = *r.tsMs
		if *r.tsMs < 0 {
			delete(src, "ts_ms")
		}
	}
	if r.op == "r" {
		src["snapshot"] = "true"
	}
	v := map[string]any{"op": r.op, "source": src, "ts_ms": changeTime.Add(40 * time.Millisecond).UnixMilli()}
	if r.before != nil {
		v["before"] = r.before
	}
	if r.after != nil {
		v["after"] = r.after
	}
	if r.tx != nil {
		v["transaction"] = r.tx
	}
	m := cdc.Message{Topic: topic, Headers: r.headers}
	var err error
	if r.op != "x" {
		m.Value, err = json.Marshal(v)
		require.NoError(t, err)
	}
	key := r.key
	if key == nil {
		img := r.after
		if img == nil {
			img = r.before
		}
		if img != nil {
			key = map[string]any{"id": img["id"]}
		}
	}
	if key != nil && r.op != "t" {
		m.Key, err = json.Marshal(key)
		require.NoError(t, err)
	}
	return m
}

func decoder(t testing.TB) *cdc.Decoder {
	t.Helper()
	d, err := cdc.New(cdc.Config{Types: voyageTypes()})
	require.NoError(t, err)
	return d
}

// decode decodes r and requires success.
func (r rec) decode(t testing.TB) *cdc.Event {
	t.Helper()
	ev, err := decoder(t).Decode(r.message(t))
	require.NoError(t, err)
	return ev
}

// applied is an in-memory applied_command table.
type applied struct {
	cmds map[string]normalize.AppliedCommand
	err  error
}

func (a *applied) Applied(_ context.Context, _, id string) (normalize.AppliedCommand, bool, error) {
	if a.err != nil {
		return normalize.AppliedCommand{}, false, a.err
	}
	c, ok := a.cmds[id]
	return c, ok, nil
}

func appliedTable() *applied {
	return &applied{cmds: map[string]normalize.AppliedCommand{
		cmdIns: {Operation: pb.Operation_OPERATION_INSERT, ResultRevision: rev1},
		cmdUpd: {Operation: pb.Operation_OPERATION_UPDATE, ResultRevision: rev2},
		cmdDel: {Operation: pb.Operation_OPERATION_DELETE, ResultRevision: "9a3c1b7e-0000-5000-8000-000000000000"},
	}}
}

// baseRule is the voyage_log rule the tests vary.
const baseRule = `{"id": "voyage-log", "version": 3, "direction": "BOTH", "database": "ops", "table": "voyage_log",
	"key_columns": ["id"]}`

// rules loads a rules file holding baseRule changed by the JSON members in
// extra (merged over it).
func rules(t testing.TB, extra string) *normalize.RuleSet {
	t.Helper()
	var r map[string]any
	require.NoError(t, json.Unmarshal([]byte(baseRule), &r))
	if extra != "" {
		var e map[string]any
		require.NoError(t, json.Unmarshal([]byte(extra), &e))
		for k, v := range e {
			r[k] = v
		}
	}
	b, err := json.Marshal(map[string]any{"rules": []any{r}})
	require.NoError(t, err)
	rs, err := normalize.LoadRules(strings.NewReader(string(b)))
	require.NoError(t, err)
	return rs
}

func newNormalizer(t testing.TB, rs *normalize.RuleSet, a normalize.AppliedLookup) *normalize.Normalizer {
	t.Helper()
	n, err := normalize.New(normalize.Config{NodeID: node, ConnectorID: "ship0042-mysql", ReplayEpoch: 1}, rs, a)
	require.NoError(t, err)
	return n
}

var src = normalize.Source{Topic: topic, Partition: 2, Offset: 1017}

// requireValid checks an emitted event the way the shore will (with a
// source_sequence, which the client assigns) and that no _sync_ column is
// carried.
func requireValid(t testing.TB, o normalize.Outcome) {
	t.Helper()
	require.Equal(t, normalize.Emit, o.Disposition, "%s: %s", o.Reason, o.Detail)
	ev := o.Event
	require.NotNil(t, ev)
	require.Zero(t, ev.SourceSequence)
	ev.SourceSequence = 1
	require.NoError(t, wire.ValidateEvent(ev, nil))
	ev.SourceSequence = 0
	for _, img := range []*pb.RowImage{ev.Before, ev.After} {
		for _, c := range img.GetColumns() {
			require.False(t, strings.HasPrefix(strings.ToLower(c.Name), "_sync_"), "platform column %s carried", c.Name)
		}
	}
}

func names(img *pb.RowImage) []string {
	var out []string
	for _, c := range img.GetColumns() {
		out = append(out, c.Name)
	}
	return out
}

func get(img *pb.RowImage, name string) *pb.ColumnValue {
	for _, c := range img.GetColumns() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

var errLookup = errors.New("applied_command: database is locked")

func ptr[T any](v T) *T { return &v }

// exampleRules loads testdata/rules.json, the rules file
// docs/shipsync/normalize.md shows.
func exampleRules(t testing.TB) *normalize.RuleSet {
	t.Helper()
	f, err := os.Open("testdata/rules.json")
	require.NoError(t, err)
	defer f.Close()
	rs, err := normalize.LoadRules(f)
	require.NoError(t, err)
	return rs
}
