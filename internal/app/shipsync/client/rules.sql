-- The node's rule snapshots and expiry approvals (SQLite).

-- name: SnapshotActive
-- The released rules the node ran last.
SELECT content FROM rule_snapshot WHERE status = 'ACTIVE' ORDER BY rule_id;

-- name: SnapshotSupersede
-- Before a switch: every ACTIVE row is superseded (the switch makes the new
-- set's rows ACTIVE in the same transaction).
UPDATE rule_snapshot SET status = 'SUPERSEDED', updated_at = ? WHERE status = 'ACTIVE';

-- name: SnapshotUpsert
-- A rule version with its status; a FAILED report never overwrites the row
-- of a version that runs.
INSERT INTO rule_snapshot (rule_id, version, content, status, validation, updated_at) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (rule_id, version) DO UPDATE SET content = excluded.content, status = excluded.status,
    validation = excluded.validation, updated_at = excluded.updated_at
WHERE rule_snapshot.status <> 'ACTIVE' OR excluded.status = 'ACTIVE';

-- name: ExpiredResult
-- Events expired on read get their terminal result.
UPDATE event_state SET result = 'EXPIRED_APPROVED', updated_at = ?
WHERE state = 'EXPIRED_APPROVED' AND result IS NULL;

-- name: ExpiredCounts
-- Per approval id (the reason of its expired events): events and raw bytes.
SELECT reason, count(*), coalesce(sum(raw_bytes), 0) FROM event_state
WHERE state = 'EXPIRED_APPROVED' AND reason IN (SELECT value FROM json_each(?))
GROUP BY reason;
