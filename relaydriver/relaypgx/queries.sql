-- Every SQL statement of relaypgx. Each statement follows a "-- name: Name"
-- marker and runs to the next marker; queries.go parses this file once at init.
-- Timestamps are always parameters (the engine's Clock), never now().
-- {{ident}} marks an identifier that Go validates and substitutes (savepoints).

-- name: MessageAllocateIDs
SELECT nextval('relay_message_id_seq') FROM generate_series(1, $1::integer);

-- name: MessageInsertMany
-- Insert if absent (seed 000 §4.1 step 5). $7 is each input's identity (NULL:
-- none); an input whose identity a message of its queue holds is not
-- inserted (a duplicate). ON CONFLICT has no target, so both the primary key
-- and the partial unique identity index (migration 006) are arbiters: an input
-- conflicting with a row of a transaction still in progress waits for it and
-- is skipped if that transaction commits. Go sends each (queue, id) and
-- each (queue, identity) at most once per statement. Rows are inserted in
-- (queue, identity, id) order — id order for rows without an identity, as
-- intake sends them — so that concurrent batches overlapping on ids, or on
-- identities, take their conflicts in the same order and cannot deadlock.
INSERT INTO relay_message (queue, id, key, state, payload, received_at, enqueued_at, updated_at, identity_key)
SELECT u.queue, u.id, u.key, 'PENDING', u.payload, u.received_at, u.now, u.now, u.identity
FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bytea[], $5::timestamptz[], $6::timestamptz[], $7::text[])
     AS u(queue, id, key, payload, received_at, now, identity)
ORDER BY u.queue, u.identity NULLS FIRST, u.id
ON CONFLICT DO NOTHING
RETURNING queue, id;

-- name: MessageInsertLookup
-- Runs right after MessageInsertMany in the same batch, with a snapshot of its
-- own: for each input with an identity ($1 queue, $2 id, $3 identity; ord
-- its position) whether its (queue, id) exists now and which message holds
-- its identity — including a row of a concurrent transaction the INSERT waited
-- for. Both lookups are LATERAL subqueries with LIMIT 1, so even a generic
-- plan made on an empty table probes the primary key and the identity index
-- once per input (see MessageBindIdentities).
SELECT u.ord, m.id IS NOT NULL AS present, o.id AS owner
FROM unnest($1::text[], $2::bigint[], $3::text[]) WITH ORDINALITY AS u(queue, id, identity, ord)
LEFT JOIN LATERAL (SELECT x.id FROM relay_message x
                   WHERE x.queue = u.queue AND x.id = u.id LIMIT 1) m ON true
LEFT JOIN LATERAL (SELECT x.id FROM relay_message x
                   WHERE x.queue = u.queue AND x.identity_key = u.identity LIMIT 1) o ON true
ORDER BY u.ord;

-- name: MessageGet
SELECT queue, id, key, state, attempts, next_attempt_at, error_class, last_error,
       identity_key, payload, received_at, enqueued_at, updated_at,
       ack_next_at, ack_at, ack_attempts, ack_abandoned_at, ack_abandon_reason,
       lease_owner, lease_expires_at
FROM relay_message
WHERE queue = $1 AND id = $2;

-- name: MessageIDExists
SELECT EXISTS (SELECT 1 FROM relay_message WHERE queue = $1 AND id = $2);

-- name: MessageListUnfinished
-- ARCHIVED is excluded explicitly, not only by the state list (seed 000 §9.3).
SELECT queue, id, key, state, attempts, next_attempt_at, error_class, last_error,
       identity_key, payload, received_at, enqueued_at, updated_at,
       ack_next_at, ack_at, ack_attempts, ack_abandoned_at, ack_abandon_reason,
       lease_owner, lease_expires_at
FROM relay_message
WHERE queue = $1 AND id > $2
  AND state IN ('PENDING', 'FAILED') AND state <> 'ARCHIVED'
ORDER BY id
LIMIT $3;

-- name: MessageBindIdentity
-- One independent idempotent statement (seed 000 §2); a unique violation means
-- another message owns the identity.
UPDATE relay_message SET identity_key = $3
WHERE queue = $1 AND id = $2 AND identity_key IS NULL
RETURNING id;

-- name: SessionAsyncCommit
-- Leads a batch (one implicit transaction): its commit does not wait for the
-- WAL flush. Only for writes that are safe to lose in a crash and are made
-- durable by the next synchronous commit (see MessageBindIdentity,
-- MessageClaim and OutboxMarkSent).
SELECT set_config('synchronous_commit', 'off', true);

