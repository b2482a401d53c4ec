-- 009: snapshots. A snapshot row arrives as an ordinary inbox event whose
-- operation is SNAPSHOT, in its task's own source stream
-- ('snapshot/<task id>/0'), and is applied as an upsert under a version
-- condition; the task itself (its pinned position, state and the catch-up
-- barrier) lives on the ship. The shore only needs to find a node's snapshot
-- streams without reading the whole inbox (snapshot.ShoreBaselines).
CREATE INDEX sync_inbox_event_snapshot ON sync_inbox_event (origin_node_id, source_partition)
    WHERE source_partition LIKE 'snapshot/%';
