package cdc_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/cdc"
)

// secret is put into row values; no error text may contain it.
const secret = "S3CRET-ROW-VALUE"

// TestDecodeErrors: every error kind, each naming its field, none echoing
// a row value.
func TestDecodeErrors(t *testing.T) {
	t.Parallel()
	typed := newDecoder(t, cdc.Config{Types: voyageTypes()})
	untyped := newDecoder(t, cdc.Config{})
	only3 := newDecoder(t, cdc.Config{Majors: []int{3}, Types: voyageTypes()})
	key := fixture(t, "schemaless/key_1017.json")
	snap := fixture(t, "schemaless/snapshot_last.json")
	schemaInsert := fixture(t, "schema/insert.json")
	// variant edits the schema-less snapshot; the secret is in every row.
	variant := func(f func(p map[string]any)) []byte {
		return edit(t, snap, func(p map[string]any) {
			p["after"].(map[string]any)["note"] = secret
			f(p)
		})
	}
	src := func(p map[string]any) map[string]any { return p["source"].(map[string]any) }
	after := func(p map[string]any) map[string]any { return p["after"].(map[string]any) }
	for _, tc := range []struct {
		name       string
		d          *cdc.Decoder
		key, value []byte
		kind       cdc.ErrorKind
		field      string
	}{
		{"not JSON", typed, key, []byte(`{"op":"c",` + secret), cdc.Malformed, "value"},
		{"trailing data", typed, key, append(append([]byte{}, snap...), `{}`...), cdc.Malformed, "value"},
		{"duplicate member", typed, key, []byte(`{"op":"c","op":"d"}`), cdc.Malformed, "value"},
		{"value not an object", typed, key, []byte(`["` + secret + `"]`), cdc.Malformed, "value"},
		{"too deep", typed, key, []byte(strings.Repeat("[", 40) + strings.Repeat("]", 40)), cdc.Malformed, "value"},
		{"no source", typed, key, variant(func(p map[string]any) { delete(p, "source") }), cdc.Malformed, "value.payload.source"},
		{"no version", typed, key, variant(func(p map[string]any) { delete(src(p), "version") }), cdc.Malformed, "value.payload.source.version"},
		{"version not a version", typed, key, variant(func(p map[string]any) { src(p)["version"] = "Final" }), cdc.Malformed, "value.payload.source.version"},
		{"no op", typed, key, variant(func(p map[string]any) { delete(p, "op") }), cdc.Malformed, "value.payload.op"},
		{"unknown op", typed, key, variant(func(p map[string]any) { p["op"] = "m" }), cdc.Malformed, "value.payload.op"},
		{"snapshot without after", typed, key, variant(func(p map[string]any) { p["after"] = nil }), cdc.Malformed, "value.payload.after"},
		{"snapshot with before", typed, key, variant(func(p map[string]any) { p["before"] = after(p) }), cdc.Malformed, "value.payload.before"},
		{"delete with after", typed, key, variant(func(p map[string]any) { p["op"], p["before"] = "d", after(p) }), cdc.Malformed, "value.payload.after"},
		{"truncate with a row", typed, nil, variant(func(p map[string]any) { p["op"] = "t" }), cdc.Malformed, "value.payload"},
		{"unknown snapshot marker", typed, key, variant(func(p map[string]any) { src(p)["snapshot"] = "maybe" }), cdc.Malformed, "value.payload.source.snapshot"},
		{"pos not a number", typed, key, variant(func(p map[string]any) { src(p)["pos"] = "17" }), cdc.Malformed, "value.payload.source.pos"},
		{"no table", typed, key, variant(func(p map[string]any) { delete(src(p), "table") }), cdc.Malformed, "value.payload.source.table"},
		{"transaction order 0", typed, key, variant(func(p map[string]any) {
			p["transaction"] = map[string]any{"id": "gtid:1", "total_order": 0, "data_collection_order": 1}
		}), cdc.Malformed, "value.payload.transaction.total_order"},
		{"row does not match schema", typed, key, edit(t, schemaInsert, func(m map[string]any) {
			a := m["payload"].(map[string]any)["after"].(map[string]any)
			a["note"] = secret
			delete(a, "photo")
		}), cdc.Malformed, "value.payload.after"},
		{"schema field without name", typed, key, []byte(`{"schema":{"type":"struct","fields":[{"type":"int32"}]},"payload":{}}`), cdc.Malformed, "value.schema.fields[0].field"},
		{"decimal without scale", typed, key, []byte(`{"schema":{"type":"struct","fields":[{"field":"v","type":"bytes","name":"org.apache.kafka.connect.data.Decimal"}]},"payload":{}}`), cdc.Malformed, "value.schema.fields[0].parameters"},

		{"unknown major", typed, key, variant(func(p map[string]any) { src(p)["version"] = "9.0.0.Final" }), cdc.UnsupportedVersion, "value.payload.source.version"},
		{"major 0", typed, key, variant(func(p map[string]any) { src(p)["version"] = "0.10.0.Final" }), cdc.UnsupportedVersion, "value.payload.source.version"},
		{"major not configured", only3, key, snap, cdc.UnsupportedVersion, "value.payload.source.version"},
		{"other connector", typed, key, variant(func(p map[string]any) { src(p)["connector"] = "postgresql" }), cdc.UnsupportedVersion, "value.payload.source.connector"},

		{"string in an int column", typed, key, variant(func(p map[string]any) { after(p)["built_year"] = secret }), cdc.IncompatibleType, "value.payload.after.built_year"},
		{"decimal bad base64", typed, key, variant(func(p map[string]any) { after(p)["fuel_used"] = secret }), cdc.IncompatibleType, "value.payload.after.fuel_used"},
		{"null in a required column", typed, key, variant(func(p map[string]any) { after(p)["vessel"] = nil }), cdc.IncompatibleType, "value.payload.after.vessel"},
		{"key of wrong type", typed, []byte(`{"id":"` + secret + `"}`), snap, cdc.IncompatibleType, "key.id"},

		{"no key", typed, nil, snap, cdc.MissingKey, "key"},
		{"null key", typed, []byte(`null`), snap, cdc.MissingKey, "key"},
		{"empty key", typed, []byte(`{}`), snap, cdc.MissingKey, "key"},
		{"null key column", typed, []byte(`{"id":null}`), snap, cdc.MissingKey, "key.id"},
		{"tombstone without key", typed, nil, nil, cdc.MissingKey, "key"},

		{"schema-less without types", untyped, key, snap, cdc.MissingType, "value.payload.after.id"},
		{"column not in type map", typed, key, variant(func(p map[string]any) { after(p)["draft_m"] = 7.5 }), cdc.MissingType, "value.payload.after.draft_m"},
		{"key column not in type map", typed, []byte(`{"voyage_id":1}`), snap, cdc.MissingType, "key.voyage_id"},
	} {
		_, err := tc.d.Decode(cdc.Message{Topic: topic, Key: tc.key, Value: tc.value})
		require.Error(t, err, tc.name)
		de := requireKind(t, err, tc.kind, tc.field)
		require.NotContains(t, err.Error(), secret, tc.name)
		require.True(t, strings.HasPrefix(err.Error(), "cdc: "+tc.kind.String()+": "+de.Field+": "), tc.name)
	}
}

// TestErrorFieldIsBounded: a column name taken from the input is cut and
// made printable in the error's field path.
func TestErrorFieldIsBounded(t *testing.T) {
	t.Parallel()
	d := newDecoder(t, cdc.Config{Types: voyageTypes()})
	long := strings.Repeat("n", 500)
	_, err := d.Decode(cdc.Message{Topic: topic, Key: []byte(`{"` + long + `":1}`), Value: fixture(t, "schemaless/snapshot_last.json")})
	de := requireKind(t, err, cdc.MissingType, "")
	require.Equal(t, "key."+strings.Repeat("n", 64), de.Field)
	_, err = d.Decode(cdc.Message{Topic: topic, Key: []byte(`{"a\u0001b":1}`), Value: fixture(t, "schemaless/snapshot_last.json")})
	de = requireKind(t, err, cdc.MissingType, "")
	require.Equal(t, "key.a?b", de.Field)
}
