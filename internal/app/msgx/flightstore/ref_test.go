package flightstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/msgx/flightstore"
)

// REF_MASTER: insert, update, NULL vs empty values, duplicate keys (last
// wins), types independent, absent keys kept.
func TestRefs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, flightstore.UpsertRefs(b.ctx, b.pool, "AIRLINE", []flightstore.RefRow{
		{RKey: "MU", RVal: "China Eastern", HasVal: true},
		{RKey: "CA", HasVal: false, RVal: "ignored"},
		{RKey: "FM", RVal: "", HasVal: true},
	}, 1, base))
	require.NoError(t, flightstore.UpsertRefs(b.ctx, b.pool, "AIRPORT", []flightstore.RefRow{{RKey: "MU", RVal: "x", HasVal: true}}, 1, base))

	got, err := flightstore.LoadRefs(b.ctx, b.pool, "AIRLINE")
	require.NoError(t, err)
	require.Equal(t, map[string]flightstore.RefRow{
		"MU": {RKey: "MU", RVal: "China Eastern", HasVal: true},
		"CA": {RKey: "CA"},
		"FM": {RKey: "FM", HasVal: true},
	}, got)

	later := base.Add(time.Hour)
	require.NoError(t, flightstore.UpsertRefs(b.ctx, b.pool, "AIRLINE", []flightstore.RefRow{
		{RKey: "CA", RVal: "Air China", HasVal: true},
		{RKey: "MU", RVal: "first", HasVal: true},
		{RKey: "MU"},
	}, 2, later))
	got, err = flightstore.LoadRefs(b.ctx, b.pool, "AIRLINE")
	require.NoError(t, err)
	require.Equal(t, map[string]flightstore.RefRow{
		"MU": {RKey: "MU"},
		"CA": {RKey: "CA", RVal: "Air China", HasVal: true},
		"FM": {RKey: "FM", HasVal: true},
	}, got)
	require.Equal(t, 2, b.count(t, "SELECT count(*) FROM ref_master WHERE rtype = 'AIRLINE' AND last_msg_id = 2 AND updated_at = $1", later))

	none, err := flightstore.LoadRefs(b.ctx, b.pool, "NOPE")
	require.NoError(t, err)
	require.NotNil(t, none)
	require.Empty(t, none)
	require.NoError(t, flightstore.UpsertRefs(b.ctx, b.pool, "AIRLINE", nil, 3, later))
	require.Error(t, flightstore.UpsertRefs(b.ctx, b.pool, "", []flightstore.RefRow{{RKey: "x"}}, 3, later))
	require.Error(t, flightstore.UpsertRefs(b.ctx, b.pool, "AIRLINE", []flightstore.RefRow{{RKey: ""}}, 3, later))
}
