-- name: EventLoad
-- The batch's events with what is already known of them: a receipt (the
-- event is finished) and the apply job's state. The lookups are correlated
-- scalar subqueries, so they run as index probes whatever the planner's
-- statistics say (a join, and an EXISTS, were planned as a hash of every
-- receipt, built once per batch: the apply slowed as receipts grew).
SELECT e.id, e.origin_node_id, e.event_id::text, e.rule_id, e.pk_hash, e.pk_text, e.event,
    (SELECT r.receipt_id FROM sync_event_receipt r
     WHERE r.origin_node_id = e.origin_node_id AND r.event_id = e.event_id LIMIT 1) IS NOT NULL,
    coalesce((SELECT j.state FROM sync_apply_job j WHERE j.inbox_id = e.id), '')
FROM sync_inbox_event e
WHERE e.id = ANY($1::bigint[]);

-- name: HeadLockMany
-- Locks the record heads that exist among the (rule, key) pairs, in the
-- order given (callers sort): one probe of the primary key per pair, which
-- a LATERAL subquery forces whatever the statistics say (a filter on the
-- arrays was planned as a scan of every head).
SELECT h.rule_id, h.pk_hash, h.current_revision, h.origin_node_id, coalesce(h.event_id::text, ''), h.tombstone,
    h.recent_revisions
FROM unnest($1::text[], $2::bytea[]) WITH ORDINALITY AS u(r, k, i)
CROSS JOIN LATERAL (
    SELECT * FROM sync_record_head h WHERE h.rule_id = u.r AND h.pk_hash = u.k FOR UPDATE
) h
ORDER BY u.i;

-- name: JobCommittedMany
-- §10.3 step 6: the target committed these events' writes. Written on its
-- own, outside the engine transaction, right after the target's commit.
INSERT INTO sync_apply_job (inbox_id, state, learnt_by, updated_at)
SELECT unnest($1::bigint[]), 'TARGET_COMMITTED', 'write', $2
ON CONFLICT (inbox_id) DO NOTHING;

-- name: HeadUpsertMany
INSERT INTO sync_record_head (rule_id, pk_hash, current_revision, origin_node_id, event_id, tombstone, updated_at)
SELECT r, k, rev, o, e, t, $7
FROM unnest($1::text[], $2::bytea[], $3::text[], $4::text[], $5::uuid[], $6::boolean[]) AS u(r, k, rev, o, e, t)
ON CONFLICT (rule_id, pk_hash) DO UPDATE SET current_revision = EXCLUDED.current_revision,
    origin_node_id = EXCLUDED.origin_node_id, event_id = EXCLUDED.event_id, tombstone = EXCLUDED.tombstone,
    updated_at = EXCLUDED.updated_at,
    -- The revision replaced joins the recent ones (newest first, eight kept).
    recent_revisions = CASE WHEN sync_record_head.current_revision = EXCLUDED.current_revision
        THEN sync_record_head.recent_revisions
        ELSE (ARRAY[sync_record_head.current_revision] || sync_record_head.recent_revisions)[1:8] END;

-- name: ReceiptInsertMany
-- One receipt per event, ever: an event with a receipt is skipped before
-- it gets here, so a conflict cannot happen and would keep the first.
INSERT INTO sync_event_receipt (origin_node_id, event_id, result, reason, detail, conflict_id, applied_revision, decided_at)
SELECT o, e, r, re, d, c, a, $8
FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::uuid[], $7::text[]) AS u(o, e, r, re, d, c, a)
ON CONFLICT (origin_node_id, event_id) DO NOTHING;

-- name: JobFinalMany
INSERT INTO sync_apply_job (inbox_id, state, learnt_by, updated_at)
SELECT i, s, l, $4 FROM unnest($1::bigint[], $2::text[], $3::text[]) AS u(i, s, l)
ON CONFLICT (inbox_id) DO UPDATE SET state = EXCLUDED.state, learnt_by = EXCLUDED.learnt_by,
    updated_at = EXCLUDED.updated_at;

