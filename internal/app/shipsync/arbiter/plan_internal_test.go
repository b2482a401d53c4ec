package arbiter

import (
	"crypto/sha256"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relayhq/relay/internal/app/shipsync/shore"
	"github.com/relayhq/relay/internal/dsn"
	"github.com/relayhq/relay/internal/testdb"
	"github.com/relayhq/relay/relayclock"
	"github.com/relayhq/relay/relaymigrate"
)

// TestNodeVersionProcessedDoesNotScan: asking whether the shore received a
// node's reported version reads about one record's head, cases and
// evidence with 20,000 other records' in the tables, on a generic plan
// made while the tables held three records and on one made after ANALYZE.
// Cases are kept for good, so a plan that scanned them would grow with the
// shore's whole history, once per decision on a node's report.
func TestNodeVersionProcessedDoesNotScan(t *testing.T) {
	ctx := t.Context()
	url := testdb.PGSchema(t)
	pg := testdb.PGDriverAt(t, url)
	_, err := relaymigrate.Up(ctx, pg, relayclock.NewFake(time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)), shore.MigrationLines(pg)...)
	require.NoError(t, err)
	noFK, err := dsn.WithParam(url, "session_replication_role", "replica")
	require.NoError(t, err)
	raw := testdb.PGDriverAt(t, noFK).Pool()
	// records from..to: a head each (current and two recent revisions),
	// two closed cases each with one evidence row the shore found.
	grow := func(from, to int) {
		_, err := raw.Exec(ctx, `INSERT INTO sync_record_head (rule_id, pk_hash, current_revision, origin_node_id, tombstone,
				updated_at, recent_revisions)
			SELECT 'crew', sha256(g::text::bytea), 'cur-' || g, 'shore', false, now(), ARRAY['old-' || g, 'older-' || g]
			FROM generate_series($1::int, $2::int) g`, from, to)
		require.NoError(t, err)
		_, err = raw.Exec(ctx, `INSERT INTO sync_conflict_case (conflict_id, rule_id, rule_version, pk_hash, pk_text,
				active_conflict_key, state, created_at, updated_at)
			SELECT md5(g::text || '/' || k)::uuid, 'crew', 1, sha256(g::text::bytea), g::text, g::text || '/' || k,
				'ACKNOWLEDGED', now(), now()
			FROM generate_series($1::int, $2::int) g, generate_series(1, 2) k`, from, to)
		require.NoError(t, err)
		_, err = raw.Exec(ctx, `INSERT INTO sync_conflict_evidence (conflict_id, origin_node_id, event_id, operation,
				incoming_base_revision, incoming_result_revision, current_revision, current_origin_node_id, current_event_id,
				current_tombstone, found_in, recorded_at)
			SELECT md5(g::text || '/' || k)::uuid, 'node-1', md5('e' || g || '/' || k)::uuid, 'OPERATION_UPDATE',
				'base-' || g, 'up-' || g || '-' || k, 'cur-' || g, 'shore', '', false, 'target', now()
			FROM generate_series($1::int, $2::int) g, generate_series(1, 2) k`, from, to)
		require.NoError(t, err)
	}
	args := func(g int, rev string) []any {
		return []any{"crew", sha256Of(g), "node-1", rev}
	}
	grow(1, 3)
	plan := testdb.PrepareStale(t, ctx, noFK, "processed", stmts["NodeVersionProcessed"], args(2, "nothing")...)
	grow(4, 20_003)
	// a version nowhere (both branches run to their end)
	plan.RequireNoScan(t, ctx, raw, []string{"sync_record_head", "sync_conflict_case", "sync_conflict_evidence"},
		args(10_000, "NOTHING")...)
	var got bool
	for _, c := range []struct {
		rev  string
		want bool
	}{{"OLD-10000", true}, {"up-10000-2", true}, {"up-9999-2", false}, {"nothing", false}} {
		require.NoError(t, raw.QueryRow(ctx, stmts["NodeVersionProcessed"], args(10_000, c.rev)...).Scan(&got))
		require.Equal(t, c.want, got, c.rev)
	}
}

// sha256Of is the test's record hash of record g: sha256(g::text::bytea).
func sha256Of(g int) []byte {
	s := sha256.Sum256([]byte(strconv.Itoa(g)))
	return s[:]
}
