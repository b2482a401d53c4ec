package normalize_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
	"github.com/relayhq/relay/internal/app/shipsync/normalize"
	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
)

func TestRowFilter(t *testing.T) {
	t.Parallel()
	r0 := localRow(1017, rev1) // status ACTIVE, fuel 4521.0750, note NULL, logged_on 2026-12-01
	for _, tc := range []struct {
		name, filter string
		row          row
		want         normalize.Disposition
		reason       string
	}{
		{"eq holds", `[{"column": "status", "op": "eq", "value": "ACTIVE"}]`, r0, normalize.Emit, ""},
		{"eq fails", `[{"column": "status", "op": "eq", "value": "DOCKED"}]`, r0, normalize.Skip, normalize.ReasonFiltered},
		{"ne", `[{"column": "status", "op": "ne", "value": "DOCKED"}]`, r0, normalize.Emit, ""},
		{"in", `[{"column": "status", "op": "in", "values": ["DOCKED", "ACTIVE"]}]`, r0, normalize.Emit, ""},
		{"in fails", `[{"column": "status", "op": "in", "values": ["DOCKED", "LAID_UP"]}]`, r0, normalize.Skip, normalize.ReasonFiltered},
		{"integer compared as a number", `[{"column": "id", "op": "gt", "value": "999"}]`, r0, normalize.Emit, ""},
		{"integer le", `[{"column": "id", "op": "le", "value": "1017"}]`, r0, normalize.Emit, ""},
		{"integer lt fails", `[{"column": "id", "op": "lt", "value": "1017"}]`, r0, normalize.Skip, normalize.ReasonFiltered},
		{"decimal exactly", `[{"column": "fuel_used", "op": "ge", "value": "4521.075"}]`, r0, normalize.Emit, ""},
		{"decimal gt fails", `[{"column": "fuel_used", "op": "gt", "value": "4521.0750"}]`, r0, normalize.Skip, normalize.ReasonFiltered},
		{"date", `[{"column": "logged_on", "op": "lt", "value": "2026-12-02"}]`, r0, normalize.Emit, ""},
		{"timestamp", `[{"column": "departed_at", "op": "ge", "value": "2026-11-30T12:00:00Z"}]`, r0, normalize.Emit, ""},
		{"is_null", `[{"column": "note", "op": "is_null"}]`, r0, normalize.Emit, ""},
		{"not_null fails", `[{"column": "note", "op": "not_null"}]`, r0, normalize.Skip, normalize.ReasonFiltered},
		{"comparison with NULL is false", `[{"column": "note", "op": "ne", "value": "x"}]`, r0, normalize.Skip, normalize.ReasonFiltered},
		{"conditions are ANDed", `[{"column": "status", "op": "eq", "value": "ACTIVE"}, {"column": "id", "op": "gt", "value": "2000"}]`, r0, normalize.Skip, normalize.ReasonFiltered},
		{"column missing", `[{"column": "draught", "op": "gt", "value": "3"}]`, r0, normalize.Block, normalize.ReasonColumnMissing},
		{"value not of the column's type", `[{"column": "id", "op": "gt", "value": "many"}]`, r0, normalize.Block, normalize.ReasonFilterInvalid},
		{"bad decimal text", `[{"column": "fuel_used", "op": "gt", "value": "1e3"}]`, r0, normalize.Block, normalize.ReasonFilterInvalid},
		{"bad date text", `[{"column": "logged_on", "op": "gt", "value": "2026-13-01"}]`, r0, normalize.Block, normalize.ReasonFilterInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newNormalizer(t, rules(t, `{"row_filter": `+tc.filter+`}`), appliedTable())
			o := run(t, n, rec{op: "c", after: tc.row})
			require.Equal(t, tc.want, o.Disposition, "%s: %s", o.Reason, o.Detail)
			require.Equal(t, tc.reason, o.Reason)
			require.NotContains(t, o.Detail, "ACTIVE")
		})
	}
	// A DELETE is filtered on its before image.
	n := newNormalizer(t, rules(t, `{"row_filter": [{"column": "status", "op": "eq", "value": "DOCKED"}]}`), appliedTable())
	o := run(t, n, rec{op: "d", before: r0})
	require.Equal(t, normalize.ReasonFiltered, o.Reason)
	o = run(t, n, rec{op: "d", before: r0.with("status", "DOCKED")})
	require.Equal(t, normalize.Emit, o.Disposition)
}

