-- Every SQL statement of relaysqlite. Each statement follows a
-- "-- name: QueryName" marker; queries.go parses this file once at init and
-- refuses to start on a name it uses but cannot find.
--
-- Placeholders are $1, $2 … bound by position (modernc binds $N to the N-th
-- argument, a reused $N to the same argument). Times are INTEGER Unix
-- microseconds UTC; NULL is the zero time. No statement reads SQLite's clock:
-- every "now" is a parameter (seed 000 §5.1).

-- name: Savepoint
SAVEPOINT {{ident}};

-- name: RollbackToSavepoint
ROLLBACK TO SAVEPOINT {{ident}};

-- name: ReleaseSavepoint
RELEASE SAVEPOINT {{ident}};

-- name: PragmaJournalMode
PRAGMA journal_mode;

-- name: MigrationTableExists
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'relay_migration';

-- name: MigrationBootstrap
CREATE TABLE IF NOT EXISTS relay_migration (
    line       TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL,
    PRIMARY KEY (line, version)
) STRICT;

-- name: MigrationVersions
SELECT version FROM relay_migration WHERE line = $1 ORDER BY version;

-- name: MigrationIsApplied
SELECT count(*) FROM relay_migration WHERE line = $1 AND version = $2;

-- name: MigrationRecord
INSERT INTO relay_migration (line, version, name, applied_at) VALUES ($1, $2, $3, $4);

-- name: SequenceNext
-- The next id is past both the counter and every id already in the queue,
-- so an allocated id never collides with an explicit (source) id.
INSERT INTO relay_sequence (queue, last_id)
VALUES ($1, coalesce((SELECT max(id) FROM relay_message WHERE queue = $1), 0) + 1)
ON CONFLICT (queue) DO UPDATE
SET last_id = max(relay_sequence.last_id,
                  coalesce((SELECT max(id) FROM relay_message WHERE queue = $1), 0)) + 1
RETURNING last_id;

-- name: MessageInsert
-- Insert if absent (seed 000 §4.1 step 5). $7 is the identity the message is
-- inserted bound to (NULL: none); Go looked up first (MessageInsertLookup) that
-- no message holds it, under the single writer.
INSERT INTO relay_message (queue, id, "key", state, payload, received_at, enqueued_at, updated_at, identity_key)
VALUES ($1, $2, $3, 'PENDING', $4, $5, $6, $6, $7)
ON CONFLICT (queue, id) DO NOTHING;

-- name: MessageInsertLookup
-- For an input with an identity, before its insert: whether its explicit id
-- ($2; 0 for an allocated one) is present and which message holds its
-- identity $3 (NULL: none).
SELECT EXISTS (SELECT 1 FROM relay_message WHERE queue = $1 AND id = $2),
       (SELECT id FROM relay_message WHERE queue = $1 AND identity_key = $3);

-- name: MessageGet
SELECT queue, id, "key", state, attempts, next_attempt_at, error_class, last_error,
       identity_key, payload, received_at, enqueued_at, updated_at,
       ack_next_at, ack_at, ack_attempts, ack_abandoned_at, ack_abandon_reason,
       lease_owner, lease_expires_at
FROM relay_message
WHERE queue = $1 AND id = $2;

-- name: MessageListUnfinished
SELECT queue, id, "key", state, attempts, next_attempt_at, error_class, last_error,
       identity_key, payload, received_at, enqueued_at, updated_at,
       ack_next_at, ack_at, ack_attempts, ack_abandoned_at, ack_abandon_reason,
       lease_owner, lease_expires_at
FROM relay_message
WHERE queue = $1 AND state IN ('PENDING', 'FAILED') AND id > $2
ORDER BY id
LIMIT $3;

-- name: MessageBindIdentity
-- One idempotent statement (seed 000 §2): binds only an unbound message. A
-- unique violation means another message owns the identity.
UPDATE relay_message SET identity_key = $3
WHERE queue = $1 AND id = $2 AND identity_key IS NULL;

-- name: MessageIdentityOf
SELECT identity_key FROM relay_message WHERE queue = $1 AND id = $2;

-- name: MessageIdentityOwner
SELECT id FROM relay_message WHERE queue = $1 AND identity_key = $2;

