package shore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/shore"
)

// TestAuditAppendOnly: an audit entry records the trace id of the request
// that made it, and the database refuses to change or remove an entry.
func TestAuditAppendOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := shore.WithTrace(t.Context(), "trace-123")
	_, err := b.reg.Add(ctx, b.node(t, "ship-1", ""), op)
	require.NoError(t, err)
	pool := b.d.Pool()
	var trace, actor string
	require.NoError(t, pool.QueryRow(ctx, "SELECT trace_id, actor FROM sync_audit_event WHERE action = 'node.add'").
		Scan(&trace, &actor))
	require.Equal(t, "trace-123", trace)
	require.Equal(t, op.Actor, actor)

	_, err = pool.Exec(ctx, "UPDATE sync_audit_event SET actor = 'someone else'")
	require.ErrorContains(t, err, "append-only")
	_, err = pool.Exec(ctx, "DELETE FROM sync_audit_event")
	require.ErrorContains(t, err, "append-only")
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM sync_audit_event WHERE actor = $1", op.Actor).Scan(&n))
	require.Positive(t, n, "the entries are still there")
}
