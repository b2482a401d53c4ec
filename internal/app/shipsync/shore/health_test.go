package shore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

// TestShoreHealth: each subsystem's state follows what it is behind on,
// the overall state is the worst, receiving while the applier falls behind
// is DEGRADED, and a database that does not answer BLOCKS.
func TestShoreHealth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	pool := b.d.Pool()
	b.addNode(t, "ship-1")
	var targetDown bool
	h := shore.NewHealth(shore.HealthConfig{Pool: pool, Clock: b.clock, Driver: b.d, Arbiter: true,
		Target: func(context.Context) error {
			if targetDown {
				return errors.New("down")
			}
			return nil
		}})
	states := func() map[string]shore.HealthState {
		b.clock.Advance(time.Minute) // past the report cache
		r := h.Report(ctx)
		out := map[string]shore.HealthState{"overall": r.Overall}
		for _, s := range r.Subsystems {
			out[s.Name] = s.State
		}
		return out
	}
	require.Equal(t, map[string]shore.HealthState{"overall": shore.Healthy, "receive": shore.Healthy,
		"processing": shore.Healthy, "arbiter": shore.Healthy, "downlink": shore.Healthy, "target": shore.Healthy}, states())

	// An event released to the applier long ago and still waiting.
	_, err := pool.Exec(ctx, `INSERT INTO relay_message (queue, id, key, payload, enqueued_at, updated_at)
		VALUES ($1, 1, 'k', '\x31', $2, $2)`, shore.ApplyQueue, b.clock.Now().Add(-time.Minute))
	require.NoError(t, err)
	got := states()
	require.Equal(t, shore.Healthy, got["processing"], "two minutes is within the goal")
	b.clock.Advance(5 * time.Minute)
	got = states()
	require.Equal(t, shore.Degraded, got["processing"])
	require.Equal(t, shore.Healthy, got["receive"], "receiving still works")
	require.Equal(t, shore.Degraded, got["overall"])
	_, err = pool.Exec(ctx, `UPDATE relay_message SET state = 'DEAD'`)
	require.NoError(t, err)
	require.Equal(t, shore.Blocked, states()["processing"], "a dead event needs an operator")
	_, err = pool.Exec(ctx, `DELETE FROM relay_message`)
	require.NoError(t, err)

	// A case no policy decided for a long time; a command an online node
	// has not answered for hours.
	now := b.clock.Now()
	_, err = pool.Exec(ctx, `INSERT INTO sync_conflict_case (conflict_id, rule_id, rule_version, pk_hash, pk_text,
		active_conflict_key, state, created_at, updated_at) VALUES (gen_random_uuid(), 'voyage-log', 1, 'k', 'k', 'x',
		'DETECTED', $1, $1)`, now.Add(-time.Hour))
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE sync_node SET last_heartbeat_at = $1`, now)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO sync_downlink_command (target_node_id, sequence, command_id, kind, body, created_at)
		VALUES ('ship-1', 1, gen_random_uuid(), 'change', '\x00', $1)`, now.Add(-2*time.Hour))
	require.NoError(t, err)
	got = states()
	require.Equal(t, shore.Degraded, got["arbiter"])
	require.Equal(t, shore.Degraded, got["downlink"])
	b.clock.Advance(time.Hour) // the node falls silent: its commands are not the shore's fault
	require.Equal(t, shore.Healthy, states()["downlink"])

	targetDown = true
	got = states()
	require.Equal(t, shore.Blocked, got["target"])
	require.Equal(t, shore.Blocked, got["overall"])

	// The report is served again within Every; the gauges carry it.
	r1 := h.Report(ctx)
	targetDown = false
	require.Equal(t, r1, h.Report(ctx))
	reg := prometheus.NewRegistry()
	reg.MustRegister(h)
	g := gather(t, reg)
	require.Equal(t, float64(shore.Blocked), g["relay_shipsync_shore_health{subsystem=target}"])
	require.Equal(t, float64(shore.Blocked), g["relay_shipsync_shore_health{subsystem=overall}"])
}
