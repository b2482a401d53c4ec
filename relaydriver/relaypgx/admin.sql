-- Operator listings of relaypgx (relay admin, docs/operations.md); admin.go
-- parses this file once at init. Kept apart from queries.sql. Read-only; the
-- payload is never read (NULL), so an operator listing never carries a body.

-- name: MessageList
-- Keyset pagination by id. $2 states (empty: every state but ARCHIVED, which is
-- listed only when named), $3 classes (empty: any), $4 abandoned
-- acknowledgements only. $7 bounds the characters of last_error read
-- (relaytype.MaxErrorText): rows stored before error text was bounded stay small.
SELECT queue, id, key, state, attempts, next_attempt_at, error_class, left(last_error, $7::int) AS last_error,
       identity_key, NULL::bytea AS payload, received_at, enqueued_at, updated_at,
       ack_next_at, ack_at, ack_attempts, ack_abandoned_at, ack_abandon_reason,
       lease_owner, lease_expires_at
FROM relay_message
WHERE queue = $1 AND id > $5
  AND (CASE WHEN cardinality($2::text[]) = 0 THEN state <> 'ARCHIVED' ELSE state = ANY($2::text[]) END)
  AND (cardinality($3::text[]) = 0 OR error_class = ANY($3::text[]))
  AND (NOT $4::boolean OR (ack_abandoned_at IS NOT NULL AND ack_at IS NULL))
ORDER BY id
LIMIT $6;

-- name: MessageClasses
-- The distinct classes of the FAILED/DEAD messages among the ids $2, in byte
-- order (COLLATE "C": the same order on every server and in SQLite).
SELECT DISTINCT error_class COLLATE "C" AS error_class
FROM relay_message
WHERE queue = $1 AND id = ANY($2::bigint[]) AND state IN ('FAILED', 'DEAD')
ORDER BY 1;
