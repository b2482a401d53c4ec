-- Queries of relay_work (migration line "relay_work", PostgreSQL only), parsed
-- once at package init by sqlfile.MustParse (store.go).
--
-- $1 is always "now": the injected clock's time, or NULL for the database's
-- clock_timestamp(). Each statement evaluates it once, in the CTE n.
-- Durations are bigint microseconds.

-- name: Ensure
-- $2 queue, $3 sorted keys, $4 wake-up time or NULL.
WITH n AS (SELECT coalesce($1::timestamptz, clock_timestamp()) AS now)
INSERT INTO relay_work (queue, key, revision, processed_revision, state, next_attempt_at, created_at, updated_at)
SELECT $2, u.k, 0, 0, 'idle', $4::timestamptz, n.now, n.now
FROM unnest($3::text[]) WITH ORDINALITY AS u(k, i), n
ORDER BY u.i
ON CONFLICT (queue, key) DO NOTHING;

-- name: Bump
-- $2 queue, $3 sorted distinct keys. Rows are inserted or updated in the
-- order of $3 (the lock order).
WITH n AS (SELECT coalesce($1::timestamptz, clock_timestamp()) AS now)
INSERT INTO relay_work AS w (queue, key, revision, processed_revision, state, created_at, updated_at)
SELECT $2, u.k, 1, 0, 'pending', n.now, n.now
FROM unnest($3::text[]) WITH ORDINALITY AS u(k, i), n
ORDER BY u.i
ON CONFLICT (queue, key) DO UPDATE SET
    revision        = w.revision + 1,
    state           = CASE WHEN w.state = 'idle' THEN 'pending' ELSE w.state END,
    next_attempt_at = CASE WHEN w.state = 'idle' THEN NULL ELSE w.next_attempt_at END,
    updated_at      = CASE WHEN w.state = 'idle' THEN excluded.updated_at ELSE w.updated_at END;

-- name: Claim
-- $2 queue, $3 limit, $4 owner, $5 lease (µs). Candidates: the oldest of
-- each claimable range (one partial index each), merged oldest first; the
-- locking select repeats the predicate because a row may have changed since
-- the snapshot, and skips rows another claimer holds.
--
-- The plan's shape must not depend on statistics: a generic plan cached
-- while the table was small (and never re-planned until an ANALYZE) joined
-- the candidates to a scan of the whole queue, 90 ms at 20,000 rows. So each
-- candidate is locked by its primary key in a LATERAL subquery, and the
-- update reaches the locked row by its ctid. Should a row have changed
-- between the snapshot and the lock, its new version is not visible to the
-- update: the row is then left unclaimed (locked until the statement ends)
-- and the next claim takes it; nothing is claimed that was not updated.
WITH n AS (SELECT coalesce($1::timestamptz, clock_timestamp()) AS now),
cand AS (
    (SELECT key, updated_at AS since FROM relay_work
     WHERE queue = $2 AND state = 'pending' ORDER BY updated_at LIMIT $3)
    UNION ALL
    (SELECT key, next_attempt_at FROM relay_work
     WHERE queue = $2 AND state = 'retry_wait' AND next_attempt_at <= (SELECT now FROM n) ORDER BY next_attempt_at LIMIT $3)
    UNION ALL
    (SELECT key, next_attempt_at FROM relay_work
     WHERE queue = $2 AND state = 'idle' AND next_attempt_at IS NOT NULL AND next_attempt_at <= (SELECT now FROM n)
     ORDER BY next_attempt_at LIMIT $3)
    UNION ALL
    (SELECT key, lease_until FROM relay_work
     WHERE queue = $2 AND state = 'processing' AND lease_until < (SELECT now FROM n) ORDER BY lease_until LIMIT $3)
),
oldest AS (SELECT key, since FROM cand ORDER BY since, key LIMIT $3),
picked AS (
    SELECT w.tid, w.key, w.was, o.since
    FROM oldest o CROSS JOIN LATERAL (
        SELECT w.ctid AS tid, w.key, w.state AS was
        FROM relay_work w
        WHERE w.queue = $2 AND w.key = o.key AND (
            w.state = 'pending'
            OR (w.state IN ('retry_wait', 'idle') AND w.next_attempt_at <= (SELECT now FROM n))
            OR (w.state = 'processing' AND w.lease_until < (SELECT now FROM n)))
        FOR UPDATE OF w SKIP LOCKED
    ) w
    ORDER BY o.since, o.key
)
UPDATE relay_work w SET
    state           = 'processing',
    lease_owner     = $4,
    lease_until     = n.now + $5::bigint * interval '1 microsecond',
    fence           = w.fence + 1,
    next_attempt_at = NULL,
    updated_at      = n.now
FROM picked, n
WHERE w.ctid = picked.tid AND w.queue = $2 AND w.key = picked.key
RETURNING w.key, w.fence, w.revision, w.attempts, picked.was = 'processing', picked.since;

-- name: Renew
-- $2 queue, $3 keys, $4 fences, $5 owners, $6 lease (µs). Returns the keys
-- whose lease was extended: fence and owner match and the lease is live.
WITH n AS (SELECT coalesce($1::timestamptz, clock_timestamp()) AS now)
UPDATE relay_work w SET lease_until = n.now + $6::bigint * interval '1 microsecond'
FROM unnest($3::text[], $4::bigint[], $5::text[]) AS c(key, fence, owner), n
WHERE w.queue = $2 AND w.key = c.key AND w.fence = c.fence AND w.lease_owner = c.owner
  AND w.state = 'processing' AND w.lease_until > n.now
