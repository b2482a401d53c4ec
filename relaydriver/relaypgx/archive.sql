-- Archival statements of relaypgx (seed 000 §9.3 "处理终态归档"); archive.go
-- parses this file once at init. Kept apart from queries.sql. Timestamps are
-- always parameters (the engine's Clock), never now(). The four statements run
-- in one transaction: select, copy, guarded shadow update, uncopy of the rows
-- the guard refused.

-- name: ArchiveSelect
-- Candidates: terminal, acknowledgement settled (acknowledged, or no intent
-- ever recorded; an abandoned, unreconciled row is NOT settled), and terminal
-- since before the threshold. ARCHIVED is excluded by the state list of
-- terminal states. No row lock: the guard of ArchiveShadow orders us against a
-- concurrent replay.
SELECT id, state, updated_at
FROM relay_message
WHERE queue = $1
  AND state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
  AND (ack_at IS NOT NULL
       OR (ack_next_at IS NULL AND ack_at IS NULL AND ack_abandoned_at IS NULL))
  AND updated_at < $2::timestamptz
ORDER BY updated_at, id
LIMIT $3;

-- name: ArchiveCopy
-- INSERT INTO history … SELECT the whole row, only while it still has the
-- state (and updated_at) it was selected with. Returns the copied ids.
INSERT INTO relay_message_history (queue, id, key, state, attempts, next_attempt_at, error_class, last_error,
                                   identity_key, payload, received_at, enqueued_at, updated_at, ack_next_at,
                                   ack_at, ack_attempts, ack_abandoned_at, ack_abandon_reason, lease_owner,
                                   lease_expires_at, archived_at)
SELECT m.queue, m.id, m.key, m.state, m.attempts, m.next_attempt_at, m.error_class, m.last_error,
       m.identity_key, m.payload, m.received_at, m.enqueued_at, m.updated_at, m.ack_next_at,
       m.ack_at, m.ack_attempts, m.ack_abandoned_at, m.ack_abandon_reason, m.lease_owner,
       m.lease_expires_at, $5::timestamptz
FROM relay_message AS m
JOIN unnest($2::bigint[], $3::text[], $4::timestamptz[]) AS c(id, state, updated_at)
  ON m.id = c.id AND m.state = c.state AND m.updated_at = c.updated_at
WHERE m.queue = $1
RETURNING id;

-- name: ArchiveShadow
-- The write guarded by the state the candidate had when selected (and its
-- updated_at, so a row replayed and finished again meanwhile is not taken for
-- the copy). A replay that moved the row back to PENDING first makes the
-- predicate false: 0 rows for it. Keeps queue, id, identity_key and
-- enqueued_at; clears everything else. Returns the shadowed ids.
UPDATE relay_message AS m
SET state = 'ARCHIVED', payload = NULL, key = '', attempts = 0, next_attempt_at = NULL,
    error_class = '', last_error = '', received_at = NULL, updated_at = $5::timestamptz,
    ack_next_at = NULL, ack_at = NULL, ack_attempts = 0, ack_abandoned_at = NULL, ack_abandon_reason = '',
    lease_owner = '', lease_expires_at = NULL
FROM unnest($2::bigint[], $3::text[], $4::timestamptz[]) AS c(id, state, updated_at)
WHERE m.queue = $1 AND m.id = c.id AND m.state = c.state AND m.updated_at = c.updated_at
RETURNING m.id;

-- name: ArchiveUncopy
-- Removes the history copies of rows whose guarded update touched nothing.
DELETE FROM relay_message_history
WHERE queue = $1 AND id = ANY($2::bigint[]);
