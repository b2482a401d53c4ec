-- name: NodeInsert
INSERT INTO sync_node (node_id, state, created_at, updated_at) VALUES ($1, 'active', $2, $2);

-- name: NodeLock
SELECT state FROM sync_node WHERE node_id = $1 FOR UPDATE;

-- name: NodeSetState
UPDATE sync_node SET state = $2, updated_at = $3 WHERE node_id = $1;

-- name: CertInsert
INSERT INTO sync_node_cert (fingerprint, node_id, not_before, not_after, state, created_at, updated_at)
VALUES ($1, $2, $3, $4, 'active', $5, $5);

-- name: CertActiveCount
SELECT count(*) FROM sync_node_cert WHERE node_id = $1 AND state = 'active';

-- name: CertRetire
UPDATE sync_node_cert SET state = 'retired', updated_at = $3
WHERE node_id = $1 AND fingerprint = $2 AND state = 'active';

-- name: CertLookup
SELECT c.node_id, n.state, c.state, c.not_before, c.not_after
FROM sync_node_cert c JOIN sync_node n ON n.node_id = c.node_id
WHERE c.fingerprint = $1;

-- name: NodeList
SELECT n.node_id, n.state, c.fingerprint, c.state, c.not_after
FROM sync_node n LEFT JOIN sync_node_cert c ON c.node_id = n.node_id
ORDER BY n.node_id, c.created_at;

-- name: BatchAnswer
SELECT statuses FROM sync_upload_batch WHERE node_id = $1 AND batch_id = $2;

