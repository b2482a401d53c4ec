-- Latest-state outbox statements of relaysqlite (seed 000 §8.2); latest.go
-- parses this file once at init. Kept apart from queries.sql. Times are
-- INTEGER Unix microseconds from parameters (the engine's Clock), never the
-- store's. Row lists are JSON arrays of [key, generation] pairs.

-- name: LatestNextGeneration
-- Takes the next write generation (in the upsert's transaction).
UPDATE relay_latest_generation SET last = last + 1 WHERE id = 1 RETURNING last;

-- name: LatestUpsert
-- Only forward: the update applies only when the new version is >= the stored
-- one. An accepted write takes the new generation $9 and resets delivery
-- (PENDING, attempts 0, no error), which also revives a DEAD row. No row comes
-- back when refused.
INSERT INTO relay_latest (target, "key", topic, version, generation, event_type, headers, payload,
                          state, attempts, next_attempt_at, last_error, updated_at, sent_at)
VALUES ($1, $2, $3, $4, $9, $5, $6, $7, 'PENDING', 0, NULL, '', $8, NULL)
ON CONFLICT (target, "key") DO UPDATE
SET topic = excluded.topic, version = excluded.version, generation = excluded.generation,
    event_type = excluded.event_type, headers = excluded.headers, payload = excluded.payload,
    state = 'PENDING', attempts = 0, next_attempt_at = NULL, last_error = '',
    updated_at = excluded.updated_at, sent_at = NULL
WHERE relay_latest.version <= excluded.version
RETURNING generation;

-- name: LatestFetch
-- Due PENDING rows of a target, in key order.
SELECT target, "key", topic, version, generation, event_type, headers, payload, state, attempts,
       next_attempt_at, last_error, updated_at, sent_at
FROM relay_latest
WHERE target = $1 AND state = 'PENDING'
  AND (next_attempt_at IS NULL OR next_attempt_at <= $2)
ORDER BY "key"
LIMIT $3;

-- name: LatestMarkSent
-- Conditional confirmation: only the generation read, only while PENDING. A
-- row rewritten since the fetch keeps its newer generation PENDING. $2 is a
-- JSON array of [key, generation] pairs.
UPDATE relay_latest
SET state = 'SENT', sent_at = $3, updated_at = $3, next_attempt_at = NULL
WHERE target = $1 AND state = 'PENDING'
  AND ("key", generation) IN (
      SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each($2));

-- name: LatestFail
-- One failed delivery of the generation read: attempts+1 and a backoff, or
-- DEAD at the limit. Right-hand "attempts" is the old value.
UPDATE relay_latest
SET attempts = attempts + 1,
    last_error = $4,
    state = CASE WHEN attempts + 1 >= $6 THEN 'DEAD' ELSE 'PENDING' END,
    next_attempt_at = CASE WHEN attempts + 1 >= $6 THEN NULL ELSE $5 END,
    updated_at = $7
WHERE target = $1 AND "key" = $2 AND generation = $3 AND state = 'PENDING'
RETURNING attempts, state;

-- name: LatestGet
SELECT target, "key", topic, version, generation, event_type, headers, payload, state, attempts,
       next_attempt_at, last_error, updated_at, sent_at
FROM relay_latest
WHERE target = $1 AND "key" = $2;

-- name: LatestStats
SELECT state, count(*), min(updated_at) FROM relay_latest WHERE target = $1 GROUP BY state;
