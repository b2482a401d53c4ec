package normalize_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/normalize"
)

// TestLoadRulesExample loads the documented example file.
func TestLoadRulesExample(t *testing.T) {
	t.Parallel()
	rs := exampleRules(t)
	require.Len(t, rs.Rules(), 2)

	r := rs.Lookup("ops", "voyage_log")
	require.NotNil(t, r)
	require.Equal(t, "voyage-log", r.ID)
	require.True(t, r.Revisioned, "revisioned defaults to true")
	require.Equal(t, normalize.PriorityHigh, r.Priority)
	require.True(t, r.Uplink())
	require.True(t, r.HasWindow())
	// 30 calendar days in Oslo across the end of daylight saving time
	// (2026-10-25) is 30 days and one hour.
	at := time.Date(2026, 11, 10, 12, 0, 0, 0, time.UTC)
	require.Equal(t, at.Add(-30*24*time.Hour-time.Hour), r.WindowStart(at).UTC())

	tel := rs.Lookup("ops", "engine_sample")
	require.NotNil(t, tel)
	require.False(t, tel.Revisioned)
	require.Equal(t, normalize.PriorityBulk, tel.Priority)
	require.False(t, tel.HasWindow())
	require.Nil(t, rs.Lookup("ops", "nothing"))
	require.Nil(t, (*normalize.RuleSet)(nil).Lookup("ops", "voyage_log"))

	// A rule writes back in the file's form.
	b, err := json.Marshal(r)
	require.NoError(t, err)
	again, err := normalize.LoadRules(strings.NewReader(`{"rules":[` + string(b) + `]}`))
	require.NoError(t, err)
	require.Equal(t, r.ID, again.Rules()[0].ID)
	require.True(t, again.Rules()[0].Revisioned)
}