-- name: MessageIdentityOwner
SELECT id FROM relay_message WHERE queue = $1 AND identity_key = $2;

-- name: MessageIdentityOf
SELECT coalesce(identity_key, '') FROM relay_message WHERE queue = $1 AND id = $2;

-- name: MessageComplete
-- Terminal state and acknowledgement intent in one UPDATE (seed 000 §5.2 step 7).
-- "Unfinished" is spelled as "not a terminal state" (the same set, by the
-- state CHECK) in every statement that finds a message by id, so that no
-- partial index on unfinished rows can serve it and the planner takes the
-- primary key: without statistics (a fresh table, autovacuum behind) it
-- otherwise picked a (queue, key, id) index, whose scan reads every
-- unfinished row of the queue to find one id.
-- $9 (CountAttempt) adds the attempt the terminal state ends to attempts.
UPDATE relay_message
SET state = $3, error_class = $4, last_error = $5,
    ack_next_at = CASE WHEN $6::boolean THEN $7::timestamptz ELSE NULL END,
    attempts = attempts + CASE WHEN $9::boolean THEN 1 ELSE 0 END,
    updated_at = $7, lease_owner = '', lease_expires_at = NULL
WHERE queue = $1 AND id = $2
  AND state NOT IN ('SUCCEEDED', 'SKIPPED', 'DEAD', 'ARCHIVED')
  AND ($8::text = '' OR lease_owner = $8::text);

-- name: MessageCompleteMany
-- MessageComplete for a batch in one statement, with the same guard per row;
-- the caller compares the returned rows with its input (all or nothing).
-- Each input finds its row by a primary-key probe (a LATERAL subquery with
-- LIMIT 1, which the planner cannot turn into a join) and the update reaches
-- it by that row's ctid: even a generic plan made while the table was empty
-- then touches only the batch's rows, where a plain join was planned as a
-- hash join over a scan of every unfinished row. A row changed by another
-- transaction since the statement's snapshot no longer has that ctid, so it
-- drops out (as a failed guard does) and the caller falls back.
UPDATE relay_message t
SET state = v.state, error_class = v.error_class, last_error = v.last_error,
    ack_next_at = CASE WHEN v.ack THEN v.now ELSE NULL END,
    attempts = t.attempts + CASE WHEN v.count_attempt THEN 1 ELSE 0 END,
    updated_at = v.now, lease_owner = '', lease_expires_at = NULL
FROM (SELECT u.*, r.tid
      FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::boolean[],
                  $7::timestamptz[], $8::text[], $9::boolean[])
           AS u(queue, id, state, error_class, last_error, ack, now, owner, count_attempt),
           LATERAL (SELECT x.ctid AS tid FROM relay_message x
                    WHERE x.queue = u.queue AND x.id = u.id LIMIT 1) r) v
WHERE t.ctid = v.tid
  AND t.state NOT IN ('SUCCEEDED', 'SKIPPED', 'DEAD', 'ARCHIVED')
  AND (v.owner = '' OR t.lease_owner = v.owner)
RETURNING t.queue, t.id;

-- name: MessageDelete
-- MessageComplete of a SUCCEEDED message whose queue deletes what succeeded
-- (MessageCompleteParams.Delete): the row goes, under the same guard. A
-- delete writes no index entry (an UPDATE to SUCCEEDED is never heap-only:
-- the state is in the partial indexes' predicates, so the new row version
-- gets entries in the primary key, the acknowledgement and the archive
-- index).
DELETE FROM relay_message
WHERE queue = $1 AND id = $2
  AND state NOT IN ('SUCCEEDED', 'SKIPPED', 'DEAD', 'ARCHIVED')
  AND ($3::text = '' OR lease_owner = $3::text);

-- name: MessageDeleteMany
-- MessageDelete for a batch in one statement, each row found and reached as
-- in MessageCompleteMany (a primary-key probe per input, then its ctid).
DELETE FROM relay_message t
USING (SELECT u.*, r.tid
       FROM unnest($1::text[], $2::bigint[], $3::text[]) AS u(queue, id, owner),
            LATERAL (SELECT x.ctid AS tid FROM relay_message x
                     WHERE x.queue = u.queue AND x.id = u.id LIMIT 1) r) v
WHERE t.ctid = v.tid
  AND t.state NOT IN ('SUCCEEDED', 'SKIPPED', 'DEAD', 'ARCHIVED')
  AND (v.owner = '' OR t.lease_owner = v.owner)
RETURNING t.queue, t.id;

