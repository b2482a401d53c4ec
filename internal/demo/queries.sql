-- Queries of the demo handler. Both stores accept this text: PostgreSQL
-- natively, SQLite (modernc) binds $N positionally and supports ON CONFLICT.

-- name: ProjectionLastID
SELECT last_msg_id FROM demo_projection WHERE queue = $1 AND key = $2;

-- name: ProjectionUpsert
INSERT INTO demo_projection (queue, key, messages, total, last_msg_id)
VALUES ($1, $2, 1, $3, $4)
ON CONFLICT (queue, key) DO UPDATE
SET messages = demo_projection.messages + 1,
    total = demo_projection.total + excluded.total,
    last_msg_id = excluded.last_msg_id;

-- name: ProjectionSummary
SELECT COALESCE(SUM(messages), 0), COALESCE(SUM(total), 0), COUNT(*) FROM demo_projection WHERE queue = $1;

-- name: ProjectionRows
SELECT key, messages, total, last_msg_id FROM demo_projection WHERE queue = $1 ORDER BY key;
