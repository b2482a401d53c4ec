-- The shore's view of snapshots (PostgreSQL, the shore's platform database).

-- name: ShoreBaselines
SELECT i.origin_node_id, i.source_partition, i.rule_id, max(i.rule_version),
    count(*),
    count(*) FILTER (WHERE r.result = 'APPLIED'),
    count(*) FILTER (WHERE r.result = 'CONFLICT_RECORDED'),
    count(*) FILTER (WHERE r.result = 'REJECTED'),
    min(i.received_at), max(i.received_at)
FROM sync_inbox_event i
LEFT JOIN sync_event_receipt r ON r.origin_node_id = i.origin_node_id AND r.event_id = i.event_id
WHERE i.source_partition LIKE 'snapshot/%' AND ($1 = '' OR i.origin_node_id = $1)
GROUP BY i.origin_node_id, i.source_partition, i.rule_id
ORDER BY min(i.received_at), i.origin_node_id, i.source_partition;
