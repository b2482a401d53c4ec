-- Acknowledgement write-back statements of relaysqlite (seed 000 §6); ack.go
-- parses this file once at init. Kept apart from queries.sql. Times are INTEGER
-- Unix microseconds from parameters (the engine's Clock), never the store's.
-- updated_at is not touched: it is the time of the last processing-state
-- change, and the acknowledgement facts carry their own times. Id lists are
-- JSON arrays.

-- name: AckScan
-- Exactly the seed's predicate and order (§6.1); ARCHIVED is excluded
-- explicitly, not only by the state list (§9.3). $3 is Now − R, computed by the
-- caller from its parameters.
SELECT queue, id, "key", state, attempts, next_attempt_at, error_class, last_error,
       identity_key, payload, received_at, enqueued_at, updated_at,
       ack_next_at, ack_at, ack_attempts, ack_abandoned_at, ack_abandon_reason,
       lease_owner, lease_expires_at
FROM relay_message
WHERE queue = $1
  AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND state <> 'ARCHIVED'
  AND ack_at IS NULL
  AND ack_abandoned_at IS NULL
  AND (ack_next_at IS NULL OR ack_next_at <= $2 OR enqueued_at < $3)
ORDER BY ack_attempts, id
LIMIT $4;

-- name: AckDone
-- The source's mark is confirmed: only rows still owing an acknowledgement.
UPDATE relay_message
SET ack_at = $3
WHERE queue = $1 AND id IN (SELECT value FROM json_each($2))
  AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
  AND ack_at IS NULL AND ack_abandoned_at IS NULL;

-- name: AckRetry
-- One transient failure: attempts+1 and the next try.
UPDATE relay_message
SET ack_attempts = ack_attempts + 1, ack_next_at = $3
WHERE queue = $1 AND id = $2
  AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
  AND ack_at IS NULL AND ack_abandoned_at IS NULL;

-- name: AckAbandon
-- Stop automatic retries; ack_at stays NULL (abandoned is not acknowledged).
UPDATE relay_message
SET ack_abandoned_at = $4, ack_abandon_reason = $3
WHERE queue = $1 AND id = $2
  AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
  AND ack_at IS NULL AND ack_abandoned_at IS NULL;

-- name: AckReopen
-- Clear the abandonment of the given ids ($2 NULL means every abandoned row)
-- with reason $3 (empty: any reason); due at once. ack_attempts is kept.
UPDATE relay_message
SET ack_abandoned_at = NULL, ack_abandon_reason = '', ack_next_at = $4
WHERE queue = $1
  AND ack_abandoned_at IS NOT NULL AND ack_at IS NULL
  AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
  AND ($2 IS NULL OR id IN (SELECT value FROM json_each($2)))
  AND ($3 = '' OR ack_abandon_reason = $3);

-- name: AckRowState
-- Why a guarded acknowledgement update changed nothing: the row's state and
-- facts, or no row.
SELECT state, ack_at IS NOT NULL, ack_abandoned_at IS NOT NULL
FROM relay_message
WHERE queue = $1 AND id = $2;

-- name: AckStats
-- Terminal rows of the queue by acknowledgement state.
SELECT coalesce(sum(CASE WHEN ack_at IS NULL AND ack_abandoned_at IS NULL THEN 1 ELSE 0 END), 0),
       coalesce(sum(CASE WHEN ack_at IS NULL AND ack_abandoned_at IS NOT NULL THEN 1 ELSE 0 END), 0),
       coalesce(sum(CASE WHEN ack_at IS NOT NULL THEN 1 ELSE 0 END), 0)
FROM relay_message
WHERE queue = $1 AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD');