-- name: MessageFail
-- One increment per failure, where it happens (seed 000 §9.1). The guard is
-- spelled as in MessageComplete, so the primary key serves it.
UPDATE relay_message
SET state = 'FAILED', attempts = attempts + 1, error_class = $3, last_error = $4,
    next_attempt_at = $5, updated_at = $6, lease_owner = '', lease_expires_at = NULL
WHERE queue = $1 AND id = $2
  AND state NOT IN ('SUCCEEDED', 'SKIPPED', 'DEAD', 'ARCHIVED')
  AND ($7::text = '' OR lease_owner = $7::text)
RETURNING attempts;

-- name: MessageExhaust
-- DEAD(EXHAUSTED): the class is overwritten, last_error keeps the cause (seed 000 §3).
UPDATE relay_message
SET state = 'DEAD', error_class = 'EXHAUSTED',
    ack_next_at = CASE WHEN $4::boolean THEN $5::timestamptz ELSE NULL END,
    updated_at = $5, lease_owner = '', lease_expires_at = NULL
WHERE queue = $1 AND id = $2 AND state = 'FAILED' AND attempts >= $3;

-- name: MessageClaim
-- Unordered: the smallest ready ids, skipping rows another claimer is locking.
-- Two scans, each over an index whose predicate the WHERE clause matches
-- exactly (migration 005): unleased rows in id order (relay_message_ready_idx,
-- which rows in flight are not part of, so a claim never steps over them), and
-- expired leases, oldest expiry first (relay_message_leased_idx), unless $6
-- (SkipExpired) says this call may skip that search. The union keeps the
-- smallest $3 ids of both.
WITH fresh AS (
    SELECT m.queue, m.id
    FROM relay_message m
    WHERE m.queue = $1
      AND m.state IN ('PENDING', 'FAILED')
      AND m.lease_owner = ''
      AND (m.state = 'PENDING' OR m.next_attempt_at IS NULL OR m.next_attempt_at <= $2)
    ORDER BY m.id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), expired AS (
    SELECT m.queue, m.id
    FROM relay_message m
    WHERE NOT $6::boolean
      AND m.queue = $1
      AND m.state IN ('PENDING', 'FAILED')
      AND m.lease_owner <> ''
      AND m.lease_expires_at <= $2
      AND (m.state = 'PENDING' OR m.next_attempt_at IS NULL OR m.next_attempt_at <= $2)
    ORDER BY m.lease_expires_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), ready AS (
    SELECT queue, id FROM fresh
    UNION ALL
    SELECT queue, id FROM expired
    ORDER BY id
    LIMIT $3
)
UPDATE relay_message t
SET lease_owner = $4, lease_expires_at = $5
FROM ready
WHERE t.queue = ready.queue AND t.id = ready.id
RETURNING t.queue, t.id, t.key, t.state, t.attempts, t.next_attempt_at, t.error_class, t.last_error,
          t.identity_key, t.payload, t.received_at, t.enqueued_at, t.updated_at,
          t.ack_next_at, t.ack_at, t.ack_attempts, t.ack_abandoned_at, t.ack_abandon_reason,
          t.lease_owner, t.lease_expires_at;

