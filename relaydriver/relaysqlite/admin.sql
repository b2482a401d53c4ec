-- Operator listings of relaysqlite (relay admin, docs/operations.md); admin.go
-- parses this file once at init. Kept apart from queries.sql. Read-only; the
-- payload is never read (NULL), so an operator listing never carries a body.
-- Lists are JSON arrays; NULL means "no filter".

-- name: MessageList
-- Keyset pagination by id. $2 states (NULL: every state but ARCHIVED, which is
-- listed only when named), $3 classes (NULL: any), $4 abandoned
-- acknowledgements only (0/1). $7 bounds the characters of last_error read
-- (relaytype.MaxErrorText): rows stored before error text was bounded stay small.
SELECT queue, id, "key", state, attempts, next_attempt_at, error_class, substr(last_error, 1, $7) AS last_error,
       identity_key, NULL AS payload, received_at, enqueued_at, updated_at,
       ack_next_at, ack_at, ack_attempts, ack_abandoned_at, ack_abandon_reason,
       lease_owner, lease_expires_at
FROM relay_message
WHERE queue = $1 AND id > $5
  AND (CASE WHEN $2 IS NULL THEN state <> 'ARCHIVED' ELSE state IN (SELECT value FROM json_each($2)) END)
  AND ($3 IS NULL OR error_class IN (SELECT value FROM json_each($3)))
  AND ($4 = 0 OR (ack_abandoned_at IS NOT NULL AND ack_at IS NULL))
ORDER BY id
LIMIT $6;

-- name: MessageClasses
-- The distinct classes of the FAILED/DEAD messages among the ids $2 (a JSON
-- array), in byte order (SQLite's default BINARY collation).
SELECT DISTINCT error_class
FROM relay_message
WHERE queue = $1 AND id IN (SELECT value FROM json_each($2)) AND state IN ('FAILED', 'DEAD')
ORDER BY error_class;
