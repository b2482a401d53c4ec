-- relay engine schema for SQLite (modernc.org/sqlite), version 1.
--
-- Mirrors the PostgreSQL schema of relaypgx table for table and column for
-- column (same names, same NULL/'' conventions: absent text is '', absent
-- times and the unbound identity are NULL). Differences are representation
-- only:
--   * every time column is INTEGER Unix microseconds UTC (NULL = no time), so
--     comparisons are numeric; the driver converts, SQL never reads a clock;
--   * tables are STRICT, so a value of the wrong type is refused instead of
--     being stored silently (e.g. a time.Time bound as TEXT).
-- Released files are never edited: add 002_*.up.sql instead.

-- The migration bookkeeping table. The driver also creates it (IF NOT EXISTS,
-- same definition) before applying the first version, so that the version row
-- of this very file can be recorded.
CREATE TABLE IF NOT EXISTS relay_migration (
    line       TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL,
    PRIMARY KEY (line, version)
) STRICT;

-- The durable inbox (seed 000 §1.2 PROC_STATE).
CREATE TABLE relay_message (
    pipeline           TEXT    NOT NULL,
    id                 INTEGER NOT NULL,
    "key"              TEXT    NOT NULL DEFAULT '',
    state              TEXT    NOT NULL DEFAULT 'PENDING'
        CHECK (state IN ('PENDING', 'FAILED', 'SUCCEEDED', 'SKIPPED', 'DEAD', 'ARCHIVED')),
    attempts           INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at    INTEGER,
    error_class        TEXT    NOT NULL DEFAULT '',
    last_error         TEXT    NOT NULL DEFAULT '',
    -- business identity, bound once after decoding (seed 000 §2); NULL = unbound.
    identity_key       TEXT,
    payload            BLOB,
    -- copied from the source's clock; may be NULL; display only (seed 000 §1.2).
    received_at        INTEGER,
    -- local enqueue time; the only basis of age checks (seed 000 §6.1).
    enqueued_at        INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    -- acknowledgement write-back facts (seed 000 §6.1).
    ack_next_at        INTEGER,
    ack_at             INTEGER,
    ack_attempts       INTEGER NOT NULL DEFAULT 0,
    ack_abandoned_at   INTEGER,
    ack_abandon_reason TEXT    NOT NULL DEFAULT '',
    -- claim of the per-key and unordered modes.
    lease_owner        TEXT    NOT NULL DEFAULT '',
    lease_expires_at   INTEGER,
    PRIMARY KEY (pipeline, id),
    -- the identity stays unique while a row (or its ARCHIVED shadow) exists (seed 000 §9.3).
    UNIQUE (pipeline, identity_key)
) STRICT;

-- The FIFO head: smallest unfinished id (seed 000 §1.1). ARCHIVED is excluded
-- by the predicate, never by a state list that happens to omit it.
CREATE INDEX relay_message_head_idx ON relay_message (pipeline, id)
    WHERE state IN ('PENDING', 'FAILED');

-- Per-key heads and the per-key live-lease test of MessageClaim.
CREATE INDEX relay_message_key_head_idx ON relay_message (pipeline, "key", id)
    WHERE state IN ('PENDING', 'FAILED');

-- The acknowledgement scan (seed 000 §6.1): terminal, not confirmed, not
-- abandoned, fair order by attempts then id.
CREATE INDEX relay_message_ack_idx ON relay_message (pipeline, ack_attempts, id)
    WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD')
      AND ack_at IS NULL AND ack_abandoned_at IS NULL;

-- The intake watermark of a sequence source (seed 000 §1.2 INBOX_CURSOR).
CREATE TABLE relay_cursor (
    pipeline   TEXT    NOT NULL PRIMARY KEY,
    watermark  INTEGER NOT NULL,
    hole_since INTEGER,
    seeded_at  INTEGER,
    seed_mode  TEXT    NOT NULL DEFAULT '',
    updated_at INTEGER NOT NULL
) STRICT;

-- Permanent holes released by the watermark (seed 000 §4.1 step 4).
CREATE TABLE relay_hole (
    pipeline      TEXT    NOT NULL,
    id            INTEGER NOT NULL,
    first_seen_at INTEGER,
    released_at   INTEGER,
    PRIMARY KEY (pipeline, id)
) STRICT;

-- Lease rows of TryLock: SQLite has no session advisory locks, so an instance
-- holds a row it renews; the row expires after its TTL.
CREATE TABLE relay_lock (
    name       TEXT    NOT NULL PRIMARY KEY,
    owner      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT;

-- Id allocation for messages enqueued with ID 0. Allocation runs under the
-- single writer, so allocation order is commit order.
CREATE TABLE relay_sequence (
    pipeline TEXT    NOT NULL PRIMARY KEY,
    last_id  INTEGER NOT NULL
) STRICT;