// TestLoadRulesRefusals: every refusal names the rule and the field.
func TestLoadRulesRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, extra, field string
	}{
		{"no id", `{"id": ""}`, "id"},
		{"version 0", `{"version": 0}`, "version"},
		{"bad direction", `{"direction": "SIDEWAYS"}`, "direction"},
		{"no database", `{"database": ""}`, "database"},
		{"no table", `{"table": ""}`, "table"},
		{"no key", `{"key_columns": []}`, "key_columns"},
		{"key twice", `{"key_columns": ["id", "id"]}`, "key_columns[1]"},
		{"platform key", `{"key_columns": ["_SYNC_revision"]}`, "key_columns[0]"},
		{"unrevisioned both ways", `{"revisioned": false}`, "revisioned"},
		{"included and excluded", `{"included_columns": ["id"], "excluded_columns": ["note"]}`, "excluded_columns"},
		{"key excluded", `{"excluded_columns": ["note", "id"]}`, "excluded_columns (key_columns[0])"},
		{"key not included", `{"included_columns": ["note"]}`, "included_columns (key_columns[0])"},
		{"platform column included", `{"included_columns": ["id", "_sync_origin"]}`, "included_columns[1]"},
		{"mapping to a bad name", `{"field_mappings": {"note": "note text"}}`, `field_mappings["note"]`},
		{"mapping to a platform column", `{"field_mappings": {"note": "_sync_event_id"}}`, `field_mappings["note"]`},
		{"two mappings to one name", `{"field_mappings": {"note": "remark", "status": "remark"}}`, `field_mappings["status"]`},
		{"mapping onto a key column", `{"field_mappings": {"note": "id"}}`, `field_mappings["note"]`},
		{"mapping an excluded column", `{"excluded_columns": ["note"], "field_mappings": {"note": "remark"}}`, `field_mappings["note"]`},
		{"unknown transform", `{"transforms": [{"column": "note", "transform": "rot13@1"}]}`, "transforms[0].transform"},
		{"unknown transform version", `{"transforms": [{"column": "note", "transform": "trim@2"}]}`, "transforms[0].transform"},
		{"transform without version", `{"transforms": [{"column": "note", "transform": "trim"}]}`, "transforms[0].transform"},
		{"transform of a key", `{"transforms": [{"column": "id", "transform": "trim@1"}]}`, "transforms[0].column"},
		{"transform missing its argument", `{"transforms": [{"column": "note", "transform": "truncate@1"}]}`, "transforms[0].args"},
		{"transform with an extra argument", `{"transforms": [{"column": "note", "transform": "trim@1", "args": [1]}]}`, "transforms[0].args"},
		{"round scale out of range", `{"transforms": [{"column": "fuel_used", "transform": "round@1", "args": [99]}]}`, "transforms[0].args"},
		{"transform of an excluded column", `{"excluded_columns": ["note"], "transforms": [{"column": "note", "transform": "trim@1"}]}`, "transforms[0].column"},
		{"unknown filter op", `{"row_filter": [{"column": "status", "op": "like", "value": "A%"}]}`, "row_filter[0].op"},
		{"filter without value", `{"row_filter": [{"column": "status", "op": "eq"}]}`, "row_filter[0].value"},
		{"in without values", `{"row_filter": [{"column": "status", "op": "in", "value": "A"}]}`, "row_filter[0].values"},
		{"is_null with a value", `{"row_filter": [{"column": "status", "op": "is_null", "value": "A"}]}`, "row_filter[0].value"},
		{"filter on a platform column", `{"row_filter": [{"column": "_sync_origin", "op": "eq", "value": "x"}]}`, "row_filter[0].column"},
		{"window without business time", `{"dataset_window": "30d"}`, "dataset_window"},
		{"window of zero", `{"business_time_column": "departed_at", "dataset_window": "0s"}`, "dataset_window"},
		{"window of days badly written", `{"business_time_column": "departed_at", "dataset_window": "1.5d"}`, "dataset_window"},
		{"negative window", `{"business_time_column": "departed_at", "dataset_window": "-3h"}`, "dataset_window"},
		{"unknown zone", `{"window_zone": "Mars/Olympus"}`, "window_zone"},
		{"local zone", `{"window_zone": "Local"}`, "window_zone"},
		{"bad skew", `{"future_skew": "soon"}`, "future_skew"},
		{"platform business time", `{"business_time_column": "_sync_updated_at"}`, "business_time_column"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var r map[string]any
			require.NoError(t, json.Unmarshal([]byte(baseRule), &r))
			var e map[string]any
			require.NoError(t, json.Unmarshal([]byte(tc.extra), &e))
			for k, v := range e {
				r[k] = v
			}
			b, err := json.Marshal(map[string]any{"rules": []any{map[string]any{"id": "first", "version": 1, "direction": "UPLINK",
				"database": "ops", "table": "other", "key_columns": []string{"id"}}, r}})
			require.NoError(t, err)
			_, err = normalize.LoadRules(strings.NewReader(string(b)))
			var re *normalize.RuleError
			require.True(t, errors.As(err, &re), "%v", err)
			require.Equal(t, tc.field, re.Field, "%v", err)
			require.Equal(t, 1, re.Index)
			require.Contains(t, err.Error(), `(rules[1])`)
			require.NotContains(t, err.Error(), "A%")
		})
	}
}

func TestLoadRulesFileRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, file, want string }{
		{"unknown top-level field", `{"rules": [], "rulez": []}`, "unknown field"},
		{"unknown rule field", `{"rules": [{"id": "a", "version": 1, "direction": "UPLINK", "database": "d", "table": "t", "key_columns": ["id"], "colour": "red"}]}`, "unknown field"},
		{"bad priority", `{"rules": [{"id": "a", "version": 1, "direction": "UPLINK", "database": "d", "table": "t", "key_columns": ["id"], "priority": "URGENT"}]}`, "CRITICAL"},
		{"trailing data", `{"rules": []} {}`, "trailing"},
		{"not JSON", `rules:`, "rules file"},
		{"duplicate id", `{"rules": [` + baseRule + `,` + strings.Replace(baseRule, "voyage_log", "other", 1) + `]}`, "used by another rule"},
		{"duplicate table", `{"rules": [` + baseRule + `,` + strings.Replace(baseRule, "voyage-log", "other", 1) + `]}`, "same database.table"},
	} {
		_, err := normalize.LoadRules(strings.NewReader(tc.file))
		require.ErrorContains(t, err, tc.want, tc.name)
	}
	rs, err := normalize.LoadRules(strings.NewReader(`{"rules": []}`))
	require.NoError(t, err)
	require.Empty(t, rs.Rules())
}
