-- Acknowledgement write-back statements of relaypgx (seed 000 §6); ack.go
-- parses this file once at init. Kept apart from queries.sql. Timestamps are
-- always parameters (the engine's Clock), never now(). updated_at is not
-- touched: it is the time of the last processing-state change, and the
-- acknowledgement facts carry their own times.

-- name: AckScan
-- Exactly the seed's predicate and order (§6.1); ARCHIVED is excluded
-- explicitly, not only by the state list (§9.3). $3 is Now − R, computed by the
-- caller from its parameters.
SELECT queue, id, key, state, attempts, next_attempt_at, error_class, last_error,
       identity_key, payload, received_at, enqueued_at, updated_at,
       ack_next_at, ack_at, ack_attempts, ack_abandoned_at, ack_abandon_reason,
       lease_owner, lease_expires_at
FROM relay_message
WHERE queue = $1
  AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD') AND state <> 'ARCHIVED'
  AND ack_at IS NULL
  AND ack_abandoned_at IS NULL
  AND (ack_next_at IS NULL OR ack_next_at <= $2::timestamptz OR enqueued_at < $3::timestamptz)
ORDER BY ack_attempts, id
LIMIT $4;

-- name: AckDone
-- The source's mark is confirmed: only rows still owing an acknowledgement.
-- Rows are found by primary-key probes and updated by ctid, as in
-- MessageCompleteMany (a generic plan on an empty table otherwise read every
-- terminal row of the queue through relay_message_archive_idx).
UPDATE relay_message t
SET ack_at = $3
FROM (SELECT r.tid
      FROM unnest($2::bigint[]) AS u(id),
           LATERAL (SELECT x.ctid AS tid FROM relay_message x
                    WHERE x.queue = $1 AND x.id = u.id LIMIT 1) r) v
WHERE t.ctid = v.tid AND t.queue = $1
  AND t.state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
  AND t.ack_at IS NULL AND t.ack_abandoned_at IS NULL;

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
-- Clear the abandonment of the given ids (an empty $2 means every abandoned
-- row) with reason $3 (empty: any reason); due at once. ack_attempts is kept.
UPDATE relay_message
SET ack_abandoned_at = NULL, ack_abandon_reason = '', ack_next_at = $4
WHERE queue = $1
  AND ack_abandoned_at IS NOT NULL AND ack_at IS NULL
  AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
  AND (cardinality($2::bigint[]) = 0 OR id = ANY($2::bigint[]))
  AND ($3::text = '' OR ack_abandon_reason = $3::text);

-- name: AckRowState
-- Why a guarded acknowledgement update changed nothing: the row's state and
-- facts, or no row.
SELECT state, ack_at IS NOT NULL, ack_abandoned_at IS NOT NULL
FROM relay_message
WHERE queue = $1 AND id = $2;

-- name: AckStats
-- Terminal rows of the queue by acknowledgement state.
SELECT count(*) FILTER (WHERE ack_at IS NULL AND ack_abandoned_at IS NULL),
       count(*) FILTER (WHERE ack_at IS NULL AND ack_abandoned_at IS NOT NULL),
       count(*) FILTER (WHERE ack_at IS NOT NULL)
FROM relay_message
WHERE queue = $1 AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD');
