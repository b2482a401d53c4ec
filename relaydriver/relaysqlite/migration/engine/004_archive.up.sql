-- relay engine schema for SQLite, version 4: archival of terminal processing
-- rows (seed 000 §9.3). Mirrors relaypgx's 004_archive column for column;
-- times are INTEGER Unix microseconds UTC written from parameters, tables are
-- STRICT. relay_message_history holds the full row of every archived message
-- (payload included); the main table keeps an ARCHIVED shadow row with the id
-- and identity, so the identity stays unique (INV-9).

CREATE TABLE relay_message_history (
    pipeline           TEXT    NOT NULL,
    id                 INTEGER NOT NULL,
    "key"              TEXT    NOT NULL DEFAULT '',
    -- the terminal state the row had when archived.
    state              TEXT    NOT NULL,
    attempts           INTEGER NOT NULL DEFAULT 0,
    next_attempt_at    INTEGER,
    error_class        TEXT    NOT NULL DEFAULT '',
    last_error         TEXT    NOT NULL DEFAULT '',
    identity_key       TEXT,
    payload            BLOB,
    received_at        INTEGER,
    enqueued_at        INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL,
    ack_next_at        INTEGER,
    ack_at             INTEGER,
    ack_attempts       INTEGER NOT NULL DEFAULT 0,
    ack_abandoned_at   INTEGER,
    ack_abandon_reason TEXT    NOT NULL DEFAULT '',
    lease_owner        TEXT    NOT NULL DEFAULT '',
    lease_expires_at   INTEGER,
    -- when the archival job moved the row here.
    archived_at        INTEGER NOT NULL,
    PRIMARY KEY (pipeline, id)
) STRICT;

-- Archival candidates: terminal rows of a pipeline by updated_at.
CREATE INDEX relay_message_archive_idx ON relay_message (pipeline, updated_at)
    WHERE state IN ('SUCCEEDED', 'SKIPPED', 'DEAD');