-- name: MessageClaimPerKey
-- Per key: only the head of each key (no smaller unfinished id of the key), and
-- only keys where no other message holds a live lease — a smaller id can commit
-- after a larger one was claimed, and must then wait for that lease. Candidates
-- are unleased rows (relay_message_ready_idx) and expired leases
-- (relay_message_leased_idx; skipped when $6), as in MessageClaim. Both checks are
-- correlated scalar subqueries rather than NOT EXISTS: the planner turns NOT
-- EXISTS into an anti-join, and without statistics it then scanned every
-- unfinished row of the queue once per candidate. Both subqueries spell the
-- unfinished states "state BETWEEN 'FAILED' AND 'PENDING'", which only the
-- predicate of relay_message_key_order_idx (queue, key, id) matches (see
-- migration 005): each runs as a probe of the key's few unfinished rows,
-- whatever the statistics say. (The live-lease check once said
-- "state IN ('PENDING', 'FAILED')", which relay_message_head_idx (queue, id)
-- also matches; a generic plan without statistics chose that index and
-- filtered every unfinished row of the queue per candidate — 8.8 s per claim
-- at a backlog of 22,000 keys.)
WITH fresh AS (
    SELECT m.queue, m.id
    FROM relay_message m
    WHERE m.queue = $1
      AND m.state IN ('PENDING', 'FAILED')
      AND m.lease_owner = ''
      AND (m.state = 'PENDING' OR m.next_attempt_at IS NULL OR m.next_attempt_at <= $2)
      AND (SELECT o.id FROM relay_message o
           WHERE o.queue = m.queue AND o.key = m.key
             AND o.state BETWEEN 'FAILED' AND 'PENDING' AND o.id < m.id
           LIMIT 1) IS NULL
      AND (SELECT l.id FROM relay_message l
           WHERE l.queue = m.queue AND l.key = m.key
             AND l.state BETWEEN 'FAILED' AND 'PENDING' AND l.lease_owner <> ''
             AND l.lease_expires_at > $2
           LIMIT 1) IS NULL
    ORDER BY m.id
    LIMIT $3
    FOR UPDATE OF m SKIP LOCKED
), expired AS (
    SELECT m.queue, m.id
    FROM relay_message m
    WHERE NOT $6::boolean
      AND m.queue = $1
      AND m.state IN ('PENDING', 'FAILED')
      AND m.lease_owner <> ''
      AND m.lease_expires_at <= $2
      AND (m.state = 'PENDING' OR m.next_attempt_at IS NULL OR m.next_attempt_at <= $2)
      AND (SELECT o.id FROM relay_message o
           WHERE o.queue = m.queue AND o.key = m.key
             AND o.state BETWEEN 'FAILED' AND 'PENDING' AND o.id < m.id
           LIMIT 1) IS NULL
      AND (SELECT l.id FROM relay_message l
           WHERE l.queue = m.queue AND l.key = m.key
             AND l.state BETWEEN 'FAILED' AND 'PENDING' AND l.lease_owner <> ''
             AND l.id <> m.id AND l.lease_expires_at > $2
           LIMIT 1) IS NULL
    ORDER BY m.lease_expires_at
    LIMIT $3
    FOR UPDATE OF m SKIP LOCKED
), ready AS (
    SELECT queue, id FROM fresh
    UNION ALL
    SELECT queue, id FROM expired
    ORDER BY id
    LIMIT $3
)
UPDATE relay_message t
SET lease_owner = $4, lease_expires_at = $5
FROM ready
WHERE t.queue = ready.queue AND t.id = ready.id
RETURNING t.queue, t.id, t.key, t.state, t.attempts, t.next_attempt_at, t.error_class, t.last_error,
          t.identity_key, t.payload, t.received_at, t.enqueued_at, t.updated_at,
          t.ack_next_at, t.ack_at, t.ack_attempts, t.ack_abandoned_at, t.ack_abandon_reason,
          t.lease_owner, t.lease_expires_at;

-- name: MessageLeaseRenew
-- Extends the leases $3 still holds on the messages $2 to $4, in one statement
-- for every message an instance has in flight, and returns the ids of $2 that
-- are no longer $3's (finished, released, leased to another owner, unknown).
-- A row locked by another transaction is skipped (SKIP LOCKED) instead of
-- waited for: it is usually the owner's own terminal write, not committed yet,
-- and the renewal of the other messages must not wait for that batch. Such a
-- row is still $3's in the statement's snapshot, so it is neither renewed nor
-- reported; the next renewal decides it. The data-modifying CTE runs to
-- completion although the final SELECT does not read it. Each id is a
-- primary-key probe (a LATERAL subquery with LIMIT 1, and a correlated scalar
-- subquery, which the planner cannot turn into a join; "unfinished" spelled
-- as in MessageComplete) and the update reaches the locked row by its ctid,
-- as in MessageCompleteMany: a generic plan made on an empty table otherwise
-- scanned the whole queue or hash-joined over every row.
WITH renewed AS (
    UPDATE relay_message t
    SET lease_expires_at = $4
    FROM unnest($2::bigint[]) AS u(id),
         LATERAL (SELECT m.ctid AS tid FROM relay_message m
                  WHERE m.queue = $1 AND m.id = u.id
                    AND m.state NOT IN ('SUCCEEDED', 'SKIPPED', 'DEAD', 'ARCHIVED')
                    AND m.lease_owner = $3::text
                  LIMIT 1
                  FOR UPDATE SKIP LOCKED) r
    WHERE t.ctid = r.tid
    RETURNING t.id
)
SELECT u.id
FROM unnest($2::bigint[]) AS u(id)
WHERE (SELECT m.id FROM relay_message m
       WHERE m.queue = $1 AND m.id = u.id
         AND m.state NOT IN ('SUCCEEDED', 'SKIPPED', 'DEAD', 'ARCHIVED')
         AND m.lease_owner = $3::text
       LIMIT 1) IS NULL
