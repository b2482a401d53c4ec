-- Latest-state outbox statements of relaypgx (seed 000 §8.2); latest.go parses
-- this file once at init. Kept apart from queries.sql. Timestamps are always
-- parameters (the engine's Clock), never now().

-- name: LatestUpsert
-- Only forward: the update applies only when the new version is >= the stored
-- one (the conflicting row stays locked either way). An accepted write takes a
-- new generation and resets delivery (PENDING, attempts 0, no error), which
-- also revives a DEAD row. No row comes back when refused. The notify wakes
-- started dispatchers of the target at commit (transactional, like the
-- outbox's).
WITH u AS (
    INSERT INTO relay_latest AS l (target, key, topic, version, generation, event_type, headers, payload,
                                   state, attempts, next_attempt_at, last_error, updated_at, sent_at)
    VALUES ($1, $2, $3, $4, nextval('relay_latest_generation_seq'), $5, $6, $7,
            'PENDING', 0, NULL, '', $8, NULL)
    ON CONFLICT (target, key) DO UPDATE
    SET topic = excluded.topic, version = excluded.version, generation = excluded.generation,
        event_type = excluded.event_type, headers = excluded.headers, payload = excluded.payload,
        state = 'PENDING', attempts = 0, next_attempt_at = NULL, last_error = '',
        updated_at = excluded.updated_at, sent_at = NULL
    WHERE l.version <= excluded.version
    RETURNING l.generation
), n AS (
    SELECT pg_notify('relay_outbox', $1) FROM u
)
SELECT u.generation FROM u, n;

-- name: LatestFetch
-- Due PENDING rows of a target, in key order.
SELECT target, key, topic, version, generation, event_type, headers, payload, state, attempts,
       next_attempt_at, last_error, updated_at, sent_at
FROM relay_latest
WHERE target = $1 AND state = 'PENDING'
  AND (next_attempt_at IS NULL OR next_attempt_at <= $2::timestamptz)
ORDER BY key
LIMIT $3;

-- name: LatestMarkSent
-- Conditional confirmation: only the generation read, only while PENDING. A
-- row rewritten since the fetch keeps its newer generation PENDING.
UPDATE relay_latest AS l
SET state = 'SENT', sent_at = $4, updated_at = $4, next_attempt_at = NULL
FROM unnest($2::text[], $3::bigint[]) AS m(key, generation)
WHERE l.target = $1 AND l.key = m.key AND l.generation = m.generation AND l.state = 'PENDING';

-- name: LatestFail
-- One failed delivery of the generation read: attempts+1 and a backoff, or
-- DEAD at the limit. Right-hand "attempts" is the old value.
UPDATE relay_latest
SET attempts = attempts + 1,
    last_error = $4,
    state = CASE WHEN attempts + 1 >= $6 THEN 'DEAD' ELSE 'PENDING' END,
    next_attempt_at = CASE WHEN attempts + 1 >= $6 THEN NULL ELSE $5::timestamptz END,
    updated_at = $7
WHERE target = $1 AND key = $2 AND generation = $3 AND state = 'PENDING'
RETURNING attempts, state;

-- name: LatestGet
SELECT target, key, topic, version, generation, event_type, headers, payload, state, attempts,
       next_attempt_at, last_error, updated_at, sent_at
FROM relay_latest
WHERE target = $1 AND key = $2;

-- name: LatestStats
SELECT state, count(*), min(updated_at) FROM relay_latest WHERE target = $1 GROUP BY state;

-- name: LatestUpsertMany
-- LatestUpsert for several keys in one statement, each key with the same
-- only-forward rule; the caller passes no (target, key) twice. Rows are
-- inserted in (target, key) order, so concurrent calls lock keys in one order
-- and cannot deadlock. Only accepted rows come back. One notify per target
-- written (count(*) makes every one run, and keeps the result one row per
-- accepted key).
WITH u AS (
    INSERT INTO relay_latest AS l (target, key, topic, version, generation, event_type, headers, payload,
                                   state, attempts, next_attempt_at, last_error, updated_at, sent_at)
    SELECT i.target, i.key, i.topic, i.version, nextval('relay_latest_generation_seq'), i.event_type,
           i.headers, i.payload, 'PENDING', 0, NULL, '', i.now, NULL
    FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::bytea[],
                $8::timestamptz[])
         AS i(target, key, topic, version, event_type, headers, payload, now)
    ORDER BY i.target, i.key
    ON CONFLICT (target, key) DO UPDATE
    SET topic = excluded.topic, version = excluded.version, generation = excluded.generation,
        event_type = excluded.event_type, headers = excluded.headers, payload = excluded.payload,
        state = 'PENDING', attempts = 0, next_attempt_at = NULL, last_error = '',
        updated_at = excluded.updated_at, sent_at = NULL
    WHERE l.version <= excluded.version
    RETURNING l.target, l.key, l.generation
), n AS (
    SELECT pg_notify('relay_outbox', t.target) FROM (SELECT DISTINCT target FROM u) t
)
SELECT u.target, u.key, u.generation
FROM u CROSS JOIN (SELECT count(*) FROM n) c;