// TestColumnsMappingsTransforms runs the documented example rule.
func TestColumnsMappingsTransforms(t *testing.T) {
	t.Parallel()
	rs := exampleRules(t)
	n := newNormalizer(t, rs, appliedTable())

	before := localRow(1017, rev1).with("note", "fog off Utsira, visibility under two cables, speed reduced to 6 kn")
	after := localRow(1017, rev2).with("status", "DOCKED", "fuel_used", "/w==") // -0.0001
	o := run(t, n, rec{op: "u", before: before, after: after})
	ev := o.Event
	require.Equal(t, normalize.PriorityHigh, o.Priority)
	require.ElementsMatch(t, []string{"id", "vessel_name", "fuel_t", "departed_at", "logged_on", "status", "note", "occurred"}, names(ev.After))
	require.ElementsMatch(t, names(ev.After), names(ev.Before))
	require.Nil(t, get(ev.After, "secret"), "excluded")
	require.Nil(t, get(ev.After, "vessel"), "mapped away")
	require.Equal(t, "MV NORTHERN TERN", get(ev.After, "vessel_name").GetStringValue(), "trim@1 then upper@1")
	require.Equal(t, "4521.08", get(ev.Before, "fuel_t").GetDecimalValue(), "round@1{2}, half away from zero")
	require.Equal(t, "0.00", get(ev.After, "fuel_t").GetDecimalValue(), "−0.0001 rounds to 0.00, not −0.00")
	require.Equal(t, "fog off Utsira, visibility under two cab", get(ev.Before, "note").GetStringValue(), "truncate@1{40}")
	require.True(t, get(ev.After, "note").GetNull(), "NULL passes through transforms")
	require.NotNil(t, ev.BusinessOccurredAt)
	require.Equal(t, now.Add(-48*time.Hour).Truncate(time.Millisecond), ev.BusinessOccurredAt.AsTime())

	// The filter reads source names and source values: −100.0001 fails
	// "fuel_used ge -100" although it rounds to −100.00.
	o = run(t, n, rec{op: "u", before: before, after: after.with("fuel_used", "8L2/")})
	require.Equal(t, normalize.ReasonFiltered, o.Reason)

	// A transform that meets a type it does not handle blocks.
	bad := newNormalizer(t, rules(t, `{"transforms": [{"column": "logged_on", "transform": "upper@1"}]}`), appliedTable())
	o = run(t, bad, rec{op: "c", after: localRow(1, rev1)})
	require.Equal(t, normalize.Block, o.Disposition)
	require.Equal(t, normalize.ReasonTransformInvalid, o.Reason)

	// Included columns: only those (and the key), and each must be there.
	inc := newNormalizer(t, rules(t, `{"included_columns": ["id", "status"], "field_mappings": {"id": "voyage_id"}}`), appliedTable())
	o = run(t, inc, rec{op: "c", after: localRow(1, rev1)})
	require.ElementsMatch(t, []string{"voyage_id", "status"}, names(o.Event.After))
	require.Equal(t, "voyage_id", o.Event.PrimaryKey[0].Name, "key columns are renamed by their mapping")
	o = run(t, inc, rec{op: "c", after: localRow(1, rev1).with("status", drop)})
	require.Equal(t, normalize.Block, o.Disposition)
	require.Equal(t, normalize.ReasonColumnMissing, o.Reason)
	require.Contains(t, o.Detail, `"status"`)
}