RETURNING w.key, w.fence;

-- name: Lock
-- $2 queue, $3 key. Locks the row for the caller's transaction.
WITH n AS (SELECT coalesce($1::timestamptz, clock_timestamp()) AS now)
SELECT w.fence, coalesce(w.lease_owner, ''), w.state, coalesce(w.lease_until > n.now, false)
FROM relay_work w, n
WHERE w.queue = $2 AND w.key = $3
FOR UPDATE OF w;

-- name: Done
-- $2 queue, $3 key, $4 fence, $5 owner, $6 claimed revision, $7 wake-up or NULL.
WITH n AS (SELECT coalesce($1::timestamptz, clock_timestamp()) AS now)
UPDATE relay_work w SET
    processed_revision = $6,
    state              = CASE WHEN w.revision > $6 THEN 'pending' ELSE 'idle' END,
    next_attempt_at    = CASE WHEN w.revision > $6 THEN NULL ELSE $7::timestamptz END,
    lease_owner        = NULL,
    lease_until        = NULL,
    attempts           = 0,
    last_error         = NULL,
    updated_at         = n.now
FROM n
WHERE w.queue = $2 AND w.key = $3 AND w.fence = $4 AND w.lease_owner = $5 AND w.state = 'processing'
RETURNING w.state;

-- name: FailLock
-- $1 queue, $2 key. Locks the row for Fail's transaction.
SELECT fence, coalesce(lease_owner, ''), state, attempts
FROM relay_work WHERE queue = $1 AND key = $2
FOR UPDATE;

-- name: Fail
-- $2 queue, $3 key, $4 fence, $5 new state, $6 attempts, $7 backoff (µs) or
-- NULL (needs_review), $8 error text.
WITH n AS (SELECT coalesce($1::timestamptz, clock_timestamp()) AS now)
UPDATE relay_work w SET
    state           = $5,
    attempts        = $6,
    next_attempt_at = n.now + $7::bigint * interval '1 microsecond',
    lease_owner     = NULL,
    lease_until     = NULL,
    last_error      = $8,
    updated_at      = n.now
FROM n
WHERE w.queue = $2 AND w.key = $3 AND w.fence = $4 AND w.state = 'processing';

-- name: Review
-- $2 queue, $3 key, $4 fence, $5 owner, $6 reason.
WITH n AS (SELECT coalesce($1::timestamptz, clock_timestamp()) AS now)
UPDATE relay_work w SET
    state           = 'needs_review',
    next_attempt_at = NULL,
    lease_owner     = NULL,
    lease_until     = NULL,
    last_error      = $6,
    updated_at      = n.now
FROM n
WHERE w.queue = $2 AND w.key = $3 AND w.fence = $4 AND w.lease_owner = $5 AND w.state = 'processing';

-- name: Rearm
-- $2 queue, $3 key. last_error is kept for the record until the next Done.
WITH n AS (SELECT coalesce($1::timestamptz, clock_timestamp()) AS now)
UPDATE relay_work w SET state = 'pending', attempts = 0, updated_at = n.now
FROM n
WHERE w.queue = $2 AND w.key = $3 AND w.state = 'needs_review';

-- name: Release
-- $2 queue, $3 owner.
WITH n AS (SELECT coalesce($1::timestamptz, clock_timestamp()) AS now)
UPDATE relay_work w SET state = 'pending', lease_owner = NULL, lease_until = NULL, updated_at = n.now
FROM n
WHERE w.queue = $2 AND w.state = 'processing' AND w.lease_owner = $3;

-- name: Get
-- $1 queue, $2 key.
SELECT key, revision, processed_revision, state, coalesce(lease_owner, ''), lease_until, fence, attempts,
       next_attempt_at, coalesce(last_error, ''), created_at, updated_at
FROM relay_work WHERE queue = $1 AND key = $2;

-- name: Stats
-- $1 queue.
SELECT state, count(*), min(updated_at), min(next_attempt_at)
FROM relay_work WHERE queue = $1
GROUP BY state;

-- name: LockMany
-- $2 queue, $3 keys (sorted by the caller: one lock order). Locks the rows
-- for the caller's transaction and returns what Lock checks of each.
WITH n AS (SELECT coalesce($1::timestamptz, clock_timestamp()) AS now)
SELECT w.key, w.fence, coalesce(w.lease_owner, ''), w.state, coalesce(w.lease_until > n.now, false)
FROM relay_work w, n
WHERE w.queue = $2 AND w.key = ANY ($3::text[])
ORDER BY w.key
FOR UPDATE OF w;

-- name: DoneMany
-- Done for many claims of one queue: $2 queue, then per claim key, fence,
-- owner, claimed revision and wake-up (NULL: none). Returns the keys done.
WITH n AS (SELECT coalesce($1::timestamptz, clock_timestamp()) AS now),
v AS (SELECT * FROM unnest($3::text[], $4::bigint[], $5::text[], $6::bigint[], $7::timestamptz[])
          AS v(key, fence, owner, revision, wake))
UPDATE relay_work w SET
    processed_revision = v.revision,
    state              = CASE WHEN w.revision > v.revision THEN 'pending' ELSE 'idle' END,
    next_attempt_at    = CASE WHEN w.revision > v.revision THEN NULL ELSE v.wake END,
    lease_owner        = NULL,
    lease_until        = NULL,
    attempts           = 0,
    last_error         = NULL,
    updated_at         = n.now
FROM n, v
WHERE w.queue = $2 AND w.key = v.key AND w.fence = v.fence AND w.lease_owner = v.owner AND w.state = 'processing'
RETURNING w.key;
