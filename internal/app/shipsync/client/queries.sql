-- The ship client's queries (SQLite). Lists of ids travel as one JSON
-- array parameter read with json_each.

-- name: WatermarkList
SELECT topic, part, read_next, received_next, terminal_next, next_seq
FROM partition_watermark WHERE direction = ? AND grp = ?;

-- name: WatermarkSave
INSERT INTO partition_watermark (direction, grp, topic, part, read_next, received_next, terminal_next, next_seq, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (direction, grp, topic, part) DO UPDATE SET
    read_next = excluded.read_next, received_next = excluded.received_next,
    terminal_next = excluded.terminal_next, next_seq = excluded.next_seq, updated_at = excluded.updated_at;

-- name: EventStates
SELECT event_id, seq, state FROM event_state WHERE event_id IN (SELECT value FROM json_each(?));

-- name: EventInsert
INSERT INTO event_state (event_id, direction, topic, part, off, seq, rule_id, rule_version, priority, state, reason,
    raw_bytes, business_at, captured_at, created_at, updated_at)
VALUES (?, 'up', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (event_id) DO NOTHING;

-- name: EventReceived
UPDATE event_state SET state = 'RECEIVED', reason = NULL, updated_at = ?
WHERE event_id IN (SELECT value FROM json_each(?)) AND state IN ('READY', 'RETRY_WAIT');

-- name: EventRetry
UPDATE event_state SET state = 'RETRY_WAIT', attempts = attempts + 1, reason = ?, updated_at = ?
WHERE event_id = ? AND state IN ('READY', 'RETRY_WAIT');

-- name: EventBlock
UPDATE event_state SET state = 'BLOCKED', reason = ?, updated_at = ?
WHERE event_id = ? AND state IN ('READY', 'RETRY_WAIT');

-- name: EventTerminal
UPDATE event_state SET state = 'TERMINAL', result = ?, reason = ?, conflict_id = ?, updated_at = ?
WHERE event_id = ? AND state <> 'TERMINAL';

-- name: EventTerminalPlain
-- Many events' one result, without reason or conflict: ids as a JSON array.
UPDATE event_state SET state = 'TERMINAL', result = ?, reason = NULL, conflict_id = NULL, updated_at = ?
WHERE event_id IN (SELECT value FROM json_each(?)) AND state <> 'TERMINAL';

-- name: EventCounts
SELECT state, count(*), coalesce(sum(raw_bytes), 0) FROM event_state GROUP BY state;

-- name: ResultCounts
SELECT result, count(*) FROM event_state WHERE state = 'TERMINAL' GROUP BY result;

-- name: MetaGet
SELECT value FROM client_meta WHERE name = ?;

-- name: MetaSet
INSERT INTO client_meta (name, value) VALUES (?, ?)
ON CONFLICT (name) DO UPDATE SET value = excluded.value;

-- name: AppliedGet
-- A command whose write did not happen (a conflict, a rejection) explains
-- no captured row; one still PENDING may have written (its result comes
-- after the write).
SELECT operation, result_revision FROM applied_command
WHERE command_id = ? AND result NOT IN ('CONFLICT_REPORTED', 'REJECTED');

-- name: BacklogByRule
SELECT direction, rule_id, priority, state, count(*), coalesce(sum(raw_bytes), 0), min(captured_at), max(captured_at),
    min(business_at), max(business_at)
FROM event_state WHERE state NOT IN ('TERMINAL', 'EXPIRED_APPROVED')
GROUP BY direction, rule_id, priority, state ORDER BY direction, rule_id, priority, state;

-- name: MetaSetMax
INSERT INTO client_meta (name, value) VALUES (?, ?)
ON CONFLICT (name) DO UPDATE SET value = excluded.value
WHERE CAST(excluded.value AS INTEGER) > CAST(client_meta.value AS INTEGER);

-- name: EventList
SELECT event_id, rule_id, topic, part, off, state, coalesce(result, ''), raw_bytes FROM event_state ORDER BY topic, part, off;

-- name: BlockedList
SELECT event_id, topic, part, off, rule_id, coalesce(reason, ''), updated_at
FROM event_state WHERE state = 'BLOCKED' ORDER BY topic, part, off LIMIT ?;

-- name: CommandSequence
SELECT sequence FROM inbound_command WHERE command_id = ?;

-- name: CommandInsert
INSERT INTO inbound_command (command_id, sequence, kind, body, state, received_at)
VALUES (?, ?, ?, ?, 'RECEIVED', ?)
ON CONFLICT DO NOTHING;

-- name: CommandsUnapplied
SELECT body FROM inbound_command WHERE state <> 'TERMINAL' ORDER BY sequence LIMIT ?;

-- name: CommandIntent
-- Before the write: the normaliser may meet the write's capture before
-- the apply returns. A row there already (a retry) stays as it is.
INSERT INTO applied_command (command_id, operation, result_revision, result, applied_at)
VALUES (?, ?, ?, 'PENDING', ?)
ON CONFLICT (command_id) DO NOTHING;

-- name: CommandResult
UPDATE inbound_command SET state = 'TERMINAL', result = ?, reason = ?, current_revision = ?, ack = ?, applied_at = ?
WHERE command_id = ? AND state <> 'TERMINAL';

-- name: AppliedResult
UPDATE applied_command SET result = ?, applied_at = ? WHERE command_id = ?;

-- name: CommandsUnacked
SELECT command_id, ack FROM inbound_command WHERE acked = 0 AND state = 'TERMINAL' ORDER BY sequence LIMIT ?;

-- name: CommandAcked
UPDATE inbound_command SET acked = 1, ack_status = ?, acked_at = ? WHERE command_id = ? AND acked = 0;

-- name: DownlinkMarkSave
-- The downlink checkpoints, from the commands themselves (stored
-- sequences are contiguous): read_next past the last stored, received_next
-- the first without a result, terminal_next the first not acknowledged
-- (the platform checkpoint). 0 while nothing is stored. (WHERE true: an
-- upsert from a SELECT needs one, or SQLite reads ON as a join's.)
INSERT INTO partition_watermark (direction, grp, topic, part, read_next, received_next, terminal_next, next_seq, updated_at)
SELECT 'down', ?1, 'commands', 0, n,
    coalesce((SELECT min(sequence) FROM inbound_command WHERE state <> 'TERMINAL'), n),
    coalesce((SELECT min(sequence) FROM inbound_command WHERE acked = 0), n), n, ?2
FROM (SELECT coalesce((SELECT max(sequence) + 1 FROM inbound_command), 0) AS n) WHERE true
ON CONFLICT (direction, grp, topic, part) DO UPDATE SET
    read_next = excluded.read_next, received_next = excluded.received_next,
    terminal_next = excluded.terminal_next, next_seq = excluded.next_seq, updated_at = excluded.updated_at;

-- name: DownlinkMark
SELECT read_next, received_next, terminal_next FROM partition_watermark
WHERE direction = 'down' AND grp = ? AND topic = 'commands' AND part = 0;

-- name: CommandCounts
SELECT CASE WHEN state = 'TERMINAL' THEN result ELSE 'RECEIVED' END, acked, count(*)
FROM inbound_command GROUP BY 1, 2;
