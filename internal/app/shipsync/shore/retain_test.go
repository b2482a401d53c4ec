package shore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	pb "github.com/relayhq/relay/internal/app/shipsync/shipsyncpb"
	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

// TestRetain: one pass removes what is past its keep time and keeps what
// is still needed whatever its age — events without a result, events of a
// record in an active conflict, requests being served — and a settled
// event keeps its row and header (what de-duplication and the shore's CDC
// consumer need) without its row images.
func TestRetain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	pool := b.d.Pool()
	b.addNode(t, "ship-1")
	old, recent := t0.Add(-40*24*time.Hour), t0.Add(-time.Hour)
	img := &pb.RowImage{Columns: []*pb.ColumnValue{{Name: "note", Value: &pb.ColumnValue_StringValue{StringValue: "secret cargo"}}}}
	insert := func(n int, at time.Time, pk string, receipt bool) string {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
		ev := &pb.ChangeEvent{EventId: id, Operation: pb.Operation_OPERATION_UPDATE, ResultRevision: "rev-" + pk, After: img,
			Before: img}
		raw, err := proto.Marshal(ev)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO sync_inbox_event (origin_node_id, event_id, sender_node_id, batch_id, rule_id,
			rule_version, pk_hash, pk_text, source_connector_id, source_partition, source_position, source_sequence,
			schema_version, content_hash, event, received_at) VALUES ('ship-1', $1, 'ship-1', 'b', 'voyage-log', 1, $2, $3,
			'c', 'p', $4, $4, '1.0', '\x00', $5, $6)`, id, []byte(pk), pk, n, raw, at)
		require.NoError(t, err)
		if receipt {
			_, err = pool.Exec(ctx, `INSERT INTO sync_event_receipt (origin_node_id, event_id, result, decided_at)
				VALUES ('ship-1', $1, 'APPLIED', $2)`, id, at)
			require.NoError(t, err)
		}
		return id
	}
	settled := insert(1, old, "k1", true)
	pending := insert(2, old, "k2", false)
	young := insert(3, recent, "k3", true)
	inConflict := insert(4, old, "k4", true)
	_, err := pool.Exec(ctx, `INSERT INTO sync_conflict_case (conflict_id, rule_id, rule_version, pk_hash, pk_text,
		active_conflict_key, state, created_at, updated_at) VALUES (gen_random_uuid(), 'voyage-log', 1, 'k4', 'k4', 'x',
		'PENDING_MANUAL', $1, $1)`, old)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE sync_inbox_event SET event = '\xffff' WHERE event_id = $1`, insert(5, old, "k5", true))
	require.NoError(t, err)

	for _, at := range []time.Time{old, recent} {
		_, err = pool.Exec(ctx, `INSERT INTO sync_node_sample (node_id, at, elapsed_seconds, active_seconds, effective_bytes,
			physical_bytes, incoming_raw_bytes, backlog_events, backlog_raw_bytes) VALUES ('ship-1', $1, 60, 60, 1, 1, 0, 0, 0)`, at)
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `INSERT INTO sync_upload_batch (node_id, batch_id, sequence, event_count, statuses, received_at)
			VALUES ('ship-1', $1, 1, 1, '\x00', $2)`, at.String(), at)
		require.NoError(t, err)
	}
	for i, st := range []int{200, 0} { // an old answered request, and one still being served
		_, err = pool.Exec(ctx, `INSERT INTO sync_mgmt_idempotency (actor, idem_key, method, path, request_hash, status, created_at)
			VALUES ('op', $1, 'POST', '/x', '\x00', $2, $3)`, fmt.Sprint(i), st, old)
		require.NoError(t, err)
	}

	got, err := b.reg.Retain(ctx, shore.Retention{Chunk: 2})
	require.NoError(t, err)
	require.Equal(t, shore.Retained{Samples: 1, Batches: 1, Bodies: 2, Idempotency: 1, Unreadable: 1}, got, got.String())

	body := func(id string) (*pb.ChangeEvent, bool) {
		var raw []byte
		var trimmed *time.Time
		require.NoError(t, pool.QueryRow(ctx, `SELECT event, body_trimmed_at FROM sync_inbox_event WHERE event_id = $1`, id).
			Scan(&raw, &trimmed))
		var ev pb.ChangeEvent
		require.NoError(t, proto.Unmarshal(raw, &ev))
		return &ev, trimmed != nil
	}
	ev, trimmed := body(settled)
	require.True(t, trimmed)
	require.Nil(t, ev.After, "row images dropped")
	require.Nil(t, ev.Before)
	require.Equal(t, settled, ev.EventId, "the header stays")
	require.Equal(t, pb.Operation_OPERATION_UPDATE, ev.Operation)
	require.Equal(t, "rev-k1", ev.ResultRevision)
	for _, id := range []string{pending, young, inConflict} {
		ev, trimmed := body(id)
		require.False(t, trimmed, id)
		require.NotNil(t, ev.After, id)
	}

	again, err := b.reg.Retain(ctx, shore.Retention{})
	require.NoError(t, err)
	require.Equal(t, shore.Retained{}, again, "a second pass finds nothing")
}
