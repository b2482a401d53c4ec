-- Snapshot tasks (ship side): a rule's current rows read in key order and
-- sent as SNAPSHOT events, then the rule's changes captured since the task
-- began replayed on top. Times are Unix microseconds UTC.
CREATE TABLE snapshot_task (
    task_id       TEXT PRIMARY KEY,
    rule_id       TEXT NOT NULL,
    rule_version  INTEGER NOT NULL,
    db            TEXT NOT NULL,
    tbl           TEXT NOT NULL,
    state         TEXT NOT NULL CHECK (state IN ('PENDING', 'BASELINE', 'CATCHING_UP', 'COMPLETED', 'FAILED')),
    -- The pinned CDC start position: JSON [{"topic":…,"partition":…,"offset":…}],
    -- the next offset of each of the rule's partitions when the task began
    -- (NULL until pinned).
    positions     TEXT,
    -- The last key read (JSON array of base64 values; NULL: none yet) and
    -- whether the table's end was reached.
    cursor        TEXT,
    read_done     INTEGER NOT NULL DEFAULT 0,
    chunks        INTEGER NOT NULL DEFAULT 0,
    rows_read     INTEGER NOT NULL DEFAULT 0,
    -- The next source_sequence of the task's own stream.
    next_seq      INTEGER NOT NULL DEFAULT 1,
    lag_threshold INTEGER NOT NULL,
    -- The events still behind the pinned position (CATCHING_UP), last measured.
    lag           INTEGER,
    error         TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    completed_at  INTEGER
);
-- At most one unfinished task per rule.
CREATE UNIQUE INDEX snapshot_task_active ON snapshot_task (rule_id) WHERE state NOT IN ('COMPLETED', 'FAILED');

-- Chunks read and numbered but not yet received by the shore: the encoded
-- events (an EventList), sent again unchanged after a crash.
CREATE TABLE snapshot_outbox (
    task_id  TEXT NOT NULL,
    chunk    INTEGER NOT NULL,
    events   BLOB NOT NULL,
    PRIMARY KEY (task_id, chunk)
);

-- The revision each record had in the snapshot ('' when the snapshot did not
-- hold it), and the first change of the record after the pinned position
-- that the snapshot does not already contain (its topic offset; NULL until
-- met): the catch-up replay skips the record's changes before it.
CREATE TABLE snapshot_row (
    task_id   TEXT NOT NULL,
    key_hash  BLOB NOT NULL,
    revision  TEXT NOT NULL,
    apply_from INTEGER,
    PRIMARY KEY (task_id, key_hash)
);
