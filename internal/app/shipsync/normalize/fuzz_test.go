package normalize_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
)

// reasons are every documented reason code.
var reasons = map[string]bool{
	normalize.ReasonTombstone: true, normalize.ReasonNoRule: true, normalize.ReasonDirection: true,
	normalize.ReasonFiltered: true, normalize.ReasonOutsideWindow: true, normalize.ReasonLoopSuppressed: true,
	normalize.ReasonTruncate: true, normalize.ReasonUnknownOrigin: true, normalize.ReasonMissingRevision: true,
	normalize.ReasonRevisionUnchanged: true, normalize.ReasonBusinessTimeInvalid: true, normalize.ReasonColumnMissing: true,
	normalize.ReasonKeyMismatch: true, normalize.ReasonFilterInvalid: true, normalize.ReasonTransformInvalid: true,
	normalize.ReasonUnrevisionedDelete: true, normalize.ReasonCaptureTimeMissing: true, normalize.ReasonUnsupportedOp: true,
	normalize.ReasonInvalidEvent: true,
}

// FuzzNormalize: whatever the decoder accepts, Normalize never panics and
// never fails (the lookup works and the trusted now is set); every emitted
// event passes wire.ValidateEvent; every other outcome has a documented
// reason and a bounded detail. Seeds: the tests' records and the cdc
// package's fixtures, plus testdata/fuzz/FuzzNormalize.
func FuzzNormalize(f *testing.F) {
	ins, upd := localRow(1017, rev1), localRow(1017, rev2).with("status", "DOCKED")
	for _, r := range []rec{
		{op: "c", after: ins},
		{op: "u", before: ins, after: upd, tx: map[string]any{"id": "gtid:1", "total_order": 1, "data_collection_order": 1}},
		{op: "d", before: upd},
		{op: "r", after: ins},
		{op: "t"},
		{op: "x", key: map[string]any{"id": 1017}},
		{op: "c", after: remoteRow(1017, rev1, cmdIns)},
		{op: "d", before: upd.with("_sync_event_id", cmdDel)},
		{op: "u", before: upd, after: upd.with("_sync_event_id", cmdDel)},
	} {
		m := r.message(f)
		f.Add(m.Key, m.Value)
	}
	key, err := os.ReadFile("../cdc/testdata/schema/key.json")
	require.NoError(f, err)
	for _, v := range []string{"insert.json", "update.json", "delete.json"} {
		b, err := os.ReadFile("../cdc/testdata/schema/" + v)
		require.NoError(f, err)
		f.Add(key, b)
	}
	d := decoder(f)
	var ns []*normalize.Normalizer
	for _, rs := range []*normalize.RuleSet{
		rules(f, ""),
		exampleRules(f),
		rules(f, `{"revisioned": false, "direction": "UPLINK", "business_time_column": "occurred"}`),
		rules(f, `{"business_time_column": "departed_at", "dataset_window": "1h", "row_filter": [{"column": "id", "op": "lt", "value": "5000"}]}`),
	} {
		ns = append(ns, newNormalizer(f, rs, appliedTable()))
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, key, value []byte) {
		ev, err := d.Decode(messageOf(key, value))
		if err != nil {
			return
		}
		for _, n := range ns {
			o, err := n.Normalize(ctx, src, ev, now)
			require.NoError(t, err)
			require.LessOrEqual(t, len(o.Detail), 200)
			require.True(t, utf8.ValidString(o.Detail))
			switch o.Disposition {
			case normalize.Emit:
				requireValid(t, o)
			case normalize.Skip, normalize.Block:
				require.True(t, reasons[o.Reason], "undocumented reason %q", o.Reason)
				require.Nil(t, o.Event)
			default:
				t.Fatalf("disposition %v", o.Disposition)
			}
		}
	})
}

func messageOf(key, value []byte) cdc.Message {
	return cdc.Message{Topic: topic, Key: key, Value: value}
}

// FuzzLoadRules: any rules file either loads or is refused, never panics;
// a loaded set writes back (Rule.MarshalJSON) to a file that loads to the
// same rules.
func FuzzLoadRules(f *testing.F) {
	example, err := os.ReadFile("testdata/rules.json")
	require.NoError(f, err)
	f.Add(example)
	f.Add([]byte(`{"rules": [` + baseRule + `]}`))
	f.Add([]byte(`{"rules": [{"id": "a", "version": 1, "direction": "UPLINK", "database": "d", "table": "t", "key_columns": ["k"],
		"revisioned": false, "row_filter": [{"column": "c", "op": "is_null"}], "dataset_window": "2h", "business_time_column": "b"}]}`))
	f.Fuzz(func(t *testing.T, file []byte) {
		rs, err := normalize.LoadRules(bytes.NewReader(file))
		if err != nil {
			return
		}
		out, err := json.Marshal(map[string]any{"rules": rs.Rules()})
		require.NoError(t, err)
		again, err := normalize.LoadRules(bytes.NewReader(out))
		require.NoError(t, err, "%s", out)
		out2, err := json.Marshal(map[string]any{"rules": again.Rules()})
		require.NoError(t, err)
		require.JSONEq(t, string(out), string(out2))
	})
}
