-- shipsync console: the management API's reads and its idempotency keys.

-- name: NodeList
-- Every node with its heartbeat and counts: certificates active, events
-- received, events still without a terminal result (the shore's backlog of
-- the node), receipts by result, the command stream.
SELECT n.node_id, n.state, n.created_at, n.last_heartbeat_at, coalesce(n.last_health, ''),
    coalesce(n.last_config_version, 0)::bigint,
    (SELECT count(*) FROM sync_node_cert c WHERE c.node_id = n.node_id AND c.state = 'active'),
    (SELECT count(*) FROM sync_inbox_event i WHERE i.origin_node_id = n.node_id),
    (SELECT count(*) FROM sync_inbox_event i WHERE i.origin_node_id = n.node_id
        AND NOT EXISTS (SELECT 1 FROM sync_event_receipt r
                        WHERE r.origin_node_id = i.origin_node_id AND r.event_id = i.event_id)),
    (SELECT count(*) FROM sync_event_receipt r WHERE r.origin_node_id = n.node_id AND r.result = 'APPLIED'),
    (SELECT count(*) FROM sync_event_receipt r WHERE r.origin_node_id = n.node_id AND r.result = 'CONFLICT_RECORDED'),
    (SELECT count(*) FROM sync_event_receipt r WHERE r.origin_node_id = n.node_id AND r.result = 'REJECTED'),
    (SELECT count(*) FROM sync_event_receipt r WHERE r.origin_node_id = n.node_id AND r.decided_at >= $2),
    coalesce(d.next_sequence - 1, 0), coalesce(d.acked_through, 0)
FROM sync_node n LEFT JOIN sync_downlink_node d ON d.node_id = n.node_id
WHERE ($1 = '' OR n.node_id = $1)
ORDER BY n.node_id;

-- name: NodeCerts
SELECT fingerprint, state, not_before, not_after FROM sync_node_cert WHERE node_id = $1 ORDER BY created_at;

-- name: NodeRules
SELECT rule_id, rule_version FROM sync_node_rule WHERE node_id = $1 ORDER BY rule_id, rule_version;

-- name: NodeStreams
SELECT source_connector_id, source_partition, next_sequence::text, held, gap_since
FROM sync_stream WHERE origin_node_id = $1 ORDER BY source_connector_id, source_partition LIMIT 100;

-- name: ConflictCounts
-- Cases waiting for an operator, and those past their deadline.
SELECT count(*) FILTER (WHERE state = 'PENDING_MANUAL'),
    count(*) FILTER (WHERE state = 'PENDING_MANUAL' AND manual_due < $1)
FROM sync_conflict_case;

-- name: CaseVersion
-- A case's optimistic version (when it last changed, and its decisions),
-- and when it was opened.
SELECT c.updated_at, (SELECT count(*) FROM sync_conflict_decision d WHERE d.conflict_id = c.conflict_id), c.created_at
FROM sync_conflict_case c WHERE c.conflict_id = $1;

-- name: AuditSearch
-- Audit entries matching every filter given ('' / NULL: any), newest
-- first, before audit id $7 (0: from the newest).
SELECT audit_id, at, actor, action, object_type, object_id, coalesce(before, ''), coalesce(after, ''), reason, trace_id
FROM sync_audit_event
WHERE ($1 = '' OR actor = $1) AND ($2 = '' OR action = $2 OR action LIKE $2 || '.%')
    AND ($3 = '' OR object_type = $3) AND ($4 = '' OR object_id = $4)
    AND ($5::timestamptz IS NULL OR at >= $5) AND ($6::timestamptz IS NULL OR at < $6)
    AND ($7 = 0 OR audit_id < $7)
ORDER BY audit_id DESC
LIMIT $8;

-- name: IdemClaim
-- Claims (actor, key) for a request about to act; no row back: the key is
-- taken (IdemGet says by what).
INSERT INTO sync_mgmt_idempotency (actor, idem_key, method, path, request_hash, created_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT DO NOTHING
RETURNING true;

-- name: IdemGet
SELECT method, path, request_hash, status, body, created_at FROM sync_mgmt_idempotency
WHERE actor = $1 AND idem_key = $2;

-- name: IdemTakeOver
-- Takes over a claim whose request never finished (its process died):
-- only while it is still unfinished and older than $3.
UPDATE sync_mgmt_idempotency SET created_at = $4
WHERE actor = $1 AND idem_key = $2 AND status = 0 AND created_at < $3
RETURNING true;

-- name: IdemStore
UPDATE sync_mgmt_idempotency SET status = $3, body = $4 WHERE actor = $1 AND idem_key = $2;

-- name: IdemRelease
DELETE FROM sync_mgmt_idempotency WHERE actor = $1 AND idem_key = $2 AND status = 0;