-- name: MessageComplete
-- Terminal state and acknowledgement intent in one UPDATE (seed 000 §5.2 step 7).
-- $9 (CountAttempt, 0 or 1) adds the attempt the terminal state ends to attempts.
UPDATE relay_message
SET state = $3, error_class = $4, last_error = $5, ack_next_at = $6, updated_at = $7,
    attempts = attempts + $9,
    lease_owner = '', lease_expires_at = NULL
WHERE queue = $1 AND id = $2 AND state IN ('PENDING', 'FAILED')
  AND ($8 = '' OR lease_owner = $8);

-- name: MessageDelete
-- MessageComplete of a SUCCEEDED message whose queue deletes what succeeded
-- (MessageCompleteParams.Delete): the row goes, under the same guard.
DELETE FROM relay_message
WHERE queue = $1 AND id = $2 AND state IN ('PENDING', 'FAILED')
  AND ($3 = '' OR lease_owner = $3);

-- name: MessageFail
UPDATE relay_message
SET state = 'FAILED', attempts = attempts + 1, error_class = $3, last_error = $4,
    next_attempt_at = $5, updated_at = $6, lease_owner = '', lease_expires_at = NULL
WHERE queue = $1 AND id = $2 AND state IN ('PENDING', 'FAILED')
  AND ($7 = '' OR lease_owner = $7)
RETURNING attempts;

-- name: MessageExhaust
-- DEAD(EXHAUSTED) overwrites the class and keeps last_error (seed 000 §3).
UPDATE relay_message
SET state = 'DEAD', error_class = 'EXHAUSTED', ack_next_at = $4, updated_at = $5,
    lease_owner = '', lease_expires_at = NULL
WHERE queue = $1 AND id = $2 AND state = 'FAILED' AND attempts >= $3;

-- name: MessageExistsByID
SELECT count(*) FROM relay_message WHERE queue = $1 AND id = $2;

-- name: MessageClaim
-- Ready = unfinished, due, not under a live lease. The single writer
-- serialises claims, so no row can be claimed twice.
UPDATE relay_message
SET lease_owner = $2, lease_expires_at = $3
WHERE queue = $1 AND id IN (
    SELECT m.id FROM relay_message m
    WHERE m.queue = $1
      AND m.state IN ('PENDING', 'FAILED')
      AND (m.state = 'PENDING' OR m.next_attempt_at IS NULL OR m.next_attempt_at <= $4)
      AND (m.lease_expires_at IS NULL OR m.lease_expires_at <= $4)
    ORDER BY m.id
    LIMIT $5)
RETURNING queue, id, "key", state, attempts, next_attempt_at, error_class, last_error,
          identity_key, payload, received_at, enqueued_at, updated_at,
          ack_next_at, ack_at, ack_attempts, ack_abandoned_at, ack_abandon_reason,
          lease_owner, lease_expires_at;

-- name: MessageClaimPerKey
-- As MessageClaim, but only each key's head (no smaller unfinished id of the
-- same key) and only keys where no other message holds a live lease.
UPDATE relay_message
SET lease_owner = $2, lease_expires_at = $3
WHERE queue = $1 AND id IN (
    SELECT m.id FROM relay_message m
    WHERE m.queue = $1
      AND m.state IN ('PENDING', 'FAILED')
      AND (m.state = 'PENDING' OR m.next_attempt_at IS NULL OR m.next_attempt_at <= $4)
      AND (m.lease_expires_at IS NULL OR m.lease_expires_at <= $4)
      AND NOT EXISTS (
          SELECT 1 FROM relay_message h
          WHERE h.queue = m.queue AND h."key" = m."key"
            AND h.state IN ('PENDING', 'FAILED') AND h.id < m.id)
      AND NOT EXISTS (
          SELECT 1 FROM relay_message l
          WHERE l.queue = m.queue AND l."key" = m."key"
            AND l.state IN ('PENDING', 'FAILED') AND l.id <> m.id
            AND l.lease_expires_at > $4)
    ORDER BY m.id
    LIMIT $5)
RETURNING queue, id, "key", state, attempts, next_attempt_at, error_class, last_error,
          identity_key, payload, received_at, enqueued_at, updated_at,
          ack_next_at, ack_at, ack_attempts, ack_abandoned_at, ack_abandon_reason,
          lease_owner, lease_expires_at;

