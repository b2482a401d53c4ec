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