func TestTransforms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		transform string
		args      string
		in, want  any // row value in / expected event value
	}{
		{"trim@1", ``, " \t a b \n", "a b"},
		{"upper@1", ``, "Ålesund", "ÅLESUND"},
		{"lower@1", ``, "ÅLESUND", "ålesund"},
		{"truncate@1", `[3]`, "Ålesund", "Åle"},
		{"truncate@1", `[0]`, "x", ""},
		{"truncate@1", `[10]`, "short", "short"},
	} {
		spec := `{"column": "note", "transform": "` + tc.transform + `"}`
		if tc.args != "" {
			spec = `{"column": "note", "transform": "` + tc.transform + `", "args": ` + tc.args + `}`
		}
		n := newNormalizer(t, rules(t, `{"transforms": [`+spec+`]}`), appliedTable())
		o := run(t, n, rec{op: "c", after: localRow(1, rev1).with("note", tc.in)})
		require.Equal(t, tc.want, get(o.Event.After, "note").GetStringValue(), "%s %s", tc.transform, tc.args)
	}
	for _, tc := range []struct {
		scale string
		in    string // base64 of the unscaled big-endian value (scale 4)
		want  string
		value string // the value in, as text
	}{
		{"2", "ArHcfg==", "4521.08", "4521.0750"},
		{"3", "ArHcfg==", "4521.075", ""},
		{"4", "ArHcfg==", "4521.0750", ""},
		{"0", "ArHcfg==", "4521", ""},
		{"0", "AYaf", "10", "9.9999"}, // 99999 → 9.9999 → 10
		{"2", "/nkf", "-10.01", "-10.0065"},
	} {
		n := newNormalizer(t, rules(t, `{"transforms": [{"column": "fuel_used", "transform": "round@1", "args": [`+tc.scale+`]}]}`), appliedTable())
		o := run(t, n, rec{op: "c", after: localRow(1, rev1).with("fuel_used", tc.in)})
		require.Equal(t, tc.want, get(o.Event.After, "fuel_used").GetDecimalValue(), "round@1{%s}", tc.scale)
	}
}

// TestDatasetWindow: eligible when business time ≥ trustedNow − window
// (left-closed); NULL, unreadable or future business times block under a
// window and are never replaced by the capture time.
func TestDatasetWindow(t *testing.T) {
	t.Parallel()
	const window = `{"business_time_column": "departed_at", "dataset_window": "72h"}`
	start := now.Add(-72 * time.Hour)
	ms := func(t time.Time) any { return t.UnixMilli() }
	for _, tc := range []struct {
		name   string
		rule   string
		value  any
		want   normalize.Disposition
		reason string
	}{
		{"at the window's start: in (left-closed)", window, ms(start), normalize.Emit, ""},
		{"one millisecond before: out", window, ms(start.Add(-time.Millisecond)), normalize.Skip, normalize.ReasonOutsideWindow},
		{"inside", window, ms(now.Add(-time.Hour)), normalize.Emit, ""},
		{"now", window, ms(now), normalize.Emit, ""},
		{"within the future skew", window, ms(now.Add(5 * time.Minute)), normalize.Emit, ""},
		{"past the future skew", window, ms(now.Add(5*time.Minute + time.Millisecond)), normalize.Block, normalize.ReasonBusinessTimeInvalid},
		{"NULL under a window", window, nil, normalize.Block, normalize.ReasonBusinessTimeInvalid},
		{"NULL without a window", `{"business_time_column": "departed_at"}`, nil, normalize.Emit, ""},
		{"old without a window", `{"business_time_column": "departed_at"}`, ms(start.Add(-1000 * time.Hour)), normalize.Emit, ""},
		{"custom skew", `{"business_time_column": "departed_at", "dataset_window": "72h", "future_skew": "1h"}`, ms(now.Add(59 * time.Minute)), normalize.Emit, ""},
		{"column missing", `{"business_time_column": "arrived_at"}`, ms(now), normalize.Block, normalize.ReasonColumnMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newNormalizer(t, rules(t, tc.rule), appliedTable())
			o := run(t, n, rec{op: "c", after: localRow(1, rev1).with("departed_at", tc.value)})
			require.Equal(t, tc.want, o.Disposition, "%s: %s", o.Reason, o.Detail)
			require.Equal(t, tc.reason, o.Reason)
			if o.Disposition == normalize.Emit {
				if tc.value == nil {
					require.Nil(t, o.Event.BusinessOccurredAt, "never replaced by captured_at")
				} else {
					require.Equal(t, tc.value, o.Event.BusinessOccurredAt.AsTime().UnixMilli())
				}
			}
		})
	}

	// Text business times (RFC 3339 with an offset) and DATE columns (midnight
	// in the rule's zone).
	n := newNormalizer(t, rules(t, `{"business_time_column": "occurred", "dataset_window": "1h"}`), appliedTable())
	o := run(t, n, rec{op: "c", after: localRow(1, rev1).with("occurred", "2026-12-02T12:30:00+01:00")})
	require.Equal(t, normalize.Emit, o.Disposition)
	require.Equal(t, now.Add(-30*time.Minute), o.Event.BusinessOccurredAt.AsTime())
	for _, bad := range []string{"2026-12-02 11:30:00", "yesterday", ""} {
		o = run(t, n, rec{op: "c", after: localRow(1, rev1).with("occurred", bad)})
		require.Equal(t, normalize.ReasonBusinessTimeInvalid, o.Reason, bad)
	}
	// Unreadable is invalid with or without a window.
	o = run(t, newNormalizer(t, rules(t, `{"business_time_column": "occurred"}`), appliedTable()), rec{op: "c", after: localRow(1, rev1).with("occurred", "soon")})
	require.Equal(t, normalize.ReasonBusinessTimeInvalid, o.Reason)

	days := newNormalizer(t, rules(t, `{"business_time_column": "logged_on", "dataset_window": "1d", "window_zone": "Asia/Tokyo"}`), appliedTable())
	// now is 21:00 in Tokyo on 2026-12-02: the window starts 2026-12-01 21:00
	// JST; 2026-12-02 00:00 JST is in, 2026-12-01 00:00 JST out.
	o = run(t, days, rec{op: "c", after: localRow(1, rev1).with("logged_on", 20789)}) // 2026-12-02
	require.Equal(t, normalize.Emit, o.Disposition)
	require.Equal(t, time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC), o.Event.BusinessOccurredAt.AsTime())
	o = run(t, days, rec{op: "c", after: localRow(1, rev1).with("logged_on", 20788)}) // 2026-12-01
	require.Equal(t, normalize.ReasonOutsideWindow, o.Reason)

	// A DELETE is judged on its before image.
	o = run(t, newNormalizer(t, rules(t, window), appliedTable()), rec{op: "d", before: localRow(1, rev1).with("departed_at", ms(start.Add(-time.Hour)))})
	require.Equal(t, normalize.ReasonOutsideWindow, o.Reason)
}

