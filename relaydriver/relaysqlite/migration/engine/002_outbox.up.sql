-- relay engine schema for SQLite, version 2: the transactional outbox (seed
-- 000 §8.1, §8.3). Mirrors relaypgx's 002_outbox column for column; times are
-- INTEGER Unix microseconds UTC written from parameters, tables are STRICT.
-- SQLite has one writer, so commit order is append order anyway; the per-key
-- sequence row is kept for one schema and one behaviour (docs/outbox.md).

-- The last sequence number allocated per (target, key); never deleted.
CREATE TABLE relay_outbox_key (
    target   TEXT    NOT NULL,
    "key"    TEXT    NOT NULL,
    last_seq INTEGER NOT NULL,
    PRIMARY KEY (target, "key")
) STRICT;

-- MSG_EVENT: one row per event of a target (sink).
CREATE TABLE relay_outbox (
    id              INTEGER NOT NULL PRIMARY KEY,
    event_id        TEXT    NOT NULL UNIQUE,
    target          TEXT    NOT NULL,
    topic           TEXT    NOT NULL DEFAULT '',
    "key"           TEXT    NOT NULL,
    seq             INTEGER NOT NULL,
    event_type      TEXT    NOT NULL CHECK (event_type IN ('UPSERT', 'TOMBSTONE')),
    headers         TEXT    NOT NULL DEFAULT '{}',
    -- NULL for a tombstone.
    payload         BLOB,
    state           TEXT    NOT NULL DEFAULT 'PENDING'
        CHECK (state IN ('PENDING', 'SENT', 'DEAD')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER,
    last_error      TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    sent_at         INTEGER,
    updated_at      INTEGER NOT NULL,
    UNIQUE (target, "key", seq),
    CHECK (event_type = 'UPSERT' OR payload IS NULL),
    CHECK ((state = 'SENT') = (sent_at IS NOT NULL))
) STRICT;

-- Pending heads and runs per key of a target (OutboxFetch).
CREATE INDEX relay_outbox_pending_idx ON relay_outbox (target, "key", seq)
    WHERE state = 'PENDING';

-- Retention of SENT rows (OutboxDeleteSent, seed 000 §8.3).
CREATE INDEX relay_outbox_sent_idx ON relay_outbox (target, sent_at)
    WHERE state = 'SENT';