-- name: MessageLeaseRenew
-- Extends the leases $2 still holds on the messages of the JSON array $4 to
-- $3 and returns the renewed ids; the single writer makes the statement see
-- every row settled, so each other input is no longer $2's.
UPDATE relay_message
SET lease_expires_at = $3
WHERE queue = $1
  AND id IN (SELECT value FROM json_each($4))
  AND state IN ('PENDING', 'FAILED')
  AND lease_owner = $2
RETURNING id;

-- name: MessageLeaseRelease
-- Makes every unfinished message leased to $2 claimable at once (a restarted
-- instance's own leases, relay.Config.InstanceID).
UPDATE relay_message
SET lease_owner = '', lease_expires_at = NULL
WHERE queue = $1
  AND state IN ('PENDING', 'FAILED')
  AND lease_owner = $2;

-- name: MessageReplay
-- Back to PENDING, resetting attempts, next attempt, error, lease and
-- acknowledgement facts, never the identity (seed 000 §9.1). $3 and $4 are
-- JSON arrays; $4 NULL means every id.
UPDATE relay_message
SET state = 'PENDING', attempts = 0, next_attempt_at = NULL, error_class = '',
    last_error = '', updated_at = $2, lease_owner = '', lease_expires_at = NULL,
    ack_next_at = NULL, ack_at = NULL, ack_attempts = 0, ack_abandoned_at = NULL,
    ack_abandon_reason = ''
WHERE queue = $1
  AND state IN ('FAILED', 'DEAD')
  AND error_class IN (SELECT value FROM json_each($3))
  AND ($4 IS NULL OR id IN (SELECT value FROM json_each($4)));

-- name: MessageStats
-- One statement, so counts, oldest and max id come from one snapshot. The
-- oldest unfinished enqueue time ignores ARCHIVED and terminal rows.
SELECT state, count(*),
       min(CASE WHEN state IN ('PENDING', 'FAILED') THEN enqueued_at END),
       max(id)
FROM relay_message WHERE queue = $1 GROUP BY state;

-- name: MessageExists
SELECT EXISTS (SELECT 1 FROM relay_message WHERE queue = $1);

-- name: CursorGet
SELECT queue, watermark, hole_since, seeded_at, seed_mode, updated_at
FROM relay_cursor WHERE queue = $1;

-- name: CursorSave
-- Never touches seeded_at / seed_mode.
INSERT INTO relay_cursor (queue, watermark, hole_since, updated_at)
VALUES ($1, $2, $3, $4)
ON CONFLICT (queue) DO UPDATE
SET watermark = excluded.watermark, hole_since = excluded.hole_since,
    updated_at = excluded.updated_at;

-- name: CursorSeed
-- Check and insert in one statement (seed 000 §4.3): 0 rows means refused.
INSERT INTO relay_cursor (queue, watermark, hole_since, seeded_at, seed_mode, updated_at)
SELECT $1, $2, NULL, $4, $3, $4
WHERE NOT EXISTS (SELECT 1 FROM relay_cursor WHERE queue = $1)
  AND NOT EXISTS (SELECT 1 FROM relay_message WHERE queue = $1);

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

-- name: LockAcquire
-- Take the lease when absent, expired, or already ours; 0 rows means held.
-- holder and holder_pid name this process (see 006_lock_holder).
INSERT INTO relay_lock (name, owner, expires_at, holder, holder_pid) VALUES ($1, $2, $3, $5, $6)
ON CONFLICT (name) DO UPDATE
SET owner = excluded.owner, expires_at = excluded.expires_at,
    holder = excluded.holder, holder_pid = excluded.holder_pid
WHERE relay_lock.expires_at <= $4 OR relay_lock.owner = excluded.owner;

-- name: LockHolder
SELECT owner, holder, holder_pid FROM relay_lock WHERE name = $1;

-- name: LockTakeOver
-- Take a lease whose holding process is gone: only if the row still names
-- the owner and process that were found dead (compare and swap).
UPDATE relay_lock SET owner = $2, expires_at = $3, holder = $4, holder_pid = $5
WHERE name = $1 AND owner = $6 AND holder = $4 AND holder_pid = $7;

-- name: LockRenew
UPDATE relay_lock SET expires_at = $3 WHERE name = $1 AND owner = $2;

-- name: LockRelease
DELETE FROM relay_lock WHERE name = $1 AND owner = $2;

-- name: OutboxKeyNext
-- Allocates the key's next seq (docs/outbox.md). Under SQLite's single writer
-- commit order is append order anyway; a rolled-back transaction consumes no
-- number.
INSERT INTO relay_outbox_key (target, "key", last_seq) VALUES ($1, $2, 1)
ON CONFLICT (target, "key") DO UPDATE SET last_seq = relay_outbox_key.last_seq + 1
RETURNING last_seq;

-- name: OutboxInsert
INSERT INTO relay_outbox (event_id, target, topic, "key", seq, event_type, headers, payload,
                          state, attempts, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'PENDING', 0, $9, $9)
RETURNING id;

-- name: OutboxFetch
-- PENDING events of a target; per key only the contiguous run from its head
-- (seq - row_number is constant along a run), nothing for a key whose head
-- waits for its backoff or that is in the JSON array $5. Keys are served in
-- rotation: those after $3 first (lap 0), then from the smallest key up to $3
-- (lap 1); the result is in that order, each key's run in seq order. SQLite has
-- one writer and no skip scan to lean on; the window over the target's PENDING
-- rows is the simple form of the PostgreSQL statement's semantics.
SELECT id, event_id, target, topic, "key", seq, event_type, headers, payload, state, attempts,
       next_attempt_at, last_error, created_at, sent_at, updated_at
FROM (
    SELECT o.*,
           row_number() OVER w AS rn,
           first_value(o.seq) OVER w AS head_seq,
           first_value(o.next_attempt_at) OVER w AS head_next,
           CASE WHEN o."key" > $3 THEN 0 ELSE 1 END AS lap
    FROM relay_outbox o
    WHERE o.target = $1 AND o.state = 'PENDING'
      AND o."key" NOT IN (SELECT value FROM json_each($5))
    WINDOW w AS (PARTITION BY o."key" ORDER BY o.seq)
) r
WHERE r.seq - r.rn = r.head_seq - 1
  AND (r.head_next IS NULL OR r.head_next <= $2)
ORDER BY r.lap, r."key", r.seq
LIMIT $4;

-- name: OutboxMarkSent
-- SENT and sent_at together, only for rows still PENDING (seed 000 §8.1). $1
-- is a JSON array of ids.
UPDATE relay_outbox
SET state = 'SENT', sent_at = $2, updated_at = $2, next_attempt_at = NULL
WHERE id IN (SELECT value FROM json_each($1)) AND state = 'PENDING';

-- name: OutboxDeleteDelivered
-- OutboxMarkSent with OutboxMarkSentParams.Delete: the confirmed rows still
-- PENDING are deleted instead of marked. $1 is a JSON array of ids.
DELETE FROM relay_outbox
WHERE id IN (SELECT value FROM json_each($1)) AND state = 'PENDING';

-- name: OutboxFail
-- One failed delivery: attempts+1 and a backoff, or DEAD at the limit (kept as
-- the DLQ), in one statement. Right-hand "attempts" is the old value.
UPDATE relay_outbox
SET attempts = attempts + 1,
    last_error = $2,
    state = CASE WHEN attempts + 1 >= $4 THEN 'DEAD' ELSE 'PENDING' END,
    next_attempt_at = CASE WHEN attempts + 1 >= $4 THEN NULL ELSE $3 END,
    updated_at = $5
WHERE id = $1 AND state = 'PENDING'
RETURNING attempts, state;

-- name: OutboxExists
SELECT count(*) FROM relay_outbox WHERE id = $1;

-- name: OutboxDeleteSent
-- Retention (seed 000 §8.3): only SENT rows older than the cutoff; DEAD stays.
DELETE FROM relay_outbox
WHERE id IN (
    SELECT id FROM relay_outbox
    WHERE target = $1 AND state = 'SENT' AND sent_at < $2
    ORDER BY sent_at
    LIMIT $3);

-- name: OutboxList
SELECT id, event_id, target, topic, "key", seq, event_type, headers, payload, state, attempts,
       next_attempt_at, last_error, created_at, sent_at, updated_at
FROM relay_outbox
WHERE target = $1 AND ($2 = '' OR state = $2)
ORDER BY "key", seq
LIMIT $3;

-- name: OutboxStats
SELECT state, count(*), min(created_at) FROM relay_outbox WHERE target = $1 GROUP BY state;