-- name: BatchInsert
INSERT INTO sync_upload_batch (node_id, batch_id, sequence, event_count, statuses, received_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (node_id, batch_id) DO NOTHING;

-- name: EventInsertMany
-- Every event of a batch in one statement (arrays of equal length, one
-- element per event); returns the rows actually inserted, so an event not
-- returned was stored before, or its stream already has an event with its
-- sequence number (any unique violation is skipped, none aborts the batch).
-- released_at is set for the events the caller found contiguous. The event
-- ids and the numeric(20) columns come as text arrays (Go strings): pgx has
-- no binary encoding of a string as uuid or numeric, and its failed attempt
-- formats the whole array into an error before it falls back to text.
INSERT INTO sync_inbox_event (origin_node_id, event_id, sender_node_id, batch_id, rule_id, rule_version,
    pk_hash, pk_text, source_connector_id, source_partition, source_position, source_sequence,
    schema_version, content_hash, event, received_at, released_at)
SELECT o, e, $3, $4, r, rv, ph, pt, sc, sp, pos, seq, sv, ch, ev, $16, CASE WHEN rel THEN $16::timestamptz END
FROM unnest($1::text[], $2::text[]::uuid[], $5::text[], $6::bigint[], $7::bytea[], $8::text[], $9::text[], $10::text[],
    $11::text[]::numeric[], $12::text[]::numeric[], $13::text[], $14::bytea[], $15::bytea[], $17::boolean[])
    AS u(o, e, r, rv, ph, pt, sc, sp, pos, seq, sv, ch, ev, rel)
ON CONFLICT DO NOTHING
RETURNING id, event_id::text;

-- name: EventSavepoint
SAVEPOINT shore_event_insert;

-- name: EventSavepointRelease
RELEASE SAVEPOINT shore_event_insert;

-- name: EventSavepointRollback
ROLLBACK TO SAVEPOINT shore_event_insert;

-- name: StreamLockMany
-- Creates the streams not seen before (next sequence 1) and locks every one
-- of them, in the order given (callers sort, so two batches lock in one
-- order); returns each stream's state.
INSERT INTO sync_stream (origin_node_id, source_connector_id, source_partition, next_sequence, held, updated_at)
SELECT $1, c, p, 1, 0, $4 FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS u(c, p, i)
ORDER BY i
ON CONFLICT (origin_node_id, source_connector_id, source_partition)
    DO UPDATE SET updated_at = sync_stream.updated_at
RETURNING source_connector_id, source_partition, next_sequence::text, held;

-- name: StreamHeld
-- The events of the given streams held past a gap, and the given-up
-- sequence numbers not passed yet (inbox id 0), by stream.
SELECT e.source_connector_id, e.source_partition, e.id, e.source_sequence::text, e.rule_id, e.pk_hash
FROM sync_inbox_event e
JOIN unnest($2::text[], $3::text[]) AS u(c, p) ON e.source_connector_id = u.c AND e.source_partition = u.p
WHERE e.origin_node_id = $1 AND e.released_at IS NULL
UNION ALL
SELECT k.source_connector_id, k.source_partition, 0, k.source_sequence::text, '', ''::bytea
FROM sync_stream_skip k
JOIN unnest($2::text[], $3::text[]) AS u(c, p) ON k.source_connector_id = u.c AND k.source_partition = u.p
WHERE k.origin_node_id = $1 AND k.passed_at IS NULL
ORDER BY 1, 2;

-- name: SkipInsertMany
-- Records given-up sequence numbers ($3..$8 per number: stream, sequence,
-- event id, reason, passed already); a number recorded before is left as
-- it is. Returns the ones recorded now.
INSERT INTO sync_stream_skip (origin_node_id, source_connector_id, source_partition, source_sequence, event_id, reason,
    skipped_at, passed_at)
SELECT $1, c, p, s, e, r, $2, CASE WHEN passed THEN $2::timestamptz END
FROM unnest($3::text[], $4::text[], $5::text[]::numeric[], $6::text[], $7::text[], $8::boolean[]) AS u(c, p, s, e, r, passed)
ON CONFLICT DO NOTHING
RETURNING source_connector_id, source_partition, passed_at IS NULL;

-- name: SkipPass
-- Marks given-up sequence numbers passed by their stream's release.
UPDATE sync_stream_skip k SET passed_at = $2
FROM unnest($3::text[], $4::text[], $5::text[]::numeric[]) AS u(c, p, s)
WHERE k.origin_node_id = $1 AND k.source_connector_id = u.c AND k.source_partition = u.p AND k.source_sequence = u.s
  AND k.passed_at IS NULL;

-- name: StreamHeldAt
-- The events one stream holds at the given sequences (a batch's, to tell
-- resends of held events): probes of the stream's unique sequence index.
SELECT source_connector_id, source_partition, id, source_sequence::text, rule_id, pk_hash
FROM sync_inbox_event
WHERE origin_node_id = $1 AND source_connector_id = $2 AND source_partition = $3
  AND source_sequence = ANY($4::text[]::numeric[]) AND released_at IS NULL;

-- name: EventRelease
-- Sets (true) or clears (false) released_at of the given events.
UPDATE sync_inbox_event e SET released_at = CASE WHEN u.r THEN $3::timestamptz END
FROM unnest($1::bigint[], $2::boolean[]) AS u(id, r)
WHERE e.id = u.id;

-- name: StreamUpdateMany
-- Stores each stream's new next sequence and held count. A gap is timed from
-- when it is first seen: when next_sequence moves, a remaining gap is a new
-- one.
UPDATE sync_stream s SET next_sequence = u.n, held = u.h, updated_at = $5,
    gap_since = CASE WHEN u.h = 0 THEN NULL WHEN u.n <> s.next_sequence THEN $5 ELSE coalesce(s.gap_since, $5) END,
    resend_asked_at = CASE WHEN u.h = 0 OR u.n <> s.next_sequence THEN NULL ELSE s.resend_asked_at END
FROM unnest($2::text[], $3::text[], $4::text[]::numeric[], $6::integer[]) AS u(c, p, n, h)
WHERE s.origin_node_id = $1 AND s.source_connector_id = u.c AND s.source_partition = u.p;

-- name: NodeInboxCount
SELECT count(*) FROM sync_inbox_event WHERE origin_node_id = $1;

-- name: NodeHeartbeat
UPDATE sync_node SET last_heartbeat_at = $2, last_health = $3, last_config_version = $4,
    transfer_window = $5, transfer_window_zone = $6, upload_rate_limit = $7,
    compression_ratio = $8, compression_ratio_measured = $9, unread_events = $10, unread_raw_bytes = $11,
    state_disk_bytes = $12
WHERE node_id = $1;

-- name: NodeSampleInsert
INSERT INTO sync_node_sample (node_id, at, elapsed_seconds, active_seconds, effective_bytes, physical_bytes,
    incoming_raw_bytes, backlog_events, backlog_raw_bytes)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (node_id, at) DO NOTHING;

-- name: NodeBacklogClear
DELETE FROM sync_node_backlog WHERE node_id = $1;

-- name: NodeBacklogInsert
INSERT INTO sync_node_backlog (node_id, direction, rule_id, priority, state, events, raw_bytes, estimated_bytes,
    oldest_captured_at, newest_captured_at, oldest_business_at, newest_business_at, reported_at)
SELECT $1, d, r, p, s, sum(e), sum(b), sum(x), min(o), max(n), min(ob), max(nb), $13
FROM unnest($2::text[], $3::text[], $4::integer[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[],
    $9::timestamptz[], $10::timestamptz[], $11::timestamptz[], $12::timestamptz[]) AS t(d, r, p, s, e, b, x, o, n, ob, nb)
GROUP BY d, r, p, s;

-- name: NodeBacklog
SELECT direction, rule_id, priority, state, events, raw_bytes, estimated_bytes, oldest_captured_at, newest_captured_at,
    oldest_business_at, newest_business_at, reported_at
FROM sync_node_backlog WHERE node_id = $1 ORDER BY direction DESC, rule_id, priority, state;

-- name: NodeTransfer
SELECT transfer_window, transfer_window_zone, upload_rate_limit, compression_ratio, compression_ratio_measured,
    last_heartbeat_at, unread_events, unread_raw_bytes, state_disk_bytes
FROM sync_node WHERE node_id = $1;

-- name: NodeSamples
SELECT at, elapsed_seconds, active_seconds, effective_bytes, physical_bytes, incoming_raw_bytes, backlog_events
FROM sync_node_sample WHERE node_id = $1 AND at > $2 ORDER BY at;

-- name: EventHashes
SELECT event_id::text, content_hash FROM sync_inbox_event
WHERE origin_node_id = $1 AND event_id = ANY($2::text[]::uuid[]);

-- name: AuditInsert
INSERT INTO sync_audit_event (at, actor, action, object_type, object_id, before, after, reason, trace_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9);

-- name: AuditList
SELECT at, actor, action, object_type, object_id, coalesce(before, ''), coalesce(after, ''), reason
FROM sync_audit_event ORDER BY audit_id;

-- name: RuleAllow
INSERT INTO sync_node_rule (node_id, rule_id, rule_version, created_at) VALUES ($1, $2, $3, $4)
ON CONFLICT DO NOTHING;

-- name: RuleList
SELECT rule_id, rule_version FROM sync_node_rule WHERE node_id = $1 ORDER BY rule_id, rule_version;

-- name: RuleInsert
INSERT INTO sync_rule (rule_id, rule_version, source_table, target_table, key_columns, columns,
    insert_over_tombstone, created_at, conflict_policy, lww_column, lww_max_skew_ms, lww_tie)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT DO NOTHING;

-- name: RuleGetMany
SELECT r.rule_id, r.rule_version, r.source_table, r.target_table, r.key_columns, r.columns, r.insert_over_tombstone,
    r.conflict_policy, r.lww_column, r.lww_max_skew_ms, r.lww_tie
FROM sync_rule r JOIN unnest($1::text[], $2::bigint[]) AS u(id, v) ON r.rule_id = u.id AND r.rule_version = u.v;

-- name: RuleRegistered
SELECT rule_id, rule_version, source_table, target_table, key_columns, columns, insert_over_tombstone,
    conflict_policy, lww_column, lww_max_skew_ms, lww_tie
FROM sync_rule ORDER BY rule_id, rule_version;

-- name: ReceiptPage
-- A node's receipts after the cursor (txid, receipt_id), only from
-- transactions older than every transaction still running: a receipt whose
-- transaction commits later has a txid at or above the horizon, so it is
-- served on a later page and never skipped.
SELECT r.receipt_id, r.txid::text, r.event_id::text, r.result, r.reason, coalesce(r.conflict_id::text, ''),
    r.applied_revision, r.decided_at
FROM sync_event_receipt r
WHERE r.origin_node_id = $1 AND (r.txid, r.receipt_id) > ($2::xid8, $3::bigint)
  AND r.txid < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY r.txid, r.receipt_id
LIMIT $4;

-- name: StreamGapsDue
-- Streams whose gap is older than the grace ($2) and not asked about since
-- $3: marks them asked now and returns where each gap starts and ends (the
-- last missing sequence is one below the lowest held event or given-up
-- number).
UPDATE sync_stream s SET resend_asked_at = $1
WHERE s.gap_since IS NOT NULL AND s.gap_since <= $2 AND (s.resend_asked_at IS NULL OR s.resend_asked_at <= $3)
RETURNING s.origin_node_id, s.source_connector_id, s.source_partition, s.next_sequence::text,
    (SELECT (least(
        (SELECT min(e.source_sequence) FROM sync_inbox_event e
         WHERE e.origin_node_id = s.origin_node_id AND e.source_connector_id = s.source_connector_id
           AND e.source_partition = s.source_partition AND e.released_at IS NULL),
        (SELECT min(k.source_sequence) FROM sync_stream_skip k
         WHERE k.origin_node_id = s.origin_node_id AND k.source_connector_id = s.source_connector_id
           AND k.source_partition = s.source_partition AND k.passed_at IS NULL)) - 1)::text);

-- name: ResendInsert
INSERT INTO sync_resend_request (node_id, source_connector_id, source_partition, from_sequence, to_sequence, created_at)
VALUES ($1, $2, $3, $4, $5, $6);

-- name: ResendList
SELECT node_id, source_connector_id, source_partition, from_sequence::text, to_sequence::text, created_at
FROM sync_resend_request WHERE node_id = $1 ORDER BY request_id;

-- name: ShoreEventInsertMany
-- A poll's captured shore changes that need a row (forwarded or blocked),
-- one array element each; returns the positions actually inserted (a
-- position stored before was handled by an earlier run).
INSERT INTO sync_shore_event (topic, part, off, event_id, rule_id, rule_version, result, reason, detail, commands,
    created_at)
SELECT t, p, o, e, r, rv, res, rs, d, n, $11
FROM unnest($1::text[], $2::int[], $3::bigint[], $4::uuid[], $5::text[], $6::bigint[], $7::text[], $8::text[],
    $9::text[], $10::int[]) AS u(t, p, o, e, r, rv, res, rs, d, n)
ON CONFLICT DO NOTHING
RETURNING topic, part, off;

-- name: ShoreBlockedFirst
-- The first blocked position of each partition.
SELECT topic, part, min(off) FROM sync_shore_event WHERE result = 'BLOCKED' GROUP BY topic, part;

-- name: DownlinkTargets
-- The active nodes that sync each of the given rules (any version).
SELECT DISTINCT r.rule_id, r.node_id
FROM sync_node_rule r JOIN sync_node n ON n.node_id = r.node_id
WHERE r.rule_id = ANY($1::text[]) AND n.state = 'active'
ORDER BY r.rule_id, r.node_id;

-- name: DownlinkAllocate
-- Gives node $1 the next $2 sequence numbers (creating its stream) and
-- returns the first; the row stays locked until the transaction ends.
INSERT INTO sync_downlink_node (node_id, next_sequence, updated_at) VALUES ($1, 1 + $2, $3)
ON CONFLICT (node_id) DO UPDATE SET next_sequence = sync_downlink_node.next_sequence + $2, updated_at = $3
RETURNING next_sequence - $2;

-- name: CommandInsertMany
INSERT INTO sync_downlink_command (target_node_id, sequence, command_id, kind, source_event_id, rule_id, body,
    conflict_id, created_at)
SELECT n, s, c, k, e, r, b, f, $9
FROM unnest($1::text[], $2::bigint[], $3::uuid[], $4::text[], $5::uuid[], $6::text[], $7::bytea[], $8::uuid[])
    AS u(n, s, c, k, e, r, b, f);

-- name: CommandPage
SELECT sequence, body FROM sync_downlink_command
WHERE target_node_id = $1 AND sequence > $2
ORDER BY sequence
LIMIT $3;

-- name: CommandAckMany
-- Stores each ack's result on its command unless it has one; returns the
-- command ids of the node that exist (acked now or before).
WITH a AS (
    SELECT * FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::timestamptz[])
        AS u(c, res, rs, rev, rw, at)
), upd AS (
    UPDATE sync_downlink_command d
    SET result = a.res, reason = a.rs, current_revision = a.rev, current_row = a.rw, node_acked_at = a.at,
        acked_at = $8
    FROM a
    WHERE d.target_node_id = $1 AND d.command_id = a.c AND d.result IS NULL
    RETURNING d.command_id
)
SELECT d.command_id::text FROM sync_downlink_command d JOIN a ON d.command_id = a.c
WHERE d.target_node_id = $1;

-- name: DownlinkAdvance
-- Moves node $1's acknowledged prefix to just below its first command
-- without a result.
UPDATE sync_downlink_node n
SET acked_through = coalesce(
        (SELECT min(c.sequence) - 1 FROM sync_downlink_command c WHERE c.target_node_id = n.node_id AND c.result IS NULL),
        n.next_sequence - 1),
    updated_at = $2
WHERE n.node_id = $1;

-- name: DownlinkState
SELECT next_sequence - 1, acked_through FROM sync_downlink_node WHERE node_id = $1;

-- name: InboxEventGet
SELECT event FROM sync_inbox_event WHERE origin_node_id = $1 AND event_id = $2;

-- name: ConflictActiveGet
SELECT conflict_id::text FROM sync_conflict_case
WHERE rule_id = $1 AND pk_hash = $2
  AND state IN ('DETECTED', 'AUTO_DECIDING', 'PENDING_MANUAL', 'DECIDED', 'DISPATCHED')
FOR UPDATE;

-- name: ConflictCreate
INSERT INTO sync_conflict_case (conflict_id, rule_id, rule_version, pk_hash, pk_text, active_conflict_key, state,
    created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, 'DETECTED', $7, $7)
ON CONFLICT DO NOTHING;

-- name: ConflictEvidenceAdd
INSERT INTO sync_conflict_evidence (conflict_id, origin_node_id, event_id, operation, incoming_base_revision,
    incoming_result_revision, current_revision, current_origin_node_id, current_event_id, current_tombstone,
    current_row, found_in, recorded_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
ON CONFLICT (conflict_id, origin_node_id, event_id) DO NOTHING;

-- name: DecisionApplied
-- A conflict decision by id: what the arbiter wrote to the shore database
-- under that id (the shore CDC consumer's loop suppression).
SELECT tombstone, decided_revision FROM sync_conflict_decision WHERE decision_id = $1;

-- name: HeadFollowShore
-- The shore's own change of a record moves its head when the head is at
-- the revision the change was made over ($7; '' : no row), so the head
-- stays what the shore database holds: a head another change moved on is
-- left alone.
INSERT INTO sync_record_head (rule_id, pk_hash, current_revision, origin_node_id, event_id, tombstone, updated_at)
VALUES ($1, $2, $3, $4, NULL, $5, $6)
ON CONFLICT (rule_id, pk_hash) DO UPDATE SET current_revision = EXCLUDED.current_revision,
    origin_node_id = EXCLUDED.origin_node_id, event_id = NULL, tombstone = EXCLUDED.tombstone,
    updated_at = EXCLUDED.updated_at,
    recent_revisions = (ARRAY[sync_record_head.current_revision] || sync_record_head.recent_revisions)[1:8]
WHERE sync_record_head.current_revision = $7 OR ($7 = '' AND sync_record_head.tombstone);

-- name: RetainSamples
DELETE FROM sync_node_sample WHERE at < $1;

-- name: RetainBatches
DELETE FROM sync_upload_batch WHERE received_at < $1;

-- name: RetainIdempotency
DELETE FROM sync_mgmt_idempotency WHERE created_at < $1 AND status <> 0;

-- name: RetainBodiesPick
SELECT e.id, e.event FROM sync_inbox_event e
WHERE e.received_at < $1 AND e.body_trimmed_at IS NULL
  AND EXISTS (SELECT 1 FROM sync_event_receipt r WHERE r.origin_node_id = e.origin_node_id AND r.event_id = e.event_id)
  AND NOT EXISTS (SELECT 1 FROM sync_conflict_case c WHERE c.rule_id = e.rule_id AND c.pk_hash = e.pk_hash
      AND c.state IN ('DETECTED', 'AUTO_DECIDING', 'PENDING_MANUAL', 'DECIDED', 'DISPATCHED'))
ORDER BY e.received_at
LIMIT $2
FOR UPDATE OF e SKIP LOCKED;

-- name: RetainBodiesTrim
UPDATE sync_inbox_event e SET event = t.body, body_trimmed_at = $3
FROM unnest($1::bigint[], $2::bytea[]) AS t(id, body)
WHERE e.id = t.id;

-- name: FleetConnected
SELECT count(*) FROM sync_node WHERE state = 'active' AND last_heartbeat_at >= $1;

-- name: FleetNodes
SELECT state, count(*) FROM sync_node GROUP BY state ORDER BY state;

-- name: FleetBacklog
SELECT b.rule_id, b.state, sum(b.events)::bigint, sum(b.raw_bytes)::bigint, min(b.oldest_captured_at)
FROM sync_node_backlog b JOIN sync_node n USING (node_id)
WHERE n.state = 'active' GROUP BY b.rule_id, b.state ORDER BY b.rule_id, b.state;

-- name: FleetThroughput
SELECT COALESCE(sum(r), 0)::float8 FROM (
    SELECT sum(effective_bytes) / NULLIF(sum(active_seconds), 0) AS r
    FROM sync_node_sample WHERE at > $1 GROUP BY node_id) t;

-- name: FleetConflicts
SELECT state, rule_id, count(*) FROM sync_conflict_case GROUP BY state, rule_id ORDER BY state, rule_id;

-- name: FleetReleases
SELECT state, count(*) FROM sync_rule_release GROUP BY state ORDER BY state;

-- name: FleetNodesWithBacklog
SELECT DISTINCT b.node_id FROM sync_node_backlog b JOIN sync_node n USING (node_id)
WHERE n.state = 'active' AND b.events > 0 ORDER BY b.node_id;

-- name: HealthArbiter
SELECT count(*) FILTER (WHERE state IN ('DETECTED', 'AUTO_DECIDING') AND updated_at < $1),
       count(*) FILTER (WHERE state = 'PENDING_MANUAL' AND manual_due < $2)
FROM sync_conflict_case
WHERE state IN ('DETECTED', 'AUTO_DECIDING', 'PENDING_MANUAL');

-- name: HealthDownlink
SELECT count(*) FROM sync_downlink_command c JOIN sync_node n ON n.node_id = c.target_node_id
WHERE c.result IS NULL AND c.created_at < $1 AND n.last_heartbeat_at >= $2;
