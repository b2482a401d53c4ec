-- Archival statements of relaysqlite (seed 000 §9.3 "处理终态归档");
-- archive.go parses this file once at init. Kept apart from queries.sql.
-- Times are INTEGER Unix microseconds from parameters (the engine's Clock),
-- never the store's. The statements run in one IMMEDIATE transaction: select,
-- then per candidate copy, guarded shadow update, and uncopy when the guard
-- refused.

-- name: ArchiveSelect
-- Candidates: terminal, acknowledgement settled (acknowledged, or no intent
-- ever recorded; an abandoned, unreconciled row is NOT settled), and terminal
-- since before the threshold. ARCHIVED is excluded by the state list.
SELECT id, state, updated_at
FROM relay_message
WHERE queue = $1
  AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
  AND (ack_at IS NOT NULL
       OR (ack_next_at IS NULL AND ack_at IS NULL AND ack_abandoned_at IS NULL))
  AND updated_at < $2
ORDER BY updated_at, id
LIMIT $3;

-- name: ArchiveCopy
-- INSERT INTO history … SELECT the whole row, only while it still has the
-- state (and updated_at) it was selected with.
INSERT INTO relay_message_history (queue, id, "key", state, attempts, next_attempt_at, error_class, last_error,
                                   identity_key, payload, received_at, enqueued_at, updated_at, ack_next_at,
                                   ack_at, ack_attempts, ack_abandoned_at, ack_abandon_reason, lease_owner,
                                   lease_expires_at, archived_at)
SELECT queue, id, "key", state, attempts, next_attempt_at, error_class, last_error,
       identity_key, payload, received_at, enqueued_at, updated_at, ack_next_at,
       ack_at, ack_attempts, ack_abandoned_at, ack_abandon_reason, lease_owner,
       lease_expires_at, $5
FROM relay_message
WHERE queue = $1 AND id = $2 AND state = $3 AND updated_at = $4;

-- name: ArchiveShadow
-- The write guarded by the state the candidate had when selected (and its
-- updated_at). A row replayed to PENDING first does not match: 0 rows. Keeps
-- queue, id, identity_key and enqueued_at; clears everything else.
UPDATE relay_message
SET state = 'ARCHIVED', payload = NULL, "key" = '', attempts = 0, next_attempt_at = NULL,
    error_class = '', last_error = '', received_at = NULL, updated_at = $5,
    ack_next_at = NULL, ack_at = NULL, ack_attempts = 0, ack_abandoned_at = NULL, ack_abandon_reason = '',
    lease_owner = '', lease_expires_at = NULL
WHERE queue = $1 AND id = $2 AND state = $3 AND updated_at = $4;

-- name: ArchiveUncopy
-- Removes the history copy of a row whose guarded update touched nothing.
DELETE FROM relay_message_history WHERE queue = $1 AND id = $2;
