-- The demo's foreign source: a SQLite table standing for a shared mailbox.

-- name: SourceCreate
CREATE TABLE IF NOT EXISTS source_messages (
    id          INTEGER PRIMARY KEY,
    payload     TEXT,
    received_at INTEGER
);

-- name: SourceInsert
INSERT INTO source_messages (id, payload, received_at) VALUES ($1, $2, $3);

-- name: SourceIDs
SELECT id FROM source_messages ORDER BY id;

-- name: SourceAddMark
ALTER TABLE source_messages ADD COLUMN procflag TEXT;

-- name: SourceAddMarkTime
ALTER TABLE source_messages ADD COLUMN proctime INTEGER;

-- name: SourceUnmarked
SELECT COUNT(*) FROM source_messages WHERE procflag IS NULL OR procflag = '';

-- name: SourceMarks
SELECT id, COALESCE(procflag, '') FROM source_messages ORDER BY id;
