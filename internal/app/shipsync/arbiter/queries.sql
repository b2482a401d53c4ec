-- name: CaseClaim
-- Takes up to $4 cases to work on: new ones (which start AUTO_DECIDING),
-- ones whose arbiter's lease ran out (taken over), and decided ones not
-- dispatched yet; leases them to $1 until $2 + $3 ms.
UPDATE sync_conflict_case c
SET lease_owner = $1, lease_until = $2::timestamptz + $3 * interval '1 millisecond', attempts = c.attempts + 1,
    state = CASE WHEN c.state = 'DETECTED' THEN 'AUTO_DECIDING' ELSE c.state END, updated_at = $2
WHERE c.conflict_id IN (
    SELECT conflict_id FROM sync_conflict_case
    WHERE state IN ('DETECTED', 'AUTO_DECIDING', 'DECIDED') AND (lease_until IS NULL OR lease_until <= $2)
    ORDER BY updated_at
    LIMIT $4
    FOR UPDATE SKIP LOCKED)
RETURNING c.conflict_id::text, c.state, c.rule_id, c.rule_version, c.pk_hash, c.pk_text;

-- name: CaseRelease
-- Gives up every lease $1 holds on cases still to work on (a stopping
-- arbiter), so that another arbiter claims them at once.
UPDATE sync_conflict_case SET lease_owner = NULL, lease_until = NULL
WHERE lease_owner = $1 AND state IN ('DETECTED', 'AUTO_DECIDING', 'DECIDED');

-- name: CaseGet
SELECT conflict_id::text, state, rule_id, rule_version, pk_hash, pk_text, coalesce(lease_owner, ''),
    coalesce(manual_due, 'epoch'::timestamptz), state_reason, coalesce(superseded_by::text, '')
FROM sync_conflict_case WHERE conflict_id = $1;

-- name: CaseLockOwned
-- Locks case $1 if $2 still holds its lease (the fence of every write an
-- arbiter makes after deciding).
SELECT state FROM sync_conflict_case WHERE conflict_id = $1 AND lease_owner = $2 FOR UPDATE;

-- name: CaseLock
SELECT state FROM sync_conflict_case WHERE conflict_id = $1 FOR UPDATE;

-- name: CaseSetState
UPDATE sync_conflict_case
SET state = $2, state_reason = $3, manual_due = $4, lease_owner = NULL, lease_until = NULL, updated_at = $5
WHERE conflict_id = $1;

-- name: CaseRecord
-- A case's record and the case that superseded it ('' : none).
SELECT rule_id, rule_version, pk_hash, pk_text, coalesce(superseded_by::text, '')
FROM sync_conflict_case WHERE conflict_id = $1;

-- name: DecisionTime
-- When case $1's latest decision was made.
SELECT max(decided_at) FROM sync_conflict_decision WHERE conflict_id = $1;

-- name: CaseSupersede
UPDATE sync_conflict_case SET superseded_by = $2 WHERE conflict_id = $1;

-- name: EvidenceLatest
SELECT origin_node_id, event_id::text, operation, incoming_base_revision, incoming_result_revision, current_revision,
    current_origin_node_id, current_event_id, current_tombstone, current_row, found_in
FROM sync_conflict_evidence WHERE conflict_id = $1
ORDER BY evidence_id DESC
LIMIT 1;

-- name: NodeVersionProcessed
-- Whether the shore has already received node $3's version $4 of record
-- ($1, $2): the record held that revision (its head's current or recent
-- revisions: the change was applied), or a case of the record holds it as
-- evidence the shore found (the change arrived and conflicted). Either way
-- no upload of that version is still on its way.
SELECT EXISTS (SELECT 1 FROM sync_record_head h
               WHERE h.rule_id = $1 AND h.pk_hash = $2
                 AND (lower(h.current_revision) = lower($4)
                      OR lower($4) = ANY (ARRAY(SELECT lower(r) FROM unnest(h.recent_revisions) AS r))))
    OR EXISTS (SELECT 1 FROM sync_conflict_case c
               JOIN sync_conflict_evidence e ON e.conflict_id = c.conflict_id
               WHERE c.rule_id = $1 AND c.pk_hash = $2 AND e.found_in <> 'node'
                 AND e.origin_node_id = $3 AND lower(e.incoming_result_revision) = lower($4));

-- name: EvidenceList
SELECT origin_node_id, event_id::text, operation, incoming_base_revision, incoming_result_revision, current_revision,
    current_origin_node_id, current_event_id, current_tombstone, current_row, found_in, recorded_at
FROM sync_conflict_evidence WHERE conflict_id = $1
ORDER BY evidence_id;

-- name: InboxEventBody
SELECT event FROM sync_inbox_event WHERE origin_node_id = $1 AND event_id = $2;

-- name: DecisionAttempt
SELECT count(*) + 1 FROM sync_conflict_decision WHERE conflict_id = $1;

-- name: DecisionInsert
INSERT INTO sync_conflict_decision (decision_id, conflict_id, attempt, decided_by, policy, choice, winner_node_id, node_id,
    expected_node_revision, decided_row, tombstone, decided_revision, expected_shore_revision, reason, decided_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15);

-- name: DecisionGet
SELECT decision_id::text, decided_by, policy, choice, winner_node_id, node_id, expected_node_revision, decided_row,
    tombstone, decided_revision, expected_shore_revision, reason, decided_at
FROM sync_conflict_decision WHERE conflict_id = $1
ORDER BY attempt DESC
LIMIT 1;

-- name: AnswersClaim
-- Node answers the arbiter must act on: every answer to a decision, and
-- every conflict a node reported against a change — in the order the node
-- met the commands, not the order their answers were stored in (one ack
-- batch stores many at one acked_at): a record's later evidence must be
-- recorded after its earlier one.
SELECT target_node_id, sequence, command_id::text, kind, coalesce(conflict_id::text, ''), result, reason,
    current_revision, current_row, body
FROM sync_downlink_command
WHERE processed_at IS NULL AND result IS NOT NULL AND (kind = 'decision' OR result = 'COMMAND_CONFLICT_REPORTED')
ORDER BY target_node_id, sequence
LIMIT $1
FOR UPDATE SKIP LOCKED;

-- name: AnswerProcessed
UPDATE sync_downlink_command SET processed_at = $3 WHERE target_node_id = $1 AND sequence = $2;

-- name: DecisionAnswers
-- How the decision commands of case $1 were answered: how many, how many
-- applied (now or before).
SELECT count(*), count(*) FILTER (WHERE result IN ('COMMAND_APPLIED', 'COMMAND_ALREADY_APPLIED'))
FROM sync_downlink_command WHERE conflict_id = $1 AND kind = 'decision';

-- name: CaseList
SELECT c.conflict_id::text, c.state, c.rule_id, c.pk_text, c.state_reason, c.created_at, c.updated_at,
    (SELECT count(*) FROM sync_conflict_evidence e WHERE e.conflict_id = c.conflict_id)
FROM sync_conflict_case c
WHERE ($1 = '' OR c.state = $1)
ORDER BY c.created_at, c.conflict_id
LIMIT $2;

-- name: StreamLock
-- Locks node $1's command stream (when it has one yet) for a dispatch: the
-- first lock of the dispatch's order (stream, record head, case).
SELECT 1 FROM sync_downlink_node WHERE node_id = $1 FOR UPDATE;

-- name: HeadLock
-- Locks a record's head (when the shore has one yet) for a dispatch that
-- writes it: the second lock of the dispatch's order.
SELECT 1 FROM sync_record_head WHERE rule_id = $1 AND pk_hash = $2 FOR UPDATE;