ORDER BY u.id;

-- name: MessageLeaseRelease
-- Makes every unfinished message leased to $2 claimable at once (a restarted
-- instance's own leases, relay.Config.InstanceID). Runs once per engine start;
-- the WHERE clause matches relay_message_leased_idx (migration 005), which
-- holds only the rows in flight, so the planner can read those rather than
-- the backlog.
UPDATE relay_message
SET lease_owner = '', lease_expires_at = NULL
WHERE queue = $1
  AND state IN ('PENDING', 'FAILED')
  AND lease_owner <> ''
  AND lease_owner = $2::text;

-- name: MessageReplay
-- Back to PENDING; identity_key is never touched (seed 000 §9.1).
UPDATE relay_message
SET state = 'PENDING', attempts = 0, next_attempt_at = NULL, error_class = '', last_error = '',
    ack_next_at = NULL, ack_at = NULL, ack_attempts = 0, ack_abandoned_at = NULL,
    ack_abandon_reason = '', lease_owner = '', lease_expires_at = NULL, updated_at = $4
WHERE queue = $1
  AND state IN ('FAILED', 'DEAD')
  AND error_class = ANY($2::text[])
  AND (coalesce(cardinality($3::bigint[]), 0) = 0 OR id = ANY($3::bigint[]));

-- name: MessageStats
SELECT state, count(*),
       min(enqueued_at) FILTER (WHERE state IN ('PENDING', 'FAILED')),
       max(id)
FROM relay_message
WHERE queue = $1
GROUP BY state;

-- name: MessageExists
SELECT EXISTS (SELECT 1 FROM relay_message WHERE queue = $1);

-- name: CursorGet
SELECT queue, watermark, hole_since, seeded_at, seed_mode, updated_at
FROM relay_cursor
WHERE queue = $1;

-- name: CursorSave
-- Never changes seeded_at / seed_mode.
INSERT INTO relay_cursor (queue, watermark, hole_since, seeded_at, seed_mode, updated_at)
VALUES ($1, $2, $3, NULL, '', $4)
ON CONFLICT (queue) DO UPDATE
SET watermark = EXCLUDED.watermark, hole_since = EXCLUDED.hole_since, updated_at = EXCLUDED.updated_at;

-- name: CursorSeed
-- Check and insert in one statement: refused (no row) when the queue already
-- has a cursor or any message (seed 000 §4.3).
INSERT INTO relay_cursor (queue, watermark, hole_since, seeded_at, seed_mode, updated_at)
SELECT $1::text, $2::bigint, NULL, $4::timestamptz, $3::text, $4::timestamptz
WHERE NOT EXISTS (SELECT 1 FROM relay_message WHERE queue = $1::text)
ON CONFLICT (queue) DO NOTHING
RETURNING queue;

-- name: HoleInsert
INSERT INTO relay_hole (queue, id, first_seen_at, released_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (queue, id) DO NOTHING;

-- name: HoleList
SELECT queue, id, first_seen_at, released_at, found_at, ingested_at, ingested_id
FROM relay_hole
WHERE queue = $1
ORDER BY id;

-- name: HoleListUnfound
-- The holes the intake still checks for a late row: not found yet and
-- released at or after $2 (the look-back window), through the partial index
-- relay_hole_unfound_idx (engine migration hole_late).
SELECT queue, id, first_seen_at, released_at, found_at, ingested_at, ingested_id
FROM relay_hole
WHERE queue = $1 AND found_at IS NULL AND released_at >= $2
ORDER BY id
LIMIT $3;

-- name: HoleListFound
SELECT queue, id, first_seen_at, released_at, found_at, ingested_at, ingested_id
FROM relay_hole
WHERE queue = $1 AND found_at IS NOT NULL
ORDER BY id;

-- name: HoleMarkFound
-- Only the first finding counts: a hole already found is left as it is.
UPDATE relay_hole SET found_at = $3
WHERE queue = $1 AND id = $2 AND found_at IS NULL;

-- name: HoleMarkIngested
-- Only a found hole not yet ingested: a second ingest changes nothing.
UPDATE relay_hole SET ingested_at = $3, ingested_id = $4
WHERE queue = $1 AND id = $2 AND found_at IS NOT NULL AND ingested_at IS NULL;

-- name: OutboxAppend
-- The events of one call, in the caller's business transaction, in one
-- statement (docs/outbox.md). The key rows are upserted in (target, key)
-- order, each advanced by its number of events in the call: the upsert takes
-- the key's row lock, held to commit, so same-key writers serialise and seq
-- order is commit order without gaps, and two calls never wait on each
-- other's keys in opposite orders. A key's events get the seqs after the old
-- last_seq in input order. Tombstones carry a NULL payload element.
WITH input AS (
    SELECT t.event_id, t.target, t.topic, t.key, t.event_type, t.headers, t.payload, t.created_at, t.ord
    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[],
                $8::timestamptz[])
         WITH ORDINALITY AS t (event_id, target, topic, key, event_type, headers, payload, created_at, ord)
), counts AS (
    SELECT target, key, count(*) AS n FROM input GROUP BY target, key
), k AS (
    INSERT INTO relay_outbox_key AS rk (target, key, last_seq)
    SELECT target, key, n FROM counts ORDER BY target, key
    ON CONFLICT (target, key) DO UPDATE SET last_seq = rk.last_seq + EXCLUDED.last_seq
    RETURNING rk.target, rk.key, rk.last_seq
)
INSERT INTO relay_outbox (event_id, target, topic, key, seq, event_type, headers, payload,
                          state, attempts, created_at, updated_at)
SELECT i.event_id, i.target, i.topic, i.key,
       k.last_seq - c.n + row_number() OVER (PARTITION BY i.target, i.key ORDER BY i.ord),
       i.event_type, i.headers, i.payload, 'PENDING', 0, i.created_at, i.created_at
FROM input i
JOIN counts c ON c.target = i.target AND c.key = i.key
JOIN k ON k.target = i.target AND k.key = i.key
ORDER BY i.ord
RETURNING event_id, id, seq;

-- name: OutboxFetch
-- PENDING events of a target (docs/outbox.md, "Dispatcher throughput"). The
-- ready keys are found by a skip scan of the pending index — one probe per key,
-- each landing on the key's head — in rotation order: lap 1 the keys after $3,
-- lap 2 (wrapping around) the keys up to $3. Each key whose head is due and
-- that is not in $5 contributes the contiguous run from its head (seq = head +
-- position - 1), at most $4 events. The recursive CTEs are evaluated only as
-- far as the LIMIT pulls, so a call reads the keys it serves and the events it
-- returns, never the whole backlog. lap and ord give the serving order; the
-- driver sorts by them (no ORDER BY here: a sort would evaluate every key).
WITH RECURSIVE lap1 (key, head_seq, head_next, ord) AS (
    (SELECT o.key, o.seq, o.next_attempt_at, 1
     FROM relay_outbox o
     WHERE o.target = $1 AND o.state = 'PENDING' AND o.key > $3
     ORDER BY o.key, o.seq
     LIMIT 1)
  UNION ALL
    SELECT n.key, n.seq, n.next_attempt_at, k.ord + 1
    FROM lap1 k
    CROSS JOIN LATERAL (
        SELECT o.key, o.seq, o.next_attempt_at
        FROM relay_outbox o
        WHERE o.target = $1 AND o.state = 'PENDING' AND o.key > k.key
        ORDER BY o.key, o.seq
        LIMIT 1) n
), lap2 (key, head_seq, head_next, ord) AS (
    (SELECT o.key, o.seq, o.next_attempt_at, 1
     FROM relay_outbox o
     WHERE o.target = $1 AND o.state = 'PENDING' AND o.key <= $3
     ORDER BY o.key, o.seq
     LIMIT 1)
  UNION ALL
    SELECT n.key, n.seq, n.next_attempt_at, k.ord + 1
    FROM lap2 k
    CROSS JOIN LATERAL (
        SELECT o.key, o.seq, o.next_attempt_at
        FROM relay_outbox o
        WHERE o.target = $1 AND o.state = 'PENDING' AND o.key > k.key AND o.key <= $3
        ORDER BY o.key, o.seq
        LIMIT 1) n
), ready AS (
    SELECT key, head_seq, head_next, 1 AS lap, ord FROM lap1
    UNION ALL
    SELECT key, head_seq, head_next, 2 AS lap, ord FROM lap2
)
SELECT e.id, e.event_id, e.target, e.topic, e.key, e.seq, e.event_type, e.headers, e.payload, e.state,
       e.attempts, e.next_attempt_at, e.last_error, e.created_at, e.sent_at, e.updated_at, r.lap, r.ord
FROM ready r
CROSS JOIN LATERAL (
    SELECT w.*
    FROM (
        SELECT p.*, row_number() OVER (ORDER BY p.seq) AS rn
        FROM (
            SELECT o.*
            FROM relay_outbox o
            WHERE o.target = $1 AND o.state = 'PENDING' AND o.key = r.key
            ORDER BY o.seq
            LIMIT $4) p
    ) w
    WHERE w.seq = r.head_seq + w.rn - 1
) e
WHERE (r.head_next IS NULL OR r.head_next <= $2)
  AND r.key <> ALL ($5::text[])
LIMIT $4;

-- name: OutboxMarkSent
-- SENT and sent_at together, only for rows still PENDING (seed 000 §8.1). The
-- guard is spelled "not SENT and not DEAD" (the same set, by
-- relay_outbox_state_check) so that no partial index predicate matches it:
-- spelled state = 'PENDING' it let the planner AND the id lookup with a scan of
-- the whole pending index (and its dead entries), once per batch. Each id is
-- found by a primary-key probe and its row updated by ctid, as in
-- MessageCompleteMany: a generic plan made while the outbox was empty ran
-- "id = ANY(...)" as a scan of the whole table, SENT rows of the retention
-- period included.
UPDATE relay_outbox o
SET state = 'SENT', sent_at = $2, updated_at = $2, next_attempt_at = NULL
FROM (SELECT r.tid
      FROM unnest($1::bigint[]) AS u(id),
           LATERAL (SELECT x.ctid AS tid FROM relay_outbox x WHERE x.id = u.id LIMIT 1) r) v
WHERE o.ctid = v.tid AND o.state NOT IN ('SENT', 'DEAD');

-- name: OutboxDeleteDelivered
-- OutboxMarkSent with OutboxMarkSentParams.Delete: the confirmed rows still
-- PENDING are deleted instead of marked, found the same way (primary-key probe,
-- then the row by ctid) under the same guard. A deleted row adds no index
-- entry; a SENT mark adds one to the primary key, both unique indexes and the
-- SENT partial index (the state is in the partial indexes' predicates, so the
-- update is never heap-only).
DELETE FROM relay_outbox o
USING (SELECT r.tid
       FROM unnest($1::bigint[]) AS u(id),
            LATERAL (SELECT x.ctid AS tid FROM relay_outbox x WHERE x.id = u.id LIMIT 1) r) v
WHERE o.ctid = v.tid AND o.state NOT IN ('SENT', 'DEAD');

-- name: OutboxFail
-- One failed delivery: attempts+1 and a backoff, or DEAD at the limit (kept as
-- the DLQ), in one statement. Right-hand "attempts" is the old value.
UPDATE relay_outbox
SET attempts = attempts + 1,
    last_error = $2,
    state = CASE WHEN attempts + 1 >= $4 THEN 'DEAD' ELSE 'PENDING' END,
    next_attempt_at = CASE WHEN attempts + 1 >= $4 THEN NULL ELSE $3::timestamptz END,
    updated_at = $5
WHERE id = $1 AND state = 'PENDING'
RETURNING attempts, state;

-- name: OutboxExists
SELECT EXISTS (SELECT 1 FROM relay_outbox WHERE id = $1);

-- name: OutboxDeleteSent
-- Retention (seed 000 §8.3): only SENT rows older than the cutoff; DEAD stays.
DELETE FROM relay_outbox
WHERE id IN (
    SELECT id FROM relay_outbox
    WHERE target = $1 AND state = 'SENT' AND sent_at < $2
    ORDER BY sent_at
    LIMIT $3);

-- name: OutboxList
SELECT id, event_id, target, topic, key, seq, event_type, headers, payload, state, attempts,
       next_attempt_at, last_error, created_at, sent_at, updated_at
FROM relay_outbox
WHERE target = $1 AND ($2::text = '' OR state = $2::text)
ORDER BY key, seq
LIMIT $3;

-- name: OutboxStats
SELECT state, count(*), min(created_at) FROM relay_outbox WHERE target = $1 GROUP BY state;

-- name: MigrationTableExists
SELECT to_regclass('relay_migration') IS NOT NULL;

-- name: MigrationLock
-- Serialises migrators of one schema; released at commit.
SELECT pg_advisory_xact_lock(hashtextextended(coalesce(current_schema(), '') || '/relay_migration', 0));

-- name: MigrationCreateTable
CREATE TABLE IF NOT EXISTS relay_migration (
    line       text        NOT NULL,
    version    integer     NOT NULL,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL,
    CONSTRAINT relay_migration_pkey PRIMARY KEY (line, version)
);

-- name: MigrationApplied
SELECT version FROM relay_migration WHERE line = $1 ORDER BY version;

-- name: MigrationIsApplied
SELECT EXISTS (SELECT 1 FROM relay_migration WHERE line = $1 AND version = $2);

-- name: MigrationRecord
INSERT INTO relay_migration (line, version, name, applied_at) VALUES ($1, $2, $3, $4);

-- name: LockTry
-- Session advisory lock, scoped to the current schema so that deployments
-- sharing one database in different schemas do not exclude each other.
SELECT k, pg_try_advisory_lock(k)
FROM (SELECT hashtextextended(coalesce(current_schema(), '') || '/' || $1::text, 0) AS k) s;

-- name: LockHeld
-- A bigint advisory key shows in pg_locks as classid (high 32 bits), objid (low
-- 32 bits), objsubid 1.
SELECT EXISTS (
    SELECT 1 FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid()
      AND classid::bigint = (($1::bigint >> 32) & 4294967295)
      AND objid::bigint = ($1::bigint & 4294967295)
      AND objsubid = 1);

-- name: LockRelease
SELECT pg_advisory_unlock($1::bigint);

-- name: Savepoint
SAVEPOINT {{ident}};

-- name: RollbackToSavepoint
ROLLBACK TO SAVEPOINT {{ident}};

-- name: ReleaseSavepoint
RELEASE SAVEPOINT {{ident}};

-- name: OutboxNotify
-- Wakes listeners of the outbox when the appending transaction commits
-- (NOTIFY is transactional: nothing is sent if it rolls back).
SELECT pg_notify('relay_outbox', $1);

-- name: OutboxListen
LISTEN relay_outbox;

-- name: MessageBindIdentities
-- MessageBindIdentity for a batch in one statement, deciding as the inputs
-- would one by one in order (seed 000 §2). $2/$3 are the inputs (distinct
-- ids), ord their position. "cur" reads each input's message (found), its
-- identity (bound) and the current owner of the input's identity (owner,
-- through the (queue, identity_key) unique index). An input is free when
-- its message exists unbound and its identity has no owner; of several free
-- inputs with one identity only the first binds, the later ones are its
-- duplicates. Nothing binds when an id is unknown. Each binding is still an
-- idempotent "WHERE identity_key IS NULL", so a message bound concurrently
-- since the statement's snapshot is left alone (and missing from "done"),
-- and an identity taken concurrently is a unique violation; the caller falls
-- back to MessageBindIdentity per input on either.
--
-- Every access is written so that even a generic plan made while the table
-- was empty (no statistics: all paths cost alike) probes an index per input:
-- the two lookups are LATERAL subqueries with LIMIT 1 (which the planner
-- cannot flatten into a join it might hash over the whole queue), and the
-- update joins on (queue, id) as join columns, which only the primary key
-- serves. The "still unbound" test is num_nulls(t.identity_key) = 1 rather
-- than "IS NULL", which an identity index holding NULLs could answer: a stale
-- generic plan drove the update that way and compared every unbound message
-- of the queue with every input — 118 ms per call at a 10,000-message
-- backlog.
WITH u AS (
    SELECT i.id, i.identity, i.ord
    FROM unnest($2::bigint[], $3::text[]) WITH ORDINALITY AS i(id, identity, ord)
), cur AS (
    SELECT u.ord, u.id, u.identity, m.id IS NOT NULL AS found, m.identity_key AS bound, o.id AS owner
    FROM u
    LEFT JOIN LATERAL (SELECT x.id, x.identity_key FROM relay_message x
                       WHERE x.queue = $1 AND x.id = u.id LIMIT 1) m ON true
    LEFT JOIN LATERAL (SELECT x.id FROM relay_message x
                       WHERE x.queue = $1 AND x.identity_key = u.identity LIMIT 1) o ON true
), free AS (
    SELECT DISTINCT ON (c.identity) $1::text AS queue, c.id, c.identity
    FROM cur c
    WHERE c.found AND c.bound IS NULL AND c.owner IS NULL
    ORDER BY c.identity, c.ord
), done AS (
    UPDATE relay_message t
    SET identity_key = f.identity
    FROM free f
    WHERE t.queue = f.queue AND t.id = f.id AND num_nulls(t.identity_key) = 1
      AND NOT EXISTS (SELECT 1 FROM cur WHERE NOT cur.found)
    RETURNING t.id
)
SELECT c.ord, c.found, c.bound, c.owner, d.id IS NOT NULL
FROM cur c
LEFT JOIN done d ON d.id = c.id
ORDER BY c.ord;
