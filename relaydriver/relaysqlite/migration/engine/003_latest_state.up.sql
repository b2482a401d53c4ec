-- relay engine schema for SQLite, version 3: latest-state outbox rows (seed
-- 000 §8.2, §12.4). Mirrors relaypgx's 003_latest_state column for column;
-- times are INTEGER Unix microseconds UTC written from parameters, tables are
-- STRICT. See docs/outbox.md "Latest-state rows".

-- The write-generation counter (PostgreSQL uses a sequence): every accepted
-- upsert takes last + 1. One row.
CREATE TABLE relay_latest_generation (
    id   INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    last INTEGER NOT NULL
) STRICT;

INSERT INTO relay_latest_generation (id, last) VALUES (1, 0);

-- One row per (target, key): the key's latest full state.
CREATE TABLE relay_latest (
    target          TEXT    NOT NULL,
    "key"           TEXT    NOT NULL,
    topic           TEXT    NOT NULL DEFAULT '',
    -- STATE_VERSION: an upsert is accepted only when its version is >= this.
    version         INTEGER NOT NULL,
    generation      INTEGER NOT NULL,
    event_type      TEXT    NOT NULL CHECK (event_type IN ('UPSERT', 'TOMBSTONE')),
    headers         TEXT    NOT NULL DEFAULT '{}',
    -- NULL for a tombstone.
    payload         BLOB,
    state           TEXT    NOT NULL DEFAULT 'PENDING'
        CHECK (state IN ('PENDING', 'SENT', 'DEAD')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER,
    last_error      TEXT    NOT NULL DEFAULT '',
    updated_at      INTEGER NOT NULL,
    sent_at         INTEGER,
    PRIMARY KEY (target, "key"),
    CHECK (event_type = 'UPSERT' OR payload IS NULL),
    CHECK ((state = 'SENT') = (sent_at IS NOT NULL))
) STRICT;

-- PENDING rows of a target in key order (LatestFetch).
CREATE INDEX relay_latest_pending_idx ON relay_latest (target, "key")
    WHERE state = 'PENDING';
