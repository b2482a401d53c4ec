-- Snapshot tasks (SQLite, the ship client's database).

-- name: TaskInsert
INSERT INTO snapshot_task (task_id, rule_id, rule_version, db, tbl, state, lag_threshold, window_now, created_at,
    updated_at)
VALUES (?, ?, ?, ?, ?, 'PENDING', ?, ?, ?, ?);

-- name: TaskList
SELECT task_id, rule_id, rule_version, db, tbl, state, positions, cursor, read_done, chunks, rows_read, next_seq,
    lag_threshold, lag, error, created_at, updated_at, completed_at, window_now, result
FROM snapshot_task ORDER BY created_at, task_id;

-- name: TaskPin
UPDATE snapshot_task SET positions = ?, updated_at = ? WHERE task_id = ? AND state = 'PENDING' AND positions IS NULL;

-- name: TaskState
UPDATE snapshot_task SET state = ?, lag = ?, error = ?, updated_at = ?,
    completed_at = CASE WHEN ? IN ('COMPLETED', 'FAILED') THEN ? ELSE completed_at END
WHERE task_id = ? AND state NOT IN ('COMPLETED', 'FAILED');

-- name: TaskChunk
UPDATE snapshot_task SET cursor = ?, read_done = ?, chunks = chunks + 1, rows_read = rows_read + ?, next_seq = ?,
    updated_at = ?
WHERE task_id = ? AND chunks = ?;

-- name: OutboxInsert
INSERT INTO snapshot_outbox (task_id, chunk, events) VALUES (?, ?, ?);

-- name: OutboxList
SELECT chunk, events FROM snapshot_outbox WHERE task_id = ? ORDER BY chunk;

-- name: OutboxDelete
DELETE FROM snapshot_outbox WHERE task_id = ? AND chunk = ?;

-- name: RowPut
INSERT INTO snapshot_row (task_id, key_hash, revision, problem) VALUES (?, ?, ?, ?)
ON CONFLICT (task_id, key_hash) DO UPDATE SET revision = excluded.revision, problem = excluded.problem;

-- name: RowProblems
SELECT key_hash, problem FROM snapshot_row WHERE task_id = ? AND problem IS NOT NULL ORDER BY key_hash;

-- name: ProblemCounts
SELECT task_id, count(*) FROM snapshot_row WHERE problem IS NOT NULL GROUP BY task_id;

-- name: TaskResult
UPDATE snapshot_task SET result = ?, updated_at = ? WHERE task_id = ? AND state = 'COMPLETED';

-- name: RowGet
SELECT revision, apply_from FROM snapshot_row WHERE task_id = ? AND key_hash = ?;

-- name: RowApplyFrom
INSERT INTO snapshot_row (task_id, key_hash, revision, apply_from) VALUES (?, ?, '', ?)
ON CONFLICT (task_id, key_hash) DO UPDATE SET apply_from = excluded.apply_from;

-- The snapshot's events live in the client's event_state under the task's
-- own stream name, so the client's receipt loop records their results and
-- its backlog counts them.

-- name: EventInsert
INSERT INTO event_state (event_id, direction, topic, part, off, seq, rule_id, rule_version, priority, state,
    raw_bytes, business_at, captured_at, created_at, updated_at)
VALUES (?, 'up', ?, 0, ?, ?, ?, ?, ?, 'READY', ?, ?, ?, ?, ?)
ON CONFLICT (event_id) DO NOTHING;

-- name: EventReceived
UPDATE event_state SET state = 'RECEIVED', reason = NULL, updated_at = ?
WHERE event_id IN (SELECT value FROM json_each(?)) AND state IN ('READY', 'RETRY_WAIT');

-- name: EventBlocked
UPDATE event_state SET state = 'BLOCKED', reason = ?, updated_at = ? WHERE event_id = ? AND state <> 'TERMINAL';

-- name: EventOpen
SELECT count(*) FROM event_state WHERE topic = ? AND state <> 'TERMINAL';

-- name: EventCounts
SELECT topic, count(*),
    coalesce(sum(state IN ('RECEIVED', 'TERMINAL')), 0),
    coalesce(sum(state = 'TERMINAL'), 0),
    coalesce(sum(result = 'APPLIED'), 0),
    coalesce(sum(result = 'CONFLICT_RECORDED'), 0),
    coalesce(sum(result = 'REJECTED' OR state = 'BLOCKED'), 0)
FROM event_state WHERE topic LIKE 'snapshot/%' GROUP BY topic;