// TestUnrevisionedRule: a table without the _sync_* columns, synced one way
// as an overwrite, through the cdc package's own schema fixtures.
func TestUnrevisionedRule(t *testing.T) {
	t.Parallel()
	rs := rules(t, `{"revisioned": false, "direction": "UPLINK"}`)
	n := newNormalizer(t, rs, nil)
	d, err := cdc.New(cdc.Config{})
	require.NoError(t, err)
	decode := func(value string) *cdc.Event {
		key, err := os.ReadFile("../cdc/testdata/schema/key.json")
		require.NoError(t, err)
		v, err := os.ReadFile("../cdc/testdata/schema/" + value)
		require.NoError(t, err)
		ev, err := d.Decode(cdc.Message{Topic: topic, Key: key, Value: v})
		require.NoError(t, err)
		return ev
	}
	ctx := context.Background()

	o, err := n.Normalize(ctx, src, decode("insert.json"), now)
	require.NoError(t, err)
	requireValid(t, o)
	ins := o.Event
	require.Equal(t, pb.Operation_OPERATION_INSERT, ins.Operation)
	require.Empty(t, ins.BaseRevision)
	require.Equal(t, normalize.OverwriteRevision(mustUUID(t, ins.EventId)), ins.ResultRevision)
	require.Len(t, ins.After.Columns, 16)

	o, err = n.Normalize(ctx, normalize.Source{Topic: topic, Partition: 2, Offset: 1018}, decode("update.json"), now)
	require.NoError(t, err)
	requireValid(t, o)
	upd := o.Event
	require.Equal(t, pb.Operation_OPERATION_SNAPSHOT, upd.Operation, "an overwrite: the row as it now is")
	require.Nil(t, upd.Before)
	require.Empty(t, upd.BaseRevision)
	require.Equal(t, "7c1de3f2-5b1a-11f0-9a43-0242ac130002:5813", upd.TransactionId)
	require.Equal(t, uint64(2), upd.GetTransactionOrder())
	require.NotEqual(t, ins.ResultRevision, upd.ResultRevision)

	o, err = n.Normalize(ctx, normalize.Source{Topic: topic, Partition: 2, Offset: 1019}, decode("delete.json"), now)
	require.NoError(t, err)
	require.Equal(t, normalize.Block, o.Disposition)
	require.Equal(t, normalize.ReasonUnrevisionedDelete, o.Reason)
}
